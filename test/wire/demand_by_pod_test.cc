// Demand in standalone mode is counted by pod, never by call: a pod that kube-scheduler retries
// weighs one pod, so no prioritize score depends on how often filter was called; a pod that
// leaves takes its weight with it. Through the Handler, where standalone mode learns pods.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "linkfit/common/metrics.h"
#include "linkfit/extender/extender.h"
#include "linkfit/wire/handler.h"
#include "testing/cluster.h"

namespace linkfit::wire {
namespace {

class NullBinder final : public extender::Binder {
 public:
  extender::BindReply Bind(const extender::BindRequest&) override { return {}; }
  void Released(const std::string&) override {}
};

std::string PodJson(const std::string& uid, int gpus) {
  return R"({"metadata":{"name":"pod-)" + uid + R"(","namespace":"ml","uid":")" + uid +
         R"("},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":")" +
         std::to_string(gpus) + R"("}}}]}})";
}

std::string Args(const std::string& pod) {
  return R"({"Pod":)" + pod + R"(,"NodeNames":["a100-mig","a100","l40s","ws"]})";
}

// A partly used A100 with GPUs 0-3 in MIG mode, an idle A100, an idle L40S box and an idle
// 4-GPU workstation: scores for small pods depend on how much the demand weighs 8-GPU pods.
class DemandByPodTest : public ::testing::Test {
 protected:
  DemandByPodTest() {
    cache.UpsertNode(linkfit::testing::MakeNodeInfo("a100-mig", "dgx-a100", 0x0F));
    cache.UpsertNode(linkfit::testing::MakeNodeInfo("a100", "dgx-a100"));
    cache.UpsertNode(linkfit::testing::MakeNodeInfo("l40s", "pcie-8x-l40s-2socket"));
    cache.UpsertNode(linkfit::testing::MakeNodeInfo("ws", "ws-4x-rtxa6000-nvlink-pairs"));
    handler.SetReady(true);
  }
  // Every prioritize score of the probes (1, 2 and 4 GPUs), as the wire writes them (prioritize
  // learns no pod: the probes never count).
  std::vector<std::string> Scores() {
    std::vector<std::string> bodies;
    for (const int gpus : {1, 2, 4}) {
      bodies.push_back(
          handler.Prioritize(Args(PodJson("probe-" + std::to_string(gpus), gpus))).body);
    }
    return bodies;
  }

  state::ClusterCache cache;
  NullBinder binder;
  NullMetrics metrics;
  extender::PodMemo memo{{}};
  extender::Extender extender{cache, {}, binder, memo, metrics};
  Handler handler{extender, &memo};
};

TEST_F(DemandByPodTest, ARetriedFilterCallChangesNoScore) {
  // Pods of other shapes, so that the 8-GPU pod's weight is a share that its retries would grow.
  for (int k = 0; k < 4; ++k) handler.Filter(Args(PodJson("small-" + std::to_string(k), 1)));
  ASSERT_EQ(handler.Filter(Args(PodJson("big", 8))).status, 200);
  const std::vector<std::string> once = Scores();
  for (int retry = 0; retry < 10; ++retry) {
    ASSERT_EQ(handler.Filter(Args(PodJson("big", 8))).status, 200);
    ASSERT_EQ(handler.Prioritize(Args(PodJson("big", 8))).status, 200);
    EXPECT_EQ(Scores(), once) << "after retry " << retry;
  }
  // Five pods: the four small ones and "big" (prioritize learns none).
  EXPECT_EQ(memo.size(), 5u);
  // The same pod under another UID is another pod: it weighs (the check above can fail).
  for (int k = 0; k < 10; ++k) handler.Filter(Args(PodJson("big-" + std::to_string(k), 8)));
  EXPECT_NE(Scores(), once);
}

TEST_F(DemandByPodTest, APodThatLeavesTakesItsWeight) {
  for (int k = 0; k < 4; ++k) handler.Filter(Args(PodJson("small-" + std::to_string(k), 1)));
  const std::vector<std::string> before = Scores();
  const extender::ShapeList shapes_before = memo.demand().Shapes();
  // Three 8-GPU pods arrive, two are bound, all three leave (one never bound).
  for (int k = 0; k < 3; ++k) handler.Filter(Args(PodJson("big-" + std::to_string(k), 8)));
  EXPECT_NE(Scores(), before);
  for (const std::string node : {"a100", "l40s"}) {
    const std::string uid = node == std::string("a100") ? "big-0" : "big-1";
    ASSERT_EQ(handler
                  .Bind(R"({"PodName":"pod-)" + uid + R"(","PodNamespace":"ml","PodUID":")" + uid +
                        R"(","Node":")" + node + R"("})")
                  .body,
              R"({"Error":""})");
  }
  for (int k = 0; k < 3; ++k) {
    const std::string uid = "big-" + std::to_string(k);
    handler.Release(R"({"PodUID":")" + uid + R"("})");
  }
  EXPECT_EQ(Scores(), before);
  const extender::ShapeList shapes_after = memo.demand().Shapes();
  ASSERT_EQ(shapes_after->size(), shapes_before->size());
  for (std::size_t i = 0; i < shapes_after->size(); ++i) {
    EXPECT_EQ((*shapes_after)[i].gpus, (*shapes_before)[i].gpus);
    EXPECT_DOUBLE_EQ((*shapes_after)[i].weight, (*shapes_before)[i].weight);
  }
  EXPECT_FALSE(memo.FindPod("big-0").has_value());  // bind no longer finds a pod that left
}

// Allocations already held when linkfit starts are pods it knows: KnownPodOf reads back what
// each asked for.
TEST(KnownPodOfTest, ReadsTheRequestBackFromTheDevices) {
  state::ClusterCache cache;
  cache.UpsertNode(linkfit::testing::MakeNodeInfo("a100", "dgx-a100"));
  state::Assignment whole;
  whole.pod_uid = "u1";
  whole.pod_namespace = "ml";
  whole.pod_name = "train";
  whole.node = "a100";
  whole.gpus = 0x0F;
  whole.cpu_milli = 8000;
  ASSERT_TRUE(cache.AddBound(whole).has_value());
  const state::SnapshotPtr snapshot = cache.Snapshot();
  const extender::KnownPod known = extender::KnownPodOf(whole, *snapshot->Find("a100"));
  EXPECT_EQ(known.request.kind, extender::GpuRequest::Kind::kWhole);
  EXPECT_EQ(known.request.count, 4);
  EXPECT_EQ(known.request.cpu_milli, 8000);
  EXPECT_EQ(known.pod_name, "train");
}

}  // namespace
}  // namespace linkfit::wire
