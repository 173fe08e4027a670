// The agent's inputs to the device plugin's steering: which plans count (the pod's current UID,
// this node) and what the kubelet's List says each container holds.

#include "linkfit/agent/steering.h"

#include <gtest/gtest.h>

namespace linkfit::agent {
namespace {

std::string Plan(const std::string& uid, const std::string& node) {
  kube::AllocationRecord record;
  record.pod = "ml/p";
  record.uid = uid;
  record.node = node;
  record.devices.gpus = {1};
  record.containers = {{"main", false, record.devices}};
  return kube::EncodeAllocationRecord(record);
}

TEST(Steering, OnlyPlansOfThePodsCurrentUidOnThisNodeCount) {
  std::vector<std::string> warnings;
  const auto plans = ValidPlans({{"ml/a", "uid-a", Plan("uid-a", "n1")},
                                 {"ml/b", "uid-b2", Plan("uid-b1", "n1")},  // recreated pod
                                 {"ml/c", "uid-c", Plan("uid-c", "n2")},
                                 {"ml/d", "uid-d", "{not json"}},
                                "n1", &warnings);
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].pod_key, "ml/a");
  EXPECT_EQ(plans[0].record.devices.gpus, (std::vector<int>{1}));
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_NE(warnings[0].find("ml/b: the plan is for UID uid-b1"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("node n2"), std::string::npos) << warnings[1];
  EXPECT_NE(warnings[2].find("ml/d"), std::string::npos) << warnings[2];
}

TEST(Steering, HoldingsNameTheResourcesEachContainerHolds) {
  const std::vector<PodDeviceUse> pods = {
      {"ml", "a", {{"setup", {{"nvidia.com/gpu", {"GPU-1"}}}}, {"main", {{"nvidia.com/gpu", {}}}}}},
      {"ml", "b", {}}};
  const handoff::KubeletHoldings holdings = HoldingsOf(pods);
  ASSERT_EQ(holdings.size(), 2u);
  EXPECT_EQ(holdings.at("ml/a").at("setup"),
            (handoff::ContainerHoldings{{"nvidia.com/gpu", {"GPU-1"}}}));
  EXPECT_TRUE(holdings.at("ml/a").at("main").empty());  // listed, nothing allocated yet
  EXPECT_TRUE(holdings.at("ml/b").empty());
}

}  // namespace
}  // namespace linkfit::agent
