// NodeStore and PodStore on decoded API objects (no network): what the ClusterCache holds after
// node and pod events, relists, bad annotations and pods placed by other schedulers.

#include <gtest/gtest.h>

#include "cluster/cluster_testing.h"
#include "linkfit/cluster/api_binder.h"
#include "linkfit/cluster/node_store.h"
#include "linkfit/cluster/pod_store.h"
#include "linkfit/common/json_string.h"
#include "linkfit/extender/extender.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/model/allocation.h"
#include "testing/cluster.h"

namespace linkfit::cluster {
namespace {

using linkfit::testing::Mask;
using testing::NodeObject;
using testing::PodObject;
using testing::PodSpec;
using testing::TopologyDocument;

class StoresTest : public ::testing::Test {
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
  topology::GpuMask WholeUsed(const std::string& name) {
    const state::NodeState* node = Find(name);
    EXPECT_NE(node, nullptr) << name;
    return node == nullptr ? 0 : node->whole_used();
  }

  NullMetrics metrics_;
  state::ClusterCache cache_;
  alloc::PlacementTableCache registry_;
  model::NodeModelFactory factory_{registry_, linkfit::testing::Catalog(),
                                   topology::BandwidthModel::Defaults()};
  PodStore pods_{cache_, {}, {}, metrics_};
  NodeStore nodes_{cache_, factory_, pods_, metrics_};
  state::SnapshotPtr snapshot_;
};

TEST_F(StoresTest, ANodeIsModelledFromItsAnnotationAndStatusUpdatesCostNothing) {
  Node(NodeObject("h100-0", TopologyDocument("dgx-h100")));
  const state::NodeState* node = Find("h100-0");
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->info().gpu_count(), 8);
  EXPECT_EQ(node->info().cpu_milli, 224000);
  EXPECT_EQ(node->info().labels.count("nvidia.com/gpu.product"), 1u);
  EXPECT_EQ(node->info().labels.count("kubernetes.io/hostname"), 0u);  // not kept
  const std::uint64_t generation = cache_.Snapshot()->generation();
  Node(NodeObject("h100-0", TopologyDocument("dgx-h100")), kube::WatchEventType::kModified);
  EXPECT_EQ(cache_.Snapshot()->generation(), generation);  // a heartbeat: nothing rebuilt
  Node(NodeObject("h100-1", TopologyDocument("dgx-h100")));
  EXPECT_EQ(factory_.topologies(), 1u);  // one parse for identical documents
  EXPECT_EQ(nodes_.modelled(), 2u);
}

TEST_F(StoresTest, ANodeWithoutTheAnnotationIsUnknownAndABadOneIsAReason) {
  Node(NodeObject("cpu-0", ""));
  EXPECT_EQ(Find("cpu-0"), nullptr);
  EXPECT_EQ(nodes_.known(), 1u);
  EXPECT_EQ(nodes_.modelled(), 0u);

  Node(NodeObject("bad-0", "{\"gpus\": \"many\"}"));
  EXPECT_EQ(Find("bad-0"), nullptr);
  const std::string* problem = cache_.Snapshot()->Problem("bad-0");
  ASSERT_NE(problem, nullptr);
  EXPECT_NE(problem->find("linkfit.io/topology"), std::string::npos) << *problem;

  // Filter names the reason, unresolvable.
  const wire::FilterResult result =
      testing::FilterWholeGpus(cache_, metrics_, 1, {"bad-0", "cpu-0"});
  ASSERT_EQ(result.failed_and_unresolvable_nodes.size(), 2u);
  EXPECT_NE(result.failed_and_unresolvable_nodes[0].reason.find("unusable"), std::string::npos);
  EXPECT_NE(result.failed_and_unresolvable_nodes[1].reason.find("unknown"), std::string::npos);

  // Fixed: the problem goes away.
  Node(NodeObject("bad-0", TopologyDocument("dgx1-v100")), kube::WatchEventType::kModified);
  EXPECT_NE(Find("bad-0"), nullptr);
  EXPECT_EQ(cache_.Snapshot()->Problem("bad-0"), nullptr);
}

TEST_F(StoresTest, MigModeBesideTheTopologyAndItsErrors) {
  Node(NodeObject("a100-0", TopologyDocument("dgx-a100"), "0,1"));
  ASSERT_NE(Find("a100-0"), nullptr);
  EXPECT_EQ(Find("a100-0")->info().mig_enabled, Mask({0, 1}));
  Node(NodeObject("v100-0", TopologyDocument("dgx1-v100"), "all"));
  EXPECT_EQ(Find("v100-0"), nullptr);
  ASSERT_NE(cache_.Snapshot()->Problem("v100-0"), nullptr);
  EXPECT_NE(cache_.Snapshot()->Problem("v100-0")->find("not MIG-capable"), std::string::npos);
  Node(NodeObject("a100-1", TopologyDocument("dgx-a100"), "sometimes"));
  EXPECT_EQ(Find("a100-1"), nullptr);
}

TEST_F(StoresTest, ARecordOnThePodGivesExactlyThoseDevices) {
  Node(NodeObject("h100-0", TopologyDocument("dgx-h100")));
  PodSpec spec{.name = "train", .uid = "u1", .node = "h100-0", .gpus = 2};
  spec.annotations[kube::kAnnotationAllocation] =
      R"({"v":1,"pod":"ml/train","uid":"u1","node":"h100-0","gpus":[5,6]})";
  Pod(spec, kube::WatchEventType::kAdded);
  EXPECT_EQ(WholeUsed("h100-0"), Mask({5, 6}));
  EXPECT_EQ(cache_.Phase("u1"), state::PodPhase::kAdded);
  EXPECT_EQ(pods_.estimated_pods(), 0u);
  EXPECT_EQ(Find("h100-0")->cpu_used_milli(), 1000);
}

TEST_F(StoresTest, ForeignGpuPodsAreEstimatedLikeTheDevicePluginAndMarked) {
  Node(NodeObject("h100-0", TopologyDocument("dgx-h100")));
  Pod({.name = "other", .uid = "u2", .node = "h100-0", .gpus = 4, .scheduler = "default"},
      kube::WatchEventType::kAdded);
  EXPECT_EQ(__builtin_popcount(WholeUsed("h100-0")), 4);
  EXPECT_EQ(pods_.estimated_pods(), 1u);
  const auto held = cache_.Find("u2");
  ASSERT_TRUE(held.has_value());
  EXPECT_TRUE(held->estimated);
  // A pod asking for more than is free is counted for its CPU and memory only, loudly.
  Pod({.name = "greedy", .uid = "u3", .node = "h100-0", .gpus = 8}, kube::WatchEventType::kAdded);
  EXPECT_EQ(__builtin_popcount(WholeUsed("h100-0")), 4);
  EXPECT_EQ(Find("h100-0")->cpu_used_milli(), 2000);
}

TEST_F(StoresTest, TerminalAndDeletedPodsFreeWhatTheyHeld) {
  Node(NodeObject("h100-0", TopologyDocument("dgx-h100")));
  Pod({.name = "a", .uid = "ua", .node = "h100-0", .gpus = 2}, kube::WatchEventType::kAdded);
  Pod({.name = "b", .uid = "ub", .node = "h100-0", .gpus = 2}, kube::WatchEventType::kAdded);
  EXPECT_EQ(__builtin_popcount(WholeUsed("h100-0")), 4);
  Pod({.name = "a", .uid = "ua", .node = "h100-0", .gpus = 2, .phase = "Succeeded"});
  EXPECT_EQ(__builtin_popcount(WholeUsed("h100-0")), 2);
  Pod({.name = "b", .uid = "ub", .node = "h100-0", .gpus = 2}, kube::WatchEventType::kDeleted);
  EXPECT_EQ(WholeUsed("h100-0"), 0);
  EXPECT_EQ(pods_.size(), 0u);
}

TEST_F(StoresTest, ARelistRemovesWhatTheCutWatchMissed) {
  Node(NodeObject("h100-0", TopologyDocument("dgx-h100")));
  Pod({.name = "a", .uid = "ua", .node = "h100-0", .gpus = 2}, kube::WatchEventType::kAdded);
  Pod({.name = "b", .uid = "ub", .node = "h100-0", .gpus = 2}, kube::WatchEventType::kAdded);
  pods_.BeginList();
  pods_.ListItem(PodObject({.name = "b", .uid = "ub", .node = "h100-0", .gpus = 2}).dump());
  pods_.EndList("77");
  EXPECT_EQ(pods_.size(), 1u);
  EXPECT_EQ(cache_.Phase("ua"), state::PodPhase::kInitial);
  EXPECT_EQ(__builtin_popcount(WholeUsed("h100-0")), 2);
  // Nodes too: a node missing from a relist is gone, with its pods.
  nodes_.BeginList();
  nodes_.EndList("78");
  EXPECT_EQ(Find("h100-0"), nullptr);
  EXPECT_EQ(cache_.Phase("ub"), state::PodPhase::kInitial);
}

TEST_F(StoresTest, PodsSeenBeforeTheirNodeAreAppliedWhenItAppears) {
  PodSpec spec{.name = "train", .uid = "u1", .node = "late-0", .gpus = 2};
  spec.annotations[kube::kAnnotationAllocation] =
      R"({"v":1,"pod":"ml/train","uid":"u1","node":"late-0","gpus":[0,1]})";
  Pod(spec, kube::WatchEventType::kAdded);
  Pod({.name = "etl", .uid = "u2", .node = "late-0", .cpu = "8"}, kube::WatchEventType::kAdded);
  EXPECT_EQ(cache_.Phase("u1"), state::PodPhase::kInitial);
  Node(NodeObject("late-0", TopologyDocument("dgx1-v100")));
  EXPECT_EQ(WholeUsed("late-0"), Mask({0, 1}));
  EXPECT_EQ(Find("late-0")->cpu_used_milli(), 9000);
}

TEST_F(StoresTest, PendingPodsAreFoundForBindAndCountInDemand) {
  Pod({.name = "p", .uid = "up", .gpus = 4}, kube::WatchEventType::kAdded);
  const auto known = pods_.FindPod("up");
  ASSERT_TRUE(known.has_value());
  EXPECT_EQ(known->request.count, 4);
  EXPECT_EQ(known->pod_name, "p");
  const auto for_bind = pods_.ResolveForBind("ml", "p", "up");
  ASSERT_TRUE(for_bind.has_value());
  ASSERT_NE(for_bind->containers, nullptr);
  EXPECT_FALSE(for_bind->containers->empty());
  const extender::ShapeList shapes = pods_.demand().Shapes();
  bool four = false;
  for (const extender::Shape& shape : *shapes) four = four || shape.gpus == 4;
  EXPECT_TRUE(four);
  Pod({.name = "p", .uid = "up", .gpus = 4}, kube::WatchEventType::kDeleted);
  EXPECT_FALSE(pods_.FindPod("up").has_value());
}

// Pods asking alike share one copy of their request and keep their own CPU and memory; the copy
// goes with the last of them.
TEST_F(StoresTest, PodsAskingAlikeShareOneRequestAndKeepTheirOwnCpu) {
  Pod({.name = "a", .uid = "ua", .gpus = 2, .cpu = "2"}, kube::WatchEventType::kAdded);
  Pod({.name = "b", .uid = "ub", .gpus = 2, .cpu = "3"}, kube::WatchEventType::kAdded);
  Pod({.name = "c", .uid = "uc", .gpus = 1}, kube::WatchEventType::kAdded);
  Pod({.name = "d", .uid = "ud"}, kube::WatchEventType::kAdded);  // asks for no devices
  EXPECT_EQ(pods_.distinct_requests(), 2u);
  EXPECT_EQ(pods_.FindPod("ua")->request.cpu_milli, 2000);
  EXPECT_EQ(pods_.FindPod("ub")->request.cpu_milli, 3000);
  EXPECT_EQ(pods_.FindPod("ub")->request.count, 2);
  // A pod whose request changes moves to the other copy.
  Pod({.name = "b", .uid = "ub", .gpus = 1, .cpu = "3"});
  EXPECT_EQ(pods_.distinct_requests(), 2u);
  EXPECT_EQ(pods_.FindPod("ub")->request.count, 1);
  Pod({.name = "a", .uid = "ua", .gpus = 2}, kube::WatchEventType::kDeleted);
  EXPECT_EQ(pods_.distinct_requests(), 1u);
  Pod({.name = "b", .uid = "ub", .gpus = 1}, kube::WatchEventType::kDeleted);
  Pod({.name = "c", .uid = "uc", .gpus = 1}, kube::WatchEventType::kDeleted);
  EXPECT_EQ(pods_.distinct_requests(), 0u);
}

// A pod asking only for NICs keeps its request (the NICs) and, while pending, its containers for
// bind; demand counts GPU pods only, so it adds no shape.
TEST_F(StoresTest, PendingPodsAskingOnlyForNicsKeepTheirRequestForBind) {
  const std::size_t shapes_before = pods_.demand().Shapes()->size();
  Pod({.name = "n", .uid = "un", .annotations = {{"linkfit.io/nics", "2"}}},
      kube::WatchEventType::kAdded);
  const auto known = pods_.FindPod("un");
  ASSERT_TRUE(known.has_value());
  EXPECT_EQ(known->request.kind, extender::GpuRequest::Kind::kNone);
  EXPECT_EQ(known->request.nics.count, 2);
  EXPECT_EQ(known->request.cpu_milli, 1000);
  const auto for_bind = pods_.ResolveForBind("ml", "n", "un");
  ASSERT_TRUE(for_bind.has_value());
  ASSERT_NE(for_bind->containers, nullptr);
  EXPECT_FALSE(for_bind->containers->empty());
  EXPECT_EQ(pods_.demand().Shapes()->size(), shapes_before);
  // A status update with the same request changes nothing; an annotation change is seen.
  Pod({.name = "n", .uid = "un", .annotations = {{"linkfit.io/nics", "2"}}});
  Pod({.name = "n", .uid = "un", .annotations = {{"linkfit.io/nics", "per-gpu"}}});
  EXPECT_EQ(pods_.FindPod("un")->request.nics.count, alloc::NicRequest::kPerGpu);
  // A pod asking for nothing keeps no containers.
  Pod({.name = "c", .uid = "uc"}, kube::WatchEventType::kAdded);
  const auto plain = pods_.ResolveForBind("ml", "c", "uc");
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->containers, nullptr);
}

TEST_F(StoresTest, TheWatchConfirmsAnAssumedPodAndTheRecordWinsWhenItDiffers) {
  Node(NodeObject("h100-0", TopologyDocument("dgx-h100")));
  Pod({.name = "p", .uid = "up", .gpus = 2}, kube::WatchEventType::kAdded);
  auto assumed = cache_.Assume("up", "h100-0", [](const state::NodeState&) {
    state::Assignment a;
    a.pod_namespace = "ml";
    a.pod_name = "p";
    a.gpus = Mask({0, 1});
    return Result<state::Assignment>(a);
  });
  ASSERT_TRUE(assumed.has_value());
  // The pod comes back bound, but with another writer's record (GPUs 2, 3): the record wins.
  PodSpec bound{.name = "p", .uid = "up", .node = "h100-0", .gpus = 2};
  bound.annotations[kube::kAnnotationAllocation] =
      R"({"v":1,"pod":"ml/p","uid":"up","node":"h100-0","gpus":[2,3]})";
  Pod(bound);
  EXPECT_EQ(cache_.Phase("up"), state::PodPhase::kAdded);
  EXPECT_EQ(WholeUsed("h100-0"), Mask({2, 3}));
}

TEST_F(StoresTest, TheWatchEndsBindsInFlight) {
  Node(NodeObject("h100-0", TopologyDocument("dgx-h100")));
  const auto in_flight = [&](const std::string& uid, topology::GpuMask gpus) {
    Pod({.name = uid, .uid = uid, .gpus = 2}, kube::WatchEventType::kAdded);
    auto assumed = cache_.Assume(uid, "h100-0", [&](const state::NodeState&) {
      state::Assignment a;
      a.pod_namespace = "ml";
      a.pod_name = uid;
      a.gpus = gpus;
      return Result<state::Assignment>(a);
    });
    ASSERT_TRUE(assumed.has_value());
    ASSERT_TRUE(cache_.Advance(uid, state::BindEvent::kWrite).has_value());
  };
  in_flight("bound", Mask({0, 1}));
  in_flight("gone", Mask({2, 3}));
  PodSpec bound{.name = "bound", .uid = "bound", .node = "h100-0", .gpus = 2};
  bound.annotations[kube::kAnnotationAllocation] =
      R"({"v":1,"pod":"ml/bound","uid":"bound","node":"h100-0","gpus":[0,1]})";
  Pod(bound);  // the watch before the Binding's reply
  EXPECT_EQ(cache_.Stage("bound"), state::BindStage::kConfirmed);
  EXPECT_EQ(cache_.Phase("bound"), state::PodPhase::kAdded);
  Pod({.name = "gone", .uid = "gone", .gpus = 2}, kube::WatchEventType::kDeleted);
  EXPECT_EQ(cache_.Stage("gone"), state::BindStage::kForgotten);
  EXPECT_EQ(WholeUsed("h100-0"), Mask({0, 1}));
  // The replies come late and change nothing.
  EXPECT_TRUE(cache_.Advance("bound", state::BindEvent::kCreated)->late);
  EXPECT_TRUE(cache_.Advance("gone", state::BindEvent::kCreated)->late);
  EXPECT_EQ(WholeUsed("h100-0"), Mask({0, 1}));
}

// A committed record takes only what it names: of two binds in flight on one MIG GPU, the one
// planned on the record's slices loses them before it is sent; the other keeps its slice.
TEST_F(StoresTest, ARecordDisplacesOnlyTheBindsWhoseDevicesItNames) {
  Node(NodeObject("a100-0", TopologyDocument("dgx-a100"), "0,1"));
  ASSERT_NE(Find("a100-0"), nullptr);
  const auto in_flight = [&](const std::string& uid, int start) {
    kube::AllocationRecord plan;
    plan.pod = "ml/" + uid;
    plan.uid = uid;
    plan.node = "a100-0";
    plan.devices.mig = {{0, "3g.20gb", start, ""}};
    auto planned = model::AssignmentOf(plan, Find("a100-0")->info());
    ASSERT_TRUE(planned.has_value()) << planned.error().message;
    ASSERT_TRUE(
        cache_.Assume(uid, "a100-0", [&](const state::NodeState&) { return planned; }).has_value());
    ASSERT_TRUE(cache_.Advance(uid, state::BindEvent::kWrite).has_value());
  };
  in_flight("low", 0);
  in_flight("high", 4);
  PodSpec over{.name = "over", .uid = "over", .node = "a100-0"};
  over.annotations[kube::kAnnotationAllocation] =
      R"({"v":1,"pod":"ml/over","uid":"over","node":"a100-0",)"
      R"("mig":[{"gpu":0,"profile":"3g.20gb","start":0}]})";
  Pod(over, kube::WatchEventType::kAdded);
  EXPECT_EQ(cache_.Phase("over"), state::PodPhase::kAdded);
  EXPECT_EQ(cache_.Stage("low"), state::BindStage::kForgotten);
  EXPECT_EQ(cache_.Stage("high"), state::BindStage::kWriting);
  EXPECT_TRUE(pods_.collisions().empty());
}

TEST_F(StoresTest, AnUnusableRecordFallsBackToAnEstimate) {
  Node(NodeObject("v100-0", TopologyDocument("dgx1-v100")));
  PodSpec spec{.name = "p", .uid = "u1", .node = "v100-0", .gpus = 1};
  spec.annotations[kube::kAnnotationAllocation] = R"({"v":7})";
  Pod(spec, kube::WatchEventType::kAdded);
  EXPECT_EQ(__builtin_popcount(WholeUsed("v100-0")), 1);
  EXPECT_EQ(pods_.estimated_pods(), 1u);
}

}  // namespace
}  // namespace linkfit::cluster

namespace linkfit::cluster {
namespace {

TEST_F(StoresTest, ARecordMovesEstimatesOutOfItsWay) {
  Node(NodeObject("v100-0", TopologyDocument("dgx1-v100")));
  Pod({.name = "foreign", .uid = "uf", .node = "v100-0", .gpus = 4}, kube::WatchEventType::kAdded);
  const auto guessed = cache_.Find("uf");
  ASSERT_TRUE(guessed.has_value());
  // linkfit's pod holds exactly the GPUs the estimate took.
  PodSpec spec{.name = "mine", .uid = "um", .node = "v100-0", .gpus = 4};
  kube::AllocationRecord record;
  record.pod = "ml/mine";
  record.uid = "um";
  record.node = "v100-0";
  record.devices.gpus = alloc::MaskToIndexes(guessed->gpus);
  spec.annotations[kube::kAnnotationAllocation] = kube::EncodeAllocationRecord(record);
  Pod(spec, kube::WatchEventType::kAdded);
  const auto mine = cache_.Find("um");
  const auto moved = cache_.Find("uf");
  ASSERT_TRUE(mine.has_value() && moved.has_value());
  EXPECT_EQ(mine->gpus, guessed->gpus);
  EXPECT_TRUE(moved->estimated);
  EXPECT_EQ(mine->gpus & moved->gpus, 0);
  EXPECT_EQ(WholeUsed("v100-0"), 0xff);
}

}  // namespace
}  // namespace linkfit::cluster

namespace linkfit::cluster {
namespace {

TEST_F(StoresTest, ANodeThatLeavesAndComesBackGetsItsPodsBack) {
  Node(NodeObject("v100-0", TopologyDocument("dgx1-v100")));
  PodSpec spec{.name = "train", .uid = "u1", .node = "v100-0", .gpus = 2};
  spec.annotations[kube::kAnnotationAllocation] =
      R"({"v":1,"pod":"ml/train","uid":"u1","node":"v100-0","gpus":[6,7]})";
  Pod(spec, kube::WatchEventType::kAdded);
  EXPECT_EQ(WholeUsed("v100-0"), Mask({6, 7}));
  // The annotation is removed (the node is unknown for a while), then published again.
  Node(NodeObject("v100-0", ""), kube::WatchEventType::kModified);
  EXPECT_EQ(Find("v100-0"), nullptr);
  Node(NodeObject("v100-0", TopologyDocument("dgx1-v100")), kube::WatchEventType::kModified);
  EXPECT_EQ(__builtin_popcount(WholeUsed("v100-0")), 2);  // counted again (estimated)...
  Pod(spec);                                              // ...and exact from its next event
  EXPECT_EQ(WholeUsed("v100-0"), Mask({6, 7}));
  EXPECT_EQ(pods_.estimated_pods(), 0u);
}

}  // namespace
}  // namespace linkfit::cluster

namespace linkfit::cluster {
namespace {

TEST_F(StoresTest, PodsWithoutGpusCountAsALoadWithoutARecord) {
  Node(NodeObject("h100-0", TopologyDocument("dgx-h100")));
  for (int i = 0; i < 3; ++i) {
    Pod({.name = "web-" + std::to_string(i),
         .uid = "w" + std::to_string(i),
         .node = "h100-0",
         .cpu = "2",
         .memory = "1Gi"},
        kube::WatchEventType::kAdded);
  }
  EXPECT_EQ(Find("h100-0")->load_pods(), 3);
  EXPECT_EQ(Find("h100-0")->cpu_used_milli(), 6000);
  EXPECT_EQ(Find("h100-0")->memory_used_bytes(), 3LL << 30);
  EXPECT_TRUE(Find("h100-0")->pods().empty());
  EXPECT_FALSE(cache_.Find("w0").has_value());
  // Status updates change nothing; a deletion and a finished pod free their requests.
  Pod({.name = "web-0", .uid = "w0", .node = "h100-0", .cpu = "2", .memory = "1Gi"});
  EXPECT_EQ(Find("h100-0")->load_pods(), 3);
  Pod({.name = "web-1", .uid = "w1", .node = "h100-0", .cpu = "2", .memory = "1Gi"},
      kube::WatchEventType::kDeleted);
  Pod({.name = "web-2",
       .uid = "w2",
       .node = "h100-0",
       .cpu = "2",
       .memory = "1Gi",
       .phase = "Succeeded"});
  EXPECT_EQ(Find("h100-0")->load_pods(), 1);
  EXPECT_EQ(Find("h100-0")->cpu_used_milli(), 2000);
  // A resized pod is counted with its new requests.
  Pod({.name = "web-0", .uid = "w0", .node = "h100-0", .cpu = "3", .memory = "1Gi"});
  EXPECT_EQ(Find("h100-0")->cpu_used_milli(), 3000);
  // A changed node model keeps the load; a node that leaves and comes back counts it again.
  Node(NodeObject("h100-0", TopologyDocument("dgx-h100"), "", "100"),
       kube::WatchEventType::kModified);
  EXPECT_EQ(Find("h100-0")->load_pods(), 1);
  EXPECT_EQ(Find("h100-0")->cpu_used_milli(), 3000);
  Node(NodeObject("h100-0", ""), kube::WatchEventType::kDeleted);
  Node(NodeObject("h100-0", TopologyDocument("dgx-h100")));
  EXPECT_EQ(Find("h100-0")->load_pods(), 1);
  EXPECT_EQ(Find("h100-0")->cpu_used_milli(), 3000);
  Pod({.name = "web-0", .uid = "w0", .node = "h100-0", .cpu = "3", .memory = "1Gi"},
      kube::WatchEventType::kDeleted);
  EXPECT_EQ(Find("h100-0")->load_pods(), 0);
  EXPECT_EQ(Find("h100-0")->cpu_used_milli(), 0);
}

}  // namespace
}  // namespace linkfit::cluster

namespace linkfit::cluster {
namespace {

TEST(BindingBody, CarriesTheRecordAndOnRequestTheNriMarkerOfEachPlannedContainer) {
  const extender::BindTarget target{"train", "ml", "u1", "dgx-0"};
  kube::AllocationRecord record;
  record.pod = "ml/train";
  record.uid = "u1";
  record.node = "dgx-0";
  record.devices.gpus = {4};
  record.containers = {{"train", false, record.devices}, {"logger", false, {}}};
  const std::string allocation = kube::EncodeAllocationRecord(record);
  std::string quoted;
  json::AppendString(quoted, allocation);
  EXPECT_EQ(
      ApiBinder::BindingBody(target, nullptr),
      R"({"apiVersion":"v1","kind":"Binding","metadata":{"name":"train",)"
      R"("namespace":"ml","uid":"u1"},"target":{"apiVersion":"v1","kind":"Node","name":"dgx-0"}})");
  const std::string plain = ApiBinder::BindingBody(target, &record);
  EXPECT_EQ(plain, R"({"apiVersion":"v1","kind":"Binding","metadata":{"name":"train",)"
                   R"("namespace":"ml","uid":"u1","annotations":{"linkfit.io/allocation":)" +
                       quoted + R"(}},"target":{"apiVersion":"v1","kind":"Node","name":"dgx-0"}})");
  const std::string marked = ApiBinder::BindingBody(target, &record, true);
  const auto body = nlohmann::json::parse(marked);
  const auto& annotations = body["metadata"]["annotations"];
  EXPECT_EQ(annotations["required-plugins.noderesource.dev/container.train"], R"(["linkfit"])");
  EXPECT_FALSE(annotations.contains("required-plugins.noderesource.dev/container.logger"));
  EXPECT_EQ(annotations["linkfit.io/allocation"], allocation);
}

}  // namespace
}  // namespace linkfit::cluster
