// Filter and prioritize decide each distinct GPU state once per call (gpu_state_memo.h). These
// property tests check that this changes nothing: on random clusters where many nodes share a
// state, every node's filter verdict and reason equal FitOnNode's for that node alone, and every
// score equals ScoreNodes' with a fit of its own per node (which no other node can share).

#include <deque>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "extender/extender_testing.h"
#include "extender/gpu_state_memo.h"
#include "linkfit/extender/scoring.h"

namespace linkfit::extender {
namespace {

using linkfit::testing::Mask;

class PerStateTest : public ::testing::Test {
 protected:
  PerStateTest() : memo_(RequestDefaults{}), extender_(cache_, {}, binder_, memo_, metrics_) {}

  // `nodes` nodes over three topologies (A100s with GPUs 0-1 in MIG mode), each with a few
  // random holds drawn from a small set so that states repeat, and random CPU use.
  void BuildCluster(std::mt19937& rng, int nodes) {
    const char* fixtures[] = {"dgx1-v100", "dgx-a100", "pcie-8x-l40s-2socket"};
    for (int n = 0; n < nodes; ++n) {
      const std::string fixture = fixtures[rng() % 3];
      const std::string name = "node-" + std::to_string(n);
      auto info = std::make_shared<state::NodeInfo>(
          *linkfit::testing::MakeNodeInfo(name, fixture, fixture == "dgx-a100" ? Mask({0, 1}) : 0));
      info->cpu_milli = 64000;
      info->memory_bytes = std::int64_t{512} << 30;
      cache_.UpsertNode(info);
      names_.push_back(name);
      const int holds = static_cast<int>(rng() % 3);
      for (int h = 0; h < holds; ++h) {
        state::Assignment a;
        a.pod_uid = name + "-" + std::to_string(h);
        a.pod_namespace = "ml";
        a.pod_name = a.pod_uid;
        a.node = name;
        a.cpu_milli = static_cast<std::int64_t>(rng() % 4) * 8000;
        a.memory_bytes = static_cast<std::int64_t>(rng() % 4) << 35;
        if (rng() % 3 == 0) {
          const int gpu = 2 + static_cast<int>(rng() % 2);
          a.kind = state::Assignment::Kind::kShared;
          a.gpus = Mask({gpu});
          a.shares = {{gpu, 250}};
        } else {
          a.gpus = Mask({4 + static_cast<int>(rng() % 4)});
          if (h == 0 && rng() % 2 == 0) a.gpus = Mask({4, 5, 6, 7});
        }
        (void)cache_.AddBound(a);  // a collision with an earlier hold is just skipped
      }
    }
  }

  static std::vector<kube::PodView> Pods() {
    std::vector<kube::PodView> pods;
    for (int gpus : {1, 2, 4, 8}) {
      pods.push_back(testing::GpuPod("w" + std::to_string(gpus), gpus));
      pods.push_back(
          testing::GpuPod("n" + std::to_string(gpus), gpus, {{"linkfit.io/closeness", "nvlink"}}));
    }
    pods.push_back(testing::GpuPod("r2", 2, testing::NvlinkRequired()));
    kube::PodView shared = testing::GpuPod("s", 0);
    shared.requests["linkfit.io/gpu-share"] = 250 * 1000;
    pods.push_back(shared);
    kube::PodView mig = testing::GpuPod("m", 0);
    mig.requests["nvidia.com/mig-1g.5gb"] = 1000;
    pods.push_back(mig);
    pods.push_back(testing::GpuPod("none", 0));
    return pods;
  }

  state::ClusterCache cache_;
  testing::FakeBinder binder_;
  NullMetrics metrics_;
  PodMemo memo_;
  Extender extender_;
  std::vector<std::string> names_;
};

TEST_F(PerStateTest, FilterAnswersEveryNodeAsItsOwnFitDoes) {
  std::mt19937 rng(7);
  BuildCluster(rng, 120);
  names_.push_back("unknown-node");
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  for (const kube::PodView& pod : Pods()) {
    const auto request = ParseGpuRequest(pod, RequestDefaults{});
    ASSERT_TRUE(request.has_value()) << pod.uid;
    const kube::FilterResult result = extender_.Filter(testing::NamesArgs(pod, names_));
    if (request->kind == GpuRequest::Kind::kNone) {  // passes everywhere, known or not
      EXPECT_EQ(result.node_names.size(), names_.size());
      continue;
    }
    std::map<std::string, std::string> failed, unresolvable;
    for (const kube::NodeFailure& f : result.failed_nodes) failed[std::string(f.node)] = f.reason;
    for (const kube::NodeFailure& f : result.failed_and_unresolvable_nodes) {
      unresolvable[std::string(f.node)] = f.reason;
    }
    std::size_t passed = 0;
    for (const std::string& name : names_) {
      const state::NodeState* node = snapshot->Find(name);
      if (node == nullptr) {
        EXPECT_EQ(unresolvable.count(name), 1u) << name;
        continue;
      }
      const NodeFit fit = FitOnNode(*request, *node, {});
      if (fit.fits) {
        ++passed;
        EXPECT_EQ(failed.count(name) + unresolvable.count(name), 0u) << pod.uid << " " << name;
      } else if (fit.unresolvable) {
        EXPECT_EQ(unresolvable[name], fit.reason) << pod.uid << " " << name;
      } else {
        EXPECT_EQ(failed[name], fit.reason) << pod.uid << " " << name;
      }
    }
    EXPECT_EQ(result.node_names.size(), passed) << pod.uid;
    EXPECT_GT(passed, 0u) << pod.uid;  // the cluster leaves room for every pod
  }
}

TEST_F(PerStateTest, PrioritizeScoresEveryNodeAsItsOwnFitDoes) {
  std::mt19937 rng(11);
  BuildCluster(rng, 150);
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  // Learn a demand first, so that fragmentation and balance have shapes with CPU and memory.
  for (const kube::PodView& pod : Pods()) memo_.Observe(pod, /*filtered=*/true);
  for (const kube::PodView& pod : Pods()) {
    const auto request = ParseGpuRequest(pod, RequestDefaults{});
    ASSERT_TRUE(request.has_value()) << pod.uid;
    const auto priorities = extender_.Prioritize(testing::NamesArgs(pod, names_));
    ASSERT_EQ(priorities.size(), names_.size());
    std::deque<NodeFit> fits;  // one per node: nothing shared between nodes
    std::vector<Candidate> candidates;
    std::vector<std::size_t> positions;
    for (std::size_t i = 0; i < names_.size(); ++i) {
      const state::NodeState* node = snapshot->Find(names_[i]);
      ASSERT_NE(node, nullptr);
      NodeFit& fit = fits.emplace_back(FitOnNode(*request, *node, {}));
      if (!fit.fits) continue;
      candidates.push_back({node, &fit});
      positions.push_back(i);
    }
    const std::vector<std::int64_t> expected =
        ScoreNodes(*request, candidates, *memo_.demand().Shapes(), ScoreWeights{}, 140,
                   memo_.demand().MigWeights());
    std::vector<std::int64_t> want(names_.size(), 0);
    for (std::size_t c = 0; c < candidates.size(); ++c) want[positions[c]] = expected[c];
    for (std::size_t i = 0; i < names_.size(); ++i) {
      EXPECT_EQ(priorities[i].score, want[i]) << pod.uid << " " << names_[i];
    }
  }
}

TEST(GpuStateMemoTest, ComputesOncePerDistinctStateAndExtra) {
  auto a =
      std::make_shared<const state::NodeState>(linkfit::testing::MakeNodeInfo("a", "dgx1-v100"));
  auto b =
      std::make_shared<const state::NodeState>(linkfit::testing::MakeNodeInfo("b", "dgx1-v100"));
  auto c =
      std::make_shared<const state::NodeState>(linkfit::testing::MakeNodeInfo("c", "dgx-a100"));
  GpuStateMemo<int> memo;
  int computed = 0;
  const auto value = [&] { return ++computed; };
  EXPECT_EQ(memo.Of(*a, {}, value), 1);
  EXPECT_EQ(memo.Of(*b, {}, value), 1);  // alike: a's value
  EXPECT_EQ(memo.Of(*c, {}, value), 2);
  EXPECT_EQ(memo.Of(*a, {1, 0, nullptr}, value), 3);  // another extra
  EXPECT_EQ(memo.Of(*b, {1, 0, nullptr}, value), 3);
  // Many distinct extras grow the table; earlier values stay where they were.
  const int& first = memo.Of(*a, {}, value);
  for (std::uint64_t e = 2; e < 2000; ++e) memo.Of(*c, {e, e, nullptr}, value);
  EXPECT_EQ(first, 1);
  EXPECT_EQ(memo.Of(*c, {1999, 1999, nullptr}, value), computed);
  EXPECT_EQ(memo.size(), 2001u);
}

}  // namespace
}  // namespace linkfit::extender
