// Whole machines are worth keeping (whole_machines.h): which keeper a placement breaks, and, on
// small random clusters where a placement of every pod exists, a stream of small pods never
// takes the idle machine the big pod at its end needs. Both sides of the `ring` trade-off.

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "extender/extender_testing.h"

namespace linkfit::extender {
namespace {

using linkfit::testing::Mask;
using testing::GpuPod;
using testing::NamesArgs;
using testing::NvlinkRequired;

state::Assignment Whole(topology::GpuMask gpus) {
  state::Assignment a;
  a.gpus = gpus;
  return a;
}

class BrokenKeeperTest : public testing::ExtenderFixture {
 protected:
  int Broken(const std::string& node, topology::GpuMask gpus) {
    const state::SnapshotPtr snapshot = cache_.Snapshot();
    return BrokenKeeperGpus(*snapshot->Find(node), Whole(gpus));
  }
  // The same for a pod of 1 GPU with a quarter of the NIC `nic` (a NIC share at PXB).
  int BrokenWithShare(const std::string& node, int gpu, int nic) {
    const state::SnapshotPtr snapshot = cache_.Snapshot();
    state::Assignment a = Whole(static_cast<topology::GpuMask>(1u << gpu));
    a.nics.push_back({nic, 250, gpu});
    return BrokenKeeperGpus(*snapshot->Find(node), a, ShareOfOneNic());
  }
  static alloc::NicRequest ShareOfOneNic() {
    alloc::NicRequest request;
    request.count = 1;
    request.milli = 250;
    return request;
  }
};

TEST_F(BrokenKeeperTest, NvlinkIslandsWholeMachinesIncluded) {
  AddNode("a100", "dgx-a100");
  AddNode("a100-mig", "dgx-a100", Mask({0, 1, 2, 3}));
  AddNode("ws", "ws-4x-rtxa6000-nvlink-pairs");
  AddNode("ws-used", "ws-4x-rtxa6000-nvlink-pairs");
  AddNode("l40s", "pcie-8x-l40s-2socket");
  Hold("held", "ws-used", Mask({0}));
  EXPECT_EQ(Broken("a100", Mask({0, 1})), 8);                    // an idle machine
  EXPECT_EQ(Broken("a100", Mask({0, 1, 2, 3, 4, 5, 6, 7})), 0);  // taken whole, not broken
  // Never an 8-GPU host, but its free GPUs 4-7 are the NVLink set a 4-GPU pod needs.
  EXPECT_EQ(Broken("a100-mig", Mask({4, 5})), 4);
  EXPECT_EQ(Broken("a100-mig", Mask({4, 5, 6, 7})), 0);  // taken whole, not broken
  EXPECT_EQ(Broken("ws", Mask({0})), 2);  // breaks the NVLink pair 0-1 (4 GPUs, not all NVLink)
  EXPECT_EQ(Broken("ws-used", Mask({2})), 2);  // breaks the intact NVLink pair 2-3
  EXPECT_EQ(Broken("ws-used", Mask({1})), 0);  // the pair 0-1 is broken already
  EXPECT_EQ(Broken("l40s", Mask({0, 1})), 0);  // no NVLink: FGD's fragmentation decides
  Hold("a100-one", "a100", Mask({7}));
  // Partly used: an NVLink 4-set stays among the GPUs left.
  EXPECT_EQ(Broken("a100", Mask({0, 1})), 0);
  EXPECT_EQ(Broken("a100", Mask({0, 1, 2})), 0);
  Hold("a100-four", "a100", Mask({4, 5, 6}));
  EXPECT_EQ(Broken("a100", Mask({0})), 4);     // the last free NVLink 4-set
  EXPECT_EQ(Broken("a100", Mask({0, 1})), 4);  // a 2-GPU pod breaks it as well
  EXPECT_EQ(Broken("l40s", Mask({0})), 0);     // PCIe sets are FGD's to weigh
}

// Random clusters: partly used DGX A100s with GPUs 0-3 in MIG mode (never an 8-GPU host) or
// 4-GPU workstations with NVLink pairs (fewer GPUs, slower rings), one or two idle DGX A100s,
// a stream of 1- and 2-GPU pods (sometimes a 4-GPU pod first, some with a closeness hint) that
// the partly used machines can absorb in any order, then one 8-GPU NVLink-required A100 pod;
// linkfit has seen 200 small pods before and no big one.
// Each pod goes to a top-scoring node (ties at random, as kube-scheduler breaks them).
struct Outcome {
  int scenarios = 0;
  int big_placed = 0;
  int small_on_idle = 0;  // small pods that opened an idle A100
};

Outcome RunScenarios(WholeMachinePolicy policy, bool workstations, bool hinted, int count) {
  Outcome outcome;
  for (int seed = 0; seed < count; ++seed) {
    std::mt19937 rng(static_cast<std::uint32_t>(seed) * 7919u + (workstations ? 1u : 0u));
    ExtenderOptions options;
    options.weights.whole_machines = policy;
    state::ClusterCache cache;
    testing::FakeBinder binder;
    NullMetrics metrics;
    testing::MemoExtender extender(cache, options, binder, metrics);
    std::vector<std::string> names;
    std::vector<std::string> idle;
    int budget = 0;  // GPUs the small pods may take, in any order (one spare per machine)
    bool four_fits = false;
    const int partly_used = 1 + static_cast<int>(rng() % 3);
    for (int m = 0; m < partly_used; ++m) {
      const std::string name = "used-" + std::to_string(m);
      const bool ws = workstations;
      cache.UpsertNode(linkfit::testing::MakeNodeInfo(
          name, ws ? "ws-4x-rtxa6000-nvlink-pairs" : "dgx-a100", ws ? 0 : Mask({0, 1, 2, 3})));
      const int first = ws ? 0 : 4;
      const int held = static_cast<int>(rng() % 2);  // GPUs already held on the whole side
      if (held > 0) {
        state::Assignment a;
        a.pod_uid = name + "-held";
        a.pod_namespace = "ml";
        a.pod_name = a.pod_uid;
        a.node = name;
        a.gpus = Mask({first});
        EXPECT_TRUE(cache.AddBound(a).has_value());
      }
      budget += 4 - held - 1;
      four_fits = four_fits || held == 0;
      names.push_back(name);
    }
    const int idle_count = 1 + static_cast<int>(rng() % 2);
    for (int m = 0; m < idle_count; ++m) {
      idle.push_back("idle-" + std::to_string(m));
      cache.UpsertNode(linkfit::testing::MakeNodeInfo(idle.back(), "dgx-a100"));
      names.push_back(idle.back());
    }
    std::shuffle(names.begin(), names.end(), rng);
    // The demand linkfit knows: many small pods running elsewhere, no big one (the case where
    // fragmentation alone found breaking an idle machine cheap).
    for (int k = 0; k < 200; ++k) {
      extender.Filter(NamesArgs(GpuPod("elsewhere-" + std::to_string(k), 1 + k % 2), {}));
    }
    std::vector<int> sizes;
    if (four_fits && rng() % 3 == 0) {
      sizes.push_back(4);
      budget -= 4;
    }
    while (budget > 0) {
      const int size = std::min(budget, 1 + static_cast<int>(rng() % 2));
      sizes.push_back(size);
      budget -= size;
    }
    sizes.push_back(8);
    ++outcome.scenarios;
    for (std::size_t p = 0; p < sizes.size(); ++p) {
      const bool big = sizes[p] == 8;
      kube::StringMap hints;
      if (big) {
        hints = NvlinkRequired();
        hints["linkfit.io/gpu-model"] = "A100";
      } else if (hinted && sizes[p] >= 2) {
        hints = {{"linkfit.io/closeness", "nvlink"}};
      }
      const kube::PodView pod = GpuPod("pod-" + std::to_string(p), sizes[p], hints);
      const wire::FilterResult passed = extender.Filter(NamesArgs(pod, names));
      if (passed.node_names.empty()) break;  // the big pod found no machine
      std::vector<std::string> passing(passed.node_names.begin(), passed.node_names.end());
      const std::vector<wire::HostPriority> scores = extender.Prioritize(NamesArgs(pod, passing));
      std::int64_t best = -1;
      std::vector<std::string> top;
      for (const wire::HostPriority& score : scores) {
        if (static_cast<std::int64_t>(score.score) > best) top.clear();
        best = std::max(best, static_cast<std::int64_t>(score.score));
        if (static_cast<std::int64_t>(score.score) == best) top.emplace_back(score.host);
      }
      const std::string node = top[rng() % top.size()];
      EXPECT_EQ(extender.Bind(testing::BindArgs(pod, node)), "");
      if (big) ++outcome.big_placed;
      if (!big && std::find(idle.begin(), idle.end(), node) != idle.end()) {
        ++outcome.small_on_idle;
      }
    }
  }
  return outcome;
}

TEST(WholeMachinesTest, SmallPodsNeverTakeTheMachineTheBigPodNeeds) {
  // Same model, GPUs 0-3 in MIG mode: each small pod gets the same ring as on an idle machine.
  for (const bool hinted : {false, true}) {
    for (const WholeMachinePolicy policy : {WholeMachinePolicy::kKeep, WholeMachinePolicy::kRing}) {
      const Outcome outcome = RunScenarios(policy, /*workstations=*/false, hinted, 150);
      EXPECT_EQ(outcome.big_placed, outcome.scenarios)
          << "policy " << ToString(policy) << ", hinted " << hinted;
      EXPECT_EQ(outcome.small_on_idle, 0) << "policy " << ToString(policy);
    }
  }
}

TEST(WholeMachinesTest, PodsWithoutAHintKeepMachinesOverAFasterRingUnderKeepOnly) {
  // Workstations (fewer GPUs, NVLink pairs at a fraction of the A100's ring): under `keep` a pod
  // without a hint still leaves the idle A100s whole; under `ring` its 2-GPU pods take them for
  // the faster ring (the trade-off, made on purpose), and the big pod then waits sometimes.
  const Outcome keep = RunScenarios(WholeMachinePolicy::kKeep, true, false, 150);
  EXPECT_EQ(keep.big_placed, keep.scenarios);
  EXPECT_EQ(keep.small_on_idle, 0);
  const Outcome ring = RunScenarios(WholeMachinePolicy::kRing, true, false, 150);
  EXPECT_GT(ring.small_on_idle, 0);
  EXPECT_LT(ring.big_placed, ring.scenarios);
  // Without the rule at all, small pods take idle machines even at equal rings.
  const Outcome off = RunScenarios(WholeMachinePolicy::kOff, false, false, 150);
  EXPECT_GT(off.small_on_idle, 0);
  std::printf("big pods placed: keep %d/%d, ring %d/%d (workstations); off %d/%d (MIG A100s)\n",
              keep.big_placed, keep.scenarios, ring.big_placed, ring.scenarios, off.big_placed,
              off.scenarios);
}

// `linkfit explain` says which node loses the points, what it would break and who keeps it.
TEST_F(BrokenKeeperTest, ExplainSaysWhoLosesPointsForBreakingAWholeMachine) {
  AddNode("a100", "dgx-a100");
  AddNode("a100-mig", "dgx-a100", Mask({0, 1, 2, 3}));
  const std::vector<std::string> lines = extender_.Explain(GpuPod("p", 2));
  std::string a100;
  std::string mig;
  for (const std::string& line : lines) {
    if (line.rfind("a100: ", 0) == 0) a100 = line;
    if (line.rfind("a100-mig: ", 0) == 0) mig = line;
  }
  EXPECT_NE(a100.find("loses 70 of 140 points: it would break an idle whole machine (8 GPUs) "
                      "while a100-mig serves the pod with a ring as fast "
                      "(policy.whole_machines: ring)"),
            std::string::npos)
      << a100;
  EXPECT_EQ(mig.find("loses"), std::string::npos) << mig;
}

// A pod asking a NIC per GPU: the machine whose one NIC is never within PXB of a GPU loses the
// NIC points to the DGX A100, and `linkfit explain` says so and why (issue 37's N term).
TEST_F(BrokenKeeperTest, ExplainSaysWhoLosesPointsForItsNics) {
  AddNode("a100", "dgx-a100");
  AddNode("gen3", "pcie-8x-cascaded-switch-2socket");
  const std::vector<std::string> lines =
      extender_.Explain(GpuPod("p", 1, {{"linkfit.io/nics", "per-gpu"}}));
  std::string a100;
  std::string gen3;
  for (const std::string& line : lines) {
    if (line.rfind("a100: ", 0) == 0) a100 = line;
    if (line.rfind("gen3: ", 0) == 0) gen3 = line;
  }
  EXPECT_NE(gen3.find("loses 70 of 140 points: its NICs are not at the asked closeness while "
                      "a100 gives every GPU one (policy.nic_alignment: aligned)"),
            std::string::npos)
      << gen3;
  EXPECT_EQ(a100.find("loses"), std::string::npos) << a100;
}

// For a pod asking NICs an NVLink keeper counts only where whole free NICs back it: a DGX-1 (four
// NICs, each at PIX to a GPU pair) is no 8-GPU keeper, and a DGX-1 whose free GPUs 0-3 have two
// whole NICs no 4-GPU keeper, so a share pod takes it rather than a GPU and a fresh NIC of a
// partly used DGX A100 that drains whole for the 8-GPU pods (issue 37's nic experiment).
TEST_F(BrokenKeeperTest, NicPodsCountOnlyTheKeepersWholeNicsBack) {
  AddNode("dgx1", "dgx1-v100");
  AddNode("dgx1-half", "dgx1-v100");
  AddNode("a100", "dgx-a100");
  Hold("half", "dgx1-half", Mask({4, 5, 6, 7}));
  EXPECT_EQ(Broken("dgx1", Mask({0})), 8);  // without NICs: an idle whole machine
  EXPECT_EQ(BrokenWithShare("dgx1", 0, 0), 0);
  EXPECT_EQ(BrokenWithShare("a100", 0, 0), 8);   // eight NICs at PXB back the 8-GPU keeper
  EXPECT_EQ(Broken("dgx1-half", Mask({0})), 4);  // the last free NVLink 4-set
  EXPECT_EQ(BrokenWithShare("dgx1-half", 0, 0), 0);

  Hold("a100-one", "a100", Mask({7}));
  const kube::PodView pod =
      GpuPod("share", 1, {{"linkfit.io/nics", "1"}, {"linkfit.io/nic-share", "250"}});
  for (const std::string& line : extender_.Explain(pod)) {
    if (line.rfind("dgx1-half: ", 0) == 0 || line.rfind("dgx1: ", 0) == 0) {
      EXPECT_EQ(line.find("loses"), std::string::npos) << line;
    }
  }
}

// At equal nominal ring bandwidth an all-NVLink ring is the better ring (RingRank, scoring.h's
// T): a 4-GPU pod without a hint takes four NVLink-joined GPUs of an idle DGX-1 (ring 20 GB/s)
// rather than four PCIe-joined GPUs of an idle L40S server (also 20 GB/s), and the DGX-1 loses no
// whole-machine points for it.
TEST_F(BrokenKeeperTest, AnNvlinkRingBeatsAPcieRingOfEqualBandwidth) {
  AddNode("dgx1", "dgx1-v100");
  AddNode("l40s-idle", "pcie-8x-l40s-2socket");
  AddNode("l40s-half", "pcie-8x-l40s-2socket");
  Hold("held", "l40s-half", Mask({0, 1, 2, 3}));
  const kube::PodView pod = GpuPod("four", 4);
  const std::vector<std::string> names = {"dgx1", "l40s-idle", "l40s-half"};
  const wire::FilterResult passed = extender_.Filter(NamesArgs(pod, names));
  ASSERT_EQ(passed.node_names.size(), 3u);
  std::map<std::string, std::int64_t> score;
  for (const wire::HostPriority& p : extender_.Prioritize(NamesArgs(pod, names))) {
    score[std::string(p.host)] = static_cast<std::int64_t>(p.score);
  }
  EXPECT_GT(score["dgx1"], score["l40s-idle"]);
  for (const std::string& line : extender_.Explain(pod)) {
    if (line.rfind("dgx1: ", 0) == 0) {
      EXPECT_EQ(line.find("loses"), std::string::npos) << line;
    }
  }
  // The rule's comparison itself: equal bandwidth, NVLink first.
  EXPECT_GT(RingRank(20000, true), RingRank(20000, false));
  EXPECT_LT(RingRank(20000, true), RingRank(20001, false));
  KeptAlternatives kept;
  kept.Add(0, RingRank(20000, false));  // the L40S: breaks nothing, PCIe ring
  EXPECT_FALSE(LosesWholeMachinePoints(8, RingRank(20000, true), kept.Below(), true));
  EXPECT_TRUE(LosesWholeMachinePoints(8, RingRank(20000, false), kept.Below(), true));
}

// Also against a half-used L40S server that the pod fills exactly: packing and FGD's
// fragmentation (an 8-GPU shape loses the idle DGX-1) outweighed the topology term's NVLink
// preference there, so the PCIe ring now loses the whole-machine points while the ring decides
// (whole_machines.h, LosesNvlinkPoints); under `keep` a pod without a hint may take it.
TEST_F(BrokenKeeperTest, AHalfUsedPcieServerLosesToAnNvlinkRingAsFast) {
  AddNode("dgx1", "dgx1-v100");
  AddNode("l40s-half", "pcie-8x-l40s-2socket");
  Hold("held", "l40s-half", Mask({0, 1, 2, 3}));
  const kube::PodView pod = GpuPod("four", 4);
  const std::vector<std::string> names = {"dgx1", "l40s-half"};
  ASSERT_EQ(extender_.Filter(NamesArgs(pod, names)).node_names.size(), 2u);
  std::map<std::string, std::int64_t> score;
  for (const wire::HostPriority& p : extender_.Prioritize(NamesArgs(pod, names))) {
    score[std::string(p.host)] = static_cast<std::int64_t>(p.score);
  }
  EXPECT_GT(score["dgx1"], score["l40s-half"]);
  std::string l40s;
  for (const std::string& line : extender_.Explain(pod)) {
    if (line.rfind("l40s-half: ", 0) == 0) l40s = line;
  }
  EXPECT_NE(l40s.find("loses 70 of 140 points: its ring has a PCIe hop while dgx1 offers an "
                      "all-NVLink ring as fast (policy.whole_machines: ring)"),
            std::string::npos)
      << l40s;
  EXPECT_TRUE(LosesNvlinkPoints(20000, false, 20000, true));
  EXPECT_FALSE(LosesNvlinkPoints(20001, false, 20000, true));   // the PCIe ring is faster
  EXPECT_FALSE(LosesNvlinkPoints(20000, true, 20000, true));    // all NVLink itself
  EXPECT_FALSE(LosesNvlinkPoints(20000, false, 0, true));       // no NVLink ring anywhere
  EXPECT_FALSE(LosesNvlinkPoints(20000, false, 20000, false));  // `keep` without a hint, `off`
  GpuRequest ring;
  ring.kind = GpuRequest::Kind::kWhole;
  ring.count = 4;
  EXPECT_TRUE(NvlinkRuleApplies(ring, WholeMachinePolicy::kRing));
  EXPECT_FALSE(NvlinkRuleApplies(ring, WholeMachinePolicy::kKeep));  // no hint: keep decides
  EXPECT_FALSE(NvlinkRuleApplies(ring, WholeMachinePolicy::kOff));
  GpuRequest one = ring;
  one.count = 1;  // no ring
  EXPECT_FALSE(NvlinkRuleApplies(one, WholeMachinePolicy::kRing));
}

}  // namespace
}  // namespace linkfit::extender
