// Filter and prioritize decide each distinct GPU state once per call (gpu_state_memo.h). These
// property tests check that this changes nothing: on random clusters where many nodes share a
// state, every node's filter verdict and reason equal FitOnNode's for that node alone, and every
// score equals ScoreNodes' with a fit of its own per node (which no other node can share).
// The verb cache's own unit tests (kept tables, positions, the pool) are in verb_cache_test.cc.

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "extender/extender_testing.h"
#include "extender/gpu_state_memo.h"
#include "extender/verb_cache.h"
#include "linkfit/extender/scoring.h"
#include "linkfit/wire/verb_calls.h"

namespace linkfit::extender {
namespace {

using linkfit::testing::Mask;

class PerStateTest : public ::testing::Test {
 protected:
  // A fine score range: any change of a term shows in the score.
  static ExtenderOptions FineScores() {
    ExtenderOptions options;
    options.score_range = 1000000;
    return options;
  }
  PerStateTest()
      : memo_(RequestDefaults{}), extender_(cache_, FineScores(), binder_, memo_, metrics_) {}

  // `nodes` nodes over three topologies (A100s with GPUs 0-1 in MIG mode), each with a few
  // random holds drawn from a small set so that states repeat, and random CPU use.
  void BuildCluster(std::mt19937& rng, int nodes) {
    const char* fixtures[] = {"dgx1-v100", "dgx-a100", "pcie-8x-l40s-2socket"};
    for (int n = 0; n < nodes; ++n) {
      const std::string fixture = fixtures[rng() % 3];
      const std::string name = "node-" + std::to_string(n);
      auto info = std::make_shared<state::NodeInfo>(
          *linkfit::testing::MakeNodeInfo(name, fixture, fixture == "dgx-a100" ? Mask({0, 1}) : 0));
      info->cpu_milli = 16000 * (1 + static_cast<std::int64_t>(rng() % 8));
      info->memory_bytes = (std::int64_t{64} << 30) * (1 + static_cast<std::int64_t>(rng() % 8));
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

  void CheckFilter(const kube::PodView& pod);
  void CheckPrioritize(const kube::PodView& pod);
  // 200 rounds of random binds, releases, new demand and load, each checked (CheckFilter,
  // CheckPrioritize); returns the number of binds made.
  int CheckRandomChanges(std::mt19937& rng);

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
  std::vector<std::string> sample_;  // when not empty: the names prioritize is asked about
  int filter_calls_ = 0;
};

// Filter's answer for `pod` on every node equals FitOnNode's for that node alone.
void PerStateTest::CheckFilter(const kube::PodView& pod) {
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  const auto request = ParseGpuRequest(pod, RequestDefaults{});
  ASSERT_TRUE(request.has_value()) << pod.uid;
  const wire::ExtenderArgs args = testing::NamesArgs(pod, names_);
  // The wire's reply (built from marks when every name is known) is the lists' reply encoded.
  // Asked first on every other call, so that each of the two meets fits not kept yet.
  std::optional<std::string> reply;
  if (++filter_calls_ % 2 == 0) reply = wire::RunFilterReply(extender_, args);
  const wire::FilterResult result = wire::RunFilter(extender_, args);
  if (!reply) reply = wire::RunFilterReply(extender_, args);
  ASSERT_TRUE(reply.has_value()) << pod.uid;
  EXPECT_EQ(*reply, wire::EncodeFilterResult(result)) << pod.uid;
  if (request->kind == GpuRequest::Kind::kNone) {  // passes everywhere, known or not
    EXPECT_EQ(result.node_names.size(), names_.size());
    return;
  }
  std::map<std::string, std::string> failed, unresolvable;
  for (const wire::NodeFailure& f : result.failed_nodes) failed[std::string(f.node)] = f.reason;
  for (const wire::NodeFailure& f : result.failed_and_unresolvable_nodes) {
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
}

// Prioritize's score for `pod` on every node equals ScoreNodes' with a fit of its own per node.
void PerStateTest::CheckPrioritize(const kube::PodView& pod) {
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  const auto request = ParseGpuRequest(pod, RequestDefaults{});
  ASSERT_TRUE(request.has_value()) << pod.uid;
  const std::vector<std::string>& names = sample_.empty() ? names_ : sample_;
  const auto priorities = wire::Priorities(extender_, testing::NamesArgs(pod, names));
  ASSERT_EQ(priorities.size(), names.size());
  std::deque<NodeFit> fits;  // one per node: nothing shared between nodes
  std::vector<Candidate> candidates;
  std::vector<std::size_t> positions;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const state::NodeState* node = snapshot->Find(names[i]);
    if (node == nullptr) continue;
    NodeFit& fit = fits.emplace_back(FitOnNode(*request, *node, {}));
    if (!fit.fits) continue;
    candidates.push_back({node, &fit});
    positions.push_back(i);
  }
  const std::vector<std::int64_t> expected =
      ScoreNodes(*request, candidates, *memo_.demand().Shapes(), ScoreWeights{},
                 FineScores().score_range, memo_.demand().MigWeights());
  std::vector<std::int64_t> want(names.size(), 0);
  for (std::size_t c = 0; c < candidates.size(); ++c) want[positions[c]] = expected[c];
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(priorities[i].score, want[i]) << pod.uid << " " << names[i];
  }
}

TEST_F(PerStateTest, FilterAnswersEveryNodeAsItsOwnFitDoes) {
  std::mt19937 rng(7);
  BuildCluster(rng, 120);
  names_.push_back("unknown-node");
  for (const kube::PodView& pod : Pods()) CheckFilter(pod);
}

// Filter's failed nodes carry their names' ranks (the reply's map is written in name order by
// them, without reading the names): for every pair, ranks compare as the names do.
TEST_F(PerStateTest, FailedNodesCarryTheirNamesRanks) {
  std::mt19937 rng(13);
  BuildCluster(rng, 120);
  std::shuffle(names_.begin(), names_.end(), rng);
  std::size_t checked = 0;
  for (const kube::PodView& pod : Pods()) {
    const wire::FilterResult result = wire::RunFilter(extender_, testing::NamesArgs(pod, names_));
    std::vector<const wire::NodeFailure*> failures;
    for (const wire::NodeFailure& f : result.failed_nodes) failures.push_back(&f);
    for (const wire::NodeFailure& f : result.failed_and_unresolvable_nodes) failures.push_back(&f);
    for (const wire::NodeFailure* a : failures) {
      ASSERT_NE(a->order, wire::NodeFailure::kUnordered) << pod.uid << " " << a->node;
      for (const wire::NodeFailure* b : failures) {
        EXPECT_EQ(a->order < b->order, a->node < b->node) << a->node << " / " << b->node;
      }
    }
    checked += failures.size();
  }
  EXPECT_GT(checked, 100u);
}

// Filter's counts of passing, failing and unresolvable nodes (what the metrics show).
class FilterCounts final : public MetricsSink {
 public:
  void ObserveRequest(Verb, std::string_view, double) override {}
  void CountFilterNodes(std::uint64_t passed, std::uint64_t failed,
                        std::uint64_t unresolvable) override {
    counts.push_back({passed, failed, unresolvable});
  }
  void SetCacheSizes(std::uint64_t, std::uint64_t, std::uint64_t) override {}
  void SetNodeDevices(std::string_view, std::string_view, double, double) override {}
  void RemoveNode(std::string_view) override {}
  void SetFragmentation(double) override {}
  std::vector<std::array<std::uint64_t, 3>> counts;
};

// The wire's reply in steady state, built from marks by rank (wire::EncodeFilterVerdicts), is the
// lists' reply encoded, byte for byte, and counts the same nodes: names shuffled, some sent twice
// (the failure maps list such a name once, NodeNames as often as it passes), escapes looked for
// or not, on the first call of a request (fits computed) and on the next (fits kept).
TEST_F(PerStateTest, TheWireReplyIsTheListsReplyEncoded) {
  std::mt19937 rng(31);
  BuildCluster(rng, 300);
  std::vector<std::string> names = names_;
  for (int repeat = 0; repeat < 30; ++repeat) names.push_back(names_[rng() % names_.size()]);
  std::shuffle(names.begin(), names.end(), rng);
  FilterCounts wire_counts;
  FilterCounts list_counts;
  Extender marks(cache_, FineScores(), binder_, memo_, wire_counts);
  Extender lists(cache_, FineScores(), binder_, memo_, list_counts);
  for (const bool escape_free : {false, true}) {
    for (const kube::PodView& pod : Pods()) {
      wire::ExtenderArgs args = testing::NamesArgs(pod, names);
      args.node_names_escape_free = escape_free;
      for (int call = 0; call < 2; ++call) {
        const std::string reply = wire::RunFilterReply(marks, args);
        EXPECT_EQ(reply, wire::EncodeFilterResult(wire::RunFilter(lists, args))) << pod.uid;
      }
    }
  }
  EXPECT_EQ(wire_counts.counts, list_counts.counts);
  // Not a test of nothing: some replies fail nodes both ways, and some names twice.
  std::size_t failed = 0;
  std::size_t unresolvable = 0;
  for (const auto& [passed, now, never] : wire_counts.counts) {
    failed += now;
    unresolvable += never;
  }
  EXPECT_GT(failed, 100u);
  EXPECT_GT(unresolvable, 100u);
}

TEST_F(PerStateTest, PrioritizeScoresEveryNodeAsItsOwnFitDoes) {
  std::mt19937 rng(11);
  BuildCluster(rng, 150);
  // Learn a demand first, so that fragmentation and balance have shapes with CPU and memory.
  for (const kube::PodView& pod : Pods()) memo_.Seen(pod);
  for (const kube::PodView& pod : Pods()) CheckPrioritize(pod);
}

int PerStateTest::CheckRandomChanges(std::mt19937& rng) {
  const std::vector<kube::PodView> pods = Pods();
  std::vector<std::string> bound;
  int binds = 0;
  for (int round = 0; round < 200; ++round) {
    const kube::PodView& pod = pods[rng() % pods.size()];
    CheckFilter(pod);
    CheckPrioritize(pod);
    sample_.clear();
    switch (rng() % 5) {
      case 0: {  // bind a pod where it fits
        const kube::PodView& next = pods[rng() % pods.size()];
        const wire::FilterResult passed =
            wire::RunFilter(extender_, testing::NamesArgs(next, names_));
        if (passed.node_names.empty()) break;
        kube::PodView placed = next;
        placed.uid = next.uid + "-" + std::to_string(round);
        placed.name = "pod-" + placed.uid;
        memo_.Seen(placed);  // as the wire handler does: bind knows it
        const std::string node(passed.node_names[rng() % passed.node_names.size()]);
        if (extender_.Bind(testing::BindArgs(placed, node)).empty()) {
          bound.push_back(placed.uid);
          ++binds;
        }
        break;
      }
      case 1:  // release one
        if (!bound.empty()) {
          extender_.Release(bound.back());
          bound.pop_back();
        }
        break;
      case 2:                           // new demand: more of one shape
        for (int k = 0; k < 20; ++k) {  // new pods (a pod seen again weighs nothing more)
          kube::PodView more = pods[rng() % pods.size()];
          more.uid += "-more-" + std::to_string(round) + "-" + std::to_string(k);
          memo_.Seen(more);
        }
        break;
      case 3: {  // CPU and memory of pods linkfit does not place
        const std::string& node = names_[rng() % names_.size()];
        cache_.AddLoad(node, 4000, std::int64_t{16} << 30);
        break;
      }
      default:  // kube-scheduler's sample: a few nodes (another best ring, other medians)
        sample_ = names_;
        std::shuffle(sample_.begin(), sample_.end(), rng);
        sample_.resize(2 + rng() % 10);
        CheckPrioritize(pod);
        break;
    }
    if (::testing::Test::HasFailure()) break;
  }
  return binds;
}

// Answers kept across calls (by node position, dropped for the nodes changed since the last call)
// follow every change: binds and releases change a node's state, new demand changes the shapes, a
// candidate set without the best node changes the best ring. Every call is checked against answers
// computed afresh.
TEST_F(PerStateTest, KeptAnswersFollowEveryChange) {
  std::mt19937 rng(23);
  BuildCluster(rng, 80);
  EXPECT_GE(CheckRandomChanges(rng), 5);
}

// Between two calls, more changes than the cluster cache keeps (kept answers cannot be brought
// up to date: every table starts afresh), and a node removed and added back (every position
// after it moves down one, and the node comes back empty at the end).
TEST_F(PerStateTest, KeptAnswersFollowManyChangesAndRenumberedPositions) {
  std::mt19937 rng(29);
  BuildCluster(rng, 60);
  const std::vector<kube::PodView> pods = Pods();
  for (const kube::PodView& pod : pods) {
    CheckFilter(pod);
    CheckPrioritize(pod);
  }
  // A few nodes change first (their CPU and memory use: scores move), then one node so often
  // that the first changes are no longer kept: only starting afresh answers them right.
  for (const std::size_t n : {std::size_t{0}, std::size_t{7}, std::size_t{9}, std::size_t{30}}) {
    cache_.AddLoad(names_[n], 24000 + 1000 * static_cast<std::int64_t>(n), std::int64_t{96} << 30);
  }
  for (std::size_t i = 0; i <= 2 * state::ClusterCache::kMaxChanges; ++i) {
    cache_.AddLoad(names_[1], 1, 1);
  }
  for (const kube::PodView& pod : pods) {
    CheckFilter(pod);
    CheckPrioritize(pod);
  }
  for (const std::string& name : {names_[3], names_[17]}) {
    const state::NodeState* node = cache_.Snapshot()->Find(name);
    ASSERT_NE(node, nullptr);
    const state::NodeInfoPtr info = node->info_ptr();
    cache_.RemoveNode(name);
    for (const kube::PodView& pod : pods) {
      CheckFilter(pod);
      CheckPrioritize(pod);
    }
    cache_.UpsertNode(info);
    for (const kube::PodView& pod : pods) {
      CheckFilter(pod);
      CheckPrioritize(pod);
    }
  }
  EXPECT_GE(CheckRandomChanges(rng), 5);
}

// Kept fits record their nodes' machine kind numbers, which prioritize counts by fit. A node
// whose allocatable CPU keeps changing leaves kinds behind until the cluster cache renumbers every
// kind (each node placed again): kept answers must follow, at every step and after the renumbering.
TEST_F(PerStateTest, KeptFitsFollowRenumberedKinds) {
  std::mt19937 rng(31);
  BuildCluster(rng, 40);
  const std::vector<kube::PodView> pods = Pods();
  for (const kube::PodView& pod : pods) CheckPrioritize(pod);
  const std::size_t kinds_before = cache_.Snapshot()->kinds().size();
  bool renumbered = false;
  for (int step = 0; step < 120; ++step) {
    const state::NodeState* node = cache_.Snapshot()->Find(names_[5]);
    ASSERT_NE(node, nullptr);
    auto info = std::make_shared<state::NodeInfo>(node->info());
    info->cpu_milli = 1000 * (200 + step);  // a kind no other node has
    cache_.UpsertNode(info);
    const std::size_t kinds = cache_.Snapshot()->kinds().size();
    renumbered = renumbered || kinds < kinds_before + static_cast<std::size_t>(step) + 1;
    if (step % 10 == 0 || kinds <= kinds_before + 1) {
      for (const kube::PodView& pod : pods) CheckPrioritize(pod);
    }
  }
  EXPECT_TRUE(renumbered);
  for (const kube::PodView& pod : pods) CheckPrioritize(pod);
}

// The same node state scores differently under other candidates' figures: a node whose only
// free pair is a PCIe pair is not the best ring beside an idle node, and is alone.
TEST_F(PerStateTest, KeptScoresFollowTheCandidatesBestRing) {
  for (const std::string name : {"idle", "broken"}) {
    auto info =
        std::make_shared<state::NodeInfo>(*linkfit::testing::MakeNodeInfo(name, "dgx1-v100"));
    info->cpu_milli = 64000;
    info->memory_bytes = std::int64_t{512} << 30;
    cache_.UpsertNode(info);
  }
  state::Assignment hold;
  hold.pod_uid = "hold";
  hold.pod_namespace = "ml";
  hold.pod_name = "hold";
  hold.node = "broken";
  hold.gpus = Mask({1, 2, 3, 4, 6, 7});  // leaves 0 and 5: no NVLink between them
  ASSERT_TRUE(cache_.AddBound(hold).has_value());
  const kube::PodView pod = testing::GpuPod("pair", 2);
  names_ = {"idle", "broken"};
  CheckPrioritize(pod);
  const auto beside = wire::Priorities(extender_, testing::NamesArgs(pod, {"idle", "broken"}));
  sample_ = {"broken"};
  CheckPrioritize(pod);
  const auto alone = wire::Priorities(extender_, testing::NamesArgs(pod, {"broken"}));
  EXPECT_GT(alone[0].score, beside[1].score);  // alone, its pair is the best ring on offer
}

// A call whose score inputs (the pod's CPU and memory, the candidates counted by machine kind,
// their best ring and sum, the demand's shapes) equal the last call's answers from the last call's
// scores without deriving the figures again (ScoreInputs); any other call derives them. Calls that
// repeat, alternate, and change one input at a time are each checked against scores computed
// afresh.
TEST_F(PerStateTest, ScoresAreReusedOnlyForEqualInputs) {
  std::mt19937 rng(11);
  BuildCluster(rng, 60);
  const kube::PodView pod = testing::GpuPod("p", 2);
  kube::PodView hungry = testing::GpuPod("h", 2);
  hungry.requests["cpu"] = 24000;  // the same fits under another CPU request: another context
  const std::vector<std::string> all = names_;
  // Other counts by kind (and perhaps another best ring): half the names.
  const std::vector<std::string> half(all.begin(), all.begin() + static_cast<long>(all.size() / 2));
  for (int round = 0; round < 3; ++round) {
    for (const std::vector<std::string>* names : {&all, &all, &half, &all}) {
      sample_ = *names;
      CheckPrioritize(pod);
      CheckPrioritize(pod);  // equal inputs
      CheckPrioritize(hungry);
      CheckPrioritize(pod);  // back to the first inputs, after another call's
    }
    // New demand: other shapes, the same candidates.
    memo_.Seen(testing::GpuPod("demand-" + std::to_string(round), 1 + 3 * round));
  }
}

// Prioritize reads each candidate's score from the table of the last call's figures while it
// counts the candidates, and checks the guess afterwards. Where filter (without reasons: the same
// fit table) has kept fits that no prioritize has scored, a call whose figures equal the last
// call's finds fits for every name and no score for some: those are scored, and nothing else
// changes. Then a call whose figures differ (another kind among the candidates) answers from the
// other table.
TEST_F(PerStateTest, GuessedScoresAreCheckedAndCompleted) {
  for (const std::string name : {"x", "y", "z", "v"}) {
    auto info = std::make_shared<state::NodeInfo>(
        *linkfit::testing::MakeNodeInfo(name, name == "v" ? "dgx1-v100" : "dgx-a100"));
    info->cpu_milli = 64000;
    info->memory_bytes = std::int64_t{512} << 30;
    cache_.UpsertNode(info);
  }
  ExtenderOptions options = FineScores();
  options.fit.explain = false;
  Extender terse(cache_, options, binder_, memo_, metrics_);
  const kube::PodView pod = testing::GpuPod("pair", 2);
  const wire::FilterResult passed =
      wire::RunFilter(terse, testing::NamesArgs(pod, {"x", "y", "z", "v"}));
  ASSERT_EQ(passed.node_names.size(), 4u);
  const auto alone = [&](const std::string& name) {
    return wire::Priorities(terse, testing::NamesArgs(pod, {name}))[0].score;
  };
  const std::int64_t x = alone("x");
  EXPECT_GT(x, 0);
  EXPECT_EQ(alone("y"), x);  // the same figures, a fit kept by filter, no score yet
  EXPECT_EQ(alone("z"), x);
  EXPECT_EQ(alone("x"), x);  // now from the table
  // Beside a V100 the figures change (kinds, best ring): every score as a fresh extender's.
  const std::vector<std::string> mixed = {"v", "y", "nowhere", "x"};
  const auto kept = wire::Priorities(terse, testing::NamesArgs(pod, mixed));
  state::ClusterCache fresh_cache;
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  for (const char* name : {"x", "y", "z", "v"}) {
    const state::NodeState* node = snapshot->Find(name);
    ASSERT_NE(node, nullptr);
    fresh_cache.UpsertNode(node->info_ptr());
  }
  Extender fresh(fresh_cache, options, binder_, memo_, metrics_);
  const auto want = wire::Priorities(fresh, testing::NamesArgs(pod, mixed));
  ASSERT_EQ(kept.size(), want.size());
  for (std::size_t i = 0; i < kept.size(); ++i) {
    EXPECT_EQ(kept[i].host, mixed[i]);
    EXPECT_EQ(kept[i].score, want[i].score) << mixed[i];
  }
  EXPECT_EQ(kept[2].score, 0);  // unknown
  EXPECT_EQ(alone("y"), x);     // and back: the first table again
}

}  // namespace
}  // namespace linkfit::extender
