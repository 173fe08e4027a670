// linkfit's device plugin: its inventory, steering and verify-mode checks as pure functions (the
// real gRPC servers against a fake kubelet: device_plugin_server_test.cc).

#include "linkfit/handoff/device_plugin.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "handoff/device_plugin_testing.h"
#include "handoff/node_testing.h"
#include "linkfit/agent/steering.h"

namespace linkfit::handoff {
namespace {

using plugin_testing::Gpus;
using plugin_testing::Nic;
using plugin_testing::Node;
using plugin_testing::Record;

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

}  // namespace
}  // namespace linkfit::handoff
