// NodeState: Apply/Remove of whole GPUs, shares and MIG instances; collisions are errors and
// never change the state; Remove restores exactly what Apply changed.

#include "linkfit/state/node_state.h"

#include <gtest/gtest.h>

#include "testing/cluster.h"

namespace linkfit::state {
namespace {

using testing::CheckConsistent;
using testing::Mask;

Assignment Whole(const std::string& uid, const std::string& node, GpuMask gpus) {
  Assignment a;
  a.pod_uid = uid;
  a.pod_namespace = "ns";
  a.pod_name = uid;
  a.node = node;
  a.kind = Assignment::Kind::kWhole;
  a.gpus = gpus;
  return a;
}

Assignment Shared(const std::string& uid, const std::string& node,
                  std::vector<Assignment::ShareSlot> slots) {
  Assignment a = Whole(uid, node, 0);
  a.kind = Assignment::Kind::kShared;
  unsigned mask = 0;
  for (const auto& slot : slots) mask |= 1u << slot.gpu;
  a.gpus = static_cast<GpuMask>(mask);
  a.shares = std::move(slots);
  return a;
}

Assignment Mig(const std::string& uid, const std::string& node, const NodeInfo& info, int gpu,
               const std::string& profile, int start) {
  Assignment a = Whole(uid, node, Mask({gpu}));
  a.kind = Assignment::Kind::kMig;
  const int index = info.MigPlannerOf(gpu)->set().FindProfile(profile);
  EXPECT_GE(index, 0) << profile;
  a.mig.push_back({gpu, alloc::MigInstance{index, start}});
  return a;
}

// Applies and expects success, returning the new state.
NodeStatePtr MustApply(const NodeStatePtr& state, const Assignment& a) {
  auto next = state->Apply(a);
  EXPECT_TRUE(next.has_value()) << a.pod_uid << ": " << (next ? "" : next.error().message);
  if (!next) return state;
  EXPECT_EQ(CheckConsistent(**next), "");
  return *next;
}

std::string ApplyError(const NodeStatePtr& state, const Assignment& a) {
  auto next = state->Apply(a);
  EXPECT_FALSE(next.has_value()) << a.pod_uid << " was accepted";
  return next ? "" : next.error().message;
}

class NodeStateTest : public ::testing::Test {
 protected:
  NodeStatePtr Dgx1() {
    return std::make_shared<const NodeState>(testing::MakeNodeInfo("dgx1", "dgx1-v100"));
  }
  // A DGX A100 with GPUs 0-3 in MIG mode.
  NodeStatePtr A100Mig() {
    return std::make_shared<const NodeState>(
        testing::MakeNodeInfo("a100", "dgx-a100", Mask({0, 1, 2, 3})));
  }
};

TEST_F(NodeStateTest, WholeGpusAreNeverGivenTwice) {
  const NodeStatePtr empty = Dgx1();
  const NodeStatePtr one = MustApply(empty, Whole("p1", "dgx1", Mask({0, 1})));
  EXPECT_EQ(one->whole_used(), Mask({0, 1}));
  EXPECT_EQ(one->whole_free(), Mask({2, 3, 4, 5, 6, 7}));
  EXPECT_NE(ApplyError(one, Whole("p2", "dgx1", Mask({1, 2}))).find("in use"), std::string::npos);
  const NodeStatePtr two = MustApply(one, Whole("p2", "dgx1", Mask({2, 3})));
  EXPECT_EQ(two->whole_used(), Mask({0, 1, 2, 3}));
  EXPECT_EQ(two->pods().size(), 2u);
  // Values: the earlier states are untouched.
  EXPECT_EQ(empty->whole_used(), 0);
  EXPECT_EQ(one->pods().size(), 1u);
}

TEST_F(NodeStateTest, StructuralErrorsAreRejected) {
  const NodeStatePtr state = MustApply(Dgx1(), Whole("p1", "dgx1", Mask({0})));
  EXPECT_NE(ApplyError(state, Whole("p1", "dgx1", Mask({5}))).find("already on this node"),
            std::string::npos);
  EXPECT_NE(ApplyError(state, Whole("p2", "other", Mask({5}))).find("other"), std::string::npos);
  EXPECT_NE(ApplyError(state, Shared("p2", "dgx1", {})).find("GPUs"), std::string::npos);
  EXPECT_NE(ApplyError(state, Whole("p2", "dgx1", Mask({8}))).find("GPUs"), std::string::npos);
  // A whole-GPU assignment carrying share slots, or shares whose GPUs disagree with the mask,
  // would leave the per-GPU counts wrong: both are refused.
  Assignment mixed = Whole("p3", "dgx1", Mask({4}));
  mixed.shares.push_back({4, 100});
  ApplyError(state, mixed);
  Assignment mismatched = Shared("p4", "dgx1", {{2, 100}});
  mismatched.gpus = Mask({3});
  ApplyError(state, mismatched);
  EXPECT_EQ(state->pods().size(), 1u);
}

TEST_F(NodeStateTest, SharesFillUpToOneThousand) {
  NodeStatePtr state = MustApply(Dgx1(), Shared("s1", "dgx1", {{0, 600}}));
  state = MustApply(state, Shared("s2", "dgx1", {{0, 400}, {1, 250}}));
  EXPECT_EQ(state->shared_milli(0), 1000);
  EXPECT_EQ(state->shared_milli(1), 250);
  EXPECT_EQ(state->pods_on_gpu(0), 2);
  const std::string full = ApplyError(state, Shared("s3", "dgx1", {{0, 1}}));
  EXPECT_NE(full.find("0 milli free, 1 requested"), std::string::npos) << full;
  ApplyError(state, Shared("s3", "dgx1", {{2, 0}}));
  ApplyError(state, Shared("s3", "dgx1", {{2, 1001}}));
  // Shared GPUs are not free for whole use, and whole GPUs take no shares.
  EXPECT_EQ(state->whole_free() & Mask({0, 1}), 0);
  ApplyError(state, Whole("w", "dgx1", Mask({1})));
  state = MustApply(state, Whole("w", "dgx1", Mask({2})));
  EXPECT_NE(ApplyError(state, Shared("s3", "dgx1", {{2, 10}})).find("cannot take shares"),
            std::string::npos);
}

TEST_F(NodeStateTest, ManySmallSharesKeepPerGpuCounts) {
  // 1000 pods of 1/1000 each fit on one GPU; the per-GPU pod count must follow them all.
  NodeStatePtr state = Dgx1();
  for (int i = 0; i < 1000; ++i) {
    auto next = state->Apply(Shared("s" + std::to_string(i), "dgx1", {{3, 1}}));
    ASSERT_TRUE(next.has_value()) << i << ": " << next.error().message;
    state = *next;
  }
  EXPECT_EQ(state->shared_milli(3), 1000);
  EXPECT_EQ(state->pods_on_gpu(3), 1000);
  EXPECT_EQ(CheckConsistent(*state), "");
  for (int i = 0; i < 1000; i += 2) state = state->Remove("s" + std::to_string(i));
  EXPECT_EQ(state->pods_on_gpu(3), 500);
  EXPECT_EQ(state->shared_milli(3), 500);
  EXPECT_EQ(CheckConsistent(*state), "");
}

TEST_F(NodeStateTest, MigInstancesFollowThePlanner) {
  const NodeStatePtr empty = A100Mig();
  const NodeInfo& info = empty->info();
  ASSERT_EQ(info.mig_planners.size(), 1u);
  const alloc::MigPlanner* planner = info.mig_planners.front();
  // Place through the planner, as bind does.
  std::vector<alloc::MigGpuView> views;
  for (int g = 0; g < 4; ++g) views.push_back({g, true, 0, empty->mig_state(g)});
  const int profile = planner->set().FindProfile("3g.20gb");
  ASSERT_GE(profile, 0);
  auto decision = planner->Choose(views, profile);
  ASSERT_TRUE(decision.has_value() && decision->fits);
  NodeStatePtr state =
      MustApply(empty, Mig("m1", "a100", info, decision->gpu, "3g.20gb", decision->start));
  EXPECT_EQ(state->pods_on_gpu(decision->gpu), 1);
  EXPECT_NE(state->mig_state(decision->gpu).slice_mask(), 0);
  // The same slices again collide; the other half of the GPU is free.
  const std::string collision =
      ApplyError(state, Mig("m2", "a100", info, decision->gpu, "3g.20gb", decision->start));
  EXPECT_NE(collision.find("does not fit"), std::string::npos) << collision;
  const int other_start = decision->start == 0 ? 4 : 0;
  state = MustApply(state, Mig("m2", "a100", info, decision->gpu, "3g.20gb", other_start));
  ApplyError(state, Mig("m3", "a100", info, decision->gpu, "1g.5gb", 0));
  // GPUs outside MIG mode take no instances, and MIG GPUs are neither whole nor shareable.
  EXPECT_NE(ApplyError(state, Mig("m3", "a100", info, 5, "1g.5gb", 0)).find("not in MIG mode"),
            std::string::npos);
  ApplyError(state, Whole("w", "a100", Mask({0})));
  ApplyError(state, Shared("s", "a100", {{1, 100}}));
  EXPECT_EQ(state->whole_free(), Mask({4, 5, 6, 7}));
  EXPECT_EQ(state->share_eligible(), Mask({4, 5, 6, 7}));
  // A node without MIG-capable GPUs refuses MIG assignments.
  Assignment on_v100 = Mig("m4", "dgx1", info, 0, "1g.5gb", 0);
  EXPECT_NE(ApplyError(Dgx1(), on_v100).find("MIG"), std::string::npos);
}

TEST_F(NodeStateTest, RemoveRestoresTheStateExactly) {
  const NodeStatePtr base = MustApply(A100Mig(), Whole("keep", "a100", Mask({7})));
  const NodeInfo& info = base->info();
  const std::vector<Assignment> added = {
      Whole("w", "a100", Mask({4, 5})),
      Shared("s", "a100", {{6, 300}}),
      Mig("m", "a100", info, 2, "4g.20gb", 0),
  };
  for (const Assignment& a : added) {
    const NodeStatePtr with = MustApply(base, a);
    const NodeStatePtr without = with->Remove(a.pod_uid);
    EXPECT_EQ(without->whole_used(), base->whole_used()) << a.pod_uid;
    for (int g = 0; g < info.gpu_count(); ++g) {
      EXPECT_EQ(without->shared_milli(g), base->shared_milli(g)) << a.pod_uid << " GPU " << g;
      EXPECT_EQ(without->pods_on_gpu(g), base->pods_on_gpu(g)) << a.pod_uid << " GPU " << g;
      EXPECT_TRUE(without->mig_state(g) == base->mig_state(g)) << a.pod_uid << " GPU " << g;
    }
    EXPECT_EQ(without->pods(), base->pods());
    EXPECT_EQ(CheckConsistent(*without), "");
    // The state with the pod is unchanged by the removal.
    EXPECT_EQ(with->pods().count(a.pod_uid), 1u);
  }
  // Removing an unknown UID returns an equal copy.
  const NodeStatePtr same = base->Remove("nobody");
  EXPECT_EQ(same->pods(), base->pods());
  EXPECT_EQ(same->whole_used(), base->whole_used());
}

TEST_F(NodeStateTest, PodsReadLikeAMapAndShareTheirRecords) {
  NodeStatePtr state = Dgx1();
  for (const char* uid : {"p3", "p1", "p4", "p2"}) {
    state = MustApply(state, Whole(uid, "dgx1", Mask({uid[1] - '0'})));
  }
  // In UID order, as the std::map they replace: /inspect and state files keep their order.
  std::vector<std::string> order;
  for (const auto& [uid, a] : state->pods()) {
    EXPECT_EQ(uid, a.pod_uid);
    order.push_back(uid);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"p1", "p2", "p3", "p4"}));
  EXPECT_EQ(state->pods().find("p3")->second.gpus, Mask({3}));
  EXPECT_EQ(state->pods().at("p2").gpus, Mask({2}));
  EXPECT_TRUE(state->pods().find("p9") == state->pods().end());
  EXPECT_EQ(state->pods().count("p9"), 0u);
  // Successors hold the same records, not copies; a shared record can be applied as it is.
  const NodeStatePtr without = state->Remove("p2");
  EXPECT_EQ(without->pods().size(), 3u);
  EXPECT_EQ(without->pods().records()[0], state->pods().records()[0]);
  const AssignmentPtr p2 = state->pods().records()[1];
  auto again = without->Apply(p2);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ((*again)->pods().records()[1], p2);
  EXPECT_EQ((*again)->pods(), state->pods());
}

TEST_F(NodeStateTest, UsedGpuEquivalentsCountsEveryKind) {
  NodeStatePtr state = MustApply(A100Mig(), Whole("w", "a100", Mask({4, 5})));
  state = MustApply(state, Shared("s", "a100", {{6, 500}}));
  state = MustApply(state, Mig("m", "a100", state->info(), 0, "7g.40gb", 0));
  EXPECT_DOUBLE_EQ(state->UsedGpuEquivalents(), 2.0 + 0.5 + 1.0);
}

TEST_F(NodeStateTest, NodesAlikeInTheirGpusShareOneGpuState) {
  // Different names, pods and CPU: the same GPUs held and shared, so the same GPU state.
  NodeStatePtr a = std::make_shared<const NodeState>(testing::MakeNodeInfo("a", "dgx1-v100"));
  NodeStatePtr b = std::make_shared<const NodeState>(testing::MakeNodeInfo("b", "dgx1-v100"));
  a = MustApply(a, Whole("a1", "a", Mask({0, 1})));
  Assignment b1 = Whole("b1", "b", Mask({0, 1}));
  b1.cpu_milli = 8000;
  b = MustApply(b, b1);
  a = MustApply(a, Shared("a2", "a", {{5, 250}}));
  b = MustApply(b, Shared("b2", "b", {{5, 250}}));
  EXPECT_TRUE(NodeState::SameGpuState(*a, *b));
  EXPECT_EQ(a->gpu_state_hash(), b->gpu_state_hash());
  EXPECT_EQ(a->whole_free(), b->whole_free());
  EXPECT_DOUBLE_EQ(a->UsedGpuEquivalents(), 2.25);
  // Any difference in what a fit or a score reads of the GPUs makes them differ.
  const NodeStatePtr more_shared = MustApply(b, Shared("b3", "b", {{5, 250}}));
  const NodeStatePtr other_gpu =
      MustApply(std::make_shared<const NodeState>(testing::MakeNodeInfo("c", "dgx1-v100")),
                Whole("c1", "c", Mask({0, 2})));
  const NodeStatePtr other_topology =
      MustApply(std::make_shared<const NodeState>(testing::MakeNodeInfo("d", "dgx-a100")),
                Whole("d1", "d", Mask({0, 1})));
  for (const NodeStatePtr& other : {more_shared, other_gpu, other_topology}) {
    EXPECT_FALSE(NodeState::SameGpuState(*a, *other));
    EXPECT_NE(a->gpu_state_hash(), other->gpu_state_hash());
  }
  // Removing what differs makes them alike again; the summary follows every change.
  const NodeStatePtr back = more_shared->Remove("b3");
  EXPECT_TRUE(NodeState::SameGpuState(*a, *back));
  EXPECT_EQ(a->gpu_state_hash(), back->gpu_state_hash());
  EXPECT_EQ(b->cpu_used_milli(), 8000);
}

TEST_F(NodeStateTest, MigInstancesAndPodCountsArePartOfTheGpuState) {
  const NodeStatePtr empty_a =
      std::make_shared<const NodeState>(testing::MakeNodeInfo("a", "dgx-a100", Mask({0, 1, 2, 3})));
  const NodeStatePtr empty_b =
      std::make_shared<const NodeState>(testing::MakeNodeInfo("b", "dgx-a100", Mask({0, 1, 2, 3})));
  EXPECT_TRUE(NodeState::SameGpuState(*empty_a, *empty_b));
  // Another MIG configuration is another state.
  const NodeStatePtr fewer_mig =
      std::make_shared<const NodeState>(testing::MakeNodeInfo("c", "dgx-a100", Mask({0, 1})));
  EXPECT_FALSE(NodeState::SameGpuState(*empty_a, *fewer_mig));
  const NodeStatePtr a = MustApply(empty_a, Mig("m", "a", empty_a->info(), 0, "1g.5gb", 0));
  EXPECT_FALSE(NodeState::SameGpuState(*a, *empty_b));
  const NodeStatePtr b = MustApply(empty_b, Mig("m", "b", empty_b->info(), 0, "1g.5gb", 0));
  EXPECT_TRUE(NodeState::SameGpuState(*a, *b));
  // Same slices used, another instance: not alike.
  const NodeStatePtr c = MustApply(empty_b, Mig("m", "b", empty_b->info(), 0, "1g.5gb", 1));
  EXPECT_FALSE(NodeState::SameGpuState(*a, *c));
  // Two pods sharing a GPU against one pod with both shares: the same milli, other pod counts.
  const NodeStatePtr two =
      MustApply(MustApply(empty_a, Shared("s1", "a", {{5, 250}})), Shared("s2", "a", {{5, 250}}));
  const NodeStatePtr one = MustApply(empty_b, Shared("s1", "b", {{5, 500}}));
  EXPECT_FALSE(NodeState::SameGpuState(*two, *one));
}

}  // namespace
}  // namespace linkfit::state
