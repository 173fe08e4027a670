// The kubelet's PodResources through the agent's real gRPC client against a fake kubelet on a
// unix socket, and the mapping of the kubelet's device IDs to linkfit's devices.

#include <gtest/gtest.h>

#include "agent/fake_kubelet.h"
#include "linkfit/agent/device_use.h"
#include "linkfit/agent/pod_resources.h"
#include "testing/fixtures.h"

namespace linkfit::agent {
namespace {

topology::TopologySpec A100WithMig() {
  topology::TopologySpec spec = linkfit::testing::LoadFixture("dgx-a100")->spec();
  for (topology::GpuSpec& gpu : spec.gpus) gpu.uuid = "GPU-" + std::to_string(gpu.index) + "aaa";
  spec.gpus[6].mig_mode = topology::MigMode::kEnabled;
  spec.gpus[6].mig_instances = {{"3g.20gb", 4, 4, "MIG-six-b"}, {"2g.10gb", 0, 2, "MIG-six-a"}};
  return spec;
}

std::vector<PodDeviceUse> SamplePods() {
  return {
      {"ml",
       "train",
       {{"train", {{"nvidia.com/gpu", {"GPU-5aaa", "GPU-4aaa"}}}},
        {"sidecar", {{"example.com/fpga", {"fpga-0"}}}}}},
      {"ml", "infer", {{"main", {{"nvidia.com/mig-3g.20gb", {"MIG-six-b"}}}}}},
      {"lab", "notebook", {{"nb", {{"nvidia.com/gpu", {"GPU-2aaa::0", "GPU-2aaa::3"}}}}}},
      {"ml", "web", {{"main", {}}}},
  };
}

std::optional<std::string> Uid(const std::string& key) {
  if (key == "ml/train") return "uid-train";
  if (key == "ml/infer") return "uid-infer";
  if (key == "lab/notebook") return "uid-nb";
  return std::nullopt;
}

TEST(DeviceUse, MapsGpusMigInstancesAndReplicas) {
  const DeviceUseReport report = MapDeviceUse(SamplePods(), A100WithMig(), Uid);
  EXPECT_TRUE(report.warnings.empty()) << report.warnings[0];
  kube::DevicesInUse expected;
  expected.pods = {
      {"uid-infer", "ml/infer", {{"main", {}, {{6, "3g.20gb", 4, "MIG-six-b"}}, {}}}},
      {"uid-nb", "lab/notebook", {{"nb", {}, {}, {{2, 2}}}}},
      {"uid-train", "ml/train", {{"train", {4, 5}, {}, {}}}},
  };
  EXPECT_EQ(report.devices, expected);
  EXPECT_EQ(kube::DecodeDevicesInUse(kube::EncodeDevicesInUse(report.devices)).value(), expected);
}

TEST(DeviceUse, UnknownIdsAndPodsAreWarningsNotFailures) {
  std::vector<PodDeviceUse> pods = SamplePods();
  pods[0].containers[0].devices[0].device_ids.push_back("GPU-gone");
  pods.push_back({"ml", "stranger", {{"main", {{"nvidia.com/gpu", {"GPU-7aaa"}}}}}});
  const DeviceUseReport report = MapDeviceUse(pods, A100WithMig(), Uid);
  ASSERT_EQ(report.warnings.size(), 2u);
  EXPECT_NE(report.warnings[0].find("GPU-gone"), std::string::npos);
  EXPECT_NE(report.warnings[1].find("ml/stranger"), std::string::npos);
  ASSERT_EQ(report.devices.pods.size(), 3u);
  EXPECT_EQ(report.devices.pods[2].containers[0].gpus, (std::vector<int>{4, 5}));
}

TEST(PodResources, ListsThroughTheRealClient) {
  auto kubelet = linkfit::testing::StartFakeKubelet();
  ASSERT_TRUE(kubelet) << kubelet.error().message;
  (*kubelet)->SetPods(SamplePods());
  auto pods = ListPodResources((*kubelet)->socket_path(), std::chrono::seconds(5));
  ASSERT_TRUE(pods) << pods.error().message;
  ASSERT_EQ(pods->size(), 4u);
  EXPECT_EQ((*pods)[2].pod_namespace, "lab");
  EXPECT_EQ((*pods)[2].containers[0].devices[0].device_ids[1], "GPU-2aaa::3");
  EXPECT_EQ((*pods)[0].containers[1].devices[0].resource_name, "example.com/fpga");
}

TEST(PodResources, SlowFailingAndMissingKubeletsAreErrorsNamingTheSocket) {
  auto kubelet = linkfit::testing::StartFakeKubelet();
  ASSERT_TRUE(kubelet) << kubelet.error().message;
  const std::string socket = (*kubelet)->socket_path();
  (*kubelet)->SetDelay(std::chrono::milliseconds(500));
  auto slow = ListPodResources(socket, std::chrono::milliseconds(100));
  ASSERT_FALSE(slow);
  EXPECT_NE(slow.error().message.find(socket), std::string::npos);
  EXPECT_NE(slow.error().message.find("gRPC status 4"), std::string::npos)  // DEADLINE_EXCEEDED
      << slow.error().message;
  (*kubelet)->SetDelay(std::chrono::milliseconds(0));
  (*kubelet)->SetFailure(14, "kubelet restarting");
  auto failing = ListPodResources(socket, std::chrono::seconds(2));
  ASSERT_FALSE(failing);
  EXPECT_NE(failing.error().message.find("kubelet restarting"), std::string::npos);
  auto missing = ListPodResources("/nonexistent/kubelet.sock", std::chrono::milliseconds(300));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("/nonexistent/kubelet.sock"), std::string::npos);
}

}  // namespace
}  // namespace linkfit::agent
