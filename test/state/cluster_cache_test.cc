// ClusterCache: the pod state machine (Assume -> Confirm -> Remove, Assume -> Forget, AddBound),
// idempotency, snapshots and node replacement.

#include "linkfit/state/cluster_cache.h"

#include <map>
#include <random>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "testing/cluster.h"

namespace linkfit::state {
namespace {

using testing::Mask;

// A placer that always asks for the same GPUs, and counts its calls.
struct FixedPlacer {
  GpuMask gpus = 0;
  int calls = 0;
  ClusterCache::Placer Get() {
    return [this](const NodeState&) -> Result<Assignment> {
      ++calls;
      Assignment a;
      a.pod_namespace = "ns";
      a.pod_name = "pod";
      a.kind = Assignment::Kind::kWhole;
      a.gpus = gpus;
      return a;
    };
  }
};

Assignment BoundWhole(const std::string& uid, const std::string& node, GpuMask gpus) {
  Assignment a;
  a.pod_uid = uid;
  a.pod_namespace = "ns";
  a.pod_name = uid;
  a.node = node;
  a.gpus = gpus;
  return a;
}

class ClusterCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_.UpsertNode(testing::MakeNodeInfo("dgx1", "dgx1-v100"));
    cache_.UpsertNode(testing::MakeNodeInfo("a100", "dgx-a100", Mask({0, 1, 2, 3})));
  }
  // The node's whole GPUs in use (all bits set if the node is unknown, which fails the test).
  GpuMask WholeUsed(const std::string& node) const {
    const SnapshotPtr snapshot = cache_.Snapshot();
    const NodeState* found = snapshot->Find(node);
    if (found == nullptr) {
      ADD_FAILURE() << "unknown node " << node;
      return static_cast<GpuMask>(~0u);
    }
    return found->whole_used();
  }

  ClusterCache cache_;
};

TEST_F(ClusterCacheTest, RemoveBoundRefusesAPodWhoseBindIsInFlight) {
  FixedPlacer placer{Mask({1, 2})};
  ASSERT_TRUE(cache_.Assume("u1", "dgx1", placer.Get()).has_value());
  EXPECT_EQ(cache_.RemoveBound("u1"), RemoveOutcome::kBindInFlight);
  EXPECT_EQ(cache_.Phase("u1"), PodPhase::kAssumed);
  EXPECT_EQ(WholeUsed("dgx1"), Mask({1, 2}));
  cache_.Confirm("u1");
  EXPECT_EQ(cache_.RemoveBound("u1"), RemoveOutcome::kRemoved);
  EXPECT_EQ(WholeUsed("dgx1"), 0);
  EXPECT_EQ(cache_.RemoveBound("u1"), RemoveOutcome::kUnknown);
  EXPECT_EQ(cache_.sizes().added, 0u);
}

TEST_F(ClusterCacheTest, AssumeConfirmRemove) {
  FixedPlacer placer{Mask({0, 3})};
  auto assumed = cache_.Assume("u1", "dgx1", placer.Get());
  ASSERT_TRUE(assumed.has_value()) << assumed.error().message;
  EXPECT_FALSE(assumed->already);
  EXPECT_EQ(assumed->assignment.pod_uid, "u1");
  EXPECT_EQ(assumed->assignment.node, "dgx1");
  EXPECT_EQ(cache_.Phase("u1"), PodPhase::kAssumed);
  EXPECT_EQ(cache_.sizes().assumed, 1u);
  EXPECT_EQ(WholeUsed("dgx1"), Mask({0, 3}));
  EXPECT_EQ(cache_.BoundAssignments().size(), 0u);
  EXPECT_EQ(cache_.BoundAssignments(/*include_assumed=*/true).size(), 1u);

  cache_.Confirm("u1");
  EXPECT_EQ(cache_.Phase("u1"), PodPhase::kAdded);
  EXPECT_EQ(cache_.sizes().assumed, 0u);
  EXPECT_EQ(cache_.sizes().added, 1u);
  ASSERT_EQ(cache_.BoundAssignments().size(), 1u);
  EXPECT_EQ(cache_.BoundAssignments()[0], assumed->assignment);
  cache_.Confirm("u1");  // idempotent
  EXPECT_EQ(cache_.sizes().added, 1u);

  EXPECT_TRUE(cache_.Remove("u1"));
  EXPECT_EQ(cache_.Phase("u1"), PodPhase::kInitial);
  EXPECT_EQ(WholeUsed("dgx1"), 0);
  EXPECT_FALSE(cache_.Find("u1").has_value());
  EXPECT_FALSE(cache_.Remove("u1"));
  EXPECT_EQ(cache_.sizes().added, 0u);
}

TEST_F(ClusterCacheTest, AssumeForgetFreesTheDevices) {
  FixedPlacer placer{Mask({4})};
  ASSERT_TRUE(cache_.Assume("u1", "dgx1", placer.Get()).has_value());
  cache_.Forget("u1");
  EXPECT_EQ(cache_.Phase("u1"), PodPhase::kInitial);
  EXPECT_EQ(WholeUsed("dgx1"), 0);
  EXPECT_EQ(cache_.sizes().assumed, 0u);
  cache_.Forget("u1");  // unknown: no-op
  cache_.Forget("never-seen");
  cache_.Confirm("never-seen");
  // The devices can be assumed again by another pod.
  EXPECT_TRUE(cache_.Assume("u2", "dgx1", placer.Get()).has_value());
}

TEST_F(ClusterCacheTest, AssumeIsIdempotentPerUidAndNode) {
  FixedPlacer placer{Mask({1, 2})};
  auto first = cache_.Assume("u1", "dgx1", placer.Get());
  ASSERT_TRUE(first.has_value());
  auto again = cache_.Assume("u1", "dgx1", placer.Get());
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_TRUE(again->already);
  EXPECT_EQ(again->assignment, first->assignment);
  EXPECT_EQ(placer.calls, 1);  // no second placement
  EXPECT_EQ(cache_.sizes().assumed, 1u);
  // Still idempotent once confirmed.
  cache_.Confirm("u1");
  auto confirmed = cache_.Assume("u1", "dgx1", placer.Get());
  ASSERT_TRUE(confirmed.has_value());
  EXPECT_TRUE(confirmed->already);
  // Another node is an error that names where the pod is.
  auto elsewhere = cache_.Assume("u1", "a100", placer.Get());
  ASSERT_FALSE(elsewhere.has_value());
  EXPECT_NE(elsewhere.error().message.find("already bound to node dgx1"), std::string::npos);
  EXPECT_EQ(WholeUsed("a100"), 0);
}

TEST_F(ClusterCacheTest, AssumeErrorsChangeNothing) {
  FixedPlacer placer{Mask({0})};
  ASSERT_TRUE(cache_.Assume("u1", "dgx1", placer.Get()).has_value());
  const SnapshotPtr before = cache_.Snapshot();
  // Unknown node.
  auto unknown = cache_.Assume("u2", "nowhere", placer.Get());
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(unknown.error().message.find("nowhere"), std::string::npos);
  // The placer's own error.
  auto refused = cache_.Assume("u2", "dgx1", [](const NodeState&) -> Result<Assignment> {
    return MakeError("no longer fits");
  });
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().message, "no longer fits");
  // A placement colliding with the current state (the re-check of bind).
  auto collision = cache_.Assume("u2", "dgx1", placer.Get());
  ASSERT_FALSE(collision.has_value());
  EXPECT_NE(collision.error().message.find("in use"), std::string::npos);
  EXPECT_EQ(cache_.Phase("u2"), PodPhase::kInitial);
  EXPECT_EQ(cache_.Snapshot()->generation(), before->generation());
  EXPECT_EQ(cache_.sizes().assumed, 1u);
}

TEST_F(ClusterCacheTest, ForgetOfAddedIsANoOp) {
  ASSERT_TRUE(cache_.AddBound(BoundWhole("u1", "dgx1", Mask({5}))).has_value());
  EXPECT_EQ(cache_.Phase("u1"), PodPhase::kAdded);
  cache_.Forget("u1");
  EXPECT_EQ(cache_.Phase("u1"), PodPhase::kAdded);
  EXPECT_EQ(WholeUsed("dgx1"), Mask({5}));
  FixedPlacer placer{Mask({6})};
  ASSERT_TRUE(cache_.Assume("u2", "dgx1", placer.Get()).has_value());
  cache_.Confirm("u2");
  cache_.Forget("u2");
  EXPECT_EQ(cache_.Phase("u2"), PodPhase::kAdded);
  EXPECT_EQ(WholeUsed("dgx1"), Mask({5, 6}));
}

TEST_F(ClusterCacheTest, AddBoundRejectsCollisionsAndDuplicates) {
  ASSERT_TRUE(cache_.AddBound(BoundWhole("u1", "dgx1", Mask({0, 1}))).has_value());
  auto collision = cache_.AddBound(BoundWhole("u2", "dgx1", Mask({1})));
  ASSERT_FALSE(collision.has_value());
  EXPECT_NE(collision.error().message.find("in use"), std::string::npos);
  auto duplicate = cache_.AddBound(BoundWhole("u1", "a100", Mask({5})));
  ASSERT_FALSE(duplicate.has_value());
  EXPECT_NE(duplicate.error().message.find("u1"), std::string::npos);
  auto unknown = cache_.AddBound(BoundWhole("u3", "nowhere", Mask({0})));
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(cache_.sizes().added, 1u);
  EXPECT_EQ(WholeUsed("a100"), 0);
}

TEST_F(ClusterCacheTest, SnapshotsTakenBeforeABindAreUnchanged) {
  const SnapshotPtr before = cache_.Snapshot();
  const NodeState* node_before = before->Find("dgx1");
  ASSERT_NE(node_before, nullptr);
  FixedPlacer placer{Mask({2, 3})};
  ASSERT_TRUE(cache_.Assume("u1", "dgx1", placer.Get()).has_value());
  cache_.Confirm("u1");
  EXPECT_EQ(node_before->whole_used(), 0);
  EXPECT_TRUE(node_before->pods().empty());
  EXPECT_EQ(before->Find("dgx1"), node_before);
  const SnapshotPtr after = cache_.Snapshot();
  EXPECT_GT(after->generation(), before->generation());
  ASSERT_NE(after->Find("dgx1"), nullptr);
  EXPECT_EQ(after->Find("dgx1")->whole_used(), Mask({2, 3}));
  // Nodes the bind did not touch are shared, not copied.
  EXPECT_EQ(after->Find("a100"), before->Find("a100"));
  EXPECT_EQ(before->Find("nowhere"), nullptr);
}

TEST_F(ClusterCacheTest, UpsertOfAChangedNodeKeepsFittingPodsAndDropsOthersLoudly) {
  // GPU 0 in MIG mode holds an instance; GPU 5 is held whole.
  Assignment mig = BoundWhole("mig-pod", "a100", Mask({0}));
  mig.kind = Assignment::Kind::kMig;
  const int profile = testing::Catalog().FindPlanner("a100-40gb")->set().FindProfile("3g.20gb");
  mig.mig.push_back({0, alloc::MigInstance{profile, 4}});
  ASSERT_TRUE(cache_.AddBound(mig).has_value());
  ASSERT_TRUE(cache_.AddBound(BoundWhole("whole-pod", "a100", Mask({5}))).has_value());
  FixedPlacer placer{Mask({6})};
  ASSERT_TRUE(cache_.Assume("assumed-pod", "a100", placer.Get()).has_value());

  // Same hardware: nothing dropped.
  EXPECT_EQ(cache_.UpsertNode(testing::MakeNodeInfo("a100", "dgx-a100", Mask({0, 1, 2, 3}))), 0);
  EXPECT_EQ(cache_.sizes().added, 2u);

  // GPU 0 leaves MIG mode: the MIG pod no longer fits and is dropped with an error log.
  ::testing::internal::CaptureStderr();
  const int dropped = cache_.UpsertNode(testing::MakeNodeInfo("a100", "dgx-a100", Mask({1, 2, 3})));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(dropped, 1);
  EXPECT_NE(log.find("mig-pod"), std::string::npos) << log;
  EXPECT_EQ(cache_.Phase("mig-pod"), PodPhase::kInitial);
  EXPECT_EQ(cache_.Phase("whole-pod"), PodPhase::kAdded);
  EXPECT_EQ(cache_.Phase("assumed-pod"), PodPhase::kAssumed);
  const SnapshotPtr snapshot = cache_.Snapshot();
  const NodeState* node = snapshot->Find("a100");
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->whole_used(), Mask({5, 6}));
  EXPECT_EQ(node->pods().size(), 2u);
  EXPECT_EQ(node->info().mig_enabled, Mask({1, 2, 3}));
  EXPECT_EQ(testing::CheckConsistent(*node), "");
  const ClusterCache::Sizes sizes = cache_.sizes();
  EXPECT_EQ(sizes.assumed, 1u);
  EXPECT_EQ(sizes.added, 1u);

  // The assumed pod survives and can still be confirmed or forgotten.
  cache_.Forget("assumed-pod");
  EXPECT_EQ(WholeUsed("a100"), Mask({5}));
}

TEST_F(ClusterCacheTest, RemoveNodeDropsItsPods) {
  ASSERT_TRUE(cache_.AddBound(BoundWhole("u1", "dgx1", Mask({0}))).has_value());
  FixedPlacer placer{Mask({1})};
  ASSERT_TRUE(cache_.Assume("u2", "dgx1", placer.Get()).has_value());
  cache_.RemoveNode("dgx1");
  EXPECT_EQ(cache_.Snapshot()->Find("dgx1"), nullptr);
  EXPECT_NE(cache_.Snapshot()->Find("a100"), nullptr);
  EXPECT_EQ(cache_.Phase("u1"), PodPhase::kInitial);
  EXPECT_EQ(cache_.Phase("u2"), PodPhase::kInitial);
  const ClusterCache::Sizes sizes = cache_.sizes();
  EXPECT_EQ(sizes.nodes, 1u);
  EXPECT_EQ(sizes.assumed, 0u);
  EXPECT_EQ(sizes.added, 0u);
  cache_.RemoveNode("dgx1");  // unknown: no-op
  // The node can come back, empty.
  cache_.UpsertNode(testing::MakeNodeInfo("dgx1", "dgx1-v100"));
  EXPECT_EQ(WholeUsed("dgx1"), 0);
  EXPECT_TRUE(cache_.Assume("u2", "dgx1", placer.Get()).has_value());
}

// What prioritize reads by position instead of the node: its machine kind's number.
std::string CheckByPosition(const Snapshot& snapshot) {
  for (std::size_t position = 0; position < snapshot.size(); ++position) {
    const NodeState& node = *snapshot.NodeAt(position);
    const std::uint32_t kind = snapshot.KindAt(position);
    if (kind >= snapshot.kinds().size() || !(snapshot.kinds()[kind] == node.machine_kind())) {
      return node.name() + ": kind differs";
    }
  }
  return "";
}

NodeInfoPtr NodeWithCpu(const std::string& name, const std::string& fixture, std::int64_t cpu) {
  auto info = std::make_shared<NodeInfo>(*testing::MakeNodeInfo(name, fixture));
  info->cpu_milli = cpu;
  return info;
}

TEST(ClusterCacheKindsTest, NodesOfOneMachineTypeShareAKindNumber) {
  ClusterCache cache;
  cache.UpsertNode(NodeWithCpu("a", "dgx-a100", 64000));
  cache.UpsertNode(NodeWithCpu("b", "dgx-a100", 64000));
  cache.UpsertNode(NodeWithCpu("c", "dgx-a100", 96000));  // another CPU allocatable
  cache.UpsertNode(NodeWithCpu("d", "dgx1-v100", 64000));
  const SnapshotPtr first = cache.Snapshot();
  EXPECT_EQ(CheckByPosition(*first), "");
  EXPECT_EQ(first->kinds().size(), 3u);  // a and b, c, d
  const auto position_of = [](const Snapshot& s, std::string_view name) {
    std::uint32_t found = NameIndex::kNoPosition;
    s.ForEachPosition({name}, [&found](std::size_t, std::uint32_t position) { found = position; });
    return found;
  };
  const auto kind_of = [&position_of](const Snapshot& s, std::string_view name) {
    return s.KindAt(position_of(s, name));
  };
  EXPECT_EQ(kind_of(*first, "a"), kind_of(*first, "b"));
  EXPECT_NE(kind_of(*first, "a"), kind_of(*first, "c"));
  EXPECT_NE(kind_of(*first, "a"), kind_of(*first, "d"));

  // A bind changes the node's state, not its kind; the old snapshot keeps its own.
  FixedPlacer placer{Mask({0})};
  ASSERT_TRUE(cache.Assume("u1", "b", placer.Get()).has_value());
  const SnapshotPtr second = cache.Snapshot();
  EXPECT_EQ(CheckByPosition(*second), "");
  EXPECT_EQ(CheckByPosition(*first), "");
  EXPECT_EQ(kind_of(*second, "b"), kind_of(*first, "b"));
  EXPECT_NE(second->NodeAt(position_of(*second, "b")), first->NodeAt(position_of(*first, "b")));
}

// Changes(from, to) lists every position whose node changed after snapshot `from` up to
// snapshot `to`: checked against the snapshots themselves (a position not listed holds the very
// same state in both) over random binds, loads and upserts, and it says it cannot tell once the
// changes asked about are no longer kept, or after a removal renumbered positions.
TEST(ClusterCacheChangesTest, ChangesListEveryPositionWhoseNodeChanged) {
  ClusterCache cache;
  for (int i = 0; i < 20; ++i)
    cache.UpsertNode(NodeWithCpu("n" + std::to_string(i), "dgx-a100", 1));
  std::mt19937 rng(3);
  std::vector<SnapshotPtr> snapshots = {cache.Snapshot()};
  FixedPlacer placer{Mask({0})};
  int pods = 0;
  for (int step = 0; step < 200; ++step) {
    const int changes = static_cast<int>(rng() % 4);  // 0: the same snapshot again
    for (int c = 0; c < changes; ++c) {
      const std::string node = "n" + std::to_string(rng() % 20);
      switch (rng() % 3) {
        case 0:
          (void)cache.Assume("u" + std::to_string(++pods), node, placer.Get());
          break;
        case 1:
          cache.AddLoad(node, 100, 0);
          break;
        default:
          cache.UpsertNode(NodeWithCpu(node, "dgx-a100", 1 + static_cast<int>(rng() % 3)));
          break;
      }
    }
    snapshots.push_back(cache.Snapshot());
  }
  for (std::size_t a = 0; a < snapshots.size(); a += 7) {
    for (std::size_t b = a; b < snapshots.size(); b += 5) {
      const Snapshot& from = *snapshots[a];
      const Snapshot& to = *snapshots[b];
      std::vector<std::uint32_t> positions;
      ASSERT_TRUE(cache.Changes(from.generation(), to.generation(), positions));
      const std::set<std::uint32_t> listed(positions.begin(), positions.end());
      for (std::uint32_t p = 0; p < to.size(); ++p) {
        if (listed.count(p) == 0) {
          EXPECT_EQ(from.NodeAt(p), to.NodeAt(p)) << "position " << p << " changed unlisted";
        }
      }
    }
  }
  // More changes than the cache keeps: it cannot say for the oldest snapshots, still can for
  // the newest.
  const std::uint64_t old_generation = snapshots.back()->generation();
  for (std::size_t i = 0; i < 2 * ClusterCache::kMaxChanges + 1; ++i) cache.AddLoad("n1", 1, 0);
  const SnapshotPtr after_many = cache.Snapshot();
  std::vector<std::uint32_t> positions;
  EXPECT_FALSE(cache.Changes(old_generation, after_many->generation(), positions));
  cache.AddLoad("n2", 1, 0);
  const SnapshotPtr newest = cache.Snapshot();
  positions.clear();
  ASSERT_TRUE(cache.Changes(after_many->generation(), newest->generation(), positions));
  EXPECT_EQ(positions, std::vector<std::uint32_t>{2});
  // A removal renumbers positions: nothing from before it can be caught up.
  cache.RemoveNode("n0");
  const SnapshotPtr removed = cache.Snapshot();
  EXPECT_FALSE(cache.Changes(newest->generation(), removed->generation(), positions));
  cache.AddLoad("n5", 1, 0);  // now at position 4
  const SnapshotPtr later = cache.Snapshot();
  positions.clear();
  ASSERT_TRUE(cache.Changes(removed->generation(), later->generation(), positions));
  EXPECT_EQ(positions, std::vector<std::uint32_t>{4});
  positions.clear();
  ASSERT_TRUE(cache.Changes(later->generation(), later->generation(), positions));
  EXPECT_TRUE(positions.empty());
}

TEST(ClusterCacheKindsTest, KindsLeftBehindAreDroppedAndRenumbered) {
  ClusterCache cache;
  for (int i = 0; i < 4; ++i) cache.UpsertNode(NodeWithCpu("n" + std::to_string(i), "dgx-a100", 1));
  std::vector<SnapshotPtr> kept;
  // Node n0's allocatable changes again and again: each value is a new kind, and the ones no
  // node holds any more are dropped once there are too many; every snapshot stays as it was.
  for (int change = 2; change < 200; ++change) {
    cache.UpsertNode(NodeWithCpu("n0", "dgx-a100", change));
    const SnapshotPtr snapshot = cache.Snapshot();
    ASSERT_EQ(CheckByPosition(*snapshot), "") << "change " << change;
    EXPECT_LE(snapshot->kinds().size(), 2u * 4u + 16u + 1u) << "change " << change;
    if (change % 37 == 0) kept.push_back(snapshot);
  }
  for (const SnapshotPtr& snapshot : kept) EXPECT_EQ(CheckByPosition(*snapshot), "");
  // A removal renumbers from the nodes left.
  cache.RemoveNode("n2");
  const SnapshotPtr after = cache.Snapshot();
  EXPECT_EQ(CheckByPosition(*after), "");
  EXPECT_EQ(after->kinds().size(), 2u);  // n0's last value, and 1 for n1 and n3
}

}  // namespace
}  // namespace linkfit::state
