// WireHandler's standalone release: the HTTP status for each Extender outcome, including a
// release that arrives while the pod's bind is still being recorded (409, nothing freed); and
// prioritize before the state is loaded.

#include "app/wire_handler.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "linkfit/common/metrics.h"
#include "linkfit/extender/extender.h"
#include "linkfit/kube/codec.h"
#include "testing/cluster.h"

namespace linkfit::app {
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

  WireHandler* handler = nullptr;
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
  WireHandler handler{extender, &memo};
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

// Filter and prioritize read a request's names as sent (kube::NameCheck::kByCaller) and look only
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
    WireHandler handler{extender, &memo};
    handler.SetReady(true);
    EXPECT_EQ(extender.ReadsNamesAsSent(), !odd_node);  // else every name is decoded at once
    int decoded_differently = 0;
    for (int round = 0; round < 300; ++round) {
      std::string names;
      const int count = static_cast<int>(random() % 6);
      for (int k = 0; k < count; ++k) {
        names += (k == 0 ? "" : ",") + tokens[random() % tokens.size()];
      }
      const std::string body =
          R"({"Pod":)" + pods[random() % pods.size()] + R"(,"NodeNames":[)" + names + "]}";
      auto decoded = kube::DecodeExtenderArgs(body, kube::NameCheck::kAtDecode);
      const server::HttpReply filtered = handler.Filter(body);
      const server::HttpReply prioritized = handler.Prioritize(body);
      if (!decoded) {
        const std::string expected = kube::EncodeErrorBody(decoded.error().message);
        EXPECT_EQ(filtered.status, 400) << body;
        EXPECT_EQ(filtered.body, expected) << body;
        EXPECT_EQ(prioritized.status, 400) << body;
        EXPECT_EQ(prioritized.body, expected) << body;
        continue;
      }
      auto as_sent = kube::DecodeExtenderArgs(body, kube::NameCheck::kByCaller);
      ASSERT_TRUE(as_sent.has_value()) << body;
      decoded_differently += as_sent->node_names != decoded->node_names ? 1 : 0;
      EXPECT_EQ(filtered.status, 200) << body;
      EXPECT_EQ(filtered.body, kube::EncodeFilterResult(extender.Filter(*decoded))) << body;
      EXPECT_EQ(prioritized.status, 200) << body;
      EXPECT_EQ(prioritized.body,
                kube::EncodeHostScores(decoded->node_names, extender.PrioritizeScores(*decoded),
                                       decoded->node_names_escape_free))
          << body;
    }
    EXPECT_GT(decoded_differently, 50);  // the escapes were exercised
  }
}

// Given names read as sent that need decoding, the extender's plain verbs refuse rather than
// answer for names they have not decoded.
TEST(WireHandlerNamesTest, PlainVerbsRefuseNamesThatNeedDecoding) {
  state::ClusterCache cache;
  cache.UpsertNode(linkfit::testing::MakeNodeInfo("h100", "dgx-h100"));
  ReleasingBinder binder;
  NullMetrics metrics;
  extender::PodMemo memo{{}};
  extender::Extender extender{cache, {}, binder, memo, metrics};
  const std::string body =  // the args' names point into it
      std::string(R"({"Pod":)") + kPod + R"(,"NodeNames":["h100","h\u003100"]})";
  auto args = kube::DecodeExtenderArgs(body, kube::NameCheck::kByCaller);
  ASSERT_TRUE(args.has_value());
  EXPECT_FALSE(extender.FilterNamesAsSent(*args).has_value());
  EXPECT_FALSE(extender.PrioritizeNamesAsSent(*args).has_value());
  const kube::FilterResult refused = extender.Filter(*args);
  EXPECT_NE(refused.error.find("escape"), std::string::npos) << refused.error;
  EXPECT_TRUE(refused.node_names.empty());
  EXPECT_EQ(extender.PrioritizeScores(*args), (std::vector<std::uint32_t>{0, 0}));
}

}  // namespace
}  // namespace linkfit::app
