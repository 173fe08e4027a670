// The hand-off decision table (../shared/design/node-handoff.md §4.3) case by case, and a
// property: over thousands of random bind / admit / remove sequences no device is ever handed to
// two live containers beyond its share capacity, and every container whose plan is valid and
// free gets exactly its plan.

#include <gtest/gtest.h>

#include <random>

#include "linkfit/handoff/handoff.h"
#include "linkfit/kube/annotations.h"
#include "testing/fixtures.h"

namespace linkfit::handoff {
namespace {

using Kind = HandoffDecision::Kind;

topology::TopologySpec Node() {
  topology::TopologySpec spec = linkfit::testing::LoadFixture("dgx-a100")->spec();
  for (topology::GpuSpec& gpu : spec.gpus) {
    gpu.uuid = "GPU-" + std::to_string(gpu.index);
    gpu.mig_mode = topology::MigMode::kDisabled;
  }
  spec.gpus[6].mig_mode = topology::MigMode::kEnabled;
  spec.gpus[6].mig_instances = {{"3g.20gb", 4, 4, "MIG-6-4"}, {"2g.10gb", 0, 2, "MIG-6-0"}};
  spec.gpus[5].healthy = false;
  spec.gpus[5].health_problem = "Xid 79: GPU has fallen off the bus";
  return spec;
}

std::string Plan(const std::string& uid, const std::string& container,
                 const kube::AllocationRecord::Devices& devices, const std::string& node = "n1") {
  kube::AllocationRecord record;
  record.pod = "ml/p-" + uid;
  record.uid = uid;
  record.node = node;
  record.devices = devices;
  record.containers = {{container, false, devices}};
  return kube::EncodeAllocationRecord(record);
}

kube::AllocationRecord::Devices Whole(std::vector<int> gpus) {
  kube::AllocationRecord::Devices devices;
  for (int g : gpus) {
    devices.gpus.push_back(g);
    devices.uuids.push_back("GPU-" + std::to_string(g));
  }
  return devices;
}

HandoffRequest Request(const std::string& uid, std::optional<std::string> plan,
                       std::optional<std::vector<std::string>> kubelet = std::nullopt,
                       const std::string& container = "main") {
  return {"n1", uid, container, std::move(plan), std::move(kubelet)};
}

TEST(Handoff, AValidPlanIsInjectedAndAnEqualLabelIsNoMismatch) {
  Ledger ledger;
  const auto decision = Decide(
      Request("u1", Plan("u1", "main", Whole({0, 1})), std::vector<std::string>{"GPU-1", "GPU-0"}),
      Node(), ledger);
  ASSERT_EQ(decision.kind, Kind::kInject) << decision.reason;
  EXPECT_EQ(decision.devices.gpus, (std::vector<std::string>{"GPU-0", "GPU-1"}));
  EXPECT_FALSE(decision.mismatch);
  const Adjustment cdi = AdjustmentFor(decision, true);
  EXPECT_EQ(cdi.cdi_devices,
            (std::vector<std::string>{"nvidia.com/gpu=GPU-0", "nvidia.com/gpu=GPU-1"}));
  EXPECT_EQ(cdi.env[0],
            (std::pair<std::string, std::string>{"NVIDIA_VISIBLE_DEVICES", "GPU-0,GPU-1"}));
  EXPECT_TRUE(AdjustmentFor(decision, false).cdi_devices.empty());
}

TEST(Handoff, ADifferentLabelStillGetsThePlanButIsAMismatch) {
  Ledger ledger;
  const auto request =
      Request("u1", Plan("u1", "main", Whole({0, 1})), std::vector<std::string>{"GPU-2", "GPU-3"});
  const auto wins = Decide(request, Node(), ledger);
  ASSERT_EQ(wins.kind, Kind::kInject);
  EXPECT_TRUE(wins.mismatch);
  EXPECT_EQ(wins.devices.gpus, (std::vector<std::string>{"GPU-0", "GPU-1"}));
  const auto strict = Decide(request, Node(), ledger, MismatchPolicy::kStrict);
  EXPECT_EQ(strict.kind, Kind::kRefuse);
}

struct RefusedCase {
  const char* name;
  HandoffRequest request;
  const char* reason;
};

class RefusedPlans : public ::testing::TestWithParam<RefusedCase> {};

TEST_P(RefusedPlans, AreRefusedWithTheReason) {
  Ledger ledger;
  ledger.Hold({"other", "main"}, {{"GPU-3"}, {}, {}});
  const auto decision = Decide(GetParam().request, Node(), ledger);
  ASSERT_EQ(decision.kind, Kind::kRefuse) << GetParam().name;
  EXPECT_NE(decision.reason.find(GetParam().reason), std::string::npos) << decision.reason;
}

kube::AllocationRecord::Devices Stale() {
  kube::AllocationRecord::Devices devices = Whole({2});
  devices.uuids = {"GPU-replaced"};
  return devices;
}

kube::AllocationRecord::Devices Mig(int gpu, const char* profile, int start) {
  kube::AllocationRecord::Devices devices;
  devices.mig = {{gpu, profile, start, ""}};
  return devices;
}

INSTANTIATE_TEST_SUITE_P(
    Table, RefusedPlans,
    ::testing::Values(
        RefusedCase{"garbage", Request("u1", "{not json"), "unusable"},
        RefusedCase{"uid", Request("u1", Plan("u2", "main", Whole({0}))), "pod UID u2"},
        RefusedCase{"node", Request("u1", Plan("u1", "main", Whole({0}), "n2")), "node n2"},
        RefusedCase{"stale", Request("u1", Plan("u1", "main", Stale())), "stale plan"},
        RefusedCase{"unhealthy", Request("u1", Plan("u1", "main", Whole({5}))), "unhealthy"},
        RefusedCase{"missing GPU", Request("u1", Plan("u1", "main", Whole({12}))),
                    "does not exist"},
        RefusedCase{"conflict", Request("u1", Plan("u1", "main", Whole({3}))), "held by pod other"},
        RefusedCase{"MIG not ready", Request("u1", Plan("u1", "main", Mig(6, "1g.5gb", 3))),
                    "does not exist yet"},
        RefusedCase{"whole GPU in MIG mode", Request("u1", Plan("u1", "main", Whole({6}))),
                    "MIG mode"},
        RefusedCase{"unplanned, busy",
                    Request("u1", std::nullopt, std::vector<std::string>{"GPU-3"}),
                    "held by pod other"},
        RefusedCase{"unplanned, unknown device",
                    Request("u1", std::nullopt, std::vector<std::string>{"GPU-9x"}),
                    "not on this node"}),
    [](const auto& param_info) {
      std::string name = param_info.param.name;
      for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

TEST(Handoff, MigInstancesAndSharesByPhysicalUuid) {
  Ledger ledger;
  const auto mig = Decide(Request("u1", Plan("u1", "main", Mig(6, "3g.20gb", 4))), Node(), ledger);
  ASSERT_EQ(mig.kind, Kind::kInject) << mig.reason;
  EXPECT_EQ(mig.devices.mig, (std::vector<std::string>{"MIG-6-4"}));
  ledger.Hold({"u1", "main"}, mig.devices);
  // The same instance for another pod collides; the other instance does not.
  EXPECT_EQ(Decide(Request("u2", Plan("u2", "main", Mig(6, "3g.20gb", 4))), Node(), ledger).kind,
            Kind::kRefuse);
  EXPECT_EQ(Decide(Request("u2", Plan("u2", "main", Mig(6, "2g.10gb", 0))), Node(), ledger).kind,
            Kind::kInject);
  // Shares: 600 + 400 fit GPU 7, a further 1 does not; the kubelet's replica IDs name the GPU.
  kube::AllocationRecord::Devices six;
  six.shares = {{7, 600}};
  const auto first =
      Decide(Request("s1", Plan("s1", "nb", six), std::vector<std::string>{"GPU-7::3"}, "nb"),
             Node(), ledger);
  ASSERT_EQ(first.kind, Kind::kInject) << first.reason;
  EXPECT_FALSE(first.mismatch);  // compared by physical GPU, not replica ID
  ledger.Hold({"s1", "nb"}, first.devices);
  kube::AllocationRecord::Devices four;
  four.shares = {{7, 400}};
  const auto second =
      Decide(Request("s2", Plan("s2", "nb", four), std::nullopt, "nb"), Node(), ledger);
  ASSERT_EQ(second.kind, Kind::kInject) << second.reason;
  ledger.Hold({"s2", "nb"}, second.devices);
  kube::AllocationRecord::Devices one;
  one.shares = {{7, 1}};
  const auto third =
      Decide(Request("s3", Plan("s3", "nb", one), std::nullopt, "nb"), Node(), ledger);
  EXPECT_EQ(third.kind, Kind::kRefuse);
  EXPECT_NE(third.reason.find("beyond its capacity"), std::string::npos) << third.reason;
  // linkfit's share resource: one replica per thousandth, all of the planned GPU, is no mismatch;
  // replicas of another GPU are.
  std::vector<std::string> replicas;
  for (int k = 0; k < 400; ++k) replicas.push_back("GPU-7::" + std::to_string(k));
  Ledger empty;
  EXPECT_FALSE(
      Decide(Request("s4", Plan("s4", "nb", four), replicas, "nb"), Node(), empty).mismatch);
  replicas.back() = "GPU-4::0";
  EXPECT_TRUE(
      Decide(Request("s4", Plan("s4", "nb", four), replicas, "nb"), Node(), empty).mismatch);
  // A whole GPU that pods share cannot be handed whole.
  EXPECT_EQ(Decide(Request("w", Plan("w", "main", Whole({7}))), Node(), ledger).kind,
            Kind::kRefuse);
  const Adjustment env = AdjustmentFor(first, true);
  EXPECT_EQ(env.env[1], (std::pair<std::string, std::string>{"LINKFIT_GPU_SHARES", "GPU-7=600"}));
}

TEST(Handoff, NoPlanNoGpuAndUnplannedPolicies) {
  Ledger ledger;
  const auto none = Decide(Request("u1", std::nullopt), Node(), ledger);
  EXPECT_EQ(none.kind, Kind::kNoGpu);
  EXPECT_EQ(AdjustmentFor(none, true).env[0].second, "void");
  // A planned pod's container that the plan gives nothing gets no GPU, even if the kubelet
  // allocated some (a mismatch).
  const auto sidecar = Decide(
      Request("u1", Plan("u1", "main", Whole({0})), std::vector<std::string>{"GPU-1"}, "logger"),
      Node(), ledger);
  EXPECT_EQ(sidecar.kind, Kind::kNoGpu);
  EXPECT_TRUE(sidecar.mismatch);
  // An unplanned pod's free devices are adopted, or refused by policy.
  const auto adopted =
      Decide(Request("u9", std::nullopt, std::vector<std::string>{"GPU-4"}), Node(), ledger);
  ASSERT_EQ(adopted.kind, Kind::kInject) << adopted.reason;
  EXPECT_EQ(adopted.devices.gpus, (std::vector<std::string>{"GPU-4"}));
  EXPECT_EQ(Decide(Request("u9", std::nullopt, std::vector<std::string>{"GPU-4"}), Node(), ledger,
                   MismatchPolicy::kPlanWins, UnplannedPolicy::kRefuse)
                .kind,
            Kind::kRefuse);
}

// Random sequences: pods get plans (some stale, some for another node, some colliding because
// two plans name one device, as a lost bind answer might leave), containers are admitted in
// random order and removed at random. Invariants after every step: no whole GPU or MIG instance
// in two live pods, no GPU whole and shared, no GPU shared beyond 1000; a valid plan that
// collides with nothing live gets exactly its devices.
TEST(Handoff, NoDeviceIsEverHandedTwice) {
  const topology::TopologySpec node = Node();
  std::mt19937 random(20261124);
  for (int round = 0; round < 300; ++round) {
    Ledger ledger;
    struct Pod {
      std::string uid;
      std::string plan;
      kube::AllocationRecord::Devices devices;
      bool live = false;
    };
    std::vector<Pod> pods;
    for (int step = 0; step < 40; ++step) {
      const int action = static_cast<int>(random() % 3);
      if (action == 0 || pods.empty()) {  // a new planned pod
        Pod pod;
        pod.uid = "p" + std::to_string(round) + "-" + std::to_string(step);
        const int shape = static_cast<int>(random() % 3);
        if (shape == 0) {
          pod.devices = Whole({static_cast<int>(random() % 8)});
          if (random() % 2 == 0) pod.devices = Whole({0, static_cast<int>(1 + random() % 7)});
        } else if (shape == 1) {
          pod.devices.shares = {
              {static_cast<int>(7 - random() % 2), static_cast<int>(100 + random() % 600)}};
        } else {
          pod.devices = random() % 2 == 0 ? Mig(6, "3g.20gb", 4) : Mig(6, "2g.10gb", 0);
        }
        pod.plan = Plan(pod.uid, "main", pod.devices, random() % 10 == 0 ? "n2" : "n1");
        pods.push_back(pod);
      } else if (action == 1) {  // admit a container
        Pod& pod = pods[random() % pods.size()];
        if (pod.live) continue;
        const auto decision = Decide(Request(pod.uid, pod.plan), node, ledger);
        const auto expected = Decide(Request(pod.uid, pod.plan), node, Ledger());
        if (decision.kind == Kind::kInject) {
          ASSERT_FALSE(ledger.Conflict({pod.uid, "main"}, decision.devices));
          // Exactly the plan (the same as with nothing else on the node).
          ASSERT_EQ(decision.devices, expected.devices);
          ledger.Hold({pod.uid, "main"}, decision.devices);
          pod.live = true;
        } else if (expected.kind == Kind::kInject) {
          // Refused only because something live holds its devices.
          ASSERT_TRUE(ledger.Conflict({pod.uid, "main"}, expected.devices)) << decision.reason;
        }
      } else {  // a container ends
        Pod& pod = pods[random() % pods.size()];
        ledger.ReleasePod(pod.uid);
        pod.live = false;
      }
      // The invariant, recomputed from scratch.
      std::map<std::string, std::set<std::string>> whole_or_mig;
      std::map<std::string, int> milli;
      for (const auto& [key, held] : ledger.held()) {
        for (const std::string& gpu : held.gpus) whole_or_mig[gpu].insert(key.pod_uid);
        for (const std::string& mig : held.mig) whole_or_mig[mig].insert(key.pod_uid);
        for (const auto& [gpu, share] : held.shares) milli[gpu] += share;
      }
      for (const auto& [device, holders] : whole_or_mig) {
        ASSERT_EQ(holders.size(), 1u) << device;
        ASSERT_EQ(milli.count(device), 0u) << device << " whole and shared";
      }
      for (const auto& [gpu, total] : milli) ASSERT_LE(total, 1000) << gpu;
    }
  }
}

TEST(Handoff, RuntimesThatInjectCdiDevices) {
  EXPECT_TRUE(RuntimeInjectsCdi("containerd", "v2.1.0"));
  EXPECT_TRUE(RuntimeInjectsCdi("containerd", "2.2.1-rc.1"));
  EXPECT_FALSE(RuntimeInjectsCdi("containerd", "v2.0.5"));
  EXPECT_FALSE(RuntimeInjectsCdi("containerd", "1.7.24"));
  EXPECT_TRUE(RuntimeInjectsCdi("cri-o", "1.34.0"));
  EXPECT_FALSE(RuntimeInjectsCdi("cri-o", "1.33.2"));
  EXPECT_FALSE(RuntimeInjectsCdi("containerd", ""));
  EXPECT_FALSE(RuntimeInjectsCdi("containerd", "garbage"));
  EXPECT_FALSE(RuntimeInjectsCdi("", "2.1.0"));
}

}  // namespace
}  // namespace linkfit::handoff
