// RDMA NICs handed over end to end (issue 38): the real linkfit-agent discovers four NICs from a
// sysfs tree, serves them to a fake kubelet device manager (linkfit.io/rdma and its thousandths)
// and hands them over through NRI to a fake runtime; linkfit binds the pods. A 2-GPU pod asking
// one NIC per GPU gets exactly its two NICs' verbs devices, rdma_cm and NCCL_IB_HCA naming them;
// four 1-GPU pods with a quarter of a NIC each share one NIC; admission orders are random; a
// runtime restart rebuilds the ledger; what was handed over reaches linkfit without a mismatch.
// Without NRI, a pod the kubelet reports on another NIC than planned is counted as a mismatch
// whose reason names the NICs; share resources are each container's own total (one pod's two
// containers get their own parts). With --nic-cdi-kind only NICs a CDI spec declares go by CDI
// name.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "agent/handoff_e2e.h"
#include "agent/sysfs_tree.h"

namespace linkfit::agent {
namespace {

using namespace testing_e2e;  // NOLINT: the fixture and its helpers
using linkfit::testing::FakePodSpec;

// Four ConnectX ports mlx5_0..3 (InfiniBand, ACTIVE, uverbs0..3, NUMA 0, 0, 1, 1), with the
// kernel's device numbers of their verbs devices and of rdma_cm.
void WriteNics(const testing::SysfsTree& tree) {
  for (int i = 0; i < 4; ++i) {
    const std::string function = "pci0000:a0/0000:a0:01.0/0000:a" + std::to_string(i + 1) + ":00.0";
    tree.Function(function, "0x15b3", "0x1021", i < 2 ? 0 : 1);
    tree.Rdma("mlx5_" + std::to_string(i), function, "InfiniBand", "400 Gb/sec (4X NDR)",
              "4: ACTIVE", i, "ib" + std::to_string(i));
    tree.Write("class/infiniband_verbs/uverbs" + std::to_string(i) + "/dev",
               "231:" + std::to_string(192 + i) + "\n");
  }
  tree.Write("class/misc/rdma_cm/dev", "10:58\n");
}

json WithLimits(const std::string& name, json limits) {
  limits["cpu"] = "1";
  limits["memory"] = "1Gi";
  return {{"name", name}, {"resources", {{"limits", limits}}}};
}

std::string EnvOf(const handoff::ContainerAdjustment& adjust, const std::string& key) {
  for (const auto& [name, value] : adjust.env) {
    if (name == key) return value;
  }
  return "(unset)";
}

std::vector<std::string> NicNames(const kube::AllocationRecord& record) {
  std::vector<std::string> names;
  for (const auto& nic : record.containers.at(0).devices.nics) names.push_back(nic.name);
  return names;
}

class NicHandoffEndToEndTest : public HandoffEndToEndTest {
 protected:
  void StartAgentWithNics(const std::string& nri_socket) {
    WriteNics(sysfs_);
    StartAgent(nri_socket, {"--host-sys", sysfs_.root(), "--host-dev", "/nonexistent-dev"});
  }
  testing::SysfsTree sysfs_;
};

TEST_F(NicHandoffEndToEndTest, EachPodGetsExactlyItsNicsWholeOrShared) {
  StartAgentWithNics(nri_socket_);
  const int fd = ::accept(listener_, nullptr, nullptr);
  ASSERT_GE(fd, 0);
  auto runtime = std::make_unique<linkfit::testing::FakeNriRuntime>(fd);
  ASSERT_EQ(runtime->AcceptAndConfigure(), 0);
  ASSERT_EQ(runtime->Call("Synchronize", handoff::EncodeSynchronizeRequest({})).status_code, 0);
  ASSERT_TRUE(device_manager_->WaitForDevices("linkfit.io/rdma", 4, std::chrono::seconds(20)))
      << AgentLog();
  ASSERT_TRUE(
      device_manager_->WaitForDevices("linkfit.io/rdma-share", 4000, std::chrono::seconds(5)));
  const auto published = WaitForPublishedMode("nri-cdi");
  ASSERT_TRUE(published) << AgentLog();
  ASSERT_EQ(published->nics.size(), 4u);
  // GPUs go as CDI names; the NICs have no CDI kind here, so they go as device files.
  EXPECT_EQ(published->nic_handoff_mode, "nri-env");
  StartLinkfit();

  struct Planned {
    std::string name;
    std::map<std::string, int> requests;
    kube::AllocationRecord record;
  };
  std::vector<Planned> pods = {{"train", {{"nvidia.com/gpu", 2}, {"linkfit.io/rdma", 2}}, {}}};
  for (int i = 0; i < 4; ++i) {
    pods.push_back({"serve-" + std::to_string(i),
                    {{"nvidia.com/gpu", 1}, {"linkfit.io/rdma-share", 250}},
                    {}});
  }
  for (Planned& pod : pods) {
    json limits = json::object();
    for (const auto& [resource, count] : pod.requests) limits[resource] = std::to_string(count);
    auto record = ScheduleObject(Pod(pod.name, {WithLimits("main", limits)}));
    ASSERT_TRUE(record) << record.error().message;
    pod.record = *record;
  }
  // A NIC per GPU for the trainer, whole; one NIC shared by the four others.
  ASSERT_EQ(NicNames(pods[0].record).size(), 2u);
  const std::string shared = NicNames(pods[1].record).at(0);
  for (std::size_t i = 1; i <= 4; ++i) {
    EXPECT_EQ(NicNames(pods[i].record), (std::vector<std::string>{shared}));
    EXPECT_EQ(pods[i].record.containers[0].devices.nics[0].milli, 250);
  }
  const std::vector<std::string> trainer_nics = NicNames(pods[0].record);
  EXPECT_EQ(std::count(trainer_nics.begin(), trainer_nics.end(), shared), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the agent's watch has the plans

  std::mt19937 random(seed_);
  std::shuffle(pods.begin(), pods.end(), random);
  std::map<std::string, std::string> handed;  // pod UID -> its linkfit.io/handed
  for (const Planned& pod : pods) {
    auto admitted = device_manager_->Admit(
        {"ml", pod.name, {{"main", false, false, pod.requests}}, std::nullopt});
    ASSERT_TRUE(admitted) << admitted.error().message << "\n" << AgentLog();
    const std::vector<std::string> nics = NicNames(pod.record);
    // The kubelet's bookkeeping follows the plan: the NICs themselves, or replicas of the one.
    const auto& ids = admitted->at("main").ids;
    if (pod.name == "train") {
      std::vector<std::string> sorted = nics;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(ids.at("linkfit.io/rdma"), sorted);
    } else {
      ASSERT_EQ(ids.at("linkfit.io/rdma-share").size(), 250u);
      for (const std::string& id : ids.at("linkfit.io/rdma-share")) {
        EXPECT_EQ(id.substr(0, id.find("::")), shared) << id;
      }
    }
    handoff::ContainerEvent event;
    event.pod = {"sandbox-" + pod.name,
                 pod.name,
                 pod.record.uid,
                 "ml",
                 {},
                 {{kube::kAnnotationAllocation, kube::EncodeAllocationRecord(pod.record)}}};
    event.container = {
        "ctr-" + pod.name, event.pod.id, "main", admitted->at("main").annotations, {}};
    const handoff::TtrpcResponse reply =
        runtime->Call("CreateContainer", handoff::EncodeContainerEvent(event));
    ASSERT_EQ(reply.status_code, 0) << reply.status_message;
    auto adjust = handoff::DecodeCreateContainerResponse(reply.payload);
    ASSERT_TRUE(adjust);
    // Exactly its NICs' verbs devices and rdma_cm, with the host's numbers, and NCCL_IB_HCA and
    // UCX_NET_DEVICES naming exactly those HCAs.
    std::vector<std::string> devices;
    for (const handoff::LinuxDevice& device : adjust->devices) {
      devices.push_back(device.path + "=" + std::to_string(device.major) + ":" +
                        std::to_string(device.minor));
    }
    std::vector<std::string> want = {"/dev/infiniband/rdma_cm=10:58"};
    std::string hca;
    for (const std::string& nic : nics) {
      const int n = nic.back() - '0';
      want.push_back("/dev/infiniband/uverbs" + std::to_string(n) +
                     "=231:" + std::to_string(192 + n));
      hca += (hca.empty() ? "" : ",") + nic + ":1";
    }
    EXPECT_EQ(devices, want) << pod.name;
    EXPECT_EQ(EnvOf(*adjust, "NCCL_IB_HCA"), "=" + hca) << pod.name;
    EXPECT_EQ(EnvOf(*adjust, "UCX_NET_DEVICES"), hca) << pod.name;
    EXPECT_EQ(EnvOf(*adjust, "NVIDIA_VISIBLE_DEVICES"), PlannedUuids(pod.record, "main"));
    handed[pod.record.uid] = adjust->annotations.at(handoff::kAnnotationHanded);
  }
  // What was handed over reaches linkfit: each container's NICs, and no mismatch.
  ASSERT_TRUE(WaitForReportedPods(pods.size(), std::chrono::seconds(10))) << InspectNode().dump();
  EXPECT_FALSE(InspectNode().contains("handoff_mismatch_pods")) << InspectNode().dump();
  EXPECT_EQ(InspectNode()["nic_handoff_mode"], "nri-env");
  auto in_use =
      kube::DecodeDevicesInUse(Annotations()[kube::kAnnotationDevicesInUse].get<std::string>());
  ASSERT_TRUE(in_use) << in_use.error().message;
  for (const Planned& pod : pods) {
    const auto entry = std::find_if(in_use->pods.begin(), in_use->pods.end(),
                                    [&](const auto& p) { return p.uid == pod.record.uid; });
    ASSERT_NE(entry, in_use->pods.end()) << pod.name;
    std::vector<std::string> nics = NicNames(pod.record);
    std::sort(nics.begin(), nics.end());
    EXPECT_EQ(entry->containers.at(0).nics, nics) << pod.name;
  }
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("linkfit_handoff_mismatch_total 0"), std::string::npos);

  // The runtime restarts: the agent dials again and the runtime's Synchronize (the containers
  // with the linkfit.io/handed annotations the plugin set) rebuilds the ledger, so a plan that
  // claims the trainer's whole NIC is refused, naming the NIC.
  runtime->Close();
  runtime.reset();
  const int again = ::accept(listener_, nullptr, nullptr);
  ASSERT_GE(again, 0);
  linkfit::testing::FakeNriRuntime restarted(again);
  ASSERT_EQ(restarted.AcceptAndConfigure(), 0);
  handoff::SynchronizeRequest live;
  for (const Planned& pod : pods) {
    live.pods.push_back({"sandbox-" + pod.name, pod.name, pod.record.uid, "ml", {}, {}});
    live.containers.push_back({"ctr-" + pod.name,
                               "sandbox-" + pod.name,
                               "main",
                               {{handoff::kAnnotationHanded, handed.at(pod.record.uid)}},
                               {}});
  }
  ASSERT_EQ(restarted.Call("Synchronize", handoff::EncodeSynchronizeRequest(live)).status_code, 0);
  const auto trainer =
      std::find_if(pods.begin(), pods.end(), [](const Planned& p) { return p.name == "train"; });
  kube::AllocationRecord thief;
  thief.pod = "ml/thief";
  thief.uid = "uid-thief";
  thief.node = "a100-0";
  thief.devices.nics = {{NicNames(trainer->record).at(0), "", "", -1, 100, -1}};
  thief.containers = {{"main", false, thief.devices}};
  handoff::ContainerEvent clash;
  clash.pod = {"sandbox-thief",
               "thief",
               "uid-thief",
               "ml",
               {},
               {{kube::kAnnotationAllocation, kube::EncodeAllocationRecord(thief)}}};
  clash.container = {"ctr-thief", "sandbox-thief", "main", {}, {}};
  const handoff::TtrpcResponse refused =
      restarted.Call("CreateContainer", handoff::EncodeContainerEvent(clash));
  EXPECT_EQ(refused.status_code, 2);
  EXPECT_NE(refused.status_message.find("NIC " + NicNames(trainer->record).at(0) +
                                        " is held by pod " + trainer->record.uid),
            std::string::npos)
      << refused.status_message;
  // A fifth quarter of the shared NIC does not fit beside the four (1000 thousandths in all).
  thief.devices.nics = {{shared, "", "", -1, 250, -1}};
  thief.containers = {{"main", false, thief.devices}};
  clash.pod.annotations[kube::kAnnotationAllocation] = kube::EncodeAllocationRecord(thief);
  const handoff::TtrpcResponse over =
      restarted.Call("CreateContainer", handoff::EncodeContainerEvent(clash));
  EXPECT_NE(over.status_message.find("NIC " + shared + " would be shared beyond its capacity"),
            std::string::npos)
      << over.status_message;
  EXPECT_EQ(daemon_->Stop(), 0) << AgentLog();
}

// Without NRI the device plugin verifies and the node reports what the kubelet holds: a pod the
// kubelet shows on another NIC than its plan is a hand-off mismatch, and its reason names both.
TEST_F(NicHandoffEndToEndTest, ANicOtherThanPlannedIsCountedAsAMismatch) {
  StartAgentWithNics(device_manager_->directory() + "/no-nri.sock");
  ASSERT_TRUE(device_manager_->WaitForDevices("linkfit.io/rdma", 4, std::chrono::seconds(20)))
      << AgentLog();
  const auto published = WaitForPublishedMode("verify");
  ASSERT_TRUE(published) << AgentLog();
  EXPECT_EQ(published->nic_handoff_mode, "verify");
  StartLinkfit();
  auto record = ScheduleObject(
      Pod("train", {WithLimits("main", {{"nvidia.com/gpu", "1"}, {"linkfit.io/rdma", "1"}})}));
  ASSERT_TRUE(record) << record.error().message;
  const std::string planned = NicNames(*record).at(0);
  const std::string other = planned == "mlx5_0" ? "mlx5_1" : "mlx5_0";
  // The kubelet holds the planned GPU but another NIC.
  kubelet_->SetPods({{"ml",
                      "train",
                      {{"main",
                        {{"nvidia.com/gpu", {Uuid(record->containers[0].devices.gpus.at(0))}},
                         {"linkfit.io/rdma", {other}}}}}}});
  ASSERT_TRUE(WaitFor([&] { return InspectNode().contains("handoff_mismatch_pods"); },
                      std::chrono::seconds(15)))
      << InspectNode().dump() << AgentLog();
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("linkfit_handoff_mismatch_total 1"), std::string::npos);
  ASSERT_TRUE(WaitFor([&] { return !fake_->PostedEvents().empty(); }));
  const json event = fake_->PostedEvents().front();
  EXPECT_EQ(event["reason"], "DeviceHandoffMismatch");
  EXPECT_EQ(event["regarding"]["uid"], record->uid);
  EXPECT_NE(event["note"].get<std::string>().find("NICs " + other + " held, not " + planned +
                                                  " as planned"),
            std::string::npos)
      << event.dump();
  EXPECT_EQ(InspectNode()["nic_handoff_mode"], "verify");
}

// A share resource is the container's thousandths in all, as the kubelet counts it (one replica
// ID per thousandth): without NRI, a 2-GPU pod asking linkfit.io/rdma-share: 500 is planned a
// quarter of each of its two NICs, the kubelet is steered to 250 replicas of each, the verify-only
// device plugin starts it and names both HCAs, and the node reports no mismatch. A pod asking
// linkfit.io/gpu-share: 600 over linkfit.io/gpus: 2 likewise gets 300 of each GPU and starts.
TEST_F(NicHandoffEndToEndTest, ASharedResourceIsTheTotalOverItsDevices) {
  StartAgentWithNics(device_manager_->directory() + "/no-nri.sock");
  ASSERT_TRUE(
      device_manager_->WaitForDevices("linkfit.io/rdma-share", 4000, std::chrono::seconds(20)))
      << AgentLog();
  ASSERT_TRUE(WaitForPublishedMode("verify")) << AgentLog();
  StartLinkfit();
  auto nics = ScheduleObject(Pod(
      "train", {WithLimits("main", {{"nvidia.com/gpu", "2"}, {"linkfit.io/rdma-share", "500"}})}));
  ASSERT_TRUE(nics) << nics.error().message;
  const std::vector<std::string> planned = NicNames(*nics);
  ASSERT_EQ(planned.size(), 2u);
  for (const auto& nic : nics->containers.at(0).devices.nics) EXPECT_EQ(nic.milli, 250);
  json notebook = Pod("notebook", {WithLimits("main", {{"linkfit.io/gpu-share", "600"}})});
  notebook["metadata"]["annotations"] = {{"linkfit.io/gpus", "2"}};
  auto gpus = ScheduleObject(notebook);
  ASSERT_TRUE(gpus) << gpus.error().message;
  ASSERT_EQ(gpus->containers.at(0).devices.shares.size(), 2u);
  for (const auto& share : gpus->containers.at(0).devices.shares) EXPECT_EQ(share.milli, 300);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the agent's watch has the plans

  auto admitted = device_manager_->Admit(
      {"ml",
       "train",
       {{"main", false, false, {{"nvidia.com/gpu", 2}, {"linkfit.io/rdma-share", 500}}}},
       std::nullopt});
  ASSERT_TRUE(admitted) << admitted.error().message << "\n" << AgentLog();
  std::map<std::string, int> replicas;
  for (const std::string& id : admitted->at("main").ids.at("linkfit.io/rdma-share")) {
    ++replicas[id.substr(0, id.find("::"))];
  }
  EXPECT_EQ(replicas, (std::map<std::string, int>{{planned[0], 250}, {planned[1], 250}}));
  // Both HCAs, in the order of the kubelet's IDs.
  const std::string hca = admitted->at("main").envs.at("NCCL_IB_HCA");
  EXPECT_TRUE(hca == "=" + planned[0] + ":1," + planned[1] + ":1" ||
              hca == "=" + planned[1] + ":1," + planned[0] + ":1")
      << hca;
  auto started = device_manager_->StartContainer("ml", "train", "main");
  EXPECT_TRUE(started) << started.error().message << "\n" << AgentLog();

  auto shared = device_manager_->Admit(
      {"ml", "notebook", {{"main", false, false, {{"linkfit.io/gpu-share", 600}}}}, std::nullopt});
  ASSERT_TRUE(shared) << shared.error().message << "\n" << AgentLog();
  std::map<std::string, int> gpu_replicas;
  for (const std::string& id : shared->at("main").ids.at("linkfit.io/gpu-share")) {
    ++gpu_replicas[id.substr(0, id.find("::"))];
  }
  std::map<std::string, int> want;
  for (const auto& share : gpus->containers.at(0).devices.shares) want[Uuid(share.gpu)] = 300;
  EXPECT_EQ(gpu_replicas, want);
  started = device_manager_->StartContainer("ml", "notebook", "main");
  EXPECT_TRUE(started) << started.error().message << "\n" << AgentLog();

  // What the kubelet holds reaches linkfit: both pods as planned (the notebook's replicas of the
  // agent's own share resource too), no mismatch.
  ASSERT_TRUE(WaitForReportedPods(2, std::chrono::seconds(15)))
      << InspectNode().dump(1) << AgentLog();
  EXPECT_EQ(InspectNode()["reported_pods"].get<std::set<std::string>>(),
            (std::set<std::string>{nics->uid, gpus->uid}));
  EXPECT_FALSE(InspectNode().contains("handoff_mismatch_pods")) << InspectNode().dump();
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("linkfit_handoff_mismatch_total 0"), std::string::npos);
}

// Two containers of one pod asking linkfit.io/rdma-share: 250 each: the pod asks 500 over its two
// GPUs' NICs, and each container's plan is its own quarter of the NIC serving its GPU, so the
// kubelet is steered to 250 replicas of that NIC for each container, the verify-only device
// plugin starts both, and the node reports no mismatch.
TEST_F(NicHandoffEndToEndTest, TwoContainersEachGetTheirOwnPartOfThePodsShares) {
  StartAgentWithNics(device_manager_->directory() + "/no-nri.sock");
  ASSERT_TRUE(
      device_manager_->WaitForDevices("linkfit.io/rdma-share", 4000, std::chrono::seconds(20)))
      << AgentLog();
  ASSERT_TRUE(WaitForPublishedMode("verify")) << AgentLog();
  StartLinkfit();
  const json limits = {{"nvidia.com/gpu", "1"}, {"linkfit.io/rdma-share", "250"}};
  auto record = ScheduleObject(Pod("pair", {WithLimits("a", limits), WithLimits("b", limits)}));
  ASSERT_TRUE(record) << record.error().message;
  ASSERT_EQ(record->devices.nics.size(), 2u);
  ASSERT_EQ(record->containers.size(), 2u);
  std::set<std::string> parts;
  for (const auto& container : record->containers) {
    ASSERT_EQ(container.devices.nics.size(), 1u) << container.name;
    EXPECT_EQ(container.devices.nics[0].milli, 250) << container.name;
    parts.insert(container.devices.nics[0].name);
  }
  EXPECT_EQ(parts.size(), 2u);                                  // a NIC each
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the agent's watch has the plans

  const std::map<std::string, int> requests = {{"nvidia.com/gpu", 1},
                                               {"linkfit.io/rdma-share", 250}};
  auto admitted = device_manager_->Admit(
      {"ml", "pair", {{"a", false, false, requests}, {"b", false, false, requests}}, std::nullopt});
  ASSERT_TRUE(admitted) << admitted.error().message << "\n" << AgentLog();
  for (const auto& container : record->containers) {
    std::map<std::string, int> replicas;
    for (const std::string& id : admitted->at(container.name).ids.at("linkfit.io/rdma-share")) {
      ++replicas[id.substr(0, id.find("::"))];
    }
    EXPECT_EQ(replicas, (std::map<std::string, int>{{container.devices.nics[0].name, 250}}))
        << container.name;
    EXPECT_EQ(admitted->at(container.name).envs.at("NCCL_IB_HCA"),
              "=" + container.devices.nics[0].name + ":1");
    auto started = device_manager_->StartContainer("ml", "pair", container.name);
    EXPECT_TRUE(started) << started.error().message << "\n" << AgentLog();
  }
  ASSERT_TRUE(WaitForReportedPods(1, std::chrono::seconds(15)))
      << InspectNode().dump(1) << AgentLog();
  EXPECT_FALSE(InspectNode().contains("handoff_mismatch_pods")) << InspectNode().dump();
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("linkfit_handoff_mismatch_total 0"), std::string::npos);
}

// With --nic-cdi-kind the agent reads the node's CDI specs (--cdi-spec-dir) when its NICs change:
// a NIC a spec declares goes by its CDI name, the others as device files, and rdma_cm comes once,
// as a file (the spec's devices do not bring it). A spec file that does not parse is logged with
// its path and ignored; each NIC no spec declares is logged once.
TEST_F(NicHandoffEndToEndTest, OnlyNicsACdiSpecDeclaresGoByTheirCdiNames) {
  const std::string specs = ::testing::TempDir() + "/linkfit-cdi-" + std::to_string(::getpid());
  std::filesystem::create_directories(specs);
  std::ofstream(specs + "/rdma.json") << R"({"cdiVersion": "0.6.0", "kind": "nvidia.com/rdma",
      "devices": [{"name": "mlx5_0"}, {"name": "mlx5_1"}]})";
  std::ofstream(specs + "/broken.yaml") << "kind: [\n";
  WriteNics(sysfs_);
  StartAgent(nri_socket_, {"--host-sys", sysfs_.root(), "--host-dev", "/nonexistent-dev",
                           "--nic-cdi-kind", "nvidia.com/rdma", "--cdi-spec-dir", specs});
  const int fd = ::accept(listener_, nullptr, nullptr);
  ASSERT_GE(fd, 0);
  linkfit::testing::FakeNriRuntime runtime(fd);
  ASSERT_EQ(runtime.AcceptAndConfigure(), 0);
  ASSERT_EQ(runtime.Call("Synchronize", handoff::EncodeSynchronizeRequest({})).status_code, 0);
  ASSERT_TRUE(device_manager_->WaitForDevices("linkfit.io/rdma", 4, std::chrono::seconds(20)))
      << AgentLog();
  const auto published = WaitForPublishedMode("nri-cdi");
  ASSERT_TRUE(published) << AgentLog();
  EXPECT_EQ(published->nic_handoff_mode, "nri-cdi");
  StartLinkfit();
  auto record = ScheduleObject(
      Pod("train", {WithLimits("main", {{"nvidia.com/gpu", "4"}, {"linkfit.io/rdma", "4"}})}));
  ASSERT_TRUE(record) << record.error().message;
  const std::vector<std::string> nics = NicNames(*record);
  ASSERT_EQ(nics.size(), 4u);

  handoff::ContainerEvent event;
  event.pod = {"sandbox-train",
               "train",
               record->uid,
               "ml",
               {},
               {{kube::kAnnotationAllocation, kube::EncodeAllocationRecord(*record)}}};
  event.container = {"ctr-train", event.pod.id, "main", {}, {}};
  const handoff::TtrpcResponse reply =
      runtime.Call("CreateContainer", handoff::EncodeContainerEvent(event));
  ASSERT_EQ(reply.status_code, 0) << reply.status_message << AgentLog();
  auto adjust = handoff::DecodeCreateContainerResponse(reply.payload);
  ASSERT_TRUE(adjust);
  std::vector<std::string> cdi;
  const std::string uuids = PlannedUuids(*record, "main");
  for (std::string_view uuid : Split(uuids, ',')) {
    cdi.push_back("nvidia.com/gpu=" + std::string(uuid));
  }
  std::vector<std::string> files = {"/dev/infiniband/rdma_cm=10:58"};
  for (const std::string& nic : nics) {
    const int n = nic.back() - '0';
    if (n < 2) {
      cdi.push_back("nvidia.com/rdma=" + nic);
    } else {
      files.push_back("/dev/infiniband/uverbs" + std::to_string(n) +
                      "=231:" + std::to_string(192 + n));
    }
  }
  EXPECT_EQ(adjust->cdi_devices, cdi);
  std::vector<std::string> devices;
  for (const handoff::LinuxDevice& device : adjust->devices) {
    devices.push_back(device.path + "=" + std::to_string(device.major) + ":" +
                      std::to_string(device.minor));
  }
  EXPECT_EQ(devices, files);
  EXPECT_EQ(daemon_->Stop(), 0);
  const std::string log = AgentLog();
  EXPECT_NE(log.find(specs + "/broken.yaml"), std::string::npos) << log;
  for (const std::string nic : {"mlx5_2", "mlx5_3"}) {
    const std::string line = "NIC " + nic + ": no CDI spec";
    const std::size_t first = log.find(line);
    EXPECT_NE(first, std::string::npos) << log;
    EXPECT_EQ(log.find(line, first + 1), std::string::npos) << log;  // once
  }
  EXPECT_EQ(log.find("NIC mlx5_0: no CDI spec"), std::string::npos) << log;
  std::filesystem::remove_all(specs);
}

}  // namespace
}  // namespace linkfit::agent
