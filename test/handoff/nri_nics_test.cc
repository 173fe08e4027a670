// The hand-off of RDMA NICs on the node: the decision (plan, port health, stale plans, the ledger's
// whole NICs and shares, the kubelet's NIC label), the environment NCCL and UCX read, the NICs'
// device files from a host /dev and sysfs, and the NRI plugin's CreateContainer with them.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "handoff/nic_testing.h"
#include "linkfit/handoff/nic_device_files.h"
#include "linkfit/handoff/nri_plugin.h"
#include "linkfit/kube/annotations.h"

namespace linkfit::handoff {
namespace {

using namespace nic_testing;  // NOLINT: the shared node, plans and NRI calls

HandoffRequest Request(const std::string& uid, std::optional<std::string> plan,
                       std::optional<std::vector<std::string>> kubelet = std::nullopt) {
  return {"n1", uid, "main", std::move(plan), std::move(kubelet)};
}

TEST(NicHandoff, ThePlansNicsAreHandedWholeToOneAndSharedUpToTheirCapacity) {
  Ledger ledger;
  const HandoffDecision whole =
      Decide(Request("a", Plan("a", {0, 1}, {Nic("mlx5_0"), Nic("mlx5_1")})), Node(), ledger);
  ASSERT_EQ(whole.kind, HandoffDecision::Kind::kInject) << whole.reason;
  EXPECT_EQ(whole.devices.nics,
            (std::vector<std::pair<std::string, int>>{{"mlx5_0", 1000}, {"mlx5_1", 1000}}));
  ledger.Hold({"a", "main"}, whole.devices);
  // A whole NIC reaches one pod: neither another whole claim nor a share of it passes.
  const HandoffDecision taken =
      Decide(Request("b", Plan("b", {2}, {Nic("mlx5_1")})), Node(), ledger);
  EXPECT_EQ(taken.kind, HandoffDecision::Kind::kRefuse);
  EXPECT_NE(taken.reason.find("NIC mlx5_1 is held by pod a"), std::string::npos) << taken.reason;
  EXPECT_EQ(Decide(Request("b", Plan("b", {2}, {Nic("mlx5_0", 250)})), Node(), ledger).kind,
            HandoffDecision::Kind::kRefuse);
  // Shares of one NIC reach several pods, up to 1000 thousandths.
  for (int p = 0; p < 4; ++p) {
    const std::string uid = "s" + std::to_string(p);
    const HandoffDecision share =
        Decide(Request(uid, Plan(uid, {2 + p}, {Nic("mlx5_2", 250)})), Node(), ledger);
    ASSERT_EQ(share.kind, HandoffDecision::Kind::kInject) << share.reason;
    ledger.Hold({uid, "main"}, share.devices);
  }
  const HandoffDecision fifth =
      Decide(Request("s4", Plan("s4", {6}, {Nic("mlx5_2", 1)})), Node(), ledger);
  EXPECT_EQ(fifth.kind, HandoffDecision::Kind::kRefuse);
  EXPECT_NE(fifth.reason.find("NIC mlx5_2 would be shared beyond its capacity (1001"),
            std::string::npos)
      << fifth.reason;
  EXPECT_EQ(Decide(Request("w", Plan("w", {6}, {Nic("mlx5_2")})), Node(), ledger).kind,
            HandoffDecision::Kind::kRefuse);
  // The pod that held the whole NICs ends: they are free.
  ledger.ReleasePod("a");
  EXPECT_EQ(Decide(Request("b", Plan("b", {7}, {Nic("mlx5_1")})), Node(), ledger).kind,
            HandoffDecision::Kind::kInject);
}

// Property: pods asking whole NICs or shares of them (and a GPU now and then), created and ended
// in random order: the ledger never holds a NIC whole for two pods, whole and shared, or shared
// beyond 1000 thousandths; a plan is refused only while something live holds its NICs.
TEST(NicHandoff, NoNicOrShareIsEverHandedTwice) {
  const topology::TopologySpec node = Node();
  std::mt19937 random(38);
  for (int round = 0; round < 200; ++round) {
    Ledger ledger;
    std::vector<std::pair<std::string, std::string>> pods;  // uid, plan
    std::set<std::string> live;
    for (int step = 0; step < 40; ++step) {
      const int action = static_cast<int>(random() % 3);
      if (action == 0 || pods.empty()) {
        const std::string uid = "p" + std::to_string(step);
        const std::string nic = "mlx5_" + std::to_string(random() % 2);
        const int milli = random() % 3 == 0 ? 1000 : static_cast<int>(50 + random() % 500);
        std::vector<int> gpus;
        if (random() % 4 == 0) gpus.push_back(static_cast<int>(random() % 8));
        pods.emplace_back(uid, Plan(uid, gpus, {Nic(nic, milli)}));
      } else if (action == 1) {
        const auto& [uid, plan] = pods[random() % pods.size()];
        if (live.count(uid) != 0) continue;
        const HandoffDecision decision = Decide(Request(uid, plan), node, ledger);
        const HandoffDecision alone = Decide(Request(uid, plan), node, Ledger());
        if (decision.kind == HandoffDecision::Kind::kInject) {
          ASSERT_EQ(decision.devices, alone.devices);
          ledger.Hold({uid, "main"}, decision.devices);
          live.insert(uid);
        } else {
          ASSERT_TRUE(ledger.Conflict({uid, "main"}, alone.devices)) << decision.reason;
        }
      } else {
        const std::string uid = pods[random() % pods.size()].first;
        ledger.ReleasePod(uid);
        live.erase(uid);
      }
      std::map<std::string, std::set<std::string>> whole;
      std::map<std::string, int> shared;
      for (const auto& [key, held] : ledger.held()) {
        for (const auto& [nic, milli] : held.nics) {
          if (milli >= 1000) {
            whole[nic].insert(key.pod_uid);
          } else {
            shared[nic] += milli;
          }
        }
      }
      for (const auto& [nic, holders] : whole) {
        ASSERT_EQ(holders.size(), 1u) << nic;
        ASSERT_EQ(shared.count(nic), 0u) << nic << " whole and shared";
      }
      for (const auto& [nic, total] : shared) ASSERT_LE(total, 1000) << nic;
    }
  }
}

TEST(NicHandoff, MissingDownOrStaleNicsAreRefusedNamingTheNic) {
  topology::TopologySpec node = Node();
  node.nics[3].state = "DOWN";
  const auto reason = [&](std::vector<kube::AllocationRecord::Nic> nics) {
    return Decide(Request("a", Plan("a", {0}, std::move(nics))), node, Ledger()).reason;
  };
  EXPECT_NE(reason({Nic("mlx5_9")}).find("NIC mlx5_9 does not exist here"), std::string::npos);
  EXPECT_NE(reason({Nic("mlx5_3")}).find("NIC mlx5_3's port is DOWN"), std::string::npos);
  kube::AllocationRecord::Nic moved = Nic("mlx5_1");
  moved.pci_bus_id = "0000:99:00.0";
  EXPECT_NE(reason({moved}).find("stale plan: NIC mlx5_1 is 0000:11:00.0 now"), std::string::npos);
}

TEST(NicHandoff, TheKubeletsNicLabelIsComparedWhereItGaveNics) {
  const std::string plan = Plan("a", {0, 1}, {Nic("mlx5_0"), Nic("mlx5_1")});
  // The kubelet's GPUs and NICs are the plan's.
  EXPECT_FALSE(
      Decide(Request("a", plan, {{"GPU-0", "GPU-1", "mlx5_1", "mlx5_0"}}), Node(), Ledger())
          .mismatch);
  // The pod asked its NICs by annotation: the kubelet gave GPUs only. Not a mismatch.
  EXPECT_FALSE(Decide(Request("a", plan, {{"GPU-0", "GPU-1"}}), Node(), Ledger()).mismatch);
  // Another NIC: a mismatch whose reason names the NICs; strict mode refuses.
  const HandoffDecision other =
      Decide(Request("a", plan, {{"GPU-0", "GPU-1", "mlx5_0", "mlx5_2"}}), Node(), Ledger());
  EXPECT_EQ(other.kind, HandoffDecision::Kind::kInject);
  EXPECT_TRUE(other.mismatch);
  EXPECT_NE(other.reason.find("NICs mlx5_0, mlx5_2 (the kubelet's) instead of mlx5_0, mlx5_1 "
                              "(the plan's)"),
            std::string::npos)
      << other.reason;
  const HandoffDecision strict =
      Decide(Request("a", plan, {{"GPU-0", "GPU-1", "mlx5_0", "mlx5_2"}}), Node(), Ledger(),
             MismatchPolicy::kStrict);
  EXPECT_EQ(strict.kind, HandoffDecision::Kind::kRefuse);
  EXPECT_NE(strict.reason.find("mlx5_2"), std::string::npos);
  // A pod linkfit did not plan is adopted with the kubelet's free NICs (replicas as thousandths).
  const HandoffDecision adopted =
      Decide(Request("u", std::nullopt, {{"mlx5_3::0", "mlx5_3::1", "mlx5_2"}}), Node(), Ledger());
  ASSERT_EQ(adopted.kind, HandoffDecision::Kind::kInject) << adopted.reason;
  EXPECT_EQ(adopted.devices.nics,
            (std::vector<std::pair<std::string, int>>{{"mlx5_3", 2}, {"mlx5_2", 1000}}));
}

TEST(NicHandoff, TheEnvironmentNamesExactlyTheHandedHcasAndPorts) {
  EXPECT_EQ(NicEnvironment({{"mlx5_0", 1}, {"mlx5_3", 2}}),
            (std::vector<std::pair<std::string, std::string>>{
                {"NCCL_IB_HCA", "=mlx5_0:1,mlx5_3:2"}, {"UCX_NET_DEVICES", "mlx5_0:1,mlx5_3:2"}}));
  EXPECT_TRUE(NicEnvironment({}).empty());
  HandoffDecision decision;
  decision.kind = HandoffDecision::Kind::kInject;
  decision.devices.nics = {{"mlx5_1", 250}};
  // A NIC-only container: no GPU, its NIC's environment, a CDI name where the NICs have one.
  const Adjustment adjustment = AdjustmentFor(decision, true, {true, "nvidia.com/rdma"});
  EXPECT_EQ(adjustment.env,
            (std::vector<std::pair<std::string, std::string>>{{"NVIDIA_VISIBLE_DEVICES", "void"},
                                                              {"NCCL_IB_HCA", "=mlx5_1:1"},
                                                              {"UCX_NET_DEVICES", "mlx5_1:1"}}));
  EXPECT_EQ(adjustment.cdi_devices, (std::vector<std::string>{"nvidia.com/rdma=mlx5_1"}));
  EXPECT_TRUE(AdjustmentFor(decision, true, {false, ""}).cdi_devices.empty());
  EXPECT_EQ(AdjustmentFor(decision, true, {false, ""}).env.size(), 1u);
}

// Each NIC is named with the port it is used through (NicSpec::port, the lowest ACTIVE port
// discovery found): a card cabled on its second port is mlx5_3:2, planned or adopted.
TEST(NicHandoff, TheEnvironmentNamesThePortEachNicIsUsedThrough) {
  topology::TopologySpec node = Node();
  node.nics[3].port = 2;
  const HandoffDecision planned = Decide(
      Request("p", Plan("p", {0}, {Nic("mlx5_0", 500), Nic("mlx5_3", 500)})), node, Ledger());
  ASSERT_EQ(planned.kind, HandoffDecision::Kind::kInject) << planned.reason;
  const Adjustment adjustment = AdjustmentFor(planned, false);
  ASSERT_EQ(adjustment.env.size(), 3u);
  EXPECT_EQ(adjustment.env[1],
            (std::pair<std::string, std::string>{"NCCL_IB_HCA", "=mlx5_0:1,mlx5_3:2"}));
  EXPECT_EQ(adjustment.env[2],
            (std::pair<std::string, std::string>{"UCX_NET_DEVICES", "mlx5_0:1,mlx5_3:2"}));
  const HandoffDecision adopted =
      Decide(Request("u", std::nullopt, {{"mlx5_3::0", "mlx5_3::1"}}), node, Ledger());
  ASSERT_EQ(adopted.kind, HandoffDecision::Kind::kInject) << adopted.reason;
  EXPECT_EQ(AdjustmentFor(adopted, false).env.back(),
            (std::pair<std::string, std::string>{"UCX_NET_DEVICES", "mlx5_3:2"}));
  EXPECT_EQ(NicPortOf(node, "mlx5_3"), 2);
  EXPECT_EQ(NicPortOf(node, "mlx5_9"), 1);  // a NIC the node does not list
}

TEST(NicHandoff, HandedAnnotationCarriesNicsAndStillReadsTheOldForm) {
  HandedDevices devices;
  devices.gpus = {"GPU-0"};
  devices.nics = {{"mlx5_0", 1000}, {"mlx5_2", 250}};
  EXPECT_EQ(EncodeHanded(devices), "gpus=GPU-0;mig=;shares=;nics=mlx5_0:1000,mlx5_2:250");
  EXPECT_EQ(DecodeHanded(EncodeHanded(devices)).value(), devices);
  EXPECT_EQ(DecodeHanded("gpus=GPU-0;mig=;shares=").value().nics.size(), 0u);
  EXPECT_FALSE(DecodeHanded("gpus=;mig=;shares=;nics=mlx5_0"));
  EXPECT_FALSE(DecodeHanded("gpus=;mig=;shares=;nics=mlx5_0:1001"));
  EXPECT_FALSE(DecodeHanded("gpus=;mig=;shares=;gpus=x"));
}

// A host /dev where the verbs devices are character devices (links to /dev/null, 1:3, stand in
// for them: no test can create device nodes), and a sysfs giving the kernel's numbers.
class NicDevTree {
 public:
  NicDevTree() {
    root_ = std::filesystem::temp_directory_path() /
            ("linkfit-nic-dev-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::create_directories(root_ / "dev/infiniband");
    std::filesystem::create_directories(root_ / "sys");
  }
  ~NicDevTree() { std::filesystem::remove_all(root_); }
  std::string dev() const { return (root_ / "dev").string(); }
  std::string sys() const { return (root_ / "sys").string(); }
  void HostDevice(const std::string& name) const {
    std::filesystem::create_symlink("/dev/null", root_ / "dev/infiniband" / name);
  }
  void SysfsDev(const std::string& relative, const std::string& text) const {
    std::filesystem::create_directories((root_ / "sys" / relative).parent_path());
    std::ofstream(root_ / "sys" / relative) << text;
  }

 private:
  static inline int counter_ = 0;
  std::filesystem::path root_;
};

TEST(NicDeviceFiles, NumbersComeFromTheHostsDevElseFromSysfs) {
  NicDevTree tree;
  tree.HostDevice("uverbs0");
  tree.SysfsDev("class/infiniband_verbs/uverbs0/dev", "231:999\n");  // /dev wins
  tree.SysfsDev("class/infiniband_verbs/uverbs1/dev", "231:193\n");
  tree.SysfsDev("class/infiniband_verbs/uverbs2/dev", "231:194\n");
  tree.SysfsDev("class/infiniband_verbs/uverbs3/dev", "231:195\n");
  tree.SysfsDev("class/misc/rdma_cm/dev", "10:58\n");
  auto files = ReadNicDeviceFiles(tree.dev(), tree.sys(), Node());
  ASSERT_TRUE(files) << files.error().message;
  EXPECT_EQ(files->rdma_cm, (DeviceFile{"/dev/infiniband/rdma_cm", 10, 58}));
  EXPECT_EQ(files->by_nic.at("mlx5_0"), (DeviceFile{"/dev/infiniband/uverbs0", 1, 3}));
  EXPECT_EQ(files->by_nic.at("mlx5_3"), (DeviceFile{"/dev/infiniband/uverbs3", 231, 195}));
  HandedDevices handed;
  handed.nics = {{"mlx5_3", 250}, {"mlx5_0", 1000}};
  auto needed = NicDeviceFilesFor(handed, *files);
  ASSERT_TRUE(needed) << needed.error().message;
  EXPECT_EQ(*needed, (std::vector<DeviceFile>{{"/dev/infiniband/rdma_cm", 10, 58},
                                              {"/dev/infiniband/uverbs3", 231, 195},
                                              {"/dev/infiniband/uverbs0", 1, 3}}));
  EXPECT_TRUE(NicDeviceFilesFor({}, *files)->empty());
  handed.nics = {{"mlx5_7", 1000}};
  EXPECT_FALSE(NicDeviceFilesFor(handed, *files));
  // No rdma_cm (rdma_ucm not loaded): left out. A verbs device nobody gives numbers for, or a
  // malformed dev file: an error naming it.
  NicDevTree bare;
  bare.SysfsDev("class/infiniband_verbs/uverbs0/dev", "231:192\n");
  topology::TopologySpec one = Node();
  one.nics.resize(1);
  auto without = ReadNicDeviceFiles(bare.dev(), bare.sys(), one);
  ASSERT_TRUE(without) << without.error().message;
  EXPECT_FALSE(without->rdma_cm.has_value());
  one.nics.push_back(Node().nics[1]);
  auto missing = ReadNicDeviceFiles(bare.dev(), bare.sys(), one);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("NIC mlx5_1"), std::string::npos);
  bare.SysfsDev("class/infiniband_verbs/uverbs1/dev", "231-193\n");
  EXPECT_NE(ReadNicDeviceFiles(bare.dev(), bare.sys(), one).error().message.find("MAJOR:MINOR"),
            std::string::npos);
}

TEST(NriPluginNics, CreateContainerHandsExactlyThePlannedNics) {
  NriPluginOptions options;
  options.node_name = "n1";
  options.nic_env_exempt_namespaces = {"hpc"};
  NicDeviceFiles files;
  files.rdma_cm = DeviceFile{"/dev/infiniband/rdma_cm", 10, 58};
  for (int i = 0; i < 4; ++i) {
    files.by_nic["mlx5_" + std::to_string(i)] =
        DeviceFile{"/dev/infiniband/uverbs" + std::to_string(i), 231, 192 + i};
  }
  options.nic_device_files = [&files]() -> Result<NicDeviceFiles> { return files; };
  std::string nic_mode;
  options.on_nic_configured = [&](const std::string& mode) { nic_mode = mode; };
  NriPlugin plugin(options, Node);
  ASSERT_EQ(
      Call(plugin, "Configure", EncodeConfigureRequest({"", "containerd", "v2.1.1"})).status_code,
      0);
  EXPECT_EQ(nic_mode, "nri-env");  // the NICs have no CDI kind here
  const auto create = [&](const ContainerEvent& event) {
    return Call(plugin, "CreateContainer", EncodeContainerEvent(event));
  };
  const TtrpcResponse trainer =
      create(Event("t", "ml", Plan("t", {0, 2}, {Nic("mlx5_0"), Nic("mlx5_2")})));
  ASSERT_EQ(trainer.status_code, 0) << trainer.status_message;
  const ContainerAdjustment adjust = DecodeCreateContainerResponse(trainer.payload).value();
  std::vector<std::string> paths;
  for (const LinuxDevice& device : adjust.devices) paths.push_back(device.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0",
                                             "/dev/infiniband/uverbs2"}));
  EXPECT_EQ(adjust.devices[2], (LinuxDevice{"/dev/infiniband/uverbs2", "c", 231, 194, 0666}));
  EXPECT_EQ(Env(adjust, "NCCL_IB_HCA"), "=mlx5_0:1,mlx5_2:1");
  EXPECT_EQ(Env(adjust, "UCX_NET_DEVICES"), "mlx5_0:1,mlx5_2:1");
  EXPECT_EQ(adjust.cdi_devices,
            (std::vector<std::string>{"nvidia.com/gpu=GPU-0", "nvidia.com/gpu=GPU-2"}));
  // An exempt namespace: the NICs' devices, not the environment.
  const TtrpcResponse exempt = create(Event("h", "hpc", Plan("h", {1}, {Nic("mlx5_1", 500)})));
  ASSERT_EQ(exempt.status_code, 0) << exempt.status_message;
  const ContainerAdjustment exempted = DecodeCreateContainerResponse(exempt.payload).value();
  EXPECT_EQ(exempted.devices.size(), 2u);
  EXPECT_EQ(Env(exempted, "NCCL_IB_HCA"), "(unset)");
  // A container without a NIC plan gets no RDMA device.
  const TtrpcResponse plain = create(Event("g", "ml", Plan("g", {3}, {})));
  ASSERT_EQ(plain.status_code, 0) << plain.status_message;
  const ContainerAdjustment none = DecodeCreateContainerResponse(plain.payload).value();
  EXPECT_TRUE(none.devices.empty());
  EXPECT_EQ(Env(none, "NCCL_IB_HCA"), "(unset)");
  // The whole NIC is the trainer's: refused, naming it. A NIC without files: refused, naming it.
  const TtrpcResponse taken = create(Event("x", "ml", Plan("x", {4}, {Nic("mlx5_2", 100)})));
  EXPECT_NE(taken.status_message.find("NIC mlx5_2 is held by pod t"), std::string::npos)
      << taken.status_message;
  files.by_nic.erase("mlx5_3");
  const TtrpcResponse no_files = create(Event("y", "ml", Plan("y", {5}, {Nic("mlx5_3")})));
  EXPECT_NE(no_files.status_message.find("NIC mlx5_3 has no verbs device"), std::string::npos)
      << no_files.status_message;
  EXPECT_EQ(plugin.ledger().containers(), 3u);  // t, h, g: nothing held for the refused
  // The kubelet labelled other NICs: counted as a mismatch, the plan handed over.
  const TtrpcResponse labelled =
      create(Event("z", "ml", Plan("z", {6}, {Nic("mlx5_3", 250)}),
                   {{"linkfit.io/kubelet-ids.linkfit.io/rdma-share", "mlx5_1::0,mlx5_1::1"}}));
  EXPECT_NE(labelled.status_message.find("mlx5_3 has no verbs device"), std::string::npos);
  files.by_nic["mlx5_3"] = DeviceFile{"/dev/infiniband/uverbs3", 231, 195};
  const std::uint64_t before = plugin.mismatches();
  ASSERT_EQ(create(Event("z", "ml", Plan("z", {6}, {Nic("mlx5_3", 250)}),
                         {{"linkfit.io/kubelet-ids.linkfit.io/rdma-share", "mlx5_1::0"}}))
                .status_code,
            0);
  EXPECT_EQ(plugin.mismatches(), before + 1);
}

TEST(NriPluginNics, NicCdiNamesReplaceTheirFilesWhereTheRuntimeInjectsCdi) {
  NriPluginOptions options;
  options.node_name = "n1";
  options.nics.cdi_kind = "nvidia.com/rdma";
  options.nic_device_files = []() -> Result<NicDeviceFiles> { return MakeError("not called"); };
  std::string nic_mode;
  options.on_nic_configured = [&](const std::string& mode) { nic_mode = mode; };
  NriPlugin plugin(options, Node);
  Call(plugin, "Configure", EncodeConfigureRequest({"", "containerd", "v2.1.1"}));
  EXPECT_EQ(nic_mode, "nri-cdi");
  const TtrpcResponse reply =
      Call(plugin, "CreateContainer",
           EncodeContainerEvent(Event("t", "ml", Plan("t", {0}, {Nic("mlx5_0")}))));
  ASSERT_EQ(reply.status_code, 0) << reply.status_message;
  const ContainerAdjustment adjust = DecodeCreateContainerResponse(reply.payload).value();
  EXPECT_TRUE(adjust.devices.empty());
  EXPECT_EQ(adjust.cdi_devices,
            (std::vector<std::string>{"nvidia.com/gpu=GPU-0", "nvidia.com/rdma=mlx5_0"}));
  EXPECT_EQ(Env(adjust, "NCCL_IB_HCA"), "=mlx5_0:1");
  // A runtime without CDI injection: the files (here unreadable, so the creation fails).
  NriPlugin old(options, Node);
  Call(old, "Configure", EncodeConfigureRequest({"", "containerd", "1.7.24"}));
  EXPECT_EQ(nic_mode, "nri-env");
  const TtrpcResponse refused =
      Call(old, "CreateContainer",
           EncodeContainerEvent(Event("t", "ml", Plan("t", {0}, {Nic("mlx5_0")}))));
  EXPECT_NE(refused.status_message.find("not called"), std::string::npos);
}

// A restarted plugin learns the NICs live containers hold from the runtime's Synchronize.
TEST(NriPluginNics, SynchronizeRebuildsTheNicLedger) {
  NriPlugin plugin({"n1"}, Node);
  SynchronizeRequest live;
  live.pods = {{"sandbox-t", "p-t", "t", "ml", {}, {}}};
  live.containers = {{"ctr-t",
                      "sandbox-t",
                      "main",
                      {{kAnnotationHanded, "gpus=GPU-0;mig=;shares=;nics=mlx5_0:1000"}},
                      {}}};
  ASSERT_EQ(Call(plugin, "Synchronize", EncodeSynchronizeRequest(live)).status_code, 0);
  const TtrpcResponse clash =
      Call(plugin, "CreateContainer",
           EncodeContainerEvent(Event("u", "ml", Plan("u", {1}, {Nic("mlx5_0", 10)}))));
  EXPECT_NE(clash.status_message.find("NIC mlx5_0 is held by pod t"), std::string::npos)
      << clash.status_message;
}

}  // namespace
}  // namespace linkfit::handoff
