// WireHandler's standalone release: the HTTP status for each Extender outcome, including a
// release that arrives while the pod's bind is still being recorded (409, nothing freed); and
// prioritize before the state is loaded.

#include "app/wire_handler.h"

#include <gtest/gtest.h>

#include <optional>

#include "linkfit/common/metrics.h"
#include "linkfit/extender/extender.h"
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
  Result<extender::BindOutcome> Bind(const extender::BindTarget&,
                                     const state::Assignment&) override {
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

}  // namespace
}  // namespace linkfit::app
