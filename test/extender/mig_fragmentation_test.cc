// MIG fragmentation: stranded slices per profile on hand-checked A100 40GB states, the learned
// profile weights, the growth of one placement, and prioritize keeping whole GPUs for 7g.

#include "linkfit/extender/mig_fragmentation.h"

#include <cmath>
#include <cstdlib>

#include <gtest/gtest.h>

#include "linkfit/extender/node_fit.h"
#include "linkfit/extender/scoring.h"
#include "testing/cluster.h"

namespace linkfit::extender {
namespace {

using state::Assignment;
using state::NodeState;
using state::NodeStatePtr;
using testing::Mask;

const alloc::MigProfileSet& A100() {
  const alloc::MigProfileSet* set = testing::Catalog().FindSet("a100-40gb");
  EXPECT_NE(set, nullptr);
  static const alloc::MigProfileSet empty;
  return set != nullptr ? *set : empty;
}

const alloc::MigPlanner& A100Planner() {
  const alloc::MigPlanner* planner = testing::Catalog().FindPlanner("a100-40gb");
  if (planner == nullptr) {
    ADD_FAILURE() << "no MIG planner for a100-40gb in config/mig";
    std::abort();
  }
  return *planner;
}

int Profile(const std::string& name) {
  const int profile = A100().FindProfile(name);
  EXPECT_GE(profile, 0) << name;
  return profile;
}

alloc::MigGpuState Gpu(std::initializer_list<std::pair<const char*, int>> instances) {
  std::vector<alloc::MigInstance> list;
  for (const auto& [name, start] : instances) list.push_back({Profile(name), start});
  auto state = alloc::MigGpuState::FromInstances(A100(), list);
  EXPECT_TRUE(state.has_value()) << (state ? "" : state.error().message);
  return state ? *state : alloc::MigGpuState();
}

GpuRequest MigRequest(const std::string& profile, int count = 1) {
  GpuRequest request;
  request.kind = GpuRequest::Kind::kMig;
  request.mig_profile = profile;
  request.count = count;
  return request;
}

MigProfileWeights Named(std::vector<std::pair<std::string, double>> by_name) {
  MigProfileWeights weights;
  weights.by_name = std::move(by_name);  // callers list names in order
  return weights;
}

// A DGX A100 named `name` with GPUs 0 and 1 in MIG mode holding `instances` (gpu, profile, start).
NodeStatePtr A100Node(const std::string& name,
                      std::initializer_list<std::tuple<int, const char*, int>> instances) {
  NodeStatePtr node =
      std::make_shared<const NodeState>(testing::MakeNodeInfo(name, "dgx-a100", Mask({0, 1})));
  int uid = 0;
  for (const auto& [gpu, profile, start] : instances) {
    Assignment a;
    a.pod_uid = name + "-" + std::to_string(uid++);
    a.node = name;
    a.kind = Assignment::Kind::kMig;
    a.gpus = Mask({gpu});
    a.mig.push_back({gpu, alloc::MigInstance{Profile(profile), start}});
    auto next = node->Apply(a);
    EXPECT_TRUE(next.has_value()) << (next ? "" : next.error().message);
    if (next) node = *next;
  }
  return node;
}

TEST(MigFragmentationTest, StrandedSlicesOfOneSmallInstance) {
  // A 1g.5gb at slice 0; free slices 1-7. By hand, from config/mig/a100-40gb.json:
  //   1g.5gb, 1g.5gb+me  starts 0-6: slice 7 has no start                       1
  //   1g.10gb            starts 0,2,4,6 (2 slices): slice 1 lies only in [0,2)   1
  //   2g.10gb            starts 0,2,4: slices 1, 6 and 7 uncovered               3
  //   3g.20gb            starts 0,4: [4,8) free, slices 1-3 uncovered            3
  //   4g.20gb, 7g.40gb   start 0 only, blocked: all 7 free slices                7 each
  const alloc::MigGpuState gpu = Gpu({{"1g.5gb", 0}});
  EXPECT_EQ(A100Planner().StrandedSlices(gpu, Profile("1g.5gb")), 1);
  EXPECT_EQ(A100Planner().StrandedSlices(gpu, Profile("1g.5gb+me")), 1);
  EXPECT_EQ(A100Planner().StrandedSlices(gpu, Profile("1g.10gb")), 1);
  EXPECT_EQ(A100Planner().StrandedSlices(gpu, Profile("2g.10gb")), 3);
  EXPECT_EQ(A100Planner().StrandedSlices(gpu, Profile("3g.20gb")), 3);
  EXPECT_EQ(A100Planner().StrandedSlices(gpu, Profile("4g.20gb")), 7);
  EXPECT_EQ(A100Planner().StrandedSlices(gpu, Profile("7g.40gb")), 7);
  // Uniform weights over the set's 7 profiles: 23 / 7 slices.
  const std::vector<double> uniform = WeightsForSet(A100(), MigProfileWeights{});
  EXPECT_NEAR(MigGpuFragmentation(A100Planner(), gpu, uniform), 23.0 / 7.0, 1e-12);
  // Out of range: nothing.
  EXPECT_EQ(A100Planner().StrandedSlices(gpu, 99), 0);
}

TEST(MigFragmentationTest, StrandedSlicesOfAHalfAndOfExhaustedCompute) {
  // A 3g.20gb at slice 4: slices 0-3 serve every profile but the whole-GPU 7g.
  const alloc::MigGpuState half = Gpu({{"3g.20gb", 4}});
  for (const char* name : {"1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb"}) {
    EXPECT_EQ(A100Planner().StrandedSlices(half, Profile(name)), 0) << name;
  }
  EXPECT_EQ(A100Planner().StrandedSlices(half, Profile("7g.40gb")), 4);
  // Seven 1g.5gb use all 7 compute slices: the free slice 7 serves nothing.
  const alloc::MigGpuState full = Gpu({{"1g.5gb", 0},
                                       {"1g.5gb", 1},
                                       {"1g.5gb", 2},
                                       {"1g.5gb", 3},
                                       {"1g.5gb", 4},
                                       {"1g.5gb", 5},
                                       {"1g.5gb", 6}});
  for (int p = 0; p < static_cast<int>(A100().profiles.size()); ++p) {
    EXPECT_EQ(A100Planner().StrandedSlices(full, p), 1)
        << A100().profiles[static_cast<std::size_t>(p)].name;
  }
  // An empty GPU: slice 7 has no 1g start, no 2g start covers slices 6-7, and the one 4g (start
  // 0) can never use slices 4-7. These never change the growth of a placement on their own.
  const std::vector<std::pair<const char*, int>> empty = {
      {"1g.5gb", 1},  {"1g.5gb+me", 1}, {"1g.10gb", 0}, {"2g.10gb", 2},
      {"3g.20gb", 0}, {"4g.20gb", 4},   {"7g.40gb", 0}};
  for (const auto& [name, stranded] : empty) {
    EXPECT_EQ(A100Planner().StrandedSlices(alloc::MigGpuState(), Profile(name)), stranded) << name;
  }
}

TEST(MigFragmentationTest, WeightsForSetRenormaliseOrFallBackToUniform) {
  const std::vector<double> uniform = WeightsForSet(A100(), MigProfileWeights{});
  ASSERT_EQ(uniform.size(), A100().profiles.size());
  for (double weight : uniform) EXPECT_DOUBLE_EQ(weight, 1.0 / 7.0);
  // 3g.40gb is an H100 name: ignored here; the rest renormalised to 1.
  const std::vector<double> learned =
      WeightsForSet(A100(), Named({{"1g.5gb", 0.3}, {"3g.40gb", 0.4}, {"7g.40gb", 0.3}}));
  EXPECT_DOUBLE_EQ(learned[static_cast<std::size_t>(Profile("1g.5gb"))], 0.5);
  EXPECT_DOUBLE_EQ(learned[static_cast<std::size_t>(Profile("7g.40gb"))], 0.5);
  EXPECT_DOUBLE_EQ(learned[static_cast<std::size_t>(Profile("3g.20gb"))], 0.0);
  // Only names of other sets: uniform.
  EXPECT_EQ(WeightsForSet(A100(), Named({{"3g.40gb", 1.0}})), uniform);
}

TEST(MigFragmentationTest, ProfileStatsCountInstances) {
  MigProfileStats stats;
  EXPECT_TRUE(stats.Weights()->by_name.empty());
  stats.Record(MigRequest("1g.5gb", 3));
  stats.Record(MigRequest("7g.40gb"));
  GpuRequest whole;
  whole.kind = GpuRequest::Kind::kWhole;
  whole.count = 4;
  stats.Record(whole);  // not MIG: ignored
  const MigProfileWeightsPtr weights = stats.Weights();
  ASSERT_EQ(weights->by_name.size(), 2u);
  EXPECT_EQ(weights->by_name[0].first, "1g.5gb");
  EXPECT_DOUBLE_EQ(weights->by_name[0].second, 0.75);
  EXPECT_EQ(weights->by_name[1].first, "7g.40gb");
  EXPECT_DOUBLE_EQ(weights->by_name[1].second, 0.25);
}

TEST(MigFragmentationTest, ProfileStatsBoundTheNamesTheyKeep) {
  MigProfileStats stats;
  for (std::size_t i = 0; i < MigProfileStats::kMaxProfileNames + 10; ++i) {
    stats.Record(MigRequest("p" + std::to_string(i)));
  }
  EXPECT_EQ(stats.Weights()->by_name.size(), MigProfileStats::kMaxProfileNames);
}

TEST(MigFragmentationTest, GrowthOfOnePlacement) {
  // Only 7g.40gb requested: a 1g at slice 0 of an empty GPU strands its other 7 slices.
  const NodeStatePtr node = A100Node("n", {});
  Assignment a;
  a.kind = Assignment::Kind::kMig;
  a.gpus = Mask({1});
  a.mig.push_back({1, alloc::MigInstance{Profile("1g.5gb"), 0}});
  auto weights = std::make_shared<const MigProfileWeights>(Named({{"7g.40gb", 1.0}}));
  MigFragmentationScorer scorer(weights);
  const MigPlacementTerms fresh = scorer.Score(*node, a);
  EXPECT_DOUBLE_EQ(fresh.growth_slices, 7.0);
  EXPECT_DOUBLE_EQ(fresh.fragmentation, 1.0 / (1.0 + std::exp(7.0 / 8.0)));
  EXPECT_DOUBLE_EQ(fresh.gpu_tightness, 1.0 / 8.0);  // 7 of 8 slices left free
  // The same instance next to a 3g at slice 4 fills one of the 4 slices already stranded.
  const NodeStatePtr half = A100Node("h", {{1, "3g.20gb", 4}});
  EXPECT_DOUBLE_EQ(MigFragmentation(*half, *weights), 4.0);
  const MigPlacementTerms partitioned = scorer.Score(*half, a);
  EXPECT_DOUBLE_EQ(partitioned.growth_slices, -1.0);
  EXPECT_GT(partitioned.fragmentation, 0.5);
  EXPECT_DOUBLE_EQ(partitioned.gpu_tightness, 5.0 / 8.0);  // slices 1-3 left free
  // An instance that does not fit the state (a caller bug) is neutral.
  Assignment clash = a;
  clash.mig[0].instance = alloc::MigInstance{Profile("3g.20gb"), 4};
  const MigPlacementTerms neutral = scorer.Score(*half, clash);
  EXPECT_DOUBLE_EQ(neutral.growth_slices, 0.0);
  EXPECT_DOUBLE_EQ(neutral.fragmentation, 0.5);
}

TEST(MigFragmentationTest, ScoreNodesKeepsWholeGpusForSevenG) {
  // `open` holds a 7g on GPU 0: a 1g must partition its idle GPU 1. `room` holds a 4g on GPU 0
  // with slices 4-7 free. `open` is the fuller node (7 of 14 compute slices vs 4), which
  // node-level best fit would choose; the MIG terms put the 1g beside the 4g and keep `open`'s
  // GPU 1 whole for the next 7g.
  const NodeStatePtr open = A100Node("open", {{0, "7g.40gb", 0}});
  const NodeStatePtr room = A100Node("room", {{0, "4g.20gb", 0}});
  const GpuRequest request = MigRequest("1g.5gb");
  std::vector<NodeFit> fits;
  fits.reserve(2);  // the candidates point into it
  std::vector<Candidate> candidates;
  for (const NodeStatePtr& node : {open, room}) {
    const NodeFit& fit = fits.emplace_back(FitOnNode(request, *node, {}));
    ASSERT_TRUE(fit.fits) << fit.reason;
    candidates.push_back({node.get(), &fit});
  }
  ASSERT_EQ(candidates[0].fit->assignment.mig.at(0).gpu, 1);
  ASSERT_EQ(candidates[1].fit->assignment.mig.at(0).gpu, 0);
  const std::vector<Shape> shapes;
  // The MIG term alone, before any profile is learned (uniform weights) and with learned ones.
  const ScoreWeights fragmentation_only{0, 0, 1, 0};
  for (const MigProfileWeightsPtr& weights :
       {MigProfileWeightsPtr(),
        std::make_shared<const MigProfileWeights>(Named({{"1g.5gb", 0.8}, {"7g.40gb", 0.2}}))}) {
    const auto scores = ScoreNodes(request, candidates, shapes, fragmentation_only, 1000, weights);
    EXPECT_LT(scores[0], 500);  // fragmentation grows on `open`
    EXPECT_GT(scores[1], scores[0]);
  }
  // Packing alone is best fit per GPU: 3 slices left beside the 4g beat 7 left on a fresh GPU.
  const auto packing = ScoreNodes(request, candidates, shapes, ScoreWeights{0, 1, 0, 0}, 1000);
  EXPECT_GT(packing[1], packing[0]);
  // With every term at the bench's weights (topology 3, packing 1, fragmentation 3, balance 3).
  const auto scores = ScoreNodes(request, candidates, shapes, ScoreWeights{3, 1, 3, 3}, 140);
  EXPECT_GT(scores[1], scores[0]);
}

}  // namespace
}  // namespace linkfit::extender
