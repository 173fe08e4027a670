// The kubelet's PodResources through the agent's real gRPC client against a fake kubelet on a
// unix socket, and the mapping of the kubelet's device IDs to linkfit's devices.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/fake_kubelet.h"
#include "linkfit/agent/device_use.h"
#include "linkfit/agent/pod_resources.h"
#include "testing/fixtures.h"

namespace linkfit::agent {
namespace {

using Share = kube::DevicesInUse::Share;
using Mig = kube::AllocationRecord::Mig;

// DGX A100 with UUIDs "GPU-<index>aaa"; GPU 6 in MIG mode with two instances, listed out of order.
topology::TopologySpec A100WithMig() {
  topology::TopologySpec spec = linkfit::testing::LoadFixture("dgx-a100")->spec();
  for (topology::GpuSpec& gpu : spec.gpus) gpu.uuid = "GPU-" + std::to_string(gpu.index) + "aaa";
  spec.gpus[6].mig_mode = topology::MigMode::kEnabled;
  spec.gpus[6].mig_instances = {{"3g.20gb", 4, 4, "MIG-six-b"}, {"2g.10gb", 0, 2, "MIG-six-a"}};
  return spec;
}

// Several pods and containers, in no particular order: whole GPUs, MIG instances (mixed
// strategy), time-slice replicas, another vendor's device, a container and a pod with none.
std::vector<PodDeviceUse> SamplePods() {
  return {
      {"ml",
       "train",
       {{"train", {{"nvidia.com/gpu", {"GPU-5aaa", "GPU-4aaa"}}}},
        {"sidecar", {{"example.com/fpga", {"fpga-0"}}}},
        {"loader", {}}}},
      {"ml",
       "infer",
       {{"main",
         {{"nvidia.com/mig-3g.20gb", {"MIG-six-b"}}, {"nvidia.com/mig-2g.10gb", {"MIG-six-a"}}}},
        {"aux", {{"nvidia.com/gpu", {"GPU-1aaa"}}}}}},
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

kube::DevicesInUse SampleExpected() {
  kube::DevicesInUse expected;
  expected.pods = {
      {"uid-infer",
       "ml/infer",
       {{"aux", {1}, {}, {}, {}},
        {"main", {}, {{6, "2g.10gb", 0, "MIG-six-a"}, {6, "3g.20gb", 4, "MIG-six-b"}}, {}, {}}}},
      {"uid-nb", "lab/notebook", {{"nb", {}, {}, {{2, 2}}, {}}}},
      {"uid-train", "ml/train", {{"train", {4, 5}, {}, {}, {}}}},
  };
  return expected;
}

// One container's devices for the small cases below.
kube::DevicesInUse::Container MapOne(const std::string& resource,
                                     const std::vector<std::string>& ids,
                                     std::vector<std::string>* warnings = nullptr) {
  const DeviceUseReport report =
      MapDeviceUse({{"ml", "train", {{"c", {{resource, ids}}}}}}, A100WithMig(), Uid);
  if (warnings != nullptr) *warnings = report.warnings;
  if (report.devices.pods.empty()) return {};
  return report.devices.pods.at(0).containers.at(0);
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

TEST(DeviceUse, MapsGpusMigInstancesAndReplicasCanonically) {
  const DeviceUseReport report = MapDeviceUse(SamplePods(), A100WithMig(), Uid);
  EXPECT_TRUE(report.warnings.empty()) << Joined(report.warnings);
  EXPECT_EQ(report.devices, SampleExpected());
}

// linkfit's own GPU share resource (served by the agent's device plugin) is read where named:
// its replicas are shares of their GPU, as nvidia.com/gpu's time-sliced replicas are.
TEST(DeviceUse, TheAgentsShareResourceIsReadWhereNamed) {
  const std::vector<PodDeviceUse> pods = {
      {"lab", "notebook", {{"nb", {{"linkfit.io/gpu-share", {"GPU-2aaa::0", "GPU-2aaa::7"}}}}}}};
  EXPECT_TRUE(MapDeviceUse(pods, A100WithMig(), Uid).devices.pods.empty());
  const DeviceUseReport report =
      MapDeviceUse(pods, A100WithMig(), Uid, {kube::kNicResource, kube::kNicShareResource},
                   {"linkfit.io/gpu-share"});
  EXPECT_TRUE(report.warnings.empty()) << Joined(report.warnings);
  ASSERT_EQ(report.devices.pods.size(), 1u);
  EXPECT_EQ(report.devices.pods[0].containers.at(0),
            (kube::DevicesInUse::Container{"nb", {}, {}, {{2, 2}}, {}}));
}

TEST(DeviceUse, TheResultEncodesAndDecodesToItself) {
  const DeviceUseReport report = MapDeviceUse(SamplePods(), A100WithMig(), Uid);
  const std::string encoded = kube::EncodeDevicesInUse(report.devices);
  EXPECT_EQ(encoded.rfind(R"({"v":1,"pods":[{"uid":"uid-infer","pod":"ml/infer","containers":[)"
                          R"({"name":"aux","gpus":[1]},)",
                          0),
            0u)
      << encoded;
  auto decoded = kube::DecodeDevicesInUse(encoded);
  ASSERT_TRUE(decoded) << decoded.error().message;
  EXPECT_EQ(*decoded, report.devices);
}

TEST(DeviceUse, MigUuidsUnderEitherStrategyAndMigReplicas) {
  const Mig b{6, "3g.20gb", 4, "MIG-six-b"};
  EXPECT_EQ(MapOne("nvidia.com/gpu", {"MIG-six-b"}).mig, std::vector<Mig>{b});  // single
  EXPECT_EQ(MapOne("nvidia.com/mig-3g.20gb", {"MIG-six-b"}).mig, std::vector<Mig>{b});
  // Two replicas of one time-sliced instance: the instance is in use, once.
  EXPECT_EQ(MapOne("nvidia.com/mig-3g.20gb", {"MIG-six-b::0", "MIG-six-b::1"}).mig,
            std::vector<Mig>{b});
}

TEST(DeviceUse, PreR470MigIdsByTheirGpuAndProfile) {
  std::vector<std::string> warnings;
  EXPECT_EQ(MapOne("nvidia.com/mig-2g.10gb", {"MIG-GPU-6aaa/3/0"}, &warnings).mig,
            (std::vector<Mig>{{6, "2g.10gb", 0, "MIG-six-a"}}));
  EXPECT_TRUE(warnings.empty()) << Joined(warnings);

  // Not enough to go on: no profile in the resource name, no such instance, a malformed id.
  for (const auto& [resource, id, problem] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"nvidia.com/gpu", "MIG-GPU-6aaa/3/0", "names no MIG profile"},
           {"nvidia.com/mig-1g.5gb", "MIG-GPU-6aaa/3/0", "names no 1g.5gb instance on GPU 6"},
           {"nvidia.com/mig-2g.10gb", "MIG-GPU-9zzz/3/0", "names a GPU this node does not have"},
           {"nvidia.com/mig-2g.10gb", "MIG-GPU-6aaa/3", "is not \"MIG-GPU-<uuid>/"},
           {"nvidia.com/mig-2g.10gb", "MIG-GPU-6aaa/x/0", "is not \"MIG-GPU-<uuid>/"}}) {
    EXPECT_TRUE(MapOne(resource, {id}, &warnings).mig.empty()) << id;
    ASSERT_EQ(warnings.size(), 1u) << id;
    EXPECT_NE(warnings[0].find(problem), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find(id), std::string::npos) << warnings[0];
  }

  // Two instances of the profile on that GPU: ambiguous.
  topology::TopologySpec spec = A100WithMig();
  spec.gpus[6].mig_instances = {{"3g.20gb", 0, 4, "MIG-six-x"}, {"3g.20gb", 4, 4, "MIG-six-y"}};
  const DeviceUseReport report = MapDeviceUse(
      {{"ml", "train", {{"c", {{"nvidia.com/mig-3g.20gb", {"MIG-GPU-6aaa/1/0"}}}}}}}, spec, Uid);
  EXPECT_TRUE(report.devices.pods.empty());
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_NE(report.warnings[0].find("ambiguous"), std::string::npos) << report.warnings[0];
}

TEST(DeviceUse, ReplicasCountPerGpuAndRepeatsCountOnce) {
  const kube::DevicesInUse::Container container =
      MapOne("nvidia.com/gpu.shared",
             {"GPU-3aaa::2", "GPU-0aaa::7", "GPU-3aaa::0", "GPU-3aaa::2", "GPU-0aaa", "GPU-0aaa"});
  EXPECT_EQ(container.gpus, std::vector<int>{0});
  EXPECT_EQ(container.shares, (std::vector<Share>{{0, 1}, {3, 2}}));

  std::vector<std::string> warnings;
  for (const std::string id : {"GPU-3aaa::", "GPU-3aaa::x", "GPU-3aaa::-1", "GPU-3aaa::1::2"}) {
    EXPECT_TRUE(MapOne("nvidia.com/gpu", {id}, &warnings).shares.empty()) << id;
    ASSERT_EQ(warnings.size(), 1u) << id;
    EXPECT_NE(warnings[0].find("<uuid>::<replica number>"), std::string::npos) << warnings[0];
  }
}

TEST(DeviceUse, UnknownIdsAndPodsAreWarningsAndTheRestStillCounts) {
  std::vector<PodDeviceUse> pods = SamplePods();
  pods[0].containers[0].devices[0].device_ids.push_back("GPU-gone");
  pods[1].containers[0].devices[0].device_ids.push_back("MIG-gone");
  pods.push_back({"ml", "stranger", {{"main", {{"nvidia.com/gpu", {"GPU-7aaa"}}}}}});
  const DeviceUseReport report = MapDeviceUse(pods, A100WithMig(), Uid);
  ASSERT_EQ(report.warnings.size(), 3u) << Joined(report.warnings);
  EXPECT_NE(report.warnings[0].find("pod ml/train, container \"train\": nvidia.com/gpu device "
                                    "\"GPU-gone\" matches no GPU or MIG instance"),
            std::string::npos)
      << report.warnings[0];
  EXPECT_NE(report.warnings[1].find("\"MIG-gone\""), std::string::npos) << report.warnings[1];
  EXPECT_NE(report.warnings[2].find("pod ml/stranger holds devices but its UID is not known"),
            std::string::npos)
      << report.warnings[2];
  EXPECT_EQ(report.devices, SampleExpected());
}

TEST(DeviceUse, OtherVendorsResourcesAreIgnoredEvenWithGpuLikeIds) {
  std::vector<std::string> warnings;
  const kube::DevicesInUse::Container container =
      MapOne("example.com/gpu", {"GPU-0aaa", "nonsense"}, &warnings);
  EXPECT_EQ(container, kube::DevicesInUse::Container{});
  EXPECT_TRUE(warnings.empty()) << Joined(warnings);
}

TEST(DeviceUse, EmptyContainersAndPodsAreLeftOutWithoutAskingForUids) {
  int lookups = 0;
  const UidLookup counting = [&](const std::string& key) {
    ++lookups;
    return Uid(key);
  };
  const DeviceUseReport report = MapDeviceUse(
      {{"ml", "web", {{"main", {}}, {"side", {{"example.com/fpga", {"f0"}}}}}}, {"ml", "idle", {}}},
      A100WithMig(), counting);
  EXPECT_TRUE(report.devices.pods.empty());
  EXPECT_TRUE(report.warnings.empty()) << Joined(report.warnings);
  EXPECT_EQ(lookups, 0);
}

TEST(DeviceUse, ContainersListedTwiceMergeAndDuplicateUidsKeepTheFirst) {
  const DeviceUseReport report = MapDeviceUse(
      {{"ml",
        "train",
        {{"c", {{"nvidia.com/gpu", {"GPU-3aaa"}}}}, {"c", {{"nvidia.com/gpu", {"GPU-1aaa"}}}}}},
       {"ml", "infer", {{"c", {{"nvidia.com/gpu", {"GPU-2aaa"}}}}}}},
      A100WithMig(), [](const std::string&) { return std::optional<std::string>("same-uid"); });
  ASSERT_EQ(report.devices.pods.size(), 1u);
  EXPECT_EQ(report.devices.pods[0].pod, "ml/train");
  ASSERT_EQ(report.devices.pods[0].containers.size(), 1u);
  EXPECT_EQ(report.devices.pods[0].containers[0].gpus, (std::vector<int>{1, 3}));
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_NE(report.warnings[0].find("pod ml/infer has the UID same-uid of pod ml/train"),
            std::string::npos)
      << report.warnings[0];
  EXPECT_TRUE(kube::DecodeDevicesInUse(kube::EncodeDevicesInUse(report.devices)));
}

TEST(DeviceUse, AContainerWithoutANameIsAWarning) {
  const DeviceUseReport report = MapDeviceUse(
      {{"ml",
        "train",
        {{"", {{"nvidia.com/gpu", {"GPU-3aaa"}}}}, {"c", {{"nvidia.com/gpu", {"GPU-1aaa"}}}}}}},
      A100WithMig(), Uid);
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_NE(report.warnings[0].find("pod ml/train: a container without a name"), std::string::npos)
      << report.warnings[0];
  kube::DevicesInUse expected;
  expected.pods = {{"uid-train", "ml/train", {{"c", {1}, {}, {}, {}}}}};
  EXPECT_EQ(report.devices, expected);
}

TEST(DeviceUse, DevicesTheAnnotationCannotCarryAreNotMatched) {
  topology::TopologySpec spec = A100WithMig();
  spec.gpus[6].mig_instances.push_back({"1g.5gb", 9, 1, "MIG-bad-start"});
  const DeviceUseReport report = MapDeviceUse(
      {{"ml", "train", {{"c", {{"nvidia.com/mig-1g.5gb", {"MIG-bad-start"}}}}}}}, spec, Uid);
  EXPECT_TRUE(report.devices.pods.empty());
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_NE(report.warnings[0].find("MIG-bad-start"), std::string::npos);
}

// Through the real client -------------------------------------------------------------------

std::string Describe(const std::vector<PodDeviceUse>& pods) {
  std::ostringstream out;
  for (const PodDeviceUse& pod : pods) {
    out << pod.pod_namespace << "/" << pod.name << ":";
    for (const ContainerDeviceUse& container : pod.containers) {
      out << " [" << container.name;
      for (const ContainerDeviceUse::Devices& devices : container.devices) {
        out << " " << devices.resource_name << "=";
        for (const std::string& id : devices.device_ids) out << id << ",";
      }
      out << "]";
    }
    out << "\n";
  }
  return out.str();
}

std::unique_ptr<linkfit::testing::FakeKubelet> StartKubelet() {
  auto kubelet = linkfit::testing::StartFakeKubelet();
  EXPECT_TRUE(kubelet) << kubelet.error().message;
  return kubelet ? std::move(*kubelet) : nullptr;
}

TEST(PodResources, ListsEveryPodContainerAndDeviceThroughTheRealClient) {
  const auto kubelet = StartKubelet();
  ASSERT_NE(kubelet, nullptr);
  auto empty = ListPodResources(kubelet->socket_path(), std::chrono::seconds(5));
  ASSERT_TRUE(empty) << empty.error().message;
  EXPECT_TRUE(empty->empty());

  kubelet->SetPods(SamplePods());
  auto pods = ListPodResources(kubelet->socket_path(), std::chrono::seconds(5));
  ASSERT_TRUE(pods) << pods.error().message;
  // The fake also sent cpu_ids and NUMA topology, which the client's subset skips.
  EXPECT_EQ(Describe(*pods), Describe(SamplePods()));
  EXPECT_EQ(kubelet->lists(), 2);
}

TEST(PodResources, ListedDevicesMapEncodeAndDecode) {
  const auto kubelet = StartKubelet();
  ASSERT_NE(kubelet, nullptr);
  kubelet->SetPods(SamplePods());
  auto pods = ListPodResources(kubelet->socket_path(), std::chrono::seconds(5));
  ASSERT_TRUE(pods) << pods.error().message;
  const DeviceUseReport report = MapDeviceUse(*pods, A100WithMig(), Uid);
  EXPECT_TRUE(report.warnings.empty()) << Joined(report.warnings);
  auto decoded = kube::DecodeDevicesInUse(kube::EncodeDevicesInUse(report.devices));
  ASSERT_TRUE(decoded) << decoded.error().message;
  EXPECT_EQ(*decoded, SampleExpected());
}

TEST(PodResources, ASlowKubeletIsADeadlineErrorNamingTheSocket) {
  const auto kubelet = StartKubelet();
  ASSERT_NE(kubelet, nullptr);
  kubelet->SetPods(SamplePods());
  kubelet->SetDelay(std::chrono::seconds(30));  // cut short when the fake stops
  const auto started = std::chrono::steady_clock::now();
  auto slow = ListPodResources(kubelet->socket_path(), std::chrono::milliseconds(200));
  const auto waited = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(slow);
  EXPECT_NE(slow.error().message.find("unix://" + kubelet->socket_path()), std::string::npos)
      << slow.error().message;
  EXPECT_NE(slow.error().message.find("DEADLINE_EXCEEDED"), std::string::npos)
      << slow.error().message;
  EXPECT_LT(waited, std::chrono::seconds(10));  // the deadline, not the kubelet, ended the call
}

TEST(PodResources, AFailingKubeletIsAnErrorWithItsStatusThenRecovers) {
  const auto kubelet = StartKubelet();
  ASSERT_NE(kubelet, nullptr);
  kubelet->SetPods(SamplePods());
  kubelet->SetFailure(14, "kubelet restarting");  // UNAVAILABLE
  auto failing = ListPodResources(kubelet->socket_path(), std::chrono::seconds(5));
  ASSERT_FALSE(failing);
  EXPECT_NE(failing.error().message.find(kubelet->socket_path()), std::string::npos);
  EXPECT_NE(failing.error().message.find("gRPC UNAVAILABLE (14): kubelet restarting"),
            std::string::npos)
      << failing.error().message;
  kubelet->SetFailure(7, "no");  // PERMISSION_DENIED
  failing = ListPodResources(kubelet->socket_path(), std::chrono::seconds(5));
  ASSERT_FALSE(failing);
  EXPECT_NE(failing.error().message.find("PERMISSION_DENIED"), std::string::npos);

  kubelet->SetFailure(0, "");
  auto pods = ListPodResources(kubelet->socket_path(), std::chrono::seconds(5));
  ASSERT_TRUE(pods) << pods.error().message;
  EXPECT_EQ(pods->size(), SamplePods().size());
}

TEST(PodResources, NoKubeletIsAnErrorNamingTheSocket) {
  std::string dir = (std::filesystem::temp_directory_path() / "linkfit-nokubelet-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string missing = dir + "/kubelet.sock";
  const std::string not_a_socket = dir + "/plain-file";
  std::ofstream(not_a_socket) << "not a socket";
  for (const std::string& path : {missing, not_a_socket}) {
    const auto started = std::chrono::steady_clock::now();
    auto pods = ListPodResources(path, std::chrono::seconds(20));
    ASSERT_FALSE(pods) << path;
    EXPECT_NE(pods.error().message.find("unix://" + path), std::string::npos)
        << pods.error().message;
    EXPECT_NE(pods.error().message.find("UNAVAILABLE"), std::string::npos) << pods.error().message;
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10))
        << "fails fast rather than waiting for the deadline";
  }
  std::filesystem::remove_all(dir);

  auto no_path = ListPodResources("", std::chrono::seconds(1));
  ASSERT_FALSE(no_path);
  EXPECT_NE(no_path.error().message.find("no socket path"), std::string::npos);
  auto no_time = ListPodResources(missing, std::chrono::milliseconds(0));
  ASSERT_FALSE(no_time);
  EXPECT_NE(no_time.error().message.find("timeout must be positive"), std::string::npos);
}

}  // namespace
}  // namespace linkfit::agent

namespace linkfit::agent {
namespace {

// The NIC resources' IDs name RDMA NICs: whole (the NIC's name) or a replica of a share; an ID
// that names no NIC of the node is left out with a warning; renamed resources are read by name.
TEST(MapDeviceUse, NicResourcesNameTheNicsAContainerHolds) {
  topology::TopologySpec spec = A100WithMig();
  spec.nics.clear();
  for (const char* name : {"mlx5_0", "mlx5_1", "mlx5_2"}) {
    topology::NicSpec nic;
    nic.name = name;
    spec.nics.push_back(nic);
  }
  const std::vector<PodDeviceUse> pods = {
      {"ml",
       "train",
       {{"train",
         {{"nvidia.com/gpu", {"GPU-4aaa"}},
          {"linkfit.io/rdma", {"mlx5_2", "mlx5_0"}},
          {"linkfit.io/rdma-share", {"mlx5_1::0", "mlx5_1::7", "mlx5_9::0"}}}}}},
      {"lab", "notebook", {{"nb", {{"rdma/hca", {"mlx5_1"}}}}}}};
  const DeviceUseReport report = MapDeviceUse(pods, spec, Uid);
  ASSERT_EQ(report.devices.pods.size(), 1u);  // rdma/hca is no NIC resource of linkfit's here
  EXPECT_EQ(report.devices.pods[0].containers.at(0).nics,
            (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2"}));
  EXPECT_EQ(report.devices.pods[0].containers.at(0).gpus, (std::vector<int>{4}));
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_NE(report.warnings[0].find("\"mlx5_9::0\" matches no RDMA NIC"), std::string::npos)
      << report.warnings[0];
  const DeviceUseReport renamed = MapDeviceUse(pods, spec, Uid, {"rdma/hca"});
  ASSERT_EQ(renamed.devices.pods.size(), 2u);
  EXPECT_EQ(renamed.devices.pods[0].containers.at(0).nics, (std::vector<std::string>{"mlx5_1"}));
  // The annotation carries them and reads them back.
  EXPECT_EQ(kube::DecodeDevicesInUse(kube::EncodeDevicesInUse(report.devices)).value(),
            report.devices);
}

}  // namespace
}  // namespace linkfit::agent
