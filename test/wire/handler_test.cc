// Handler's standalone release: the HTTP status for each Extender outcome, including a
// release that arrives while the pod's bind is still being recorded (409, nothing freed); and
// prioritize before the state is loaded.

#include "linkfit/wire/handler.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "linkfit/common/json_string.h"
#include "linkfit/common/metrics.h"
#include "linkfit/extender/extender.h"
#include "linkfit/wire/codec.h"
#include "linkfit/wire/verb_calls.h"
#include "testing/cluster.h"

namespace linkfit::wire {
namespace {

constexpr const char* kPod =
    R"({"metadata":{"name":"p1","namespace":"ml","uid":"u1"},"spec":{"containers":[{"name":"c",)"
    R"("resources":{"limits":{"nvidia.com/gpu":"2"}}}]}})";
constexpr const char* kRelease = R"({"PodUID":"u1"})";

// A binder that, while recording the bind, lets a release of the same pod through the handler
// (what a departure racing the state-file write does) and keeps its reply.
class ReleasingBinder final : public extender::Binder {
 public:
  extender::BindReply Bind(const extender::BindRequest&) override {
    if (handler != nullptr) during_bind = handler->Release(kRelease);
    return {};
  }
  void Released(const std::string&) override {}

  Handler* handler = nullptr;
  std::optional<server::HttpReply> during_bind;
};

topology::GpuMask WholeUsed(state::ClusterCache& cache) {
  const state::SnapshotPtr snapshot = cache.Snapshot();
  const state::NodeState* node = snapshot->Find("h100");
  if (node == nullptr) {
    ADD_FAILURE() << "node h100 missing";
    return 0;
  }
  return node->whole_used();
}

// A handler over one idle DGX H100 ("h100"), not ready yet.
class WireHandlerTest : public ::testing::Test {
 protected:
  WireHandlerTest() { cache.UpsertNode(linkfit::testing::MakeNodeInfo("h100", "dgx-h100")); }

  state::ClusterCache cache;
  ReleasingBinder binder;
  NullMetrics metrics;
  extender::PodMemo memo{{}};
  extender::Extender extender{cache, {}, binder, memo, metrics};
  Handler handler{extender, &memo};
};

TEST_F(WireHandlerTest, ReleaseDuringTheBindIsAConflictAndFreesNothing) {
  handler.SetReady(true);
  binder.handler = &handler;

  ASSERT_EQ(handler.Filter(std::string(R"({"Pod":)") + kPod + R"(,"NodeNames":["h100"]})").status,
            200);
  const server::HttpReply bound =
      handler.Bind(R"({"PodName":"p1","PodNamespace":"ml","PodUID":"u1","Node":"h100"})");
  EXPECT_EQ(bound.body, R"({"Error":""})");
  ASSERT_TRUE(binder.during_bind.has_value());
  EXPECT_EQ(binder.during_bind->status, 409);
  EXPECT_NE(binder.during_bind->body.find("still being bound"), std::string::npos)
      << binder.during_bind->body;
  // The bind succeeded and still holds its GPUs; a release after it frees them.
  EXPECT_EQ(__builtin_popcount(WholeUsed(cache)), 2);
  binder.handler = nullptr;
  EXPECT_EQ(handler.Release(kRelease).status, 200);
  EXPECT_EQ(WholeUsed(cache), 0);
  EXPECT_EQ(handler.Release(kRelease).status, 404);
}

// Until its state is loaded the handler answers prioritize with every requested name at score
// 0, in the request's order (kube-scheduler then decides on its own scores), and afterwards with
// linkfit's.
TEST_F(WireHandlerTest, PrioritizeBeforeReadyScoresEveryNameZero) {
  const std::string body = std::string(R"({"Pod":)") + kPod + R"(,"NodeNames":["h100","x\"y"]})";
  const server::HttpReply waiting = handler.Prioritize(body);
  EXPECT_EQ(waiting.status, 200);
  EXPECT_EQ(waiting.body, R"([{"Host":"h100","Score":0},{"Host":"x\"y","Score":0}])");
  handler.SetReady(true);
  const server::HttpReply ready = handler.Prioritize(body);
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body.find(R"([{"Host":"h100","Score":0})"), std::string::npos) << ready.body;
  EXPECT_NE(ready.body.find(R"({"Host":"x\"y","Score":0}])"), std::string::npos) << ready.body;
}

// Filter and prioritize read a request's names as sent (wire::NameCheck::kByCaller) and look only
// at those linkfit does not know. Every reply must be the one the same request gets when every
// name is decoded first (the extender's verbs on kAtDecode args, encoded): names known, unknown,
// escaped in the request, needing an escape in the reply, not decodable at all; pods that need
// GPUs, that need none, and whose hint is bad; and a cluster with a node whose own name a reply
// escapes (then no known name is trusted by its bytes).
TEST(WireHandlerNamesTest, NamesReadAsSentAnswerAsDecodedNames) {
  const std::vector<std::string> tokens = {
      R"("h100")",      R"("a100-1")",     R"("h\u003100")",     R"("a100\u002d1")",
      R"("unknown-7")", R"("x<y")",        R"("x\u003cy")",      R"("q\"z")",
      R"("caf\u00e9")", "\"caf\xC3\xA9\"", R"("a\\b")",          R"("tab\tx")",
      R"("bad\x")",     R"("odd<node")",   R"("odd\u003cnode")", R"("")"};
  const std::vector<std::string> pods = {
      kPod, R"({"metadata":{"name":"cpu","namespace":"ml","uid":"u2"},"spec":{"containers":[]}})",
      R"({"metadata":{"name":"bad","namespace":"ml","uid":"u3","annotations":)"
      R"({"linkfit.io/closeness":"warp"}},"spec":{"containers":[{"name":"c","resources":)"
      R"({"limits":{"nvidia.com/gpu":"2"}}}]}})"};
  std::mt19937 random(20261127);
  for (const bool odd_node : {false, true}) {
    state::ClusterCache cache;
    cache.UpsertNode(linkfit::testing::MakeNodeInfo("h100", "dgx-h100"));
    cache.UpsertNode(linkfit::testing::MakeNodeInfo("a100-1", "dgx-a100"));
    if (odd_node) cache.UpsertNode(linkfit::testing::MakeNodeInfo("odd<node", "dgx-a100"));
    ReleasingBinder binder;
    NullMetrics metrics;
    extender::PodMemo memo{{}};
    extender::Extender extender{cache, {}, binder, memo, metrics};
    Handler handler{extender, &memo};
    handler.SetReady(true);
    // Names are read as sent while every known name is written as it is; else decoded at once.
    EXPECT_EQ(wire::KnownNamesWrittenAsIs(*cache.Snapshot()), !odd_node);
    int decoded_differently = 0;
    for (int round = 0; round < 300; ++round) {
      std::string names;
      const int count = static_cast<int>(random() % 6);
      for (int k = 0; k < count; ++k) {
        names += (k == 0 ? "" : ",") + tokens[random() % tokens.size()];
      }
      const std::string body =
          R"({"Pod":)" + pods[random() % pods.size()] + R"(,"NodeNames":[)" + names + "]}";
      auto decoded = wire::DecodeExtenderArgs(body, wire::NameCheck::kAtDecode);
      const server::HttpReply filtered = handler.Filter(body);
      const server::HttpReply prioritized = handler.Prioritize(body);
      if (!decoded) {
        const std::string expected = json::ErrorBody(decoded.error().message);
        EXPECT_EQ(filtered.status, 400) << body;
        EXPECT_EQ(filtered.body, expected) << body;
        EXPECT_EQ(prioritized.status, 400) << body;
        EXPECT_EQ(prioritized.body, expected) << body;
        continue;
      }
      auto as_sent = wire::DecodeExtenderArgs(body, wire::NameCheck::kByCaller);
      ASSERT_TRUE(as_sent.has_value()) << body;
      decoded_differently += as_sent->node_names != decoded->node_names ? 1 : 0;
      EXPECT_EQ(filtered.status, 200) << body;
      EXPECT_EQ(filtered.body, wire::EncodeFilterResult(RunFilter(extender, *decoded))) << body;
      EXPECT_EQ(prioritized.status, 200) << body;
      EXPECT_EQ(prioritized.body,
                wire::EncodeHostScores(decoded->node_names, PrioritizeScores(extender, *decoded),
                                       decoded->node_names_escape_free))
          << body;
    }
    EXPECT_GT(decoded_differently, 50);  // the escapes were exercised
  }
}

// A name read as sent that needs decoding is decoded on its own (not the whole body again) and
// answered as the name it is: "h\u003100" is h100, and a reply writes it so.
TEST(WireHandlerNamesTest, NamesThatNeedDecodingAreDecodedOneByOne) {
  state::ClusterCache cache;
  cache.UpsertNode(linkfit::testing::MakeNodeInfo("h100", "dgx-h100"));
  ReleasingBinder binder;
  NullMetrics metrics;
  extender::PodMemo memo{{}};
  extender::Extender extender{cache, {}, binder, memo, metrics};
  const std::string body =  // the args' names point into it
      std::string(R"({"Pod":)") + kPod + R"(,"NodeNames":["h100","h\u003100","x\u003cy"]})";
  auto args = wire::DecodeExtenderArgs(body, wire::NameCheck::kByCaller);
  ASSERT_TRUE(args.has_value());
  const auto candidates = Candidates::Find(*cache.Snapshot(), *args);
  ASSERT_TRUE(candidates.has_value());
  EXPECT_EQ(std::vector<std::string_view>(candidates->names().begin(), candidates->names().end()),
            (std::vector<std::string_view>{"h100", "h100", "x<y"}));
  EXPECT_FALSE(candidates->names_escape_free());  // x<y is written x\u003cy
  const wire::FilterResult result = RunFilter(extender, *args);
  EXPECT_EQ(result.node_names, (std::vector<std::string_view>{"h100", "h100"}));
  ASSERT_EQ(result.failed_and_unresolvable_nodes.size(), 1u);
  EXPECT_EQ(result.failed_and_unresolvable_nodes[0].node, "x<y");
  const std::vector<std::uint32_t> scores = PrioritizeScores(extender, *args);
  ASSERT_EQ(scores.size(), 3u);
  EXPECT_EQ(scores[0], scores[1]);
  EXPECT_GT(scores[0], 0u);
  EXPECT_EQ(scores[2], 0u);
  EXPECT_EQ(wire::DecodeNameAsSent("h\\u0031", 0).value(), "h1");
  const auto bad = wire::DecodeNameAsSent("bad\\x", 3);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message.rfind("invalid JSON at NodeNames[3]: ", 0), 0u)
      << bad.error().message;
}

}  // namespace
}  // namespace linkfit::wire
