// What a node agent publishes, as linkfit's stores read it: per-GPU health and MIG mode inside
// linkfit.io/topology, and linkfit.io/devices-in-use (the devices pods really hold), which
// replaces estimates and wins over allocation records, counting hand-off mismatches.

#include <gtest/gtest.h>

#include "cluster/cluster_testing.h"
#include "linkfit/cluster/node_store.h"
#include "linkfit/cluster/pod_store.h"
#include "linkfit/extender/extender.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/model/allocation.h"
#include "linkfit/topology/spec.h"
#include "testing/cluster.h"

namespace linkfit::cluster {
namespace {

using linkfit::testing::Mask;
using testing::NodeObject;
using testing::PodObject;
using testing::PodSpec;
using testing::TopologyDocument;

class CountingMetrics final : public MetricsSink {
 public:
  void ObserveRequest(Verb, std::string_view, double) override {}
  void CountFilterNodes(std::uint64_t, std::uint64_t, std::uint64_t) override {}
  void SetCacheSizes(std::uint64_t, std::uint64_t, std::uint64_t) override {}
  void SetNodeDevices(std::string_view, std::string_view, double, double) override {}
  void RemoveNode(std::string_view) override {}
  void SetFragmentation(double) override {}
  void CountHandoffMismatch() override { ++mismatches; }
  void SetReportedPods(std::uint64_t pods) override { reported = pods; }
  void CountBadObject(std::string_view kind, std::string_view what) override {
    bad.push_back(std::string(kind) + "/" + std::string(what));
  }
  int mismatches = 0;
  std::uint64_t reported = 0;
  std::vector<std::string> bad;
};

// A fixture document with the agent's facts added.
std::string AgentDocument(const std::string& fixture,
                          const std::function<void(topology::TopologySpec&)>& edit) {
  auto spec = topology::ParseTopologyDocument(TopologyDocument(fixture));
  EXPECT_TRUE(spec.has_value());
  for (topology::GpuSpec& gpu : spec->gpus) {
    gpu.uuid = "GPU-" + fixture + "-" + std::to_string(gpu.index);
  }
  edit(*spec);
  return topology::ToTopologyDocument(*spec);
}

nlohmann::json WithDevicesInUse(nlohmann::json node, const kube::DevicesInUse& devices) {
  node["metadata"]["annotations"][kube::kAnnotationDevicesInUse] =
      kube::EncodeDevicesInUse(devices);
  return node;
}

kube::DevicesInUse::Pod UsedWhole(const std::string& uid, const std::string& pod,
                                  std::vector<int> gpus) {
  return {uid, pod, {{"main", std::move(gpus), {}, {}, {}}}};
}

class NodeReportsTest : public ::testing::Test {
 protected:
  void Node(const nlohmann::json& node, kube::WatchEventType type = kube::WatchEventType::kAdded) {
    nodes_.Event(type, node.dump());
  }
  void Pod(const PodSpec& spec, kube::WatchEventType type = kube::WatchEventType::kModified) {
    pods_.Event(type, PodObject(spec).dump());
  }
  const state::NodeState* Find(const std::string& name) {
    snapshot_ = cache_.Snapshot();
    return snapshot_->Find(name);
  }
  wire::FilterResult FilterGpus(int gpus, const std::vector<std::string_view>& names) {
    return testing::FilterWholeGpus(cache_, metrics_, gpus, names);
  }

  CountingMetrics metrics_;
  state::ClusterCache cache_;
  alloc::PlacementTableCache registry_;
  model::NodeModelFactory factory_{registry_, linkfit::testing::Catalog(),
                                   topology::BandwidthModel::Defaults()};
  PodStore pods_{cache_, {}, {}, metrics_};
  NodeStore nodes_{cache_, factory_, pods_, metrics_};
  state::SnapshotPtr snapshot_;
};

TEST_F(NodeReportsTest, AnUnhealthyGpuIsNeverPlacedOnAndTheRestStaysUsable) {
  const std::string healthy = AgentDocument("dgx-h100", [](auto&) {});
  Node(NodeObject("h100-0", healthy));
  Pod({.name = "old",
       .uid = "u-old",
       .node = "h100-0",
       .gpus = 1,
       .annotations = {{kube::kAnnotationAllocation,
                        R"({"v":1,"pod":"ml/old","uid":"u-old","node":"h100-0","gpus":[3]})"}}},
      kube::WatchEventType::kAdded);
  const std::string sick = AgentDocument("dgx-h100", [](topology::TopologySpec& spec) {
    spec.gpus[3].healthy = false;
    spec.gpus[3].health_problem = "Xid 79: GPU has fallen off the bus";
    spec.gpus[5].healthy = false;
    spec.gpus[5].health_problem = "Xid 48: double-bit ECC error";
  });
  Node(NodeObject("h100-0", sick), kube::WatchEventType::kModified);
  const state::NodeState* node = Find("h100-0");
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->info().unhealthy, Mask({3, 5}));
  EXPECT_EQ(node->info().own_topology().gpu(5).health_problem, "Xid 48: double-bit ECC error");
  // The pod already on the sick GPU still counts; nothing new lands on 3 or 5.
  EXPECT_EQ(node->whole_used(), Mask({3}));
  EXPECT_EQ(node->whole_free(), Mask({0, 1, 2, 4, 6, 7}));
  EXPECT_EQ(FilterGpus(6, {"h100-0"}).node_names.size(), 1u);
  const wire::FilterResult seven = FilterGpus(7, {"h100-0"});
  ASSERT_EQ(seven.failed_and_unresolvable_nodes.size(), 1u);
  EXPECT_NE(seven.failed_and_unresolvable_nodes[0].reason.find("unhealthy"), std::string::npos)
      << seven.failed_and_unresolvable_nodes[0].reason;
  // Healthy again: placeable again, one placement table all along.
  Node(NodeObject("h100-0", healthy), kube::WatchEventType::kModified);
  EXPECT_EQ(Find("h100-0")->info().unhealthy, 0);
  EXPECT_EQ(registry_.size(), 1u);
}

TEST_F(NodeReportsTest, TheDocumentsMigModesWinOverTheHandTypedAnnotation) {
  const std::string document = AgentDocument("dgx-a100", [](topology::TopologySpec& spec) {
    for (topology::GpuSpec& gpu : spec.gpus) gpu.mig_mode = topology::MigMode::kDisabled;
    spec.gpus[6].mig_mode = topology::MigMode::kEnabled;
    spec.gpus[6].mig_instances = {{"3g.20gb", 4, 4, "MIG-a"}, {"2g.10gb", 0, 2, "MIG-b"}};
  });
  Node(NodeObject("a100-0", document, /*mig_mode=*/"0,1"));
  const state::NodeState* node = Find("a100-0");
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->info().mig_enabled, Mask({6}));
  ASSERT_EQ(node->info().own_topology().gpu(6).mig_instances.size(), 2u);
  EXPECT_EQ(node->info().own_topology().gpu(6).mig_instances[0].uuid, "MIG-a");
}

TEST_F(NodeReportsTest, MigPodsTakeOnlyFreeInstancesOfAReportedLayout) {
  const std::string document = AgentDocument("dgx-a100", [](topology::TopologySpec& spec) {
    for (topology::GpuSpec& gpu : spec.gpus) gpu.mig_mode = topology::MigMode::kDisabled;
    spec.gpus[6].mig_mode = topology::MigMode::kEnabled;
    spec.gpus[6].mig_instances = {{"3g.20gb", 4, 4, "MIG-a"}, {"2g.10gb", 0, 2, "MIG-b"}};
    spec.gpus[7].mig_mode = topology::MigMode::kEnabled;
    spec.gpus[7].mig_instances = {{"3g.20gb", 0, 4, "MIG-c"}, {"3g.20gb", 4, 4, "MIG-d"}};
  });
  Node(NodeObject("a100-0", document));
  extender::GpuRequest three;
  three.kind = extender::GpuRequest::Kind::kMig;
  three.count = 1;
  three.mig_profile = "3g.20gb";
  // GPU 7's instances are both free, GPU 6 has one: the lowest GPU first while none serves pods.
  extender::NodeFit fit = extender::FitOnNode(three, *Find("a100-0"), {});
  ASSERT_TRUE(fit.fits) << fit.reason;
  ASSERT_EQ(fit.assignment.mig.size(), 1u);
  EXPECT_EQ(fit.assignment.mig[0].gpu, 6);
  EXPECT_EQ(fit.assignment.mig[0].instance.start, 4);
  // Once a pod holds it (its record names the instance), the next goes to GPU 7.
  Pod({.name = "infer",
       .uid = "ui",
       .node = "a100-0",
       .annotations = {{kube::kAnnotationAllocation,
                        R"({"v":1,"pod":"ml/infer","uid":"ui","node":"a100-0",)"
                        R"("mig":[{"gpu":6,"profile":"3g.20gb","start":4}]})"}}},
      kube::WatchEventType::kAdded);
  fit = extender::FitOnNode(three, *Find("a100-0"), {});
  ASSERT_TRUE(fit.fits) << fit.reason;
  EXPECT_EQ(fit.assignment.mig[0].gpu, 7);
  // Three more do not fit now (two free), and a profile with no instance never will.
  three.count = 3;
  fit = extender::FitOnNode(three, *Find("a100-0"), {});
  EXPECT_FALSE(fit.fits);
  EXPECT_FALSE(fit.unresolvable) << fit.reason;
  extender::GpuRequest one = three;
  one.count = 1;
  one.mig_profile = "1g.5gb";
  fit = extender::FitOnNode(one, *Find("a100-0"), {});
  EXPECT_FALSE(fit.fits);
  EXPECT_TRUE(fit.unresolvable);
  EXPECT_NE(fit.reason.find("0 free 1g.5gb MIG instances of 0"), std::string::npos) << fit.reason;
  // The record of a pod bound to an instance carries the instance's UUID.
  const auto held = cache_.Find("ui");
  ASSERT_TRUE(held.has_value());
  const kube::AllocationRecord record = model::RecordOf(*held, Find("a100-0")->info());
  ASSERT_EQ(record.devices.mig.size(), 1u);
  EXPECT_EQ(record.devices.mig[0].uuid, "MIG-a");
}

TEST_F(NodeReportsTest, ReportedDevicesReplaceAForeignPodsEstimate) {
  const nlohmann::json node = NodeObject("h100-0", AgentDocument("dgx-h100", [](auto&) {}));
  Node(node);
  Pod({.name = "other", .uid = "u2", .node = "h100-0", .gpus = 2, .scheduler = "default"},
      kube::WatchEventType::kAdded);
  EXPECT_EQ(pods_.estimated_pods(), 1u);
  kube::DevicesInUse report;
  report.pods = {UsedWhole("u2", "ml/other", {6, 7})};
  Node(WithDevicesInUse(node, report), kube::WatchEventType::kModified);
  EXPECT_EQ(Find("h100-0")->whole_used(), Mask({6, 7}));
  const auto held = cache_.Find("u2");
  ASSERT_TRUE(held.has_value());
  EXPECT_TRUE(held->reported);
  EXPECT_FALSE(held->estimated);
  EXPECT_FALSE(held->handoff_mismatch);
  EXPECT_EQ(pods_.estimated_pods(), 0u);
  EXPECT_EQ(pods_.reported_pods(), 1u);
  EXPECT_EQ(metrics_.reported, 1u);
  EXPECT_EQ(metrics_.mismatches, 0);
  // A pod's later status update does not undo the report.
  Pod({.name = "other", .uid = "u2", .node = "h100-0", .gpus = 2, .scheduler = "default"});
  EXPECT_EQ(Find("h100-0")->whole_used(), Mask({6, 7}));
}

TEST_F(NodeReportsTest, APlacedPodHoldingOtherDevicesCountsAMismatchAndTheReportWins) {
  const nlohmann::json node = NodeObject("h100-0", AgentDocument("dgx-h100", [](auto&) {}));
  Node(node);
  // Two pods linkfit placed; the node handed "a" the devices recorded for "b" and vice versa.
  Pod({.name = "a",
       .uid = "ua",
       .node = "h100-0",
       .gpus = 2,
       .annotations = {{kube::kAnnotationAllocation,
                        R"({"v":1,"pod":"ml/a","uid":"ua","node":"h100-0","gpus":[0,1]})"}}},
      kube::WatchEventType::kAdded);
  Pod({.name = "b",
       .uid = "ub",
       .node = "h100-0",
       .gpus = 2,
       .annotations = {{kube::kAnnotationAllocation,
                        R"({"v":1,"pod":"ml/b","uid":"ub","node":"h100-0","gpus":[2,3]})"}}},
      kube::WatchEventType::kAdded);
  kube::DevicesInUse report;
  report.pods = {UsedWhole("ua", "ml/a", {2, 3}), UsedWhole("ub", "ml/b", {0, 1})};
  Node(WithDevicesInUse(node, report), kube::WatchEventType::kModified);
  const auto a = cache_.Find("ua");
  const auto b = cache_.Find("ub");
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(a->gpus, Mask({2, 3}));
  EXPECT_EQ(b->gpus, Mask({0, 1}));
  EXPECT_TRUE(a->handoff_mismatch && b->handoff_mismatch);
  EXPECT_EQ(metrics_.mismatches, 2);
  EXPECT_EQ(pods_.handoff_mismatches(), 2u);
  EXPECT_EQ(Find("h100-0")->whole_used(), Mask({0, 1, 2, 3}));
  // The same report again (the agent re-published nothing new): no new mismatch counted.
  Node(WithDevicesInUse(node, report), kube::WatchEventType::kModified);
  EXPECT_EQ(metrics_.mismatches, 2);
  // A report matching the records clears the marks.
  report.pods = {UsedWhole("ua", "ml/a", {0, 1}), UsedWhole("ub", "ml/b", {2, 3})};
  Node(WithDevicesInUse(node, report), kube::WatchEventType::kModified);
  EXPECT_EQ(cache_.Find("ua")->gpus, Mask({0, 1}));
  EXPECT_FALSE(cache_.Find("ua")->handoff_mismatch);
  EXPECT_EQ(metrics_.mismatches, 2);
}

// A pod whose first container started (GPUs 0, 1) while its second (GPUs 2, 3) is still being
// created: the report holds part of the record. The record keeps counting, no mismatch.
TEST_F(NodeReportsTest, AReportOfPartOfTheRecordIsAPodStillStartingNotAMismatch) {
  const nlohmann::json node = NodeObject("h100-0", AgentDocument("dgx-h100", [](auto&) {}));
  Node(node);
  Pod({.name = "a",
       .uid = "ua",
       .node = "h100-0",
       .gpus = 4,
       .annotations = {{kube::kAnnotationAllocation,
                        R"({"v":1,"pod":"ml/a","uid":"ua","node":"h100-0","gpus":[0,1,2,3]})"}}},
      kube::WatchEventType::kAdded);
  kube::DevicesInUse report;
  report.pods = {UsedWhole("ua", "ml/a", {0, 1})};
  Node(WithDevicesInUse(node, report), kube::WatchEventType::kModified);
  EXPECT_EQ(cache_.Find("ua")->gpus, Mask({0, 1, 2, 3}));
  EXPECT_FALSE(cache_.Find("ua")->handoff_mismatch);
  EXPECT_EQ(metrics_.mismatches, 0);
  // A device outside the record is a mismatch even beside recorded ones.
  report.pods = {UsedWhole("ua", "ml/a", {0, 1, 4})};
  Node(WithDevicesInUse(node, report), kube::WatchEventType::kModified);
  EXPECT_EQ(metrics_.mismatches, 1);
}

TEST_F(NodeReportsTest, AReportCollidingWithAnotherPodsRecordMovesThatPod) {
  const nlohmann::json node = NodeObject("h100-0", AgentDocument("dgx-h100", [](auto&) {}));
  Node(node);
  Pod({.name = "a",
       .uid = "ua",
       .node = "h100-0",
       .gpus = 2,
       .annotations = {{kube::kAnnotationAllocation,
                        R"({"v":1,"pod":"ml/a","uid":"ua","node":"h100-0","gpus":[0,1]})"}}},
      kube::WatchEventType::kAdded);
  Pod({.name = "f", .uid = "uf", .node = "h100-0", .gpus = 2, .scheduler = "default"},
      kube::WatchEventType::kAdded);
  // Only the foreign pod is reported, on a's recorded GPUs: two pods are never counted on one
  // device, so a loses its devices (counted by CPU and memory) until its node reports it.
  kube::DevicesInUse report;
  report.pods = {UsedWhole("uf", "ml/f", {0, 1})};
  Node(WithDevicesInUse(node, report), kube::WatchEventType::kModified);
  EXPECT_EQ(cache_.Find("uf")->gpus, Mask({0, 1}));
  EXPECT_FALSE(cache_.Find("ua").has_value());  // no devices: counted as a load
  EXPECT_EQ(Find("h100-0")->whole_used(), Mask({0, 1}));
  EXPECT_EQ(Find("h100-0")->load_pods(), 1);
  EXPECT_EQ(Find("h100-0")->cpu_used_milli(), 2000);
}

TEST_F(NodeReportsTest, ABadReportIsCountedAndChangesNothing) {
  const nlohmann::json node = NodeObject("h100-0", AgentDocument("dgx-h100", [](auto&) {}));
  Node(node);
  Pod({.name = "other", .uid = "u2", .node = "h100-0", .gpus = 2, .scheduler = "default"},
      kube::WatchEventType::kAdded);
  nlohmann::json bad = node;
  bad["metadata"]["annotations"][kube::kAnnotationDevicesInUse] = R"({"v":7})";
  Node(bad, kube::WatchEventType::kModified);
  EXPECT_TRUE(cache_.Find("u2")->estimated);
  ASSERT_FALSE(metrics_.bad.empty());
  EXPECT_EQ(metrics_.bad.back(), "node/devices-in-use");
  // A report naming a GPU the node does not have is refused for that pod only.
  kube::DevicesInUse report;
  report.pods = {UsedWhole("u2", "ml/other", {12})};
  Node(WithDevicesInUse(node, report), kube::WatchEventType::kModified);
  EXPECT_TRUE(cache_.Find("u2")->estimated);
}

TEST_F(NodeReportsTest, ReportsArriveBeforeTheNodesPodsAreApplied) {
  // A restart: the node (with its report) is listed before the pods.
  kube::DevicesInUse report;
  report.pods = {UsedWhole("u2", "ml/other", {4, 5})};
  Node(WithDevicesInUse(NodeObject("h100-0", AgentDocument("dgx-h100", [](auto&) {})), report));
  Pod({.name = "other", .uid = "u2", .node = "h100-0", .gpus = 2, .scheduler = "default"},
      kube::WatchEventType::kAdded);
  EXPECT_EQ(cache_.Find("u2")->gpus, Mask({4, 5}));
  EXPECT_TRUE(cache_.Find("u2")->reported);
  // Deleting the node forgets its report.
  Node(NodeObject("h100-0", ""), kube::WatchEventType::kDeleted);
  EXPECT_EQ(Find("h100-0"), nullptr);
}

}  // namespace
}  // namespace linkfit::cluster
