// The node agent's metrics endpoint (--metrics-listen): the guessed-figure counter in Prometheus'
// text format at GET /metrics, and addresses that cannot be served.

#include "linkfit/agent/agent_metrics.h"

#include <httplib.h>

#include <string>

#include <gtest/gtest.h>

namespace linkfit::agent {
namespace {

TEST(AgentMetricsTest, CountsPerFigureAndModel) {
  AgentMetrics metrics;
  EXPECT_EQ(metrics.Render().find("figure="), std::string::npos);
  metrics.CountGuessedFigure("nvlink", "Tesla P100-SXM2-16GB");
  metrics.CountGuessedFigure("nvlink", "Tesla P100-SXM2-16GB");
  metrics.CountGuessedFigure("mig", "Tesla P100-SXM2-16GB");
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("# TYPE linkfit_agent_guessed_figures_total counter"), std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          R"(linkfit_agent_guessed_figures_total{figure="nvlink",model="Tesla P100-SXM2-16GB"} 2)"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          R"(linkfit_agent_guessed_figures_total{figure="mig",model="Tesla P100-SXM2-16GB"} 1)"),
      std::string::npos)
      << text;
}

TEST(AgentMetricsTest, ServedAtMetrics) {
  AgentMetrics metrics;
  metrics.CountGuessedFigure("pcie", "NVIDIA B200");
  auto endpoint = ServeMetrics("127.0.0.1:0", metrics);
  ASSERT_TRUE(endpoint) << endpoint.error().message;
  ASSERT_GT((*endpoint)->port(), 0);
  httplib::Client client("127.0.0.1", (*endpoint)->port());
  // The socket listens from ServeMetrics on: the request waits in its backlog until the server
  // thread accepts it.
  const auto reply = client.Get("/metrics");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_NE(reply->body.find(R"(figure="pcie",model="NVIDIA B200"} 1)"), std::string::npos)
      << reply->body;
  EXPECT_EQ(client.Get("/other")->status, 404);
}

TEST(AgentMetricsTest, BadAddressesAreErrors) {
  AgentMetrics metrics;
  for (const char* address : {"9100", ":9100", "127.0.0.1:", "127.0.0.1:x", "127.0.0.1:70000"}) {
    const auto endpoint = ServeMetrics(address, metrics);
    ASSERT_FALSE(endpoint) << address;
    EXPECT_EQ(endpoint.error().message.rfind(std::string("--metrics-listen ") + address, 0), 0u)
        << endpoint.error().message;
  }
}

}  // namespace
}  // namespace linkfit::agent
