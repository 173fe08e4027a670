// NICs between allocation records and assignments on a node's own topology, in the per-container
// plan, in node agents' reports, and NodeInfo::nic_down from the document's port states.

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "linkfit/model/allocation.h"
#include "linkfit/model/node_model.h"
#include "testing/cluster.h"

namespace linkfit::model {
namespace {

using linkfit::testing::Mask;
using Record = kube::AllocationRecord;
using Slot = state::Assignment::NicSlot;

// test/data/topology-documents/nics.json (2 GPUs; mlx5_0 ACTIVE with bus ID and verbs device,
// mlx5_1 rail 3 state unknown, mlx5_2 a virtual function of mlx5_0), with `edit` applied.
state::NodeInfoPtr NicsNode(const std::string& from = "", const std::string& to = "") {
  static alloc::PlacementTableCache registry;
  static NodeModelFactory factory(registry, linkfit::testing::Catalog(),
                                  topology::BandwidthModel::Defaults());
  std::string text = linkfit::testing::ReadFileOrDie(
      linkfit::testing::SourcePath("test/data/topology-documents/nics.json"));
  if (!from.empty()) text.replace(text.find(from), from.size(), to);
  auto topo = factory.TopologyFromText(text, "nics");
  EXPECT_TRUE(topo.has_value()) << (topo ? "" : topo.error().message);
  auto info = factory.Build({"n", {}, *topo, 0, 0, 0});
  EXPECT_TRUE(info.has_value()) << (info ? "" : info.error().message);
  return *info;
}

state::Assignment Pod(state::GpuMask gpus, std::vector<Slot> nics) {
  state::Assignment a;
  a.pod_uid = "u1";
  a.pod_namespace = "ml";
  a.pod_name = "train";
  a.node = "n";
  a.gpus = gpus;
  a.nics = std::move(nics);
  return a;
}

kube::ContainerView Container(const std::string& name, std::map<std::string, std::int64_t> asks,
                              bool init = false, bool sidecar = false) {
  kube::ContainerView c;
  c.name = name;
  c.init = init;
  c.restartable = sidecar;
  for (const auto& [resource, count] : asks) c.extended[resource] = count * 1000;
  return c;
}

std::vector<std::string> NicNames(const Record::Container& c) {
  std::vector<std::string> names;
  for (const Record::Nic& nic : c.devices.nics) names.push_back(nic.name);
  return names;
}

TEST(AllocationNicsTest, RecordAndAssignmentRoundTripOnTheNodesOwnNics) {
  const state::NodeInfoPtr node = NicsNode();
  const state::Assignment a = Pod(Mask({0, 1}), {{0, 1000, 0}, {1, 250, 1}});
  const Record record = RecordOf(a, *node);
  ASSERT_EQ(record.devices.nics.size(), 2u);
  EXPECT_EQ(record.devices.nics[0], (Record::Nic{"mlx5_0", "0000:04:00.0", "uverbs0", 0, 1000, 0}));
  EXPECT_EQ(record.devices.nics[1], (Record::Nic{"mlx5_1", "0000:41:00.0", "", 3, 250, 1}));
  auto back = AssignmentOf(record, *node);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(*back, a);
  // Through the annotation's text too.
  auto decoded = kube::DecodeAllocationRecord(kube::EncodeAllocationRecord(record));
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  auto again = AssignmentOf(*decoded, *node);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(*again, a);
  // A pod holding a NIC and no GPU, and one holding a NIC with GPU shares.
  for (state::Assignment other : {Pod(0, {{1, 1000, -1}}), Pod(Mask({1}), {{0, 100, 1}})}) {
    if (other.gpus != 0) {
      other.kind = state::Assignment::Kind::kShared;
      other.shares = {{1, 500}};
    }
    auto round = AssignmentOf(RecordOf(other, *node), *node);
    ASSERT_TRUE(round.has_value()) << round.error().message;
    EXPECT_EQ(*round, other);
    EXPECT_TRUE(round->holds_devices());
  }
}

TEST(AllocationNicsTest, AssignmentOfNamesAnUnknownNic) {
  const state::NodeInfoPtr node = NicsNode();
  Record record = RecordOf(Pod(0, {}), *node);
  record.devices.nics = {{"mlx5_7", "", "", -1, 1000, -1}};
  auto a = AssignmentOf(record, *node);
  ASSERT_FALSE(a.has_value());
  EXPECT_NE(a.error().message.find("NIC mlx5_7 does not exist on node n (3 NICs)"),
            std::string::npos)
      << a.error().message;
  record.devices.nics = {{"mlx5_0", "", "", -1, 1000, 5}};
  a = AssignmentOf(record, *node);
  ASSERT_FALSE(a.has_value());
  EXPECT_NE(a.error().message.find("NIC mlx5_0 serves GPU 5"), std::string::npos);
}

TEST(AllocationNicsTest, PortStatesOtherThanActiveAreDown) {
  const state::NodeInfoPtr up = NicsNode();
  EXPECT_TRUE(up->nic_down.none());  // ACTIVE, and a state not known
  const state::NodeInfoPtr down =
      NicsNode(R"("rate_gbps": 800,)", R"("rate_gbps": 800, "state": "DOWN",)");
  EXPECT_EQ(down->nic_down, alloc::NicMask(0b010));
  const state::NodeState state(down);
  EXPECT_EQ(state.nic_usable(), alloc::NicMask(0b001));  // mlx5_1 down, mlx5_2 a VF
}

TEST(AllocationNicsTest, ContainersAskingForNicsGetThemInOrder) {
  Record::Devices devices;
  devices.gpus = {0, 1};
  devices.nics = {{"a", "", "", -1, 1000, 1}, {"b", "", "", -1, 1000, 0}};
  const std::vector<kube::ContainerView> containers = {
      Container("side", {{"linkfit.io/rdma", 1}}, true, true),
      Container("c1", {{kube::kGpuResource, 1}}),
      Container("c2", {{kube::kGpuResource, 1}, {"linkfit.io/rdma", 1}})};
  const auto plan = PlanContainers(containers, devices, "linkfit.io/gpu-share");
  EXPECT_EQ(NicNames(plan[0]), (std::vector<std::string>{"a"}));  // the sidecar keeps its NIC
  EXPECT_TRUE(plan[1].devices.nics.empty());
  EXPECT_EQ(NicNames(plan[2]), (std::vector<std::string>{"b"}));
  // Configured names: other resources count, the default one no longer does.
  const NicResources names{{"nvidia.com/hostdev", "rdma/ib"}, "rdma/share"};
  const std::vector<kube::ContainerView> custom = {Container("c1", {{"rdma/ib", 1}}),
                                                   Container("c2", {{"linkfit.io/rdma", 1}})};
  const auto configured = PlanContainers(custom, devices, "linkfit.io/gpu-share", names);
  EXPECT_EQ(NicNames(configured[0]), (std::vector<std::string>{"a", "b"}));  // left-overs
  EXPECT_TRUE(configured[1].devices.nics.empty());
}

TEST(AllocationNicsTest, NicsAskedByAnnotationFollowTheirGpus) {
  Record::Devices devices;
  devices.gpus = {0, 1};
  devices.nics = {
      {"a", "", "", -1, 1000, 1}, {"b", "", "", -1, 1000, 0}, {"c", "", "", -1, 1000, -1}};
  const std::vector<kube::ContainerView> containers = {
      Container("init", {{kube::kGpuResource, 1}}, true),
      Container("c1", {{kube::kGpuResource, 1}}), Container("c2", {{kube::kGpuResource, 1}})};
  const auto plan = PlanContainers(containers, devices, "linkfit.io/gpu-share");
  ASSERT_EQ(plan[1].devices.gpus, (std::vector<int>{0}));
  ASSERT_EQ(plan[2].devices.gpus, (std::vector<int>{1}));
  EXPECT_TRUE(plan[0].devices.nics.empty());  // an app container holding the GPU comes first
  EXPECT_EQ(NicNames(plan[1]), (std::vector<std::string>{"b", "c"}));  // c: no GPU, first app
  EXPECT_EQ(NicNames(plan[2]), (std::vector<std::string>{"a"}));
  // A pod without GPUs: its NICs go to the first app container.
  Record::Devices nics_only;
  nics_only.nics = {{"a", "", "", -1, 1000, -1}};
  const auto only = PlanContainers({Container("init", {}, true), Container("app", {})}, nics_only,
                                   "linkfit.io/gpu-share");
  EXPECT_TRUE(only[0].devices.nics.empty());
  EXPECT_EQ(NicNames(only[1]), (std::vector<std::string>{"a"}));
}

std::vector<std::pair<std::string, int>> NicParts(const Record::Container& c) {
  std::vector<std::pair<std::string, int>> parts;
  for (const Record::Nic& nic : c.devices.nics) parts.emplace_back(nic.name, nic.milli);
  return parts;
}

TEST(AllocationNicsTest, NicSharesAreCarvedBetweenTheContainersAskingForThem) {
  Record::Devices devices;
  devices.shares = {{0, 500}};
  devices.nics = {{"a", "", "", -1, 250, 0}};
  const std::vector<kube::ContainerView> asking = {
      Container("c1", {{"linkfit.io/rdma-share", 125}}), Container("c2", {}),
      Container("c3", {{"linkfit.io/rdma-share", 125}})};
  const auto plan = PlanContainers(asking, devices, "linkfit.io/gpu-share");
  using Parts = std::vector<std::pair<std::string, int>>;
  EXPECT_EQ(NicParts(plan[0]), (Parts{{"a", 125}}));
  EXPECT_TRUE(plan[1].devices.nics.empty());
  EXPECT_EQ(NicParts(plan[2]), (Parts{{"a", 125}}));
  // Nobody asks: the share follows its GPU's share.
  const std::vector<kube::ContainerView> silent = {
      Container("c1", {}), Container("c2", {{"linkfit.io/gpu-share", 500}})};
  const auto followed = PlanContainers(silent, devices, "linkfit.io/gpu-share");
  EXPECT_TRUE(followed[0].devices.nics.empty());
  EXPECT_EQ(NicParts(followed[1]), (Parts{{"a", 250}}));
  // One container asking the pod's whole share gets the pod's NICs as they are (the 2025 trace's
  // pods: one GPU and a quarter of a NIC).
  Record::Devices trace;
  trace.gpus = {3};
  trace.nics = {{"a", "", "uverbs0", 2, 250, 3}};
  const auto single =
      PlanContainers({Container("main", {{kube::kGpuResource, 1}, {"linkfit.io/rdma-share", 250}})},
                     trace, "linkfit.io/gpu-share");
  EXPECT_EQ(single[0].devices, trace);
}

// Two app containers, each with one of the pod's GPUs and a quarter of a NIC in all: each holds a
// quarter of the NIC serving its GPU, as the kubelet hands each 250 IDs. Containers whose totals
// do not fall on a NIC's boundary take thousandths NIC by NIC.
TEST(AllocationNicsTest, TwoAppContainersEachGetTheirPartOfTwoSharedNics) {
  Record::Devices devices;
  devices.gpus = {0, 1};
  devices.nics = {{"a", "", "", -1, 250, 1}, {"b", "", "", -1, 250, 0}};
  const std::vector<kube::ContainerView> containers = {
      Container("c1", {{kube::kGpuResource, 1}, {"linkfit.io/rdma-share", 250}}),
      Container("c2", {{kube::kGpuResource, 1}, {"linkfit.io/rdma-share", 250}})};
  const auto plan = PlanContainers(containers, devices, "linkfit.io/gpu-share");
  using Parts = std::vector<std::pair<std::string, int>>;
  ASSERT_EQ(plan[0].devices.gpus, (std::vector<int>{0}));
  EXPECT_EQ(NicParts(plan[0]), (Parts{{"b", 250}}));
  EXPECT_EQ(NicParts(plan[1]), (Parts{{"a", 250}}));
  const std::vector<kube::ContainerView> uneven = {
      Container("c1", {{"linkfit.io/rdma-share", 300}}),
      Container("c2", {{"linkfit.io/rdma-share", 200}})};
  Record::Devices nics_only;
  nics_only.nics = {{"a", "", "", -1, 250, -1}, {"b", "", "", -1, 250, -1}};
  const auto carved = PlanContainers(uneven, nics_only, "linkfit.io/gpu-share");
  EXPECT_EQ(NicParts(carved[0]), (Parts{{"a", 250}, {"b", 50}}));
  EXPECT_EQ(NicParts(carved[1]), (Parts{{"b", 200}}));
}

// The kubelet reuses an init container's IDs for the app containers after it and never a
// sidecar's: an init container asking 500 of two NICs and an app container asking 250 hold
// 250 of the same NIC; a sidecar's quarter is its own.
TEST(AllocationNicsTest, AnAppContainerReusesTheInitContainersThousandths) {
  Record::Devices devices;
  devices.nics = {
      {"a", "", "", -1, 250, -1}, {"b", "", "", -1, 250, -1}, {"c", "", "", -1, 250, -1}};
  const std::vector<kube::ContainerView> containers = {
      Container("side", {{"linkfit.io/rdma-share", 250}}, true, true),
      Container("setup", {{"linkfit.io/rdma-share", 500}}, true),
      Container("main", {{"linkfit.io/rdma-share", 250}})};
  const auto plan = PlanContainers(containers, devices, "linkfit.io/gpu-share");
  using Parts = std::vector<std::pair<std::string, int>>;
  EXPECT_EQ(NicParts(plan[0]), (Parts{{"a", 250}}));
  EXPECT_EQ(NicParts(plan[1]), (Parts{{"b", 250}, {"c", 250}}));
  EXPECT_EQ(NicParts(plan[2]), (Parts{{"b", 250}}));
}

TEST(AllocationNicsTest, ReportsNameNicsAndCountTheRequestedThousandths) {
  const state::NodeInfoPtr node = NicsNode();
  kube::DevicesInUse::Pod pod{"u1", "ml/train", {}};
  kube::DevicesInUse::Container c1;
  c1.name = "c1";
  c1.gpus = {0};
  c1.nics = {"mlx5_1"};
  kube::DevicesInUse::Container c2;
  c2.name = "c2";
  c2.nics = {"mlx5_0", "mlx5_1"};
  pod.containers = {c1, c2};
  auto whole = AssignmentOfReport(pod, "n", *node, 1);
  ASSERT_TRUE(whole.has_value()) << whole.error().message;
  EXPECT_EQ(whole->nics, (std::vector<Slot>{{0, 1000, -1}, {1, 1000, -1}}));
  auto shared = AssignmentOfReport(pod, "n", *node, 1, 250);
  ASSERT_TRUE(shared.has_value()) << shared.error().message;
  EXPECT_EQ(shared->nics, (std::vector<Slot>{{0, 250, -1}, {1, 250, -1}}));
  pod.containers[1].nics = {"mlx5_5"};
  auto unknown = AssignmentOfReport(pod, "n", *node, 1);
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(unknown.error().message.find("NIC mlx5_5 does not exist"), std::string::npos);
  EXPECT_NE(unknown.error().message.find("report of pod ml/train"), std::string::npos);
}

}  // namespace
}  // namespace linkfit::model
