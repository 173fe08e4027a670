// The whole node hand-off end to end (issue 10): linkfit binds pods through the fake API server;
// the real linkfit-agent daemon serves its device plugin to a fake kubelet device manager (which
// allocates the way the kubelet's devicesToAllocate does, steered by the plugin's
// GetPreferredAllocation) and its NRI plugin to a fake runtime. For every pod (whole GPUs with an
// init container, a MIG instance, a share of a GPU) in random admission orders: the kubelet's IDs
// equal linkfit.io/allocation, each container is handed exactly its plan, and linkfit counts no
// mismatch once the agent publishes what was handed over.

#include <algorithm>
#include <random>
#include <thread>

#include "agent/handoff_e2e.h"

namespace linkfit::agent {
namespace {

using namespace testing_e2e;  // NOLINT: the fixture and its helpers
using linkfit::testing::FakePodSpec;

TEST_F(HandoffEndToEndTest, EveryContainerGetsExactlyItsPlanAndNothingMismatches) {
  StartAgent();
  // The runtime accepts linkfit's NRI plugin.
  const int fd = ::accept(listener_, nullptr, nullptr);
  ASSERT_GE(fd, 0);
  linkfit::testing::FakeNriRuntime runtime(fd);
  ASSERT_EQ(runtime.AcceptAndConfigure(), 0);
  ASSERT_EQ(runtime.Call("Synchronize", handoff::EncodeSynchronizeRequest({})).status_code, 0);
  // The device plugin registers its resources with the kubelet.
  ASSERT_TRUE(device_manager_->WaitForDevices("nvidia.com/gpu", 7, std::chrono::seconds(20)))
      << AgentLog();
  ASSERT_TRUE(
      device_manager_->WaitForDevices("nvidia.com/mig-3g.20gb", 1, std::chrono::seconds(5)));
  ASSERT_TRUE(
      device_manager_->WaitForDevices("linkfit.io/gpu-share", 7000, std::chrono::seconds(5)));
  // linkfit sees the node once the agent published it, with the hand-off mode the runtime allows.
  ASSERT_TRUE(WaitForPublishedMode("nri-cdi")) << AgentLog();
  StartLinkfit();

  // The pods, bound by linkfit.
  struct Planned {
    json object;
    FakePodSpec kubelet;
    kube::AllocationRecord record;
  };
  std::vector<Planned> pods;
  pods.push_back({Pod("train", {Container("train", "nvidia.com/gpu", 4)},
                      {Container("setup", "nvidia.com/gpu", 2)}),
                  {"ml",
                   "train",
                   {{"setup", true, false, {{"nvidia.com/gpu", 2}}},
                    {"train", false, false, {{"nvidia.com/gpu", 4}}}},
                   std::nullopt},
                  {}});
  pods.push_back(
      {Pod("infer", {Container("infer", "nvidia.com/mig-3g.20gb", 1)}),
       {"ml", "infer", {{"infer", false, false, {{"nvidia.com/mig-3g.20gb", 1}}}}, std::nullopt},
       {}});
  pods.push_back(
      {Pod("notebook", {Container("nb", "linkfit.io/gpu-share", 300), Container("sidecar", "", 0)}),
       {"ml",
        "notebook",
        {{"nb", false, false, {{"linkfit.io/gpu-share", 300}}}, {"sidecar", false, false, {}}},
        std::nullopt},
       {}});
  pods.push_back({Pod("small", {Container("main", "nvidia.com/gpu", 1)}),
                  {"ml", "small", {{"main", false, false, {{"nvidia.com/gpu", 1}}}}, std::nullopt},
                  {}});
  for (Planned& pod : pods) {
    auto record = ScheduleObject(pod.object);
    ASSERT_TRUE(record) << record.error().message;
    pod.record = *record;
  }
  // The agent's pod watch has the plans before the kubelet admits (the kubelet's own watch
  // delivers the bound pods about as fast).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));

  std::mt19937 random(seed_);
  std::shuffle(pods.begin(), pods.end(), random);
  for (const Planned& pod : pods) {
    auto admitted = device_manager_->Admit(pod.kubelet);
    ASSERT_TRUE(admitted) << admitted.error().message << "\n" << AgentLog();
    for (const auto& [name, container] : *admitted) {
      // The kubelet's own bookkeeping agrees with the plan.
      for (const auto& [resource, ids] : container.ids) {
        std::set<std::string> physical;
        for (const std::string& id : ids) physical.insert(id.substr(0, id.find("::")));
        const std::string uuids = PlannedUuids(pod.record, name);
        std::set<std::string> planned;
        for (std::string_view uuid : Split(uuids, ',')) planned.emplace(uuid);
        EXPECT_EQ(physical, planned) << pod.kubelet.name << "/" << name << " " << resource;
      }
      // The runtime creates the container: NRI hands over exactly the plan.
      handoff::ContainerEvent event;
      event.pod = {"sandbox-" + pod.kubelet.name,
                   pod.kubelet.name,
                   pod.record.uid,
                   "ml",
                   {},
                   {{kube::kAnnotationAllocation, kube::EncodeAllocationRecord(pod.record)}}};
      event.container = {
          "ctr-" + pod.kubelet.name + "-" + name, event.pod.id, name, container.annotations, {}};
      const handoff::TtrpcResponse reply =
          runtime.Call("CreateContainer", handoff::EncodeContainerEvent(event));
      ASSERT_EQ(reply.status_code, 0) << reply.status_message;
      auto adjust = handoff::DecodeCreateContainerResponse(reply.payload);
      ASSERT_TRUE(adjust);
      std::string visible;
      for (const auto& [key, value] : adjust->env) {
        if (key == "NVIDIA_VISIBLE_DEVICES") visible = value;
      }
      EXPECT_EQ(visible, PlannedUuids(pod.record, name)) << pod.kubelet.name << "/" << name;
    }
  }
  // What was handed over reaches linkfit, and linkfit finds nothing to complain about.
  ASSERT_TRUE(WaitForReportedPods(pods.size(), std::chrono::seconds(10))) << InspectNode().dump();
  EXPECT_FALSE(InspectNode().contains("handoff_mismatch_pods")) << InspectNode().dump();
  EXPECT_EQ(InspectNode()["handoff_mode"], "nri-cdi");
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("linkfit_handoff_mismatch_total 0"), std::string::npos);
  EXPECT_NE(metrics->body.find("linkfit_nodes_by_handoff_mode{mode=\"nri-cdi\"} 1"),
            std::string::npos);
  EXPECT_EQ(daemon_->Stop(), 0) << AgentLog();
  EXPECT_NE(AgentLog().find("registered"), std::string::npos);
}

// A runtime without NRI: the agent finds no socket at start-up, runs its device plugin verify-only
// and says so; a steered pod starts, with the plan injected by the device plugin.
TEST_F(HandoffEndToEndTest, WithoutNriTheDevicePluginVerifies) {
  StartAgent(device_manager_->directory() + "/no-nri.sock");
  ASSERT_TRUE(device_manager_->WaitForDevices("nvidia.com/gpu", 7, std::chrono::seconds(20)))
      << AgentLog();
  ASSERT_TRUE(WaitForPublishedMode("verify")) << AgentLog();
  StartLinkfit();
  auto record = ScheduleObject(Pod("train", {Container("main", "nvidia.com/gpu", 2)}));
  ASSERT_TRUE(record) << record.error().message;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto admitted = device_manager_->Admit(
      {"ml", "train", {{"main", false, false, {{"nvidia.com/gpu", 2}}}}, std::nullopt});
  ASSERT_TRUE(admitted) << admitted.error().message;
  EXPECT_EQ(admitted->at("main").envs.at("NVIDIA_VISIBLE_DEVICES"), PlannedUuids(*record, "main"));
  auto started = device_manager_->StartContainer("ml", "train", "main");
  EXPECT_TRUE(started) << started.error().message;
  // The kubelet restarts (its sockets gone): the agent serves and registers again.
  const int registered = device_manager_->registrations();
  ASSERT_TRUE(device_manager_->Restart());
  EXPECT_TRUE(device_manager_->WaitForDevices("nvidia.com/gpu", 7, std::chrono::seconds(10)))
      << AgentLog();
  // All five resources again: nvidia.com/gpu, the share resource and GPU 6's three MIG profiles.
  EXPECT_TRUE(WaitFor([&] { return device_manager_->registrations() >= registered + 5; },
                      std::chrono::seconds(10)))
      << AgentLog();
  EXPECT_NE(AgentLog().find("the kubelet restarted"), std::string::npos) << AgentLog();
  EXPECT_EQ(InspectNode()["handoff_mode"], "verify");
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("linkfit_nodes_by_handoff_mode{mode=\"verify\"} 1"),
            std::string::npos);
  EXPECT_NE(AgentLog().find("verify-only"), std::string::npos) << AgentLog();
}

// An NRI runtime without CDI (containerd 1.7): the agent adds the device files of the plan, read
// from the node's driver files (a fake /proc tree written for the GPUs it discovered), and no CDI
// names; then the runtime restarts as containerd 2.1, which injects CDI, and the agent reconnects:
// with --no-cdi it still sends device files and no CDI names.
TEST_F(HandoffEndToEndTest, NriWithoutCdiGetsTheDeviceFiles) {
  const std::string proc = ::testing::TempDir() + "/handoff-proc-" + std::to_string(getpid());
  StartAgent(nri_socket_, {"--host-proc", proc, "--no-cdi"});
  const int fd = ::accept(listener_, nullptr, nullptr);
  ASSERT_GE(fd, 0);
  linkfit::testing::FakeNriRuntime runtime(fd);
  runtime.AcceptRegistration();
  ASSERT_EQ(runtime.Call("Configure", handoff::EncodeConfigureRequest({"", "containerd", "1.7.24"}))
                .status_code,
            0);
  ASSERT_EQ(runtime.Call("Synchronize", handoff::EncodeSynchronizeRequest({})).status_code, 0);
  const std::optional<topology::TopologySpec> published = WaitForPublishedMode("nri-env");
  ASSERT_TRUE(published) << AgentLog();
  EXPECT_EQ(published->nic_handoff_mode, "");  // no RDMA NICs: no NIC mode published
  const std::string written = linkfit::testing::WriteFakeProc(*published, "e2e");
  std::filesystem::rename(written, proc);

  kube::AllocationRecord record;
  record.pod = "ml/infer";
  record.uid = "uid-infer";
  record.node = "a100-0";
  record.devices.gpus = {3};
  record.devices.mig = {{6, "3g.20gb", 4, ""}};
  record.containers = {{"main", false, record.devices}};
  handoff::ContainerEvent event;
  event.pod = {"sandbox",   "infer",
               "uid-infer", "ml",
               {},          {{kube::kAnnotationAllocation, kube::EncodeAllocationRecord(record)}}};
  event.container = {"ctr", "sandbox", "main", {}, {}};
  const handoff::TtrpcResponse reply =
      runtime.Call("CreateContainer", handoff::EncodeContainerEvent(event));
  ASSERT_EQ(reply.status_code, 0) << reply.status_message;
  auto adjust = handoff::DecodeCreateContainerResponse(reply.payload);
  ASSERT_TRUE(adjust);
  std::vector<std::string> paths;
  for (const handoff::LinuxDevice& device : adjust->devices) paths.push_back(device.path);
  // GPU 3 is minor 13; the MIG instance (GPU instance 1 on GPU 6, minor 16) needs GPU 6's file
  // and its two capability files.
  EXPECT_EQ(paths, (std::vector<std::string>{"/dev/nvidiactl", "/dev/nvidia-uvm",
                                             "/dev/nvidia-uvm-tools", "/dev/nvidia13",
                                             "/dev/nvidia16", "/dev/nvidia-caps/nvidia-cap161",
                                             "/dev/nvidia-caps/nvidia-cap261"}))
      << AgentLog();
  EXPECT_TRUE(adjust->cdi_devices.empty());

  // The runtime restarts: the agent dials again, and the runtime's Synchronize (the container
  // with the linkfit.io/handed annotation the plugin set) rebuilds the ledger, so a plan that
  // collides with the running container is refused.
  const std::string handed = adjust->annotations.at(handoff::kAnnotationHanded);
  runtime.Close();
  const int again = ::accept(listener_, nullptr, nullptr);
  ASSERT_GE(again, 0);
  linkfit::testing::FakeNriRuntime restarted(again);
  ASSERT_EQ(restarted.AcceptAndConfigure(), 0);
  handoff::SynchronizeRequest live;
  live.pods = {event.pod};
  live.containers = {{"ctr", "sandbox", "main", {{handoff::kAnnotationHanded, handed}}, {}}};
  ASSERT_EQ(restarted.Call("Synchronize", handoff::EncodeSynchronizeRequest(live)).status_code, 0);
  kube::AllocationRecord other = record;
  other.pod = "ml/other";
  other.uid = "uid-other";
  other.devices.mig.clear();
  other.containers = {{"main", false, other.devices}};
  handoff::ContainerEvent clash;
  clash.pod = {"sandbox-2", "other",
               "uid-other", "ml",
               {},          {{kube::kAnnotationAllocation, kube::EncodeAllocationRecord(other)}}};
  clash.container = {"ctr-2", "sandbox-2", "main", {}, {}};
  const handoff::TtrpcResponse refused =
      restarted.Call("CreateContainer", handoff::EncodeContainerEvent(clash));
  EXPECT_EQ(refused.status_code, 2);
  EXPECT_NE(refused.status_message.find("held by pod uid-infer"), std::string::npos)
      << refused.status_message;
  // GPU 4 (minor 14) is free: device files and no CDI names, --no-cdi on a runtime that could.
  other.devices.gpus = {4};
  other.containers = {{"main", false, other.devices}};
  clash.pod.annotations[kube::kAnnotationAllocation] = kube::EncodeAllocationRecord(other);
  const handoff::TtrpcResponse given =
      restarted.Call("CreateContainer", handoff::EncodeContainerEvent(clash));
  ASSERT_EQ(given.status_code, 0) << given.status_message;
  auto files = handoff::DecodeCreateContainerResponse(given.payload);
  ASSERT_TRUE(files);
  EXPECT_TRUE(files->cdi_devices.empty());
  ASSERT_FALSE(files->devices.empty());
  EXPECT_EQ(files->devices.back().path, "/dev/nvidia14") << AgentLog();
  std::filesystem::remove_all(proc);
}

}  // namespace
}  // namespace linkfit::agent
