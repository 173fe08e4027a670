#include "linkfit/server/prometheus_metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace linkfit::server {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PrometheusMetricsTest, RendersEveryFamily) {
  PrometheusMetrics metrics;
  metrics.ObserveRequest(Verb::kFilter, "ok", 0.0002);
  metrics.ObserveRequest(Verb::kBind, "error", 0.02);
  metrics.CountRequest(Verb::kPrioritize, "too_large");
  metrics.CountFilterNodes(7, 2, 1);
  metrics.SetCacheSizes(10, 1, 4);
  metrics.SetNodeDevices("node-a", "H100", 3, 5);
  metrics.SetFragmentation(0.25);
  const std::string text = metrics.Render();
  EXPECT_TRUE(
      Contains(text, "linkfit_request_duration_seconds_bucket{verb=\"filter\",le=\"0.00025\"} 1"))
      << text;
  EXPECT_TRUE(Contains(text, "linkfit_request_duration_seconds_count{verb=\"bind\"} 1"));
  EXPECT_TRUE(Contains(text, "linkfit_requests_total{outcome=\"error\",verb=\"bind\"} 1"));
  EXPECT_TRUE(
      Contains(text, "linkfit_requests_total{outcome=\"too_large\",verb=\"prioritize\"} 1"));
  EXPECT_TRUE(Contains(text, "linkfit_filter_nodes_total{result=\"passed\"} 7"));
  EXPECT_TRUE(Contains(text, "linkfit_filter_nodes_total{result=\"unresolvable\"} 1"));
  EXPECT_TRUE(Contains(text, "linkfit_cache_nodes 10"));
  EXPECT_TRUE(Contains(text, "linkfit_cache_pods{state=\"assumed\"} 1"));
  EXPECT_TRUE(Contains(text, "linkfit_gpus{model=\"H100\",node=\"node-a\",state=\"free\"} 5"));
  EXPECT_TRUE(Contains(text, "linkfit_gpus{model=\"H100\",node=\"node-a\",state=\"used\"} 3"));
  EXPECT_TRUE(Contains(text, "linkfit_fragmentation_ratio 0.25"));
}

TEST(PrometheusMetricsTest, RemoveNodeDropsItsSeriesOnly) {
  PrometheusMetrics metrics;
  metrics.SetNodeDevices("node-a", "A100", 1, 7);
  metrics.SetNodeDevices("node-b", "A100", 8, 0);
  metrics.RemoveNode("node-a");
  metrics.RemoveNode("node-never-seen");
  const std::string text = metrics.Render();
  EXPECT_FALSE(Contains(text, "node=\"node-a\""));
  EXPECT_TRUE(Contains(text, "node=\"node-b\""));
}

TEST(PrometheusMetricsTest, ChangedModelReplacesTheSeries) {
  PrometheusMetrics metrics;
  metrics.SetNodeDevices("node-a", "A100", 1, 7);
  metrics.SetNodeDevices("node-a", "H100", 2, 6);
  const std::string text = metrics.Render();
  EXPECT_FALSE(Contains(text, "model=\"A100\""));
  EXPECT_TRUE(Contains(text, "linkfit_gpus{model=\"H100\",node=\"node-a\",state=\"used\"} 2"));
}

}  // namespace
}  // namespace linkfit::server
