// The node agent end to end: the real linkfit-agent binary, loading the fake libnvidia-ml.so.1
// through LD_LIBRARY_PATH and reading a fake kubelet's PodResources, publishes on its Node in the
// fake API server; linkfit in cluster mode, watching the same server, then places on facts: the
// reported MIG layout, the devices pods really hold (a foreign pod's estimate replaced, a placed
// pod's mismatch counted with an Event, the cache following the report), and never on a GPU the
// agent reports lost.

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <thread>

#include "agent/agent_e2e.h"
#include "handoff/fake_nri_runtime.h"

namespace linkfit::agent {
namespace {

using namespace testing_e2e;  // NOLINT: the fixture and its helpers

TEST_F(AgentEndToEndTest, LinkfitPlacesOnWhatTheAgentPublishes) {
  // Two running pods: "train" placed by linkfit on GPUs 0,1 (its record), which the node handed
  // GPUs 2,3 instead; "other" placed by another scheduler, without a record, on GPUs 4,5.
  PodSpec train{.name = "train", .uid = "uid-train", .node = "a100-0", .gpus = 2};
  train.annotations[kube::kAnnotationAllocation] =
      R"({"v":1,"pod":"ml/train","uid":"uid-train","node":"a100-0","gpus":[0,1]})";
  ASSERT_TRUE(fake_->AddPod(PodObject(train)));
  ASSERT_TRUE(fake_->AddPod(PodObject(
      {.name = "other", .uid = "uid-other", .node = "a100-0", .gpus = 2, .scheduler = "default"})));
  kubelet_->SetPods({{"ml", "train", {{"train", {{"nvidia.com/gpu", {Uuid(3), Uuid(2)}}}}}},
                     {"ml", "other", {{"main", {{"nvidia.com/gpu", {Uuid(4), Uuid(5)}}}}}}});

  auto first = RunAgentOnce();
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(*first, "published\n");
  auto document =
      topology::ParseTopologyDocument(Annotations()[kube::kAnnotationTopology].get<std::string>());
  ASSERT_TRUE(document) << document.error().message;
  EXPECT_EQ(document->gpus[6].mig_mode, topology::MigMode::kEnabled);
  EXPECT_EQ(document->gpus[6].mig_instances.size(), 3u);
  auto devices =
      kube::DecodeDevicesInUse(Annotations()[kube::kAnnotationDevicesInUse].get<std::string>());
  ASSERT_TRUE(devices) << devices.error().message;
  ASSERT_EQ(devices->pods.size(), 2u);
  EXPECT_EQ(devices->pods[0].uid, "uid-other");
  EXPECT_EQ(devices->pods[1].containers[0].gpus, (std::vector<int>{2, 3}));
  // Nothing changed: no second patch.
  auto second = RunAgentOnce();
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(*second, "unchanged\n");
  EXPECT_EQ(Patches(), 1u);

  StartLinkfit();
  const json node = InspectNode();
  ASSERT_TRUE(node.is_object());
  EXPECT_EQ(node["reported_pods"], json({"uid-other", "uid-train"}));
  EXPECT_EQ(node["handoff_mismatch_pods"], json({"uid-train"}));
  EXPECT_FALSE(node.contains("estimated_pods"));
  EXPECT_EQ(node["free_whole_gpus"], json({0, 1, 7}));  // 2-5 held as reported, 6 in MIG mode
  ASSERT_TRUE(WaitFor([&] { return !fake_->PostedEvents().empty(); }));
  EXPECT_EQ(fake_->PostedEvents()[0]["reason"], "DeviceHandoffMismatch");
  EXPECT_EQ(fake_->PostedEvents()[0]["regarding"]["uid"], "uid-train");
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("linkfit_handoff_mismatch_total 1"), std::string::npos);

  // A MIG pod takes the existing 3g.20gb instance on GPU 6, UUID and all.
  PodSpec infer{.name = "infer", .uid = "uid-infer"};
  infer.annotations["linkfit.io/mig-profile"] = "3g.20gb";
  infer.annotations["linkfit.io/gpus"] = "1";
  auto mig = Schedule(infer);
  ASSERT_TRUE(mig) << mig.error().message;
  ASSERT_EQ(mig->devices.mig.size(), 1u);
  EXPECT_EQ(mig->devices.mig[0].gpu, 6);
  EXPECT_EQ(mig->devices.mig[0].start, 4);
  EXPECT_EQ(mig->devices.mig[0].uuid, "MIG-5a1f0d3c-6b2e-5a8e-9d4c-3f0e1b2a7c61");

  // GPU 7 falls off the bus: the agent publishes it, linkfit stops placing on it.
  json lost = json::parse(linkfit::testing::ReadFileOrDie(recording_));
  lost["devices"][7]["lost"] = true;
  recording_ = ::testing::TempDir() + "/dgx-a100-lost7.json";
  std::ofstream(recording_) << lost.dump();
  auto third = RunAgentOnce();
  ASSERT_TRUE(third) << third.error().message;
  EXPECT_EQ(*third, "published\n");
  ASSERT_TRUE(WaitFor([&] { return InspectNode()["unhealthy_gpus"] == json({7}); }));
  auto three = Schedule({.name = "three", .uid = "uid-three", .gpus = 3});
  ASSERT_FALSE(three);
  EXPECT_NE(three.error().message.find("unhealthy"), std::string::npos) << three.error().message;
  auto two = Schedule({.name = "two", .uid = "uid-two", .gpus = 2});
  ASSERT_TRUE(two) << two.error().message;
  EXPECT_EQ(two->devices.gpus, (std::vector<int>{0, 1}));  // free once the report moved train
  EXPECT_EQ(two->devices.uuids, (std::vector<std::string>{Uuid(0), Uuid(1)}));
}

TEST_F(AgentEndToEndTest, RunsUntilSigtermAndKeepsTheNodeCurrent) {
  kubelet_->SetPods({});
  setenv("LD_LIBRARY_PATH",
         std::filesystem::path(LINKFIT_FAKE_NVML_FULL).parent_path().string().c_str(), 1);
  setenv("LINKFIT_FAKE_NVML", recording_.c_str(), 1);
  // The daemon as the DaemonSet runs it, stopped by SIGTERM after 3 s (exit status 0 = it
  // stopped cleanly).
  auto ran =
      RunCommand({"timeout", "--preserve-status", "-s", "TERM", "3", LINKFIT_AGENT_BINARY,
                  "--node-name", "a100-0", "--kubeconfig", kubeconfig_, "--pod-resources-socket",
                  kubelet_->socket_path(), "--devices-interval", "1"},
                 {});
  unsetenv("LD_LIBRARY_PATH");
  ASSERT_TRUE(ran) << ran.error().message;
  EXPECT_TRUE(Annotations().contains(kube::kAnnotationTopology));
  EXPECT_EQ(Annotations()[kube::kAnnotationDevicesInUse], "{\"v\":1,\"pods\":[]}");
  EXPECT_EQ(Patches(), 1u);         // one patch, however many rounds
  EXPECT_GE(kubelet_->lists(), 2);  // the kubelet was asked every second
}

// The daemon with --nri-socket: it dials the runtime's socket (a fake runtime listening in a
// temp dir), registers linkfit's plugin, and hands a created container exactly the GPUs of its
// pod's plan, by the UUIDs its NVML discovery found.
TEST_F(AgentEndToEndTest, TheNriPluginHandsContainersTheirPlannedGpus) {
  const std::string socket_path = ::testing::TempDir() + "/nri-" + std::to_string(getpid());
  ::unlink(socket_path.c_str());
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", socket_path.c_str());
  ASSERT_EQ(::bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  kubelet_->SetPods({});
  std::thread runtime_side([&] {
    const int fd = ::accept(listener, nullptr, nullptr);
    ASSERT_GE(fd, 0);
    linkfit::testing::FakeNriRuntime runtime(fd);
    // containerd 2.1 injects the CDI devices of an adjustment: the agent names them.
    EXPECT_EQ(runtime.AcceptAndConfigure(), 0);
    EXPECT_EQ(runtime.Call("Synchronize", handoff::EncodeSynchronizeRequest({})).status_code, 0);
    kube::AllocationRecord record;
    record.pod = "ml/train";
    record.uid = "uid-train";
    record.node = "a100-0";
    record.devices.gpus = {3, 4};
    record.containers = {{"main", false, record.devices}};
    // The agent discovers in the background; ask until its first discovery is in.
    handoff::TtrpcResponse reply;
    for (int attempt = 0; attempt < 50; ++attempt) {
      handoff::ContainerEvent event;
      event.pod = {
          "sandbox",   "train",
          "uid-train", "ml",
          {},          {{kube::kAnnotationAllocation, kube::EncodeAllocationRecord(record)}}};
      event.container = {"ctr", "sandbox", "main", {}, {}};
      reply = runtime.Call("CreateContainer", handoff::EncodeContainerEvent(event));
      if (reply.status_code == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_EQ(reply.status_code, 0) << reply.status_message;
    auto adjust = handoff::DecodeCreateContainerResponse(reply.payload);
    ASSERT_TRUE(adjust);
    EXPECT_EQ(adjust->cdi_devices,
              (std::vector<std::string>{"nvidia.com/gpu=" + Uuid(3), "nvidia.com/gpu=" + Uuid(4)}));
    // What was handed over is what the node reports (the kubelet's PodResources knows nothing
    // here): linkfit's cache will see no mismatch for this pod.
    EXPECT_TRUE(WaitFor(
        [&] {
          const json annotations = Annotations();
          if (!annotations.contains(kube::kAnnotationDevicesInUse)) return false;
          auto used = kube::DecodeDevicesInUse(
              annotations[kube::kAnnotationDevicesInUse].get<std::string>());
          return used && used->pods.size() == 1 && used->pods[0].uid == "uid-train" &&
                 used->pods[0].containers[0].gpus == std::vector<int>{3, 4};
        },
        std::chrono::seconds(4)));
  });
  setenv("LD_LIBRARY_PATH",
         std::filesystem::path(LINKFIT_FAKE_NVML_FULL).parent_path().string().c_str(), 1);
  setenv("LINKFIT_FAKE_NVML", recording_.c_str(), 1);
  auto ran =
      RunCommand({"timeout", "--preserve-status", "-s", "TERM", "7", LINKFIT_AGENT_BINARY,
                  "--node-name", "a100-0", "--kubeconfig", kubeconfig_, "--pod-resources-socket",
                  kubelet_->socket_path(), "--nri-socket", socket_path, "--devices-interval", "1"},
                 {});
  unsetenv("LD_LIBRARY_PATH");
  runtime_side.join();
  ::close(listener);
  ::unlink(socket_path.c_str());
  ASSERT_TRUE(ran) << ran.error().message;
}

TEST_F(AgentEndToEndTest, PrintDiscoversWithoutAnApiServer) {
  setenv("LINKFIT_FAKE_NVML", recording_.c_str(), 1);
  setenv("LD_LIBRARY_PATH",
         std::filesystem::path(LINKFIT_FAKE_NVML_FULL).parent_path().string().c_str(), 1);
  auto out =
      RunCommand({LINKFIT_AGENT_BINARY, "--once", "--print", "--pod-resources-socket", ""}, {});
  unsetenv("LD_LIBRARY_PATH");
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->rfind("# nvml, driver 550.54.15\n", 0), 0u) << *out;
  const std::string document = out->substr(out->find('\n') + 1);
  auto spec = topology::ParseTopologyDocument(document.substr(0, document.find('\n')));
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->gpus.size(), 8u);
  // `linkfit agent ...` runs the same binary.
  setenv("LD_LIBRARY_PATH",
         std::filesystem::path(LINKFIT_FAKE_NVML_FULL).parent_path().string().c_str(), 1);
  auto via_cli =
      RunCommand({LINKFIT_BINARY, "agent", "--once", "--print", "--pod-resources-socket", ""}, {});
  unsetenv("LD_LIBRARY_PATH");
  ASSERT_TRUE(via_cli) << via_cli.error().message;
  EXPECT_EQ(*via_cli, *out);
  auto bad = RunCommand({LINKFIT_AGENT_BINARY, "--once"}, {});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("--node-name"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace linkfit::agent
