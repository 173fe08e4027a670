// linkfit's device plugin: its inventory and steering as pure functions, then the real gRPC
// servers driven by a fake kubelet device manager that allocates as the kubelet's
// devicesToAllocate does (fake_device_manager.h), with random admission orders.

#include "linkfit/handoff/device_plugin.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <thread>

#include "handoff/fake_device_manager.h"
#include "handoff/node_testing.h"
#include "linkfit/agent/steering.h"

namespace linkfit::handoff {
namespace {

using linkfit::testing::AdmittedContainer;
using linkfit::testing::FakeDeviceManager;
using linkfit::testing::FakePodSpec;

// A DGX H100 (GPU i is "GPU-i"; GPUs 0-3 on NUMA 0, 4-7 on NUMA 1) with GPU 7 in MIG mode, and
// RDMA NICs mlx5_0..3 (uverbs0..3; 0-1 on NUMA 0, 2-3 on NUMA 1) and a virtual function mlx5_4.
topology::TopologySpec Node() {
  topology::TopologySpec spec = linkfit::testing::H100Node();
  for (topology::GpuSpec& gpu : spec.gpus) {
    gpu.mig_mode = topology::MigMode::kDisabled;
    gpu.numa_node = gpu.index < 4 ? 0 : 1;
  }
  spec.nics.clear();
  for (int i = 0; i < 5; ++i) {
    topology::NicSpec nic;
    nic.name = "mlx5_" + std::to_string(i);
    nic.pci_bus_id = "0000:1" + std::to_string(i) + ":00.0";
    nic.numa_node = i < 2 ? 0 : 1;
    nic.state = "ACTIVE";
    nic.uverbs = "uverbs" + std::to_string(i);
    if (i == 4) nic.sriov_physfn = "0000:13:00.0";
    spec.nics.push_back(nic);
  }
  spec.gpus[7].mig_mode = topology::MigMode::kEnabled;
  spec.gpus[7].mig_instances = {{"3g.40gb", 0, 4, "MIG-7-0"}, {"3g.40gb", 4, 4, "MIG-7-4"}};
  return spec;
}

const PluginResource* Find(const std::vector<PluginResource>& resources, const std::string& name) {
  for (const PluginResource& resource : resources) {
    if (resource.name == name) return &resource;
  }
  return nullptr;
}

TEST(PluginInventory, ServesWholeGpusMigInstancesAndThousandthShares) {
  topology::TopologySpec node = Node();
  node.gpus[2].healthy = false;
  node.gpus[3].uuid.clear();  // nothing could name it
  const auto resources = PluginInventory(node, PluginOptions{});
  ASSERT_EQ(resources.size(), 5u);
  const PluginResource* gpu = Find(resources, "nvidia.com/gpu");
  ASSERT_NE(gpu, nullptr);
  ASSERT_EQ(gpu->devices.size(), 6u);  // 0,1,2,4,5,6: not 3 (no UUID), not 7 (MIG)
  EXPECT_EQ(gpu->devices[0], (PluginDevice{"GPU-0", true, 0}));
  EXPECT_EQ(gpu->devices[2], (PluginDevice{"GPU-2", false, 0}));
  EXPECT_EQ(gpu->devices[3], (PluginDevice{"GPU-4", true, 1}));
  const PluginResource* mig = Find(resources, "nvidia.com/mig-3g.40gb");
  ASSERT_NE(mig, nullptr);
  EXPECT_EQ(mig->devices, (std::vector<PluginDevice>{{"MIG-7-0", true, 1}, {"MIG-7-4", true, 1}}));
  const PluginResource* share = Find(resources, "linkfit.io/gpu-share");
  ASSERT_NE(share, nullptr);
  ASSERT_EQ(share->devices.size(), 6u * kShareReplicasPerGpu);
  EXPECT_EQ(share->devices.front().id, "GPU-0::0");
  EXPECT_EQ(share->devices.back().id, "GPU-6::999");
  EXPECT_LE(share->devices.back().id.size(), 63u);  // the device plugin API's limit
}

TEST(PluginInventory, ServesNicsWholeAndInThousandthsWithPortHealthAndNuma) {
  topology::TopologySpec node = Node();
  node.nics[1].state = "DOWN";
  const auto resources = PluginInventory(node, PluginOptions{});
  const PluginResource* whole = Find(resources, "linkfit.io/rdma");
  ASSERT_NE(whole, nullptr);
  // mlx5_4 is a virtual function: the SR-IOV CNI's, never served.
  EXPECT_EQ(
      whole->devices,
      (std::vector<PluginDevice>{
          {"mlx5_0", true, 0}, {"mlx5_1", false, 0}, {"mlx5_2", true, 1}, {"mlx5_3", true, 1}}));
  const PluginResource* share = Find(resources, "linkfit.io/rdma-share");
  ASSERT_NE(share, nullptr);
  ASSERT_EQ(share->devices.size(), 4u * kShareReplicasPerNic);
  EXPECT_EQ(share->devices[1000], (PluginDevice{"mlx5_1::0", false, 0}));
  EXPECT_EQ(share->devices.back(), (PluginDevice{"mlx5_3::999", true, 1}));
  // Renamed resources; a node without NICs serves none.
  PluginOptions renamed;
  renamed.nic_resource = "rdma/hca";
  renamed.nic_share_resource = "";
  const auto other = PluginInventory(node, renamed);
  EXPECT_NE(Find(other, "rdma/hca"), nullptr);
  EXPECT_EQ(Find(other, "linkfit.io/rdma-share"), nullptr);
  node.nics.clear();
  EXPECT_EQ(Find(PluginInventory(node, PluginOptions{}), "linkfit.io/rdma"), nullptr);
}

TEST(PluginInventory, ResourcesStayServedWhenEmpty) {
  topology::TopologySpec node = Node();
  for (topology::GpuSpec& gpu : node.gpus) gpu.mig_mode = topology::MigMode::kEnabled;
  PluginOptions options;
  options.share_resource = "";
  const auto resources = PluginInventory(node, options);
  ASSERT_NE(Find(resources, "nvidia.com/gpu"), nullptr);
  EXPECT_TRUE(Find(resources, "nvidia.com/gpu")->devices.empty());
  EXPECT_EQ(Find(resources, "linkfit.io/gpu-share"), nullptr);
}

kube::AllocationRecord Record(const std::string& uid,
                              std::vector<kube::AllocationRecord::Container> c) {
  kube::AllocationRecord record;
  record.pod = "ml/" + uid;
  record.uid = uid;
  record.node = "n1";
  record.containers = std::move(c);
  for (const auto& container : record.containers) {
    for (int g : container.devices.gpus) {
      if (std::count(record.devices.gpus.begin(), record.devices.gpus.end(), g) == 0) {
        record.devices.gpus.push_back(g);
      }
    }
  }
  return record;
}

kube::AllocationRecord::Devices Gpus(std::vector<int> gpus) {
  kube::AllocationRecord::Devices devices;
  devices.gpus = std::move(gpus);
  return devices;
}

PreferenceRequest Asked(std::vector<std::string> available, int size,
                        std::vector<std::string> must = {}) {
  return {"nvidia.com/gpu", std::move(available), std::move(must), size};
}

std::vector<std::string> AllGpus() {
  return {"GPU-0", "GPU-1", "GPU-2", "GPU-3", "GPU-4", "GPU-5", "GPU-6"};
}

TEST(PreferredAllocation, TheOnePodUnderAdmissionGetsItsPlan) {
  const std::vector<PlannedPod> plans = {{"ml/a", Record("a", {{"main", false, Gpus({4, 5})}})},
                                         {"ml/b", Record("b", {{"main", false, Gpus({0, 1})}})}};
  // Only b is known to the kubelet (a is bound but not admitted yet).
  const KubeletHoldings kubelet = {{"ml/b", {{"main", {}}}}};
  const Preference preference =
      PreferredAllocation(Asked(AllGpus(), 2), plans, kubelet, Node(), PluginOptions{});
  EXPECT_EQ(preference.ids, (std::vector<std::string>{"GPU-0", "GPU-1"})) << preference.explanation;
}

TEST(PreferredAllocation, AmbiguousShortOrForeignRequestsGetNoPreference) {
  const std::vector<PlannedPod> plans = {{"ml/a", Record("a", {{"main", false, Gpus({4, 5})}})},
                                         {"ml/b", Record("b", {{"main", false, Gpus({0, 1})}})}};
  const KubeletHoldings both = {{"ml/a", {}}, {"ml/b", {}}};
  EXPECT_TRUE(PreferredAllocation(Asked(AllGpus(), 2), plans, both, Node(), {}).ids.empty());
  // a already holds its GPUs: b is the one.
  const KubeletHoldings a_done = {{"ml/a", {{"main", {{"nvidia.com/gpu", {"GPU-4", "GPU-5"}}}}}},
                                  {"ml/b", {}}};
  EXPECT_EQ(PreferredAllocation(Asked(AllGpus(), 2), plans, a_done, Node(), {}).ids,
            (std::vector<std::string>{"GPU-0", "GPU-1"}));
  // A size no plan has; the plan not available; a must-include outside the plan.
  EXPECT_TRUE(PreferredAllocation(Asked(AllGpus(), 3), plans, a_done, Node(), {}).ids.empty());
  EXPECT_TRUE(
      PreferredAllocation(Asked({"GPU-1", "GPU-2"}, 2), plans, a_done, Node(), {}).ids.empty());
  EXPECT_TRUE(
      PreferredAllocation(Asked(AllGpus(), 2, {"GPU-3"}), plans, a_done, Node(), {}).ids.empty());
  // A pod with a plan the kubelet does not know yet is no candidate.
  EXPECT_TRUE(PreferredAllocation(Asked(AllGpus(), 2), plans, {}, Node(), {}).ids.empty());
}

TEST(PreferredAllocation, InitContainersFirstThenAppContainersWithReuse) {
  const std::vector<PlannedPod> plans = {
      {"ml/p", Record("p", {{"train", false, Gpus({2, 3, 4, 5})}, {"setup", true, Gpus({2, 3})}})}};
  const Preference init =
      PreferredAllocation(Asked(AllGpus(), 2), plans, {{"ml/p", {}}}, Node(), {});
  EXPECT_EQ(init.ids, (std::vector<std::string>{"GPU-2", "GPU-3"})) << init.explanation;
  // The app container reuses the init container's two and asks for the rest.
  const KubeletHoldings after_init = {
      {"ml/p", {{"setup", {{"nvidia.com/gpu", {"GPU-2", "GPU-3"}}}}}}};
  auto asked = Asked({"GPU-0", "GPU-1", "GPU-2", "GPU-3", "GPU-4", "GPU-5"}, 4, {"GPU-2", "GPU-3"});
  const Preference app = PreferredAllocation(asked, plans, after_init, Node(), {});
  EXPECT_EQ(app.ids, (std::vector<std::string>{"GPU-2", "GPU-3", "GPU-4", "GPU-5"}))
      << app.explanation;
}

TEST(PreferredAllocation, MigByInstanceUuidSharesByReplicasOfThePlannedGpu) {
  kube::AllocationRecord::Devices mig;
  mig.mig = {{7, "3g.40gb", 4, ""}};  // UUID resolved from the node's facts
  kube::AllocationRecord::Devices share;
  share.shares = {{2, 3}};
  const std::vector<PlannedPod> plans = {{"ml/m", Record("m", {{"main", false, mig}})},
                                         {"ml/s", Record("s", {{"nb", false, share}})}};
  const KubeletHoldings kubelet = {{"ml/m", {}}, {"ml/s", {}}};
  PreferenceRequest mig_request{"nvidia.com/mig-3g.40gb", {"MIG-7-0", "MIG-7-4"}, {}, 1};
  EXPECT_EQ(PreferredAllocation(mig_request, plans, kubelet, Node(), {}).ids,
            (std::vector<std::string>{"MIG-7-4"}));
  PreferenceRequest share_request{"linkfit.io/gpu-share", {}, {"GPU-2::7"}, 3};
  for (int k = 0; k < 12; ++k) {
    share_request.available.push_back("GPU-1::" + std::to_string(k));
    if (k != 1) share_request.available.push_back("GPU-2::" + std::to_string(k));
  }
  EXPECT_EQ(PreferredAllocation(share_request, plans, kubelet, Node(), {}).ids,
            (std::vector<std::string>{"GPU-2::7", "GPU-2::0", "GPU-2::2"}));
}

kube::AllocationRecord::Nic Nic(const std::string& name, int milli = 1000) {
  return {name, "", "", -1, milli, -1};
}

TEST(PreferredAllocation, NicsByNameSharesByReplicasOfThePlannedNic) {
  kube::AllocationRecord::Devices trainer = Gpus({0, 2});
  trainer.nics = {Nic("mlx5_0"), Nic("mlx5_2")};
  kube::AllocationRecord::Devices server = Gpus({5});
  server.nics = {Nic("mlx5_3", 250)};
  const std::vector<PlannedPod> plans = {{"ml/t", Record("t", {{"main", false, trainer}})},
                                         {"ml/s", Record("s", {{"main", false, server}})}};
  const KubeletHoldings kubelet = {{"ml/t", {}}, {"ml/s", {}}};
  PreferenceRequest whole{"linkfit.io/rdma", {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}, {}, 2};
  EXPECT_EQ(PreferredAllocation(whole, plans, kubelet, Node(), {}).ids,
            (std::vector<std::string>{"mlx5_0", "mlx5_2"}));
  PreferenceRequest share{"linkfit.io/rdma-share", {}, {}, 250};
  for (int k = 0; k < 1000; ++k) {
    share.available.push_back("mlx5_2::" + std::to_string(k));
    share.available.push_back("mlx5_3::" + std::to_string(k));
  }
  const Preference shared = PreferredAllocation(share, plans, kubelet, Node(), {});
  ASSERT_EQ(shared.ids.size(), 250u) << shared.explanation;
  EXPECT_EQ(shared.ids.front(), "mlx5_3::0");
  EXPECT_EQ(shared.ids.back(), "mlx5_3::249");
  // Pod x asked its two NICs by annotation: its container requests GPUs only, so it never holds
  // the NIC resource and is no candidate for it (unknown requests would make the request
  // ambiguous).
  kube::AllocationRecord::Devices annotated = Gpus({6, 7});
  annotated.nics = {Nic("mlx5_1"), Nic("mlx5_3")};
  std::vector<PlannedPod> with_x = plans;
  with_x.push_back(
      {"ml/x", Record("x", {{"main", false, annotated}}), {{"main", {"nvidia.com/gpu"}}}});
  KubeletHoldings x_running = kubelet;
  x_running["ml/x"]["main"]["nvidia.com/gpu"] = {"GPU-6", "GPU-7"};
  EXPECT_EQ(PreferredAllocation(whole, with_x, x_running, Node(), {}).ids,
            (std::vector<std::string>{"mlx5_0", "mlx5_2"}));
  with_x.back().requested.clear();
  EXPECT_TRUE(PreferredAllocation(whole, with_x, x_running, Node(), {}).ids.empty());
  // The planned NIC is taken: no preference.
  whole.available = {"mlx5_1", "mlx5_2", "mlx5_3"};
  EXPECT_TRUE(PreferredAllocation(whole, plans, kubelet, Node(), {}).ids.empty());
}

TEST(VerifyPreStart, AContainerHoldingOtherNicsThanPlannedIsRefusedNamingThem) {
  kube::AllocationRecord::Devices trainer = Gpus({0, 2});
  trainer.nics = {Nic("mlx5_0"), Nic("mlx5_2")};
  const std::vector<PlannedPod> plans = {{"ml/t", Record("t", {{"main", false, trainer}})}};
  const KubeletHoldings right = {{"ml/t", {{"main", {{"linkfit.io/rdma", {"mlx5_2", "mlx5_0"}}}}}}};
  EXPECT_TRUE(VerifyPreStart("linkfit.io/rdma", {"mlx5_2", "mlx5_0"}, plans, right, Node(), {})
                  .has_value());
  const KubeletHoldings wrong = {{"ml/t", {{"main", {{"linkfit.io/rdma", {"mlx5_0", "mlx5_1"}}}}}}};
  const auto refused =
      VerifyPreStart("linkfit.io/rdma", {"mlx5_0", "mlx5_1"}, plans, wrong, Node(), {});
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("linkfit.io/rdma mlx5_0,mlx5_1 but linkfit's plan is "
                                         "mlx5_0,mlx5_2"),
            std::string::npos)
      << refused.error().message;
}

TEST(VerifyPreStart, TheContainerIsFoundByItsIdsAndMustHoldItsPlan) {
  kube::AllocationRecord::Devices share;
  share.shares = {{2, 3}};
  const std::vector<PlannedPod> plans = {{"ml/a", Record("a", {{"main", false, Gpus({4, 5})}})},
                                         {"ml/s", Record("s", {{"nb", false, share}})}};
  const KubeletHoldings kubelet = {
      {"ml/a", {{"main", {{"nvidia.com/gpu", {"GPU-5", "GPU-4"}}}}}},
      {"ml/b", {{"main", {{"nvidia.com/gpu", {"GPU-0"}}}}}},
      {"ml/s", {{"nb", {{"linkfit.io/gpu-share", {"GPU-2::0", "GPU-2::9", "GPU-2::4"}}}}}}};
  const auto verify = [&](const std::string& resource, std::vector<std::string> ids) {
    return VerifyPreStart(resource, ids, plans, kubelet, Node(), PluginOptions{});
  };
  EXPECT_TRUE(verify("nvidia.com/gpu", {"GPU-4", "GPU-5"}).has_value());
  EXPECT_TRUE(verify("linkfit.io/gpu-share", {"GPU-2::4", "GPU-2::0", "GPU-2::9"}).has_value());
  // ml/b has no plan: the kubelet's choice stands.
  const auto unplanned = verify("nvidia.com/gpu", {"GPU-0"});
  ASSERT_TRUE(unplanned.has_value());
  EXPECT_NE(unplanned->find("no linkfit plan"), std::string::npos);
  // IDs nobody holds: refused.
  EXPECT_FALSE(verify("nvidia.com/gpu", {"GPU-6"}).has_value());

  // The kubelet gave ml/a other GPUs than its plan: refused, saying both.
  const KubeletHoldings wrong = {{"ml/a", {{"main", {{"nvidia.com/gpu", {"GPU-4", "GPU-6"}}}}}}};
  const auto refused =
      VerifyPreStart("nvidia.com/gpu", {"GPU-4", "GPU-6"}, plans, wrong, Node(), PluginOptions{});
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("gave ml/a container main nvidia.com/gpu GPU-4,GPU-6 "
                                         "but linkfit's plan is GPU-4,GPU-5"),
            std::string::npos)
      << refused.error().message;
}

// --exempt-namespace in verify mode: a container of a pod in an exempt namespace starts on the
// kubelet's choice even where that is not its plan; the namespace comes from the pod the kubelet
// shows holding the IDs, so IDs nobody holds are still refused.
TEST(VerifyPreStart, ExemptNamespacesStartOnTheKubeletsChoice) {
  const std::vector<PlannedPod> plans = {
      {"gpu-operator/v", Record("v", {{"main", false, Gpus({4})}})},
      {"ml/a", Record("a", {{"main", false, Gpus({5})}})}};
  const KubeletHoldings kubelet = {{"gpu-operator/v", {{"main", {{"nvidia.com/gpu", {"GPU-0"}}}}}},
                                   {"ml/a", {{"main", {{"nvidia.com/gpu", {"GPU-1"}}}}}}};
  const std::set<std::string> exempt = {"gpu-operator"};
  const auto verify = [&](std::vector<std::string> ids, const std::set<std::string>& namespaces) {
    return VerifyPreStart("nvidia.com/gpu", ids, plans, kubelet, Node(), {}, namespaces);
  };
  EXPECT_FALSE(verify({"GPU-0"}, {}).has_value());
  const auto exempted = verify({"GPU-0"}, exempt);
  ASSERT_TRUE(exempted.has_value()) << exempted.error().message;
  EXPECT_NE(exempted->find("exempt namespace gpu-operator"), std::string::npos) << *exempted;
  // Other namespaces are still held to their plans; IDs nobody holds are refused.
  EXPECT_FALSE(verify({"GPU-1"}, exempt).has_value());
  EXPECT_FALSE(verify({"GPU-6"}, exempt).has_value());
}

// ---- the real gRPC servers against the fake device manager ----

struct Harness {
  std::unique_ptr<FakeDeviceManager> kubelet;
  std::unique_ptr<DevicePlugins> plugins;
  std::mutex mutex;
  std::vector<PlannedPod> plans;  // GUARDED_BY(mutex)

  explicit Harness(unsigned seed, bool verify = false, std::set<std::string> exempt = {}) {
    const topology::TopologySpec node = Node();
    auto started = linkfit::testing::StartFakeDeviceManager(seed);
    EXPECT_TRUE(started.has_value()) << started.error().message;
    kubelet = std::move(*started);
    DevicePluginConfig config;
    config.directory = kubelet->directory();
    config.verify = verify;
    config.exempt_namespaces = std::move(exempt);
    auto served = StartDevicePlugins(config, node, [this]() -> Result<SteeringView> {
      SteeringView view;
      {
        std::lock_guard lock(mutex);
        view.plans = plans;
      }
      view.kubelet = agent::HoldingsOf(kubelet->PodResources());
      return view;
    });
    EXPECT_TRUE(served.has_value()) << served.error().message;
    plugins = std::move(*served);
    EXPECT_TRUE(kubelet->WaitForDevices("nvidia.com/gpu", 7, std::chrono::seconds(10)));
    EXPECT_TRUE(kubelet->WaitForDevices("linkfit.io/gpu-share", 7000, std::chrono::seconds(10)));
    EXPECT_TRUE(kubelet->WaitForDevices("nvidia.com/mig-3g.40gb", 2, std::chrono::seconds(10)));
    EXPECT_TRUE(kubelet->WaitForDevices("linkfit.io/rdma", 4, std::chrono::seconds(10)));
    EXPECT_TRUE(kubelet->WaitForDevices("linkfit.io/rdma-share", 4000, std::chrono::seconds(10)));
  }
  void AddPlan(PlannedPod pod) {
    std::lock_guard lock(mutex);
    plans.push_back(std::move(pod));
  }
};

TEST(NodeDevicePlugin, RegistersEveryResourceAndListsDevicesWithHealth) {
  Harness harness(1);
  EXPECT_EQ(
      harness.plugins->resources(),
      (std::vector<std::string>{"linkfit.io/gpu-share", "linkfit.io/rdma", "linkfit.io/rdma-share",
                                "nvidia.com/gpu", "nvidia.com/mig-3g.40gb"}));
  EXPECT_EQ(harness.kubelet->registrations(), 5);
  EXPECT_TRUE(
      harness.kubelet->WaitForDevices("nvidia.com/mig-3g.40gb", 2, std::chrono::seconds(5)));
  EXPECT_TRUE(harness.kubelet->Devices("nvidia.com/gpu").at("GPU-3"));
  // GPU 3 fails: the kubelet hears it on the ListAndWatch stream.
  topology::TopologySpec node = Node();
  node.gpus[3].healthy = false;
  ASSERT_TRUE(harness.plugins->Update(node).has_value());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (harness.kubelet->Devices("nvidia.com/gpu").at("GPU-3") &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(harness.kubelet->Devices("nvidia.com/gpu").at("GPU-3"));
  // The MIG layout goes away: that resource is served empty, so its capacity drops to zero.
  node.gpus[7].mig_mode = topology::MigMode::kDisabled;
  node.gpus[7].mig_instances.clear();
  ASSERT_TRUE(harness.plugins->Update(node).has_value());
  const auto later = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!harness.kubelet->Devices("nvidia.com/mig-3g.40gb").empty() &&
         std::chrono::steady_clock::now() < later) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(harness.kubelet->Devices("nvidia.com/mig-3g.40gb").empty());
}

TEST(NodeDevicePlugin, AllocateLabelsTheContainerWithTheKubeletsIds) {
  Harness harness(2);
  harness.AddPlan({"ml/a", Record("a", {{"main", false, Gpus({4, 5})}})});
  FakePodSpec pod{"ml", "a", {{"main", false, false, {{"nvidia.com/gpu", 2}}}}, std::nullopt};
  auto admitted = harness.kubelet->Admit(pod);
  ASSERT_TRUE(admitted.has_value()) << admitted.error().message;
  const AdmittedContainer& container = admitted->at("main");
  EXPECT_TRUE(container.asked_preferred);
  EXPECT_EQ(container.ids.at("nvidia.com/gpu"), (std::vector<std::string>{"GPU-4", "GPU-5"}));
  EXPECT_EQ(container.annotations.at("linkfit.io/kubelet-ids.nvidia.com/gpu"), "GPU-4,GPU-5");
  EXPECT_EQ(harness.plugins->stats().allocations, 1u);
  EXPECT_EQ(harness.plugins->stats().preferred, 1u);
}

// The verify-only mode: the plugin injects what the kubelet chose and refuses to start a container
// whose devices are not its plan.
TEST(NodeDevicePlugin, VerifyModeInjectsAndRefusesADifferentChoice) {
  Harness harness(4, /*verify=*/true);
  harness.AddPlan({"ml/a", Record("a", {{"main", false, Gpus({4, 5})}})});
  auto steered = harness.kubelet->Admit(
      {"ml", "a", {{"main", false, false, {{"nvidia.com/gpu", 2}}}}, std::nullopt});
  ASSERT_TRUE(steered.has_value()) << steered.error().message;
  EXPECT_EQ(steered->at("main").envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-4,GPU-5");
  EXPECT_TRUE(harness.kubelet->StartContainer("ml", "a", "main").has_value());
  // Pod b is admitted before its plan is known: the kubelet picks on its own. Its plan then names
  // two GPUs it does not hold.
  auto unsteered = harness.kubelet->Admit(
      {"ml", "b", {{"main", false, false, {{"nvidia.com/gpu", 2}}}}, std::nullopt});
  ASSERT_TRUE(unsteered.has_value()) << unsteered.error().message;
  const auto& held = unsteered->at("main").ids.at("nvidia.com/gpu");
  std::vector<int> other;
  for (int g : {0, 1, 2, 3, 6}) {
    if (std::find(held.begin(), held.end(), "GPU-" + std::to_string(g)) == held.end()) {
      other.push_back(g);
    }
  }
  other.resize(2);
  harness.AddPlan({"ml/b", Record("b", {{"main", false, Gpus(other)}})});
  const auto refused = harness.kubelet->StartContainer("ml", "b", "main");
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("linkfit's plan is"), std::string::npos)
      << refused.error().message;
  EXPECT_EQ(harness.plugins->stats().verified, 1u);
  EXPECT_EQ(harness.plugins->stats().refused, 1u);
  // Shares: the replicas the kubelet chose, as their GPU and thousandths.
  kube::AllocationRecord::Devices share;
  share.shares = {{3, 250}};
  harness.AddPlan({"ml/nb", Record("nb", {{"nb", false, share}})});
  auto shared = harness.kubelet->Admit(
      {"ml", "nb", {{"nb", false, false, {{"linkfit.io/gpu-share", 250}}}}, std::nullopt});
  ASSERT_TRUE(shared.has_value()) << shared.error().message;
  EXPECT_EQ(shared->at("nb").envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-3");
  EXPECT_EQ(shared->at("nb").envs.at("LINKFIT_GPU_SHARES"), "GPU-3=250");
}

// Verify mode for NICs: the chosen NICs' verbs devices, rdma_cm and NCCL's and UCX's environment;
// a container holding other NICs than its plan does not start, and the refusal names them.
TEST(NodeDevicePlugin, VerifyModeInjectsTheChosenNicsAndRefusesOthers) {
  Harness harness(5, /*verify=*/true);
  kube::AllocationRecord::Devices trainer = Gpus({0, 2});
  trainer.nics = {Nic("mlx5_0"), Nic("mlx5_2")};
  harness.AddPlan({"ml/t", Record("t", {{"main", false, trainer}})});
  auto steered = harness.kubelet->Admit(
      {"ml",
       "t",
       {{"main", false, false, {{"nvidia.com/gpu", 2}, {"linkfit.io/rdma", 2}}}},
       std::nullopt});
  ASSERT_TRUE(steered.has_value()) << steered.error().message;
  const AdmittedContainer& main = steered->at("main");
  EXPECT_EQ(main.ids.at("linkfit.io/rdma"), (std::vector<std::string>{"mlx5_0", "mlx5_2"}));
  EXPECT_EQ(main.annotations.at("linkfit.io/kubelet-ids.linkfit.io/rdma"), "mlx5_0,mlx5_2");
  EXPECT_EQ(main.devices,
            (std::vector<std::string>{"/dev/infiniband/rdma_cm=/dev/infiniband/rdma_cm:rw",
                                      "/dev/infiniband/uverbs0=/dev/infiniband/uverbs0:rw",
                                      "/dev/infiniband/uverbs2=/dev/infiniband/uverbs2:rw"}));
  EXPECT_EQ(main.envs.at("NCCL_IB_HCA"), "=mlx5_0:1,mlx5_2:1");
  EXPECT_EQ(main.envs.at("UCX_NET_DEVICES"), "mlx5_0:1,mlx5_2:1");
  EXPECT_EQ(main.envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-0,GPU-2");
  EXPECT_TRUE(harness.kubelet->StartContainer("ml", "t", "main").has_value());
  // Pod u is admitted before its plan is known; its plan names a NIC the kubelet did not pick.
  auto unsteered = harness.kubelet->Admit(
      {"ml", "u", {{"main", false, false, {{"linkfit.io/rdma", 1}}}}, std::nullopt});
  ASSERT_TRUE(unsteered.has_value()) << unsteered.error().message;
  const std::string picked = unsteered->at("main").ids.at("linkfit.io/rdma").at(0);
  kube::AllocationRecord::Devices other;
  other.nics = {Nic(picked == "mlx5_1" ? "mlx5_3" : "mlx5_1")};
  harness.AddPlan({"ml/u", Record("u", {{"main", false, other}})});
  const auto refused = harness.kubelet->StartContainer("ml", "u", "main");
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("linkfit.io/rdma " + picked + " but linkfit's plan is " +
                                         other.nics[0].name),
            std::string::npos)
      << refused.error().message;
}

// Verify mode with --exempt-namespace: a pod of that namespace whose plan is not what the kubelet
// chose starts all the same, while one elsewhere is refused.
TEST(NodeDevicePlugin, VerifyModeLetsExemptNamespacesStartOnTheKubeletsChoice) {
  Harness harness(6, /*verify=*/true, {"gpu-operator"});
  for (const std::string ns : {"gpu-operator", "ml"}) {
    auto admitted = harness.kubelet->Admit(
        {ns, "d", {{"main", false, false, {{"nvidia.com/gpu", 1}}}}, std::nullopt});
    ASSERT_TRUE(admitted.has_value()) << admitted.error().message;
    const std::string held = admitted->at("main").ids.at("nvidia.com/gpu").at(0);
    harness.AddPlan({ns + "/d", Record("d", {{"main", false, Gpus({held == "GPU-0" ? 1 : 0})}})});
    const auto started = harness.kubelet->StartContainer(ns, "d", "main");
    EXPECT_EQ(started.has_value(), ns == "gpu-operator") << ns;
  }
  EXPECT_EQ(harness.plugins->stats().verified, 1u);
  EXPECT_EQ(harness.plugins->stats().refused, 1u);
}

TEST(NodeDevicePlugin, KubeletRestartIsNoticed) {
  Harness harness(3);
  EXPECT_FALSE(harness.plugins->KubeletRestarted());
  // The kubelet restarting removes every socket in its directory.
  ::unlink((harness.kubelet->directory() + "/" + PluginSocketName("nvidia.com/gpu")).c_str());
  EXPECT_TRUE(harness.plugins->KubeletRestarted());
}

// Property: pods whose plans are disjoint, admitted one at a time in random order, with init
// containers, shares, MIG, NUMA hints and RDMA NICs (two whole NICs for a 2-GPU pod, four pods
// with a quarter of one NIC each): every container's kubelet IDs equal its plan (so the NRI side
// sees no mismatch), no device ID is ever held by two pods, and no NIC is held whole by one pod
// and shared by another.
TEST(NodeDevicePlugin, RandomAdmissionOrdersFollowThePlans) {
  for (unsigned seed = 1; seed <= 12; ++seed) {
    std::mt19937 random(seed);
    Harness harness(seed);
    std::vector<int> gpus = {0, 1, 2, 3, 4, 5, 6};
    std::shuffle(gpus.begin(), gpus.end(), random);
    std::vector<FakePodSpec> pods;
    std::map<std::string, kube::AllocationRecord::Devices> planned;  // pod -> its one container
    // Pod 0: init container on 2 GPUs, app container on those 2 and 1 more.
    {
      const std::vector<int> init(gpus.begin(), gpus.begin() + 2);
      const std::vector<int> app(gpus.begin(), gpus.begin() + 3);
      harness.AddPlan(
          {"ml/p0", Record("p0", {{"setup", true, Gpus(init)}, {"train", false, Gpus(app)}})});
      pods.push_back({"ml",
                      "p0",
                      {{"train", false, false, {{"nvidia.com/gpu", 3}}},
                       {"setup", true, false, {{"nvidia.com/gpu", 2}}}},
                      std::nullopt});
      planned["p0"] = Gpus(app);
    }
    // Pod 1: two GPUs with a whole NIC each, with the Topology Manager's NUMA hint where both GPUs
    // are on one NUMA node (linkfit plans NUMA itself, so the hint agrees with the plan: the NICs
    // are then that node's).
    std::vector<std::string> nics = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"};
    std::shuffle(nics.begin(), nics.end(), random);
    {
      const std::vector<int> mine(gpus.begin() + 3, gpus.begin() + 5);
      std::optional<int> hint;
      if ((mine[0] < 4) == (mine[1] < 4)) hint = mine[0] < 4 ? 0 : 1;
      if (hint)
        nics = *hint == 0 ? std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2"}
                          : std::vector<std::string>{"mlx5_2", "mlx5_3", "mlx5_0"};
      kube::AllocationRecord::Devices devices = Gpus(mine);
      devices.nics = {Nic(nics[0]), Nic(nics[1])};
      harness.AddPlan({"ml/p1", Record("p1", {{"main", false, devices}})});
      pods.push_back({"ml",
                      "p1",
                      {{"main", false, false, {{"nvidia.com/gpu", 2}, {"linkfit.io/rdma", 2}}}},
                      hint});
      planned["p1"] = devices;
    }
    // Pod 2: one MIG instance; pods 3-6: 250 thousandths of a GPU and of one NIC each.
    {
      kube::AllocationRecord::Devices mig;
      mig.mig = {{7, "3g.40gb", (random() % 2) ? 4 : 0, ""}};
      harness.AddPlan({"ml/p2", Record("p2", {{"main", false, mig}})});
      pods.push_back(
          {"ml", "p2", {{"main", false, false, {{"nvidia.com/mig-3g.40gb", 1}}}}, std::nullopt});
      for (int p = 3; p <= 6; ++p) {
        const std::string name = "p" + std::to_string(p);
        kube::AllocationRecord::Devices share;
        share.shares = {{gpus[p == 3 ? 5 : 6], 250}};
        share.nics = {Nic(nics[2], 250)};
        harness.AddPlan({"ml/" + name, Record(name, {{"nb", false, share}})});
        pods.push_back({"ml",
                        name,
                        {{"nb",
                          false,
                          false,
                          {{"linkfit.io/gpu-share", 250}, {"linkfit.io/rdma-share", 250}}}},
                        std::nullopt});
        planned[name] = share;
      }
    }
    std::shuffle(pods.begin(), pods.end(), random);
    std::map<std::string, std::string> holder;  // device ID -> pod
    for (const FakePodSpec& pod : pods) {
      auto admitted = harness.kubelet->Admit(pod);
      ASSERT_TRUE(admitted.has_value()) << "seed " << seed << ": " << admitted.error().message;
      for (const auto& [container, result] : *admitted) {
        for (const auto& [resource, ids] : result.ids) {
          for (const std::string& id : ids) {
            const auto [it, fresh] = holder.emplace(id, pod.name);
            EXPECT_TRUE(fresh || it->second == pod.name)
                << "seed " << seed << ": " << id << " held by " << it->second << " and "
                << pod.name;
          }
        }
      }
      if (!planned.count(pod.name)) continue;
      const kube::AllocationRecord::Devices& plan = planned[pod.name];
      const AdmittedContainer& got =
          admitted->at(pod.name == "p0" ? "train" : pod.containers[0].name);
      for (const std::string resource :
           {"nvidia.com/gpu", "linkfit.io/gpu-share", "linkfit.io/rdma", "linkfit.io/rdma-share"}) {
        const PlannedResource want = PlannedFor(plan, resource, Node(), PluginOptions{});
        if (want.wanted == 0) continue;
        std::map<std::string, int> physical;
        for (const std::string& id : got.ids.at(resource)) ++physical[id.substr(0, id.find("::"))];
        std::map<std::string, int> expected;
        for (const std::string& id : want.ids) ++expected[id];
        for (const auto& [base, milli] : want.shares) expected[base] += milli;
        EXPECT_EQ(physical, expected) << "seed " << seed << " " << pod.name << " " << resource;
      }
    }
    // A NIC held whole is nobody's share.
    for (const auto& [id, pod] : holder) {
      const std::size_t replica = id.find("::");
      if (replica == std::string::npos) continue;
      const auto whole = holder.find(id.substr(0, replica));
      EXPECT_TRUE(whole == holder.end() || whole->second == pod) << "seed " << seed << " " << id;
    }
    EXPECT_EQ(harness.plugins->stats().no_preference, 0u) << "seed " << seed;
  }
}

}  // namespace
}  // namespace linkfit::handoff
