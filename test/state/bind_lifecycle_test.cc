// The bind lifecycle: every arrow of bind_lifecycle.h's diagram, written out again here from the
// diagram, against NextBindStep (every other pair is an error, every event after the end is
// late); then each arrow carried out on a real ClusterCache from a pod driven to its stage.

#include "linkfit/state/bind_lifecycle.h"

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "linkfit/state/cluster_cache.h"
#include "testing/cluster.h"

namespace linkfit::state {
namespace {

using enum BindStage;
using enum BindEvent;
using testing::Mask;

struct Arrow {
  BindStage from;
  BindEvent event;
  BindStage to;
  BindEffect effect;
  std::string outcome;
};

// The diagram, arrow by arrow.
const std::vector<Arrow>& Diagram() {
  static const std::vector<Arrow> arrows = {
      {kAssumed, kWrite, kWriting, BindEffect::kNone, ""},
      {kAssumed, kRecordTookDevices, kForgotten, BindEffect::kForget, "displaced"},
      {kWriting, kRecordTookDevices, kForgotten, BindEffect::kForget, "displaced"},
      {kUnknown, kRecordTookDevices, kForgotten, BindEffect::kForget, "displaced"},
      {kWriting, kRecorded, kConfirmed, BindEffect::kConfirm, "bound"},
      {kWriting, kCreated, kAccepted, BindEffect::kNone, "bound"},
      {kWriting, kConflictSameRecord, kAccepted, BindEffect::kNone, "bound"},
      {kWriting, kConflictOtherRecord, kReplaced, BindEffect::kForget, "replaced"},
      {kWriting, kLeaseRefused, kForgotten, BindEffect::kForget, "held"},
      {kWriting, kRefused, kForgotten, BindEffect::kForget, "rejected"},
      {kWriting, kNoAnswer, kUnknown, BindEffect::kNone, "unknown"},
      {kUnknown, kReadSameRecord, kAccepted, BindEffect::kNone, "settled"},
      {kUnknown, kReadOtherRecord, kReplaced, BindEffect::kForget, "settled"},
      {kUnknown, kReadNotBound, kForgotten, BindEffect::kForget, "settled"},
      {kUnknown, kReadFailed, kUnknown, BindEffect::kNone, ""},
      {kAssumed, kWatchBoundSameRecord, kConfirmed, BindEffect::kConfirm, ""},
      {kWriting, kWatchBoundSameRecord, kConfirmed, BindEffect::kConfirm, "bound"},
      {kUnknown, kWatchBoundSameRecord, kConfirmed, BindEffect::kConfirm, "settled"},
      {kAccepted, kWatchBoundSameRecord, kConfirmed, BindEffect::kConfirm, ""},
      {kAssumed, kWatchBoundOtherRecord, kReplaced, BindEffect::kNone, ""},
      {kWriting, kWatchBoundOtherRecord, kReplaced, BindEffect::kNone, "replaced"},
      {kUnknown, kWatchBoundOtherRecord, kReplaced, BindEffect::kNone, "settled"},
      {kAccepted, kWatchBoundOtherRecord, kReplaced, BindEffect::kNone, ""},
      {kAssumed, kWatchDeleted, kForgotten, BindEffect::kRemove, ""},
      {kWriting, kWatchDeleted, kForgotten, BindEffect::kRemove, "rejected"},
      {kUnknown, kWatchDeleted, kForgotten, BindEffect::kRemove, "settled"},
      {kAccepted, kWatchDeleted, kForgotten, BindEffect::kRemove, ""},
  };
  return arrows;
}

constexpr BindStage kStages[] = {kAssumed,   kWriting,  kAccepted, kUnknown,
                                 kConfirmed, kReplaced, kForgotten};
constexpr BindEvent kEvents[] = {kWrite,
                                 kRecordTookDevices,
                                 kRecorded,
                                 kCreated,
                                 kConflictSameRecord,
                                 kConflictOtherRecord,
                                 kLeaseRefused,
                                 kRefused,
                                 kNoAnswer,
                                 kReadSameRecord,
                                 kReadOtherRecord,
                                 kReadNotBound,
                                 kReadFailed,
                                 kWatchBoundSameRecord,
                                 kWatchBoundOtherRecord,
                                 kWatchDeleted};

TEST(BindLifecycleTest, EveryPairIsAnArrowOfTheDiagramLateOrAnError) {
  std::map<std::pair<BindStage, BindEvent>, const Arrow*> arrows;
  for (const Arrow& arrow : Diagram()) arrows[{arrow.from, arrow.event}] = &arrow;
  for (const BindStage from : kStages) {
    for (const BindEvent event : kEvents) {
      SCOPED_TRACE(std::string(StageName(from)) + " + " + std::string(EventName(event)));
      const Result<BindStep> step = NextBindStep(from, event);
      if (BindEnded(from)) {
        ASSERT_TRUE(step.has_value());
        EXPECT_TRUE(step->late);
        EXPECT_EQ(step->stage, from);
        EXPECT_EQ(step->effect, BindEffect::kNone);
        EXPECT_TRUE(step->outcome.empty());
        continue;
      }
      const auto arrow = arrows.find({from, event});
      if (arrow == arrows.end()) {
        ASSERT_FALSE(step.has_value());
        EXPECT_NE(step.error().message.find(std::string(EventName(event))), std::string::npos);
        EXPECT_NE(step.error().message.find(std::string(StageName(from))), std::string::npos);
        continue;
      }
      ASSERT_TRUE(step.has_value()) << step.error().message;
      EXPECT_FALSE(step->late);
      EXPECT_EQ(step->stage, arrow->second->to);
      EXPECT_EQ(step->effect, arrow->second->effect);
      EXPECT_EQ(step->outcome, arrow->second->outcome);
    }
  }
}

TEST(BindLifecycleTest, EveryBindThatLeavesWritingCountsOneEnding) {
  // Each path from Writing to an end counts one ending, whichever of the reply, the settler and
  // the watch ends it (later events are late and count nothing); "unknown" is counted on the
  // way, when the reply leaves the outcome open.
  const std::vector<std::vector<BindEvent>> paths = {
      {kCreated, kWatchBoundSameRecord},
      {kWatchBoundSameRecord, kCreated},
      {kNoAnswer, kReadSameRecord, kWatchBoundSameRecord},
      {kNoAnswer, kWatchBoundSameRecord, kReadSameRecord},
      {kNoAnswer, kReadFailed, kReadNotBound},
      {kWatchBoundOtherRecord, kConflictOtherRecord},
      {kConflictOtherRecord, kWatchBoundOtherRecord},
      {kWatchDeleted, kCreated},
      {kRefused},
      {kLeaseRefused},
      {kRecorded},
  };
  for (const auto& path : paths) {
    BindStage stage = kWriting;
    int endings = 0;
    int unknown = 0;
    for (const BindEvent event : path) {
      const Result<BindStep> step = NextBindStep(stage, event);
      ASSERT_TRUE(step.has_value()) << step.error().message;
      (step->outcome == "unknown" ? unknown : endings) += step->outcome.empty() ? 0 : 1;
      stage = step->stage;
    }
    EXPECT_TRUE(BindEnded(stage)) << StageName(stage);
    EXPECT_EQ(endings, 1) << EventName(path.front());
    EXPECT_EQ(unknown, path.front() == kNoAnswer ? 1 : 0) << EventName(path.front());
  }
}

class CountingMetrics final : public MetricsSink {
 public:
  void ObserveRequest(Verb, std::string_view, double) override {}
  void CountFilterNodes(std::uint64_t, std::uint64_t, std::uint64_t) override {}
  void SetCacheSizes(std::uint64_t, std::uint64_t, std::uint64_t) override {}
  void SetNodeDevices(std::string_view, std::string_view, double, double) override {}
  void RemoveNode(std::string_view) override {}
  void SetFragmentation(double) override {}
  void CountBindOutcome(std::string_view outcome) override { ++outcomes[std::string(outcome)]; }
  std::map<std::string, int> outcomes;
};

// A pod on a DGX-1 driven to `stage` through the lifecycle.
class CacheLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override { cache_.UpsertNode(testing::MakeNodeInfo("dgx1", "dgx1-v100")); }
  void DriveTo(BindStage stage) {
    auto assumed = cache_.Assume("p", "dgx1", [](const NodeState&) -> Result<Assignment> {
      Assignment a;
      a.pod_namespace = "ns";
      a.pod_name = "p";
      a.gpus = Mask({0, 1});
      return a;
    });
    ASSERT_TRUE(assumed.has_value()) << assumed.error().message;
    std::vector<BindEvent> path;
    if (stage != kAssumed) path.push_back(kWrite);
    if (stage == kAccepted) path.push_back(kCreated);
    if (stage == kUnknown) path.push_back(kNoAnswer);
    for (const BindEvent event : path) ASSERT_TRUE(cache_.Advance("p", event).has_value());
    ASSERT_EQ(cache_.Stage("p"), stage);
    metrics_.outcomes.clear();
  }
  GpuMask WholeUsed() const {
    const SnapshotPtr snapshot = cache_.Snapshot();
    const NodeState* node = snapshot->Find("dgx1");
    return node != nullptr ? node->whole_used() : static_cast<GpuMask>(~0u);
  }

  CountingMetrics metrics_;
  ClusterCache cache_{&metrics_};
};

TEST_F(CacheLifecycleTest, EachArrowCarriesOutItsEffectAndCountsItsOutcome) {
  for (const Arrow& arrow : Diagram()) {
    SCOPED_TRACE(std::string(StageName(arrow.from)) + " + " + std::string(EventName(arrow.event)));
    cache_.Remove("p");
    DriveTo(arrow.from);
    const Result<BindStep> step = cache_.Advance("p", arrow.event);
    ASSERT_TRUE(step.has_value()) << step.error().message;
    switch (arrow.effect) {
      case BindEffect::kNone:
        EXPECT_EQ(cache_.Phase("p"), PodPhase::kAssumed);
        EXPECT_EQ(cache_.Stage("p"), arrow.to);
        EXPECT_EQ(WholeUsed(), Mask({0, 1}));
        break;
      case BindEffect::kConfirm:
        EXPECT_EQ(cache_.Phase("p"), PodPhase::kAdded);
        EXPECT_EQ(cache_.Stage("p"), kConfirmed);
        EXPECT_EQ(cache_.sizes().assumed, 0u);
        EXPECT_EQ(WholeUsed(), Mask({0, 1}));
        break;
      case BindEffect::kForget:
      case BindEffect::kRemove:
        EXPECT_EQ(cache_.Phase("p"), PodPhase::kInitial);
        EXPECT_EQ(cache_.Stage("p"), kForgotten);
        EXPECT_EQ(cache_.sizes().assumed, 0u);
        EXPECT_EQ(WholeUsed(), 0u);
        break;
    }
    EXPECT_EQ(cache_.BindDone("p"), arrow.to == kAccepted);
    std::map<std::string, int> expected;
    if (!arrow.outcome.empty()) expected[arrow.outcome] = 1;
    EXPECT_EQ(metrics_.outcomes, expected);
  }
}

TEST_F(CacheLifecycleTest, AnEventOutsideTheDiagramChangesNothing) {
  DriveTo(kAccepted);
  const Result<BindStep> step = cache_.Advance("p", kNoAnswer);
  ASSERT_FALSE(step.has_value());
  EXPECT_EQ(cache_.Stage("p"), kAccepted);
  EXPECT_EQ(WholeUsed(), Mask({0, 1}));
  EXPECT_TRUE(metrics_.outcomes.empty());
}

TEST_F(CacheLifecycleTest, EventsAfterTheEndAreLateAndChangeNothing) {
  DriveTo(kWriting);
  ASSERT_TRUE(cache_.Advance("p", kWatchBoundSameRecord).has_value());  // the watch first
  const Result<BindStep> reply = cache_.Advance("p", kCreated);         // then the 201
  ASSERT_TRUE(reply.has_value());
  EXPECT_TRUE(reply->late);
  EXPECT_EQ(reply->stage, kConfirmed);
  EXPECT_EQ(cache_.Phase("p"), PodPhase::kAdded);
  EXPECT_EQ(metrics_.outcomes, (std::map<std::string, int>{{"bound", 1}}));
  // A pod the cache never held: every event is late, nothing is counted.
  const Result<BindStep> unknown = cache_.Advance("nobody", kCreated);
  ASSERT_TRUE(unknown.has_value());
  EXPECT_TRUE(unknown->late);
  EXPECT_EQ(unknown->stage, kForgotten);
}

TEST_F(CacheLifecycleTest, ARecordReplacingAnAssumptionEndsItsBindAsReplaced) {
  DriveTo(kWriting);
  Assignment record;
  record.pod_uid = "p";
  record.pod_namespace = "ns";
  record.pod_name = "p";
  record.node = "dgx1";
  record.gpus = Mask({4, 5});
  ASSERT_TRUE(cache_.ReplaceBound(record).has_value());
  EXPECT_EQ(cache_.Stage("p"), kReplaced);
  EXPECT_EQ(cache_.Phase("p"), PodPhase::kAdded);
  EXPECT_EQ(WholeUsed(), Mask({4, 5}));
}

}  // namespace
}  // namespace linkfit::state
