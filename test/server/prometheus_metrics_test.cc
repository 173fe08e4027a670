#include "linkfit/server/prometheus_metrics.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <thread>

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
  metrics.SetNodeDevices("node-b", "A100", 0, 8);
  metrics.SetNodeDevices("node-a", "H100", 2, 6);
  const std::string text = metrics.Render();
  EXPECT_FALSE(Contains(text, "model=\"A100\",node=\"node-a\"")) << text;
  EXPECT_TRUE(Contains(text, "linkfit_gpus{model=\"H100\",node=\"node-a\",state=\"used\"} 2"));
  EXPECT_TRUE(Contains(text, "linkfit_gpus{model=\"H100\",node=\"node-a\",state=\"free\"} 6"));
  // The other node keeps its model.
  EXPECT_TRUE(Contains(text, "linkfit_gpus{model=\"A100\",node=\"node-b\",state=\"free\"} 8"));
}

TEST(PrometheusMetricsTest, LatestValuesWin) {
  PrometheusMetrics metrics;
  metrics.SetNodeDevices("node-a", "A100", 1, 7);
  metrics.SetNodeDevices("node-a", "A100", 2.5, 5.5);
  const std::string text = metrics.Render();
  EXPECT_TRUE(Contains(text, "linkfit_gpus{model=\"A100\",node=\"node-a\",state=\"used\"} 2.5"));
  EXPECT_TRUE(Contains(text, "linkfit_gpus{model=\"A100\",node=\"node-a\",state=\"free\"} 5.5"));
  EXPECT_FALSE(Contains(text, "} 7\n")) << text;
}

TEST(PrometheusMetricsTest, RendersTheGpusFamilyExactly) {
  PrometheusMetrics metrics;
  metrics.SetCacheSizes(2, 0, 1);
  metrics.SetNodeDevices("node-b", "NVIDIA H100 80GB HBM3", 0.125, 7.875);
  metrics.SetNodeDevices("node-a", "A100", 8, 0);
  metrics.SetFragmentation(0.5);
  const std::string text = metrics.Render();
  // One header, the series sorted by node, between the cache gauges and the fragmentation gauge
  // (where prometheus-cpp put the family when it was registered there).
  const std::string expected =
      "\n# HELP linkfit_gpus Whole-GPU equivalents per node and GPU model, used or free.\n"
      "# TYPE linkfit_gpus gauge\n"
      "linkfit_gpus{model=\"A100\",node=\"node-a\",state=\"free\"} 0\n"
      "linkfit_gpus{model=\"A100\",node=\"node-a\",state=\"used\"} 8\n"
      "linkfit_gpus{model=\"NVIDIA H100 80GB HBM3\",node=\"node-b\",state=\"free\"} 7.875\n"
      "linkfit_gpus{model=\"NVIDIA H100 80GB HBM3\",node=\"node-b\",state=\"used\"} 0.125\n"
      "# HELP linkfit_fragmentation_ratio ";
  EXPECT_TRUE(Contains(text, expected)) << text;
  EXPECT_LT(text.find("# TYPE linkfit_cache_pods gauge"), text.find("# TYPE linkfit_gpus gauge"));
}

TEST(PrometheusMetricsTest, NoNodesNoGpusFamily) {
  PrometheusMetrics metrics;
  EXPECT_FALSE(Contains(metrics.Render(), "linkfit_gpus"));
  metrics.SetNodeDevices("node-a", "A100", 1, 7);
  metrics.RemoveNode("node-a");
  const std::string text = metrics.Render();
  EXPECT_FALSE(Contains(text, "linkfit_gpus")) << text;
  EXPECT_TRUE(Contains(text, "# TYPE linkfit_fragmentation_ratio gauge"));
}

TEST(PrometheusMetricsTest, LabelValuesAreEscaped) {
  PrometheusMetrics metrics;
  metrics.SetNodeDevices("node-a", "odd \"model\"\\", 1, 7);
  EXPECT_TRUE(
      Contains(metrics.Render(),
               "linkfit_gpus{model=\"odd \\\"model\\\"\\\\\",node=\"node-a\",state=\"used\"} 1"))
      << metrics.Render();
}

// More nodes than Render() serializes in one piece: every node's two series, one header.
TEST(PrometheusMetricsTest, ManyNodes) {
  PrometheusMetrics metrics;
  constexpr int kNodes = 5000;
  const char* models[] = {"A100", "H100", "V100"};
  for (int i = 0; i < kNodes; ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "node-%05d", i);
    metrics.SetNodeDevices(name, models[i % 3], i % 9, 8 - i % 9);
  }
  for (int i = 0; i < kNodes; i += 2) {
    char name[32];
    std::snprintf(name, sizeof(name), "node-%05d", i);
    metrics.RemoveNode(name);
  }
  const std::string text = metrics.Render();
  std::size_t series = 0;
  for (std::size_t at = text.find("\nlinkfit_gpus{"); at != std::string::npos;
       at = text.find("\nlinkfit_gpus{", at + 1)) {
    ++series;
  }
  EXPECT_EQ(series, static_cast<std::size_t>(kNodes));  // two per remaining node
  std::size_t headers = 0;
  for (std::size_t at = text.find("# TYPE linkfit_gpus "); at != std::string::npos;
       at = text.find("# TYPE linkfit_gpus ", at + 1)) {
    ++headers;
  }
  EXPECT_EQ(headers, 1u);
  EXPECT_FALSE(Contains(text, "node=\"node-00000\""));
  EXPECT_TRUE(Contains(text, "linkfit_gpus{model=\"H100\",node=\"node-04999\",state=\"used\"} 4"));
  EXPECT_TRUE(Contains(text, "linkfit_gpus{model=\"A100\",node=\"node-04011\",state=\"free\"} 2"));
  // Sorted by node: the last node's series come after the first remaining node's.
  EXPECT_LT(text.find("node=\"node-00001\""), text.find("node=\"node-04999\""));
}

// Nodes change on one thread while another renders (bounded; meant for ThreadSanitizer too).
TEST(PrometheusMetricsTest, RendersWhileNodesChange) {
  PrometheusMetrics metrics;
  std::thread writer([&metrics] {
    for (int i = 0; i < 2000; ++i) {
      const std::string name = "node-" + std::to_string(i % 50);
      if (i % 7 == 0) {
        metrics.RemoveNode(name);
      } else {
        metrics.SetNodeDevices(name, i % 2 == 0 ? "A100" : "H100", 1, 7);
      }
    }
  });
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(Contains(metrics.Render(), "# TYPE linkfit_fragmentation_ratio gauge"));
  }
  writer.join();
  metrics.SetNodeDevices("node-0", "L40S", 3, 5);
  EXPECT_TRUE(
      Contains(metrics.Render(), "linkfit_gpus{model=\"L40S\",node=\"node-0\",state=\"used\"} 3"));
}

}  // namespace
}  // namespace linkfit::server
