#pragma once

// PrometheusMetrics: the MetricsSink (common/metrics.h) backed by a prometheus-cpp registry and
// rendered in the Prometheus text format at GET /metrics. prometheus-cpp stays out of this header
// (pimpl) so that other modules do not compile its headers.
//
// Series:
//   linkfit_request_duration_seconds{verb}     histogram, buckets 10 us .. 1 s
//   linkfit_requests_total{verb,outcome}        counter
//   linkfit_filter_nodes_total{result}          counter, result = passed|failed|unresolvable
//   linkfit_cache_nodes                         gauge
//   linkfit_cache_pods{state}                   gauge, state = assumed|bound
//   linkfit_gpus{node,model,state}              gauge, state = used|free (whole-GPU equivalents)
//   linkfit_fragmentation_ratio                 gauge, 0..1
//
// Thread-safety: every method may be called concurrently from any thread.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "linkfit/common/metrics.h"

namespace linkfit::server {

class PrometheusMetrics final : public MetricsSink {
 public:
  PrometheusMetrics();
  ~PrometheusMetrics() override;
  PrometheusMetrics(const PrometheusMetrics&) = delete;
  PrometheusMetrics& operator=(const PrometheusMetrics&) = delete;

  void ObserveRequest(Verb verb, std::string_view outcome, double seconds) override;
  void CountFilterNodes(std::uint64_t passed, std::uint64_t failed,
                        std::uint64_t unresolvable) override;
  void SetCacheSizes(std::uint64_t nodes, std::uint64_t assumed_pods,
                     std::uint64_t bound_pods) override;
  void SetNodeDevices(std::string_view node, std::string_view gpu_model, double used,
                      double free) override;
  void RemoveNode(std::string_view node) override;
  void SetFragmentation(double ratio) override;

  // Counts a request in linkfit_requests_total without a latency observation, for requests the
  // server rejected before the handler ran (413, empty body).
  void CountRequest(Verb verb, std::string_view outcome);

  // Returns every series in the Prometheus text exposition format (version 0.0.4).
  std::string Render() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Returns "filter", "prioritize", "bind" or "preempt".
std::string_view VerbName(Verb verb);

}  // namespace linkfit::server
