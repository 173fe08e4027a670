// Extender::Filter and Extender::Prioritize: reasons in the right map, unknown nodes, bad hints,
// both node-list modes, score ranges and the topology and fragmentation preferences.

#include <algorithm>

#include <gtest/gtest.h>

#include "extender/extender_testing.h"

namespace linkfit::extender {
namespace {

using linkfit::testing::Mask;
using testing::GpuPod;
using testing::NamesArgs;
using testing::NodesArgs;
using testing::NvlinkRequired;
using testing::ReasonFor;

class FilterTest : public testing::ExtenderFixture {
 protected:
  void SetUp() override {
    AddNode("dgx1", "dgx1-v100");
    AddNode("l40s", "pcie-8x-l40s-2socket");
    AddNode("a100", "dgx-a100");
    AddNode("h100", "dgx-h100");
  }
};

TEST_F(FilterTest, ReasonsGoToTheRightMap) {
  Hold("busy", "dgx1", Mask({0, 1, 2, 3, 4, 5}));
  const std::vector<std::string> names = {"dgx1", "l40s", "a100", "ghost"};
  const auto args = NamesArgs(GpuPod("p1", 4, NvlinkRequired()), names);
  const wire::FilterResult result = extender_.Filter(args);
  EXPECT_EQ(result.error, "");
  EXPECT_EQ(result.list, wire::NodeListKind::kNames);
  EXPECT_EQ(result.node_names, std::vector<std::string_view>{"a100"});
  // Busy GPUs: preemption may help.
  EXPECT_NE(ReasonFor(result.failed_nodes, "dgx1"), "");
  EXPECT_EQ(ReasonFor(result.failed_and_unresolvable_nodes, "dgx1"), "");
  // No NVLink at all: never.
  EXPECT_NE(ReasonFor(result.failed_and_unresolvable_nodes, "l40s"), "");
  EXPECT_EQ(ReasonFor(result.failed_nodes, "l40s"), "");
  // Unknown node: never, and it says so.
  EXPECT_NE(ReasonFor(result.failed_and_unresolvable_nodes, "ghost").find("unknown"),
            std::string::npos);
  EXPECT_EQ(result.failed_nodes.size() + result.failed_and_unresolvable_nodes.size(), 3u);
}

TEST_F(FilterTest, TooManyGpusAndWrongModelAreUnresolvable) {
  const std::vector<std::string> names = {"dgx1", "a100", "h100"};
  const auto big = extender_.Filter(NamesArgs(GpuPod("p1", 9), names));
  EXPECT_TRUE(big.node_names.empty());
  EXPECT_EQ(big.failed_and_unresolvable_nodes.size(), 3u);
  const auto model =
      extender_.Filter(NamesArgs(GpuPod("p2", 2, {{"linkfit.io/gpu-model", "H100"}}), names));
  EXPECT_EQ(model.node_names, std::vector<std::string_view>{"h100"});
  EXPECT_NE(ReasonFor(model.failed_and_unresolvable_nodes, "dgx1").find("V100"), std::string::npos);
  EXPECT_NE(ReasonFor(model.failed_and_unresolvable_nodes, "a100"), "");
}

TEST_F(FilterTest, ABadHintFailsEveryNodeNamingIt) {
  const std::vector<std::string> names = {"dgx1", "a100", "ghost"};
  for (const kube::StringMap& annotations : std::vector<kube::StringMap>{
           {{"linkfit.io/closeness", "fast"}},
           {{"linkfit.io/gpus", "many"}},
           {{"linkfit.io/gpu-share", "1001"}},
       }) {
    const std::string key = annotations.begin()->first;
    SCOPED_TRACE(key);
    const auto result = extender_.Filter(NamesArgs(GpuPod("p1", 0, annotations), names));
    EXPECT_TRUE(result.node_names.empty());
    EXPECT_TRUE(result.failed_nodes.empty());
    ASSERT_EQ(result.failed_and_unresolvable_nodes.size(), names.size());
    for (const wire::NodeFailure& failure : result.failed_and_unresolvable_nodes) {
      EXPECT_NE(failure.reason.find(key), std::string::npos) << failure.reason;
    }
  }
  // Nothing was remembered for bind.
  EXPECT_NE(extender_.Bind({"pod-p1", "ml", "p1", "dgx1"}), "");
}

TEST_F(FilterTest, PodsWithoutGpusPassEverywhere) {
  const std::vector<std::string> names = {"dgx1", "ghost"};
  const auto result = extender_.Filter(NamesArgs(GpuPod("p1", 0), names));
  EXPECT_EQ(result.node_names.size(), 2u);
  EXPECT_TRUE(result.failed_and_unresolvable_nodes.empty());
}

// A pod asking only for NICs is linkfit's to place (GpuRequest::WantsDevices): nodes linkfit
// does not model are refused. Placement does not use NICs yet, so every modelled node passes.
TEST_F(FilterTest, PodsAskingOnlyForNicsAreNotPassedBlindly) {
  const std::vector<std::string> names = {"dgx1", "ghost"};
  kube::PodView pod = GpuPod("p1", 0);
  pod.requests["linkfit.io/rdma-share"] = 250 * 1000;
  const auto result = extender_.Filter(NamesArgs(pod, names));
  EXPECT_EQ(result.node_names, std::vector<std::string_view>{"dgx1"});
  EXPECT_NE(ReasonFor(result.failed_and_unresolvable_nodes, "ghost").find("unknown"),
            std::string::npos);
  // A bad NIC hint fails every node, naming it.
  const auto bad = extender_.Filter(NamesArgs(GpuPod("p2", 0, {{"linkfit.io/nics", "x"}}), names));
  EXPECT_TRUE(bad.node_names.empty());
  ASSERT_EQ(bad.failed_and_unresolvable_nodes.size(), names.size());
  EXPECT_NE(bad.failed_and_unresolvable_nodes[0].reason.find("linkfit.io/nics"), std::string::npos);
}

TEST_F(FilterTest, NonCacheModeEchoesTheNodeObjects) {
  Hold("busy", "dgx1", Mask({0, 1, 2, 3, 4, 5, 6, 7}));
  const std::vector<std::string> names = {"dgx1", "a100", "ghost"};
  const std::vector<std::string> raw = {R"({"metadata":{"name":"dgx1"}})",
                                        R"({"metadata":{"name":"a100","labels":{"x":"y"}}})",
                                        R"({"metadata":{"name":"ghost"}})"};
  const auto args = NodesArgs(GpuPod("p1", 2), names, raw);
  const wire::FilterResult result = extender_.Filter(args);
  EXPECT_EQ(result.list, wire::NodeListKind::kObjects);
  ASSERT_EQ(result.nodes_json.size(), 1u);
  EXPECT_EQ(result.nodes_json[0], raw[1]);
  EXPECT_TRUE(result.node_names.empty());
  EXPECT_NE(ReasonFor(result.failed_nodes, "dgx1"), "");
  EXPECT_NE(ReasonFor(result.failed_and_unresolvable_nodes, "ghost"), "");
}

TEST_F(FilterTest, MigAndSharedPods) {
  AddNode("a100-mig", "dgx-a100", Mask({0, 1, 2, 3}));
  const std::vector<std::string> names = {"dgx1", "a100", "a100-mig"};
  kube::PodView mig = GpuPod("m1", 0);
  mig.requests["nvidia.com/mig-3g.20gb"] = 1000;
  const auto mig_result = extender_.Filter(NamesArgs(mig, names));
  EXPECT_EQ(mig_result.node_names, std::vector<std::string_view>{"a100-mig"});
  EXPECT_NE(ReasonFor(mig_result.failed_and_unresolvable_nodes, "dgx1"), "");
  EXPECT_NE(ReasonFor(mig_result.failed_and_unresolvable_nodes, "a100"), "");
  kube::PodView shared = GpuPod("s1", 0, {{"linkfit.io/gpus", "2"}});
  shared.requests["linkfit.io/gpu-share"] = 2 * 500 * 1000;  // both GPUs' thousandths
  const auto shared_result = extender_.Filter(NamesArgs(shared, names));
  EXPECT_EQ(shared_result.node_names.size(), 3u);
}

class PrioritizeTest : public testing::ExtenderFixture {
 protected:
  std::map<std::string, std::int64_t> Scores(const kube::PodView& pod,
                                             const std::vector<std::string>& names) {
    std::map<std::string, std::int64_t> out;
    const auto priorities = extender_.Prioritize(NamesArgs(pod, names));
    EXPECT_EQ(priorities.size(), names.size());
    for (std::size_t i = 0; i < priorities.size() && i < names.size(); ++i) {
      EXPECT_EQ(priorities[i].host, names[i]);  // request order
      out[std::string(priorities[i].host)] = priorities[i].score;
    }
    return out;
  }
};

TEST_F(PrioritizeTest, ScoresStayInRangeAndNonFittingNodesGetZero) {
  AddNode("dgx1", "dgx1-v100");
  AddNode("l40s", "pcie-8x-l40s-2socket");
  AddNode("a100", "dgx-a100");
  AddNode("ws", "ws-4x-rtxa6000-nvlink-pairs");
  Hold("busy", "a100", Mask({0, 1, 2, 3, 4, 5, 6}));
  const std::vector<std::string> names = {"dgx1", "l40s", "a100", "ws", "ghost"};
  for (int gpus : {1, 2, 4}) {
    const auto scores = Scores(GpuPod("p" + std::to_string(gpus), gpus), names);
    for (const auto& [node, score] : scores) {
      EXPECT_GE(score, 0) << node;
      EXPECT_LE(score, 140) << node;  // the default score_range
    }
    EXPECT_EQ(scores.at("ghost"), 0);
    if (gpus > 1) {
      EXPECT_EQ(scores.at("a100"), 0);  // one GPU free
    }
    if (gpus == 4) {
      EXPECT_GT(scores.at("dgx1"), 0);
    }
  }
  // A bad hint scores every node 0.
  for (const auto& [node, score] :
       Scores(GpuPod("bad", 2, {{"linkfit.io/closeness", "x"}}), names)) {
    EXPECT_EQ(score, 0) << node;
  }
}

TEST_F(PrioritizeTest, TheBestRingScoresHighestForANvlinkPod) {
  AddNode("dgx1", "dgx1-v100");
  AddNode("a100", "dgx-a100");
  AddNode("h100", "dgx-h100");
  const std::vector<std::string> names = {"dgx1", "a100", "h100"};
  const auto scores = Scores(GpuPod("p1", 4, NvlinkRequired()), names);
  EXPECT_GT(scores.at("h100"), scores.at("a100"));
  EXPECT_GT(scores.at("a100"), scores.at("dgx1"));
}

TEST_F(PrioritizeTest, OneGpuPrefersANodeWhosePairIsAlreadyBroken) {
  // Two workstations with NVLink pairs {0,1} and {2,3}, half used on both: one keeps the pair
  // {2,3} whole, the other has both pairs broken. A single-GPU pod should take a lonely GPU.
  AddNode("pair-intact", "ws-4x-rtxa6000-nvlink-pairs");
  AddNode("pairs-broken", "ws-4x-rtxa6000-nvlink-pairs");
  Hold("a", "pair-intact", Mask({0, 1}));
  Hold("b", "pairs-broken", Mask({0, 2}));
  const auto scores = Scores(GpuPod("p1", 1), {"pair-intact", "pairs-broken"});
  EXPECT_GT(scores.at("pairs-broken"), scores.at("pair-intact"));
}

class WideRangeTest : public testing::ExtenderFixture {
 protected:
  static ExtenderOptions Options() {
    ExtenderOptions options;
    options.score_range = 100;
    options.weights = {1.0, 0.0, 0.0};
    return options;
  }
  WideRangeTest() : ExtenderFixture(Options()) {}
};

class FineScoresTest : public testing::ExtenderFixture {
 protected:
  static ExtenderOptions Options() {
    ExtenderOptions options;
    options.score_range = 100;
    return options;
  }
  FineScoresTest() : ExtenderFixture(Options()) {}
};

TEST_F(FineScoresTest, OneGpuPrefersANodeWhosePairIsAlreadyBroken) {
  AddNode("pair-intact", "ws-4x-rtxa6000-nvlink-pairs");
  AddNode("pairs-broken", "ws-4x-rtxa6000-nvlink-pairs");
  Hold("a", "pair-intact", Mask({0, 1}));
  Hold("b", "pairs-broken", Mask({0, 2}));
  const std::vector<std::string> names = {"pair-intact", "pairs-broken"};
  const auto priorities = extender_.Prioritize(NamesArgs(GpuPod("p1", 1), names));
  ASSERT_EQ(priorities.size(), 2u);
  EXPECT_GT(priorities[1].score, priorities[0].score);
}

TEST_F(WideRangeTest, ScoreRangeAndWeightsComeFromTheOptions) {
  AddNode("dgx1", "dgx1-v100");
  AddNode("h100", "dgx-h100");
  const std::vector<std::string> names = {"dgx1", "h100"};
  const auto priorities = extender_.Prioritize(NamesArgs(GpuPod("p1", 4, NvlinkRequired()), names));
  ASSERT_EQ(priorities.size(), 2u);
  EXPECT_EQ(priorities[1].score, 100);  // topology only: the best ring gets the whole range
  EXPECT_GT(priorities[0].score, 0);
  EXPECT_LT(priorities[0].score, 100);
}

}  // namespace
}  // namespace linkfit::extender
