// The cluster fragmentation gauge maintained by ClusterCache (include/linkfit/common/metrics.h).

#include <gtest/gtest.h>

#include "linkfit/alloc/placement_table_cache.h"
#include "linkfit/state/cluster_cache.h"
#include "testing/fixtures.h"

namespace linkfit::state {
namespace {

class RecordingMetrics final : public MetricsSink {
 public:
  void ObserveRequest(Verb, std::string_view, double) override {}
  void CountFilterNodes(std::uint64_t, std::uint64_t, std::uint64_t) override {}
  void SetCacheSizes(std::uint64_t, std::uint64_t, std::uint64_t) override {}
  void SetNodeDevices(std::string_view, std::string_view, double, double) override {}
  void RemoveNode(std::string_view) override {}
  void SetFragmentation(double ratio) override { fragmentation = ratio; }
  double fragmentation = -1;
};

NodeInfoPtr Node(const std::string& name, const std::string& fixture,
                 alloc::PlacementTableCache& registry) {
  auto info = std::make_shared<NodeInfo>();
  info->name = name;
  info->table = registry.Get(linkfit::testing::LoadFixture(fixture));
  return info;
}

Result<ClusterCache::AssumeResult> Hold(ClusterCache& cache, const std::string& uid,
                                        const std::string& node, topology::GpuMask gpus) {
  return cache.Assume(uid, node, [gpus](const NodeState&) -> Result<Assignment> {
    Assignment a;
    a.kind = Assignment::Kind::kWhole;
    a.gpus = gpus;
    return a;
  });
}

TEST(FragmentationGauge, CountsFreeGpusOutsideTheLargestConnectedSet) {
  alloc::PlacementTableCache registry;
  RecordingMetrics metrics;
  ClusterCache cache(&metrics);
  cache.UpsertNode(Node("ws", "ws-4x-rtxa6000-nvlink-pairs", registry));
  EXPECT_NEAR(metrics.fragmentation, 2.0 / 4.0, 1e-9);
  // Idle, the workstation's largest NVLink-connected free set is a pair: 2 of 4 free GPUs are
  // outside it. Holding GPUs 0 and 2 leaves 1 and 3, joined only over PCIe: 1 of 2 outside.
  cache.UpsertNode(Node("l40s", "pcie-8x-l40s-2socket", registry));
  ASSERT_TRUE(Hold(cache, "a", "ws", 0b0101));
  // ws: free {1,3}, largest NVLink set 1 -> 1 fragment; l40s: 8 free, one socket holds 4 -> 4.
  EXPECT_NEAR(metrics.fragmentation, 5.0 / 10.0, 1e-9);
  cache.Forget("a");
  // ws idle again: 2 of 4 outside a pair; l40s: 4 of 8.
  EXPECT_NEAR(metrics.fragmentation, 6.0 / 12.0, 1e-9);
  cache.RemoveNode("l40s");
  EXPECT_NEAR(metrics.fragmentation, 2.0 / 4.0, 1e-9);
}

TEST(FragmentationGauge, NodesAfterARemovedOneKeepTheirCounts) {
  alloc::PlacementTableCache registry;
  RecordingMetrics metrics;
  ClusterCache cache(&metrics);
  cache.UpsertNode(Node("ws", "ws-4x-rtxa6000-nvlink-pairs", registry));
  cache.UpsertNode(Node("l40s", "pcie-8x-l40s-2socket", registry));
  cache.RemoveNode("ws");  // l40s moves to the first position
  EXPECT_NEAR(metrics.fragmentation, 4.0 / 8.0, 1e-9);
  // Holding one socket's GPUs leaves the other socket's four, all connected.
  ASSERT_TRUE(Hold(cache, "a", "l40s", 0b00001111));
  EXPECT_NEAR(metrics.fragmentation, 0.0, 1e-9);
  // ws comes back after it: 2 of its 4 free GPUs outside a pair, none of l40s's 4.
  cache.UpsertNode(Node("ws", "ws-4x-rtxa6000-nvlink-pairs", registry));
  EXPECT_NEAR(metrics.fragmentation, 2.0 / 8.0, 1e-9);
  cache.Forget("a");
  EXPECT_NEAR(metrics.fragmentation, 6.0 / 12.0, 1e-9);
}

TEST(FragmentationGauge, IdleNvswitchNodeIsNotFragmented) {
  alloc::PlacementTableCache registry;
  RecordingMetrics metrics;
  ClusterCache cache(&metrics);
  cache.UpsertNode(Node("h100", "dgx-h100", registry));
  EXPECT_DOUBLE_EQ(metrics.fragmentation, 0.0);
  ASSERT_TRUE(Hold(cache, "a", "h100", 0b1));
  EXPECT_DOUBLE_EQ(metrics.fragmentation, 0.0);  // the other 7 stay NVSwitch-connected
}

}  // namespace
}  // namespace linkfit::state
