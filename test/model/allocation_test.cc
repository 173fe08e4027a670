// Allocation records <-> assignments on a node's model, and the per-container plan.

#include "linkfit/model/allocation.h"

#include <gtest/gtest.h>

#include "linkfit/model/node_model.h"
#include "testing/cluster.h"

namespace linkfit::model {
namespace {

using linkfit::testing::Mask;
using Record = kube::AllocationRecord;

kube::ContainerView Container(const std::string& name, std::int64_t gpus, bool init = false,
                              bool sidecar = false) {
  kube::ContainerView c;
  c.name = name;
  c.init = init;
  c.restartable = sidecar;
  if (gpus > 0) c.extended[kube::kGpuResource] = gpus * 1000;
  return c;
}

// A DGX H100 read from nvidia-smi text with the query CSV, so its GPUs have UUIDs.
state::NodeInfoPtr H100WithUuids() {
  static alloc::PlacementTableCache registry;
  static NodeModelFactory factory(registry, linkfit::testing::Catalog(),
                                  topology::BandwidthModel::Defaults());
  const std::string dir = linkfit::testing::SourcePath("test/data/nvidia-smi/");
  auto topo_text = topology::ReadTopologyFile(dir + "dgx-h100.topo.txt");
  auto csv = topology::ReadTopologyFile(dir + "dgx-h100.query.csv");
  EXPECT_TRUE(topo_text.has_value() && csv.has_value());
  auto topo = factory.TopologyFromText(*topo_text + "\n" + *csv, "dgx-h100");
  EXPECT_TRUE(topo.has_value()) << (topo ? "" : topo.error().message);
  return *factory.Build({"h100", {}, *topo, 0, 0, 0});
}

TEST(AllocationTest, WholeGpusRoundTripWithUuids) {
  const state::NodeInfoPtr node = H100WithUuids();
  state::Assignment a;
  a.pod_uid = "u1";
  a.pod_namespace = "ml";
  a.pod_name = "train";
  a.node = "h100";
  a.gpus = Mask({4, 5});
  const Record record = RecordOf(a, *node);
  EXPECT_EQ(record.pod, "ml/train");
  EXPECT_EQ(record.devices.gpus, (std::vector<int>{4, 5}));
  ASSERT_EQ(record.devices.uuids.size(), 2u);
  EXPECT_EQ(record.devices.uuids[0], node->topology().gpu(4).uuid);
  EXPECT_TRUE(record.devices.uuids[0].starts_with("GPU-")) << record.devices.uuids[0];
  auto back = AssignmentOf(record, *node);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(*back, a);
}

TEST(AllocationTest, MigAndSharesRoundTrip) {
  const state::NodeInfoPtr node = linkfit::testing::MakeNodeInfo("a100", "dgx-a100", Mask({0}));
  state::Assignment mig;
  mig.pod_uid = "u2";
  mig.pod_namespace = "ml";
  mig.pod_name = "infer";
  mig.node = "a100";
  mig.kind = state::Assignment::Kind::kMig;
  mig.mig = {{0, alloc::MigInstance{node->MigPlannerOf(0)->set().FindProfile("3g.20gb"), 4}}};
  mig.gpus = Mask({0});
  const Record record = RecordOf(mig, *node);
  ASSERT_EQ(record.devices.mig.size(), 1u);
  EXPECT_EQ(record.devices.mig[0].profile, "3g.20gb");
  auto back = AssignmentOf(record, *node);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(*back, mig);

  state::Assignment shared = mig;
  shared.kind = state::Assignment::Kind::kShared;
  shared.mig.clear();
  shared.shares = {{2, 300}, {3, 300}};
  shared.gpus = Mask({2, 3});
  auto shared_back = AssignmentOf(RecordOf(shared, *node), *node);
  ASSERT_TRUE(shared_back.has_value());
  EXPECT_EQ(*shared_back, shared);
}

TEST(AllocationTest, RejectsRecordsTheNodeCannotHold) {
  const state::NodeInfoPtr v100 = linkfit::testing::MakeNodeInfo("v100", "dgx1-v100");
  Record record;
  record.pod = "ml/x";
  record.uid = "u";
  record.node = "v100";
  record.devices.gpus = {9};
  EXPECT_NE(AssignmentOf(record, *v100).error().message.find("GPU 9 does not exist"),
            std::string::npos);
  record.devices.gpus.clear();
  record.devices.mig = {{0, "3g.20gb", 4, ""}};
  EXPECT_NE(AssignmentOf(record, *v100).error().message.find("no MIG-capable"), std::string::npos);
  record.devices.mig.clear();
  record.devices.gpus = {0};
  record.devices.shares = {{1, 10}};
  EXPECT_NE(AssignmentOf(record, *v100).error().message.find("one kind"), std::string::npos);
  record.pod = "nonamespace";
  EXPECT_NE(AssignmentOf(record, *v100).error().message.find("namespace/name"), std::string::npos);
}

TEST(AllocationTest, AppContainersReuseInitDevicesAndSidecarsKeepTheirs) {
  kube::PodView pod;
  pod.containers = {Container("sidecar", 1, true, true), Container("setup", 2, true),
                    Container("train", 2), Container("eval", 1)};
  Record::Devices devices;
  devices.gpus = {0, 1, 2, 3};
  devices.uuids = {"G0", "G1", "G2", "G3"};
  const auto plan = PlanContainers(pod, devices, "linkfit.io/gpu-share");
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(plan[0].devices.gpus, (std::vector<int>{0}));     // the sidecar's, for good
  EXPECT_EQ(plan[1].devices.gpus, (std::vector<int>{1, 2}));  // init: reused after it ends
  EXPECT_EQ(plan[2].devices.gpus, (std::vector<int>{1, 2}));  // the init container's first
  EXPECT_EQ(plan[2].devices.uuids, (std::vector<std::string>{"G1", "G2"}));
  EXPECT_EQ(plan[3].devices.gpus, (std::vector<int>{3}));
  EXPECT_TRUE(plan[1].init);
  EXPECT_FALSE(plan[2].init);
}

TEST(AllocationTest, AnnotationOnlyRequestsGoToTheFirstAppContainer) {
  kube::PodView pod;
  pod.containers = {Container("init", 0, true), Container("main", 0), Container("log", 0)};
  Record::Devices devices;
  devices.gpus = {6, 7};
  const auto plan = PlanContainers(pod, devices, "linkfit.io/gpu-share");
  EXPECT_TRUE(plan[0].devices.empty());
  EXPECT_EQ(plan[1].devices.gpus, (std::vector<int>{6, 7}));
  EXPECT_TRUE(plan[2].devices.empty());
}

TEST(AllocationTest, MigInstancesFollowEachContainersProfileRequest) {
  kube::PodView pod;
  kube::ContainerView a = Container("a", 0);
  a.extended["nvidia.com/mig-1g.5gb"] = 1000;
  kube::ContainerView b = Container("b", 0);
  b.extended["nvidia.com/mig-1g.5gb"] = 1000;
  pod.containers = {a, b};
  Record::Devices devices;
  devices.mig = {{0, "1g.5gb", 0, ""}, {0, "1g.5gb", 1, ""}};
  const auto plan = PlanContainers(pod, devices, "linkfit.io/gpu-share");
  ASSERT_EQ(plan[0].devices.mig.size(), 1u);
  ASSERT_EQ(plan[1].devices.mig.size(), 1u);
  EXPECT_EQ(plan[0].devices.mig[0].start, 0);
  EXPECT_EQ(plan[1].devices.mig[0].start, 1);
}

// A GPU share resource is each container's thousandths in all: two containers asking 300 each
// of a pod's 300 of two GPUs get one GPU's 300 each; an app container after an init container
// asking the pod's 600 reuses the init container's first 300.
TEST(AllocationTest, GpuSharesAreCarvedBetweenTheContainersAskingForThem) {
  const auto asking = [](const std::string& name, std::int64_t milli, bool init = false) {
    kube::ContainerView c = Container(name, 0, init);
    c.extended["linkfit.io/gpu-share"] = milli * 1000;
    return c;
  };
  Record::Devices devices;
  devices.shares = {{2, 300}, {5, 300}};
  kube::PodView pod;
  pod.containers = {asking("a", 300), asking("b", 300)};
  auto plan = PlanContainers(pod, devices, "linkfit.io/gpu-share");
  EXPECT_EQ(plan[0].devices.shares, (std::vector<Record::Share>{{2, 300}}));
  EXPECT_EQ(plan[1].devices.shares, (std::vector<Record::Share>{{5, 300}}));
  pod.containers = {asking("setup", 600, true), asking("main", 300)};
  plan = PlanContainers(pod, devices, "linkfit.io/gpu-share");
  EXPECT_EQ(plan[0].devices.shares, devices.shares);
  EXPECT_EQ(plan[1].devices.shares, (std::vector<Record::Share>{{2, 300}}));
  // Asked by annotation only: the first app container holds them all.
  pod.containers = {Container("setup", 0, true), Container("main", 0)};
  plan = PlanContainers(pod, devices, "linkfit.io/gpu-share");
  EXPECT_TRUE(plan[0].devices.empty());
  EXPECT_EQ(plan[1].devices.shares, devices.shares);
}

TEST(NodeModelTest, MigModeGrammar) {
  EXPECT_EQ(*ParseMigMode("all", 8), 0xff);
  EXPECT_EQ(*ParseMigMode("none", 8), 0);
  EXPECT_EQ(*ParseMigMode("0,3", 8), Mask({0, 3}));
  EXPECT_FALSE(ParseMigMode("8", 8).has_value());
  EXPECT_FALSE(ParseMigMode("sometimes", 8).has_value());
}

TEST(NodeModelTest, SameTextSharesOneTopologyAndMigNeedsCapableGpus) {
  alloc::PlacementTableCache registry;
  NodeModelFactory factory(registry, linkfit::testing::Catalog(),
                           topology::BandwidthModel::Defaults());
  auto text =
      topology::ReadTopologyFile(linkfit::testing::SourcePath("config/topologies/dgx1-v100.json"));
  ASSERT_TRUE(text.has_value());
  auto first = factory.TopologyFromText(*text, "a");
  auto second = factory.TopologyFromText(*text, "b");
  ASSERT_TRUE(first.has_value()) << first.error().message;
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ(factory.topologies(), 1u);
  EXPECT_FALSE(factory.TopologyFromText("{\"gpus\": 3}", "bad").has_value());
  auto mig = factory.Build({"n", {}, *first, Mask({0}), 0, 0});
  ASSERT_FALSE(mig.has_value());
  EXPECT_NE(mig.error().message.find("not MIG-capable"), std::string::npos);
  auto plain = factory.Build({"n", {{"zone", "a"}}, *first, 0, 4000, 1 << 30});
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ((*plain)->labels.at("zone"), "a");
  EXPECT_EQ((*plain)->cpu_milli, 4000);
}

}  // namespace
}  // namespace linkfit::model
