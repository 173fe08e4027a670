#pragma once

// AgentMetrics: the node agent's Prometheus metrics, and the small HTTP endpoint that serves them
// (linkfit-agent --metrics-listen HOST:PORT, GET /metrics, text format 0.0.4).
//
//   linkfit_agent_guessed_figures_total{figure,model}
//       discoveries in which a figure placement uses (figure: nvlink, nvlink_rate, pcie, mig) was
//       not told by the machine and came from the GPU model table or a default, per GPU model
//
// Thread-safety: every method is safe to call concurrently.

#include <memory>
#include <string>

#include "linkfit/common/result.h"

namespace linkfit::agent {

class AgentMetrics {
 public:
  AgentMetrics();
  ~AgentMetrics();
  AgentMetrics(const AgentMetrics&) = delete;
  AgentMetrics& operator=(const AgentMetrics&) = delete;

  void CountGuessedFigure(const std::string& figure, const std::string& model);
  // The metrics in Prometheus' text format.
  std::string Render() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Serves `metrics` at GET /metrics on `address` ("HOST:PORT"; port 0 picks one) from a thread of
// its own until destroyed.
class MetricsEndpoint {
 public:
  virtual ~MetricsEndpoint() = default;
  virtual int port() const = 0;
};
// `metrics` must outlive the endpoint. An error when the address is malformed or cannot be bound.
Result<std::unique_ptr<MetricsEndpoint>> ServeMetrics(const std::string& address,
                                                      const AgentMetrics& metrics);

}  // namespace linkfit::agent
