// Extender::Bind (re-check, idempotency, failing binder, unknown pods) and Extender::Preempt
// (topology-aware victim checks, order and PDB counts kept, both request modes).

#include <chrono>
#include <condition_variable>
#include <thread>

#include <gtest/gtest.h>

#include "extender/extender_testing.h"

namespace linkfit::extender {
namespace {

using linkfit::testing::Mask;
using state::PodPhase;
using testing::BindArgs;
using testing::GpuPod;
using testing::NamesArgs;
using testing::NvlinkRequired;

class BindTest : public testing::ExtenderFixture {
 protected:
  void SetUp() override {
    AddNode("h100", "dgx-h100");
    AddNode("dgx1", "dgx1-v100");
  }
  // Filters `pod` against `names` and returns the passing names.
  std::vector<std::string> Filter(const kube::PodView& pod, const std::vector<std::string>& names) {
    const auto result = extender_.Filter(NamesArgs(pod, names));
    return {result.node_names.begin(), result.node_names.end()};
  }
};

TEST_F(BindTest, BindAllocatesAndRecords) {
  const kube::PodView pod = GpuPod("p1", 4, NvlinkRequired());
  ASSERT_EQ(Filter(pod, {"h100"}), std::vector<std::string>{"h100"});
  EXPECT_EQ(extender_.Bind(BindArgs(pod, "h100")), "");
  EXPECT_EQ(cache_.Phase("p1"), PodPhase::kAdded);
  EXPECT_EQ(__builtin_popcount(WholeUsed("h100")), 4);
  ASSERT_EQ(binder_.bind_calls(), 1u);
  const auto [target, assignment] = binder_.last_bind();
  EXPECT_EQ(target.pod_uid, "p1");
  EXPECT_EQ(target.pod_name, "pod-p1");
  EXPECT_EQ(target.pod_namespace, "ml");
  EXPECT_EQ(target.node, "h100");
  EXPECT_EQ(assignment.pod_uid, "p1");
  EXPECT_EQ(assignment.PodKey(), "ml/pod-p1");
  EXPECT_EQ(assignment.gpus, WholeUsed("h100"));
}

TEST_F(BindTest, BindRechecksOnCurrentState) {
  // Both pods pass filter on the same snapshot; the second bind must see the first's GPUs gone.
  const kube::PodView first = GpuPod("p1", 6);
  const kube::PodView second = GpuPod("p2", 4);
  ASSERT_EQ(Filter(first, {"h100"}).size(), 1u);
  ASSERT_EQ(Filter(second, {"h100"}).size(), 1u);
  ASSERT_EQ(extender_.Bind(BindArgs(first, "h100")), "");
  const std::string error = extender_.Bind(BindArgs(second, "h100"));
  EXPECT_NE(error.find("no longer fits on h100"), std::string::npos) << error;
  EXPECT_EQ(cache_.Phase("p2"), PodPhase::kInitial);
  EXPECT_EQ(binder_.bind_calls(), 1u);  // the binder never saw p2
  EXPECT_EQ(__builtin_popcount(WholeUsed("h100")), 6);
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  const state::NodeState* node = snapshot->Find("h100");
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->pods().size(), 1u);
  EXPECT_EQ(node->pods().count("p1"), 1u);
}

TEST_F(BindTest, RepeatedBindIsOneAllocation) {
  const kube::PodView pod = GpuPod("p1", 2);
  ASSERT_EQ(Filter(pod, {"h100", "dgx1"}).size(), 2u);
  ASSERT_EQ(extender_.Bind(BindArgs(pod, "h100")), "");
  const topology::GpuMask used = WholeUsed("h100");
  EXPECT_EQ(extender_.Bind(BindArgs(pod, "h100")), "");
  EXPECT_EQ(WholeUsed("h100"), used);
  EXPECT_EQ(binder_.bind_calls(), 1u);
  EXPECT_EQ(cache_.sizes().added, 1u);
  // The same UID on another node is an error and allocates nothing there.
  const std::string elsewhere = extender_.Bind(BindArgs(pod, "dgx1"));
  EXPECT_NE(elsewhere.find("already bound to node h100"), std::string::npos) << elsewhere;
  EXPECT_EQ(WholeUsed("dgx1"), 0);
}

TEST_F(BindTest, AFailingBinderForgetsTheAssumption) {
  const kube::PodView pod = GpuPod("p1", 8);
  ASSERT_EQ(Filter(pod, {"h100"}).size(), 1u);
  binder_.FailWith("API server said 409 Conflict");
  EXPECT_EQ(extender_.Bind(BindArgs(pod, "h100")), "API server said 409 Conflict");
  EXPECT_EQ(cache_.Phase("p1"), PodPhase::kInitial);
  EXPECT_EQ(WholeUsed("h100"), 0);
  EXPECT_EQ(cache_.sizes().assumed, 0u);
  EXPECT_EQ(cache_.sizes().added, 0u);
  // A retry after the API recovers binds normally.
  binder_.FailWith("");
  EXPECT_EQ(extender_.Bind(BindArgs(pod, "h100")), "");
  EXPECT_EQ(__builtin_popcount(WholeUsed("h100")), 8);
}

TEST_F(BindTest, PodsNeverFilteredAreErrors) {
  const std::string error = extender_.Bind({"stranger", "ml", "u-stranger", "h100"});
  EXPECT_NE(error.find("ml/stranger"), std::string::npos) << error;
  EXPECT_NE(error.find("filter"), std::string::npos) << error;
  EXPECT_EQ(binder_.bind_calls(), 0u);
  EXPECT_EQ(WholeUsed("h100"), 0);
}

TEST_F(BindTest, PodsKnownFromStateNeedNoFilter) {
  // After a restart the request is forgotten but the allocation is in the cache: a repeated bind
  // to the same node succeeds, to another node it fails.
  Hold("p1", "h100", Mask({0, 1}));
  EXPECT_EQ(extender_.Bind({"pod-p1", "ml", "p1", "h100"}), "");
  EXPECT_NE(extender_.Bind({"pod-p1", "ml", "p1", "dgx1"}).find("already bound"),
            std::string::npos);
  EXPECT_EQ(binder_.bind_calls(), 0u);
}

TEST_F(BindTest, PodsWithoutGpusBindWithAnEmptyAssignment) {
  const kube::PodView pod = GpuPod("p1", 0);
  ASSERT_EQ(Filter(pod, {"h100"}).size(), 1u);
  EXPECT_EQ(extender_.Bind(BindArgs(pod, "h100")), "");
  ASSERT_EQ(binder_.bind_calls(), 1u);
  EXPECT_EQ(binder_.last_bind().second.gpus, 0);
  EXPECT_EQ(WholeUsed("h100"), 0);
}

TEST_F(BindTest, PodsAskingOnlyForNicsBindOnModelledNodes) {
  const kube::PodView pod = GpuPod("p1", 0, {{"linkfit.io/nics", "1"}});
  ASSERT_EQ(Filter(pod, {"h100"}).size(), 1u);
  EXPECT_EQ(extender_.Bind(BindArgs(pod, "h100")), "");
  ASSERT_EQ(binder_.bind_calls(), 1u);
  EXPECT_EQ(binder_.last_bind().second.gpus, 0);
  // Unlike a pod without devices, not on a node linkfit does not model.
  const kube::PodView elsewhere = GpuPod("p2", 0, {{"linkfit.io/nics", "1"}});
  ASSERT_EQ(Filter(elsewhere, {"h100"}).size(), 1u);
  EXPECT_NE(extender_.Bind(BindArgs(elsewhere, "ghost")), "");
  EXPECT_EQ(binder_.bind_calls(), 1u);
}

TEST_F(BindTest, ReleaseFreesAndTellsTheBinder) {
  const kube::PodView pod = GpuPod("p1", 2);
  ASSERT_EQ(Filter(pod, {"h100"}).size(), 1u);
  ASSERT_EQ(extender_.Bind(BindArgs(pod, "h100")), "");
  EXPECT_EQ(extender_.Release("p1"), state::RemoveOutcome::kRemoved);
  EXPECT_EQ(WholeUsed("h100"), 0);
  EXPECT_EQ(binder_.released(), std::vector<std::string>{"p1"});
  EXPECT_EQ(extender_.Release("p1"), state::RemoveOutcome::kUnknown);
}

// A Binder whose calls wait until the test opens it, so that a bind can be caught in flight.
class GatedBinder final : public Binder {
 public:
  BindReply Bind(const BindRequest&) override {
    std::unique_lock<std::mutex> lock(mutex_);
    entered_ = true;
    changed_.notify_all();
    // Bounded: a broken test fails instead of hanging.
    if (!changed_.wait_for(lock, std::chrono::seconds(30), [this] { return opened_; })) {
      return {state::BindEvent::kRefused, "gate never opened"};
    }
    if (!fail_with_.empty()) return {state::BindEvent::kRefused, fail_with_};
    return {};
  }
  void Released(const std::string&) override {}
  bool WaitEntered() {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(30), [this] { return entered_; });
  }
  void Open(std::string fail_with) {
    std::lock_guard<std::mutex> lock(mutex_);
    fail_with_ = std::move(fail_with);
    opened_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool entered_ = false;
  bool opened_ = false;
  std::string fail_with_;
};

// One DGX H100 behind a GatedBinder, and the 2-GPU pod p1 filtered onto it.
class BindInFlightTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_.UpsertNode(linkfit::testing::MakeNodeInfo("h100", "dgx-h100"));
    ASSERT_EQ(extender_.Filter(NamesArgs(pod_, {"h100"})).node_names.size(), 1u);
  }

  state::ClusterCache cache_;
  GatedBinder binder_;
  NullMetrics metrics_;
  testing::MemoExtender extender_{cache_, {}, binder_, metrics_};
  const kube::PodView pod_ = GpuPod("p1", 2);
};

TEST_F(BindInFlightTest, ARepeatWhileTheFirstIsInTheBinderIsNotASuccess) {
  std::string first;
  std::thread binding([&] { first = extender_.Bind(BindArgs(pod_, "h100")); });
  ASSERT_TRUE(binder_.WaitEntered());
  // The first bind's write is in flight: a repeat cannot know its outcome.
  const std::string repeat = extender_.Bind(BindArgs(pod_, "h100"));
  EXPECT_NE(repeat.find("still in progress"), std::string::npos) << repeat;
  binder_.Open("API server unavailable");
  binding.join();
  EXPECT_EQ(first, "API server unavailable");
  EXPECT_EQ(cache_.Phase("p1"), PodPhase::kInitial);
  // The scheduler's retry then binds normally.
  binder_.Open("");
  EXPECT_EQ(extender_.Bind(BindArgs(pod_, "h100")), "");
  EXPECT_EQ(cache_.Phase("p1"), PodPhase::kAdded);
}

TEST_F(BindInFlightTest, AReleaseWhileTheBindIsInTheBinderFreesNothing) {
  std::string bound = "not returned";
  std::thread binding([&] { bound = extender_.Bind(BindArgs(pod_, "h100")); });
  ASSERT_TRUE(binder_.WaitEntered());
  // The departure races the bind's write: nothing is freed, the devices stay held.
  EXPECT_EQ(extender_.Release("p1"), state::RemoveOutcome::kBindInFlight);
  EXPECT_EQ(cache_.Phase("p1"), PodPhase::kAssumed);
  EXPECT_EQ(__builtin_popcount(cache_.Snapshot()->Find("h100")->whole_used()), 2);
  binder_.Open("");
  binding.join();
  EXPECT_EQ(bound, "");
  EXPECT_EQ(extender_.Release("p1"), state::RemoveOutcome::kRemoved);
  EXPECT_EQ(cache_.Snapshot()->Find("h100")->whole_used(), 0);
}

// Preempt ---------------------------------------------------------------------------------------

wire::NodeVictims Victims(const std::string& node, std::vector<std::string> uids,
                          std::int64_t pdb = 0) {
  wire::NodeVictims victims;
  victims.node = node;
  for (const std::string& uid : uids) victims.pods.push_back(wire::Victim{uid, 0, std::nullopt});
  victims.num_pdb_violations = pdb;
  return victims;
}

// The same candidates as a cache-mode (MetaVictims) or non-cache-mode (full pods) request.
wire::PreemptionArgs PreemptArgs(const kube::PodView& pod,
                                 const std::vector<wire::NodeVictims>& candidates, bool cache) {
  wire::PreemptionArgs args;
  args.pod = pod;
  if (cache) {
    args.meta_victims_given = true;
    args.node_meta_victims = candidates;
  } else {
    args.victims_given = true;
    args.node_victims = candidates;
    for (wire::NodeVictims& node : args.node_victims) {
      for (wire::Victim& victim : node.pods) {
        victim.priority = 100;
        victim.pod = GpuPod(victim.uid, 1);
      }
    }
  }
  return args;
}

std::vector<std::string> KeptNodes(const std::vector<wire::NodeVictims>& kept) {
  std::vector<std::string> names;
  for (const wire::NodeVictims& node : kept) names.push_back(node.node);
  return names;
}

class PreemptTest : public testing::ExtenderFixture, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    // Two DGX-1s with GPU 0 free. On `far` the only victim holds GPU 5, which has no NVLink to
    // GPU 0; on `near` it holds GPU 1, which does.
    AddNode("far", "dgx1-v100");
    AddNode("near", "dgx1-v100");
    Hold("big-far", "far", Mask({1, 2, 3, 4, 6, 7}));
    Hold("v5", "far", Mask({5}));
    Hold("big-near", "near", Mask({2, 3, 4, 5, 6, 7}));
    Hold("v1", "near", Mask({1}));
  }
  bool cache_mode() const { return GetParam(); }
};

TEST_P(PreemptTest, KeepsOnlyNodesWhereTheVictimsFreeAConnectedSet) {
  const kube::PodView pod = GpuPod("p1", 2, NvlinkRequired());
  const auto kept = extender_.Preempt(
      PreemptArgs(pod, {Victims("far", {"v5"}), Victims("near", {"v1"})}, cache_mode()));
  EXPECT_EQ(KeptNodes(kept), std::vector<std::string>{"near"});
  // Without the NVLink requirement both nodes would do.
  const auto any = extender_.Preempt(PreemptArgs(
      GpuPod("p2", 2), {Victims("far", {"v5"}), Victims("near", {"v1"})}, cache_mode()));
  EXPECT_EQ(KeptNodes(any), (std::vector<std::string>{"far", "near"}));
  // Preempt is read-only: every victim still holds its GPUs.
  EXPECT_EQ(WholeUsed("far"), Mask({1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(cache_.sizes().added, 4u);
}

TEST_P(PreemptTest, KeepsVictimOrderAndPdbViolations) {
  const kube::PodView pod = GpuPod("p1", 4, NvlinkRequired());
  // Evicting v1 and big-near frees the whole of `near`; evicting v5 leaves `far` two GPUs.
  const std::vector<wire::NodeVictims> candidates = {Victims("near", {"v1", "big-near"}, 2),
                                                     Victims("far", {"v5"}, 0)};
  const auto kept = extender_.Preempt(PreemptArgs(pod, candidates, cache_mode()));
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].node, "near");
  ASSERT_EQ(kept[0].pods.size(), 2u);
  EXPECT_EQ(kept[0].pods[0].uid, "v1");
  EXPECT_EQ(kept[0].pods[1].uid, "big-near");
  EXPECT_EQ(kept[0].num_pdb_violations, 2);
}

TEST_P(PreemptTest, NeverKeepsANodeWithoutVictims) {
  // A 1-GPU pod fits on both nodes already; a node offered with no victims is still dropped.
  const kube::PodView pod = GpuPod("p1", 1);
  const auto kept = extender_.Preempt(
      PreemptArgs(pod, {Victims("far", {}), Victims("near", {"v1"})}, cache_mode()));
  EXPECT_EQ(KeptNodes(kept), std::vector<std::string>{"near"});
  for (const wire::NodeVictims& node : kept) EXPECT_FALSE(node.pods.empty());
}

TEST_P(PreemptTest, UnknownNodesVictimsAndBadHints) {
  // Unknown node: dropped. Victims linkfit does not know free nothing.
  const kube::PodView pod = GpuPod("p1", 2, NvlinkRequired());
  const auto kept = extender_.Preempt(
      PreemptArgs(pod, {Victims("ghost", {"v9"}), Victims("near", {"not-here"})}, cache_mode()));
  EXPECT_TRUE(kept.empty());
  // A bad hint keeps nothing.
  const auto bad = extender_.Preempt(PreemptArgs(GpuPod("p2", 2, {{"linkfit.io/gpus", "x"}}),
                                                 {Victims("near", {"v1"})}, cache_mode()));
  EXPECT_TRUE(bad.empty());
  // A pod without GPUs keeps every node that has victims, linkfit has no say.
  const auto none = extender_.Preempt(PreemptArgs(
      GpuPod("p3", 0), {Victims("ghost", {"v9"}), Victims("near", {"v1"})}, cache_mode()));
  EXPECT_EQ(KeptNodes(none), (std::vector<std::string>{"ghost", "near"}));
  // A pod asking only for NICs is linkfit's: a node it does not model is dropped.
  const auto nics = extender_.Preempt(
      PreemptArgs(GpuPod("p4", 0, {{"linkfit.io/nics", "per-gpu"}}),
                  {Victims("ghost", {"v9"}), Victims("near", {"v1"})}, cache_mode()));
  EXPECT_EQ(KeptNodes(nics), std::vector<std::string>{"near"});
}

INSTANTIATE_TEST_SUITE_P(BothModes, PreemptTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& param_info) {
                           return param_info.param ? std::string("MetaVictims")
                                                   : std::string("FullVictims");
                         });

}  // namespace
}  // namespace linkfit::extender
