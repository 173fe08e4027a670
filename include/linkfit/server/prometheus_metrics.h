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
//   cluster mode:
//   linkfit_watch_events_total{kind,type}       counter
//   linkfit_relists_total{kind,reason}          counter
//   linkfit_api_calls_total{verb,code}          counter
//   linkfit_bind_outcomes_total{outcome}        counter, bound|rejected|unknown|settled|
//                                               replaced|displaced
//   linkfit_binds_held_total                    counter, binds refused: the binder lease is
//                                               another process's (or not yet ours)
//   linkfit_binder_lease_held                   gauge, 1 while this process holds the lease
//   linkfit_binder_lease_transitions_total{transition}  acquired|taken_over|released|lost
//   linkfit_binds_in_doubt                      gauge, Bindings whose outcome is unknown yet
//   linkfit_allocation_collisions_total         counter, committed records naming one device
//                                               twice (must stay 0)
//   linkfit_reflector_errors_total{kind}        counter, list/watch errors
//   linkfit_bad_objects_total{kind,what}        counter, bad annotations and collisions
//   linkfit_estimated_pods                      gauge
//   linkfit_pod_store_pods                      gauge
//   linkfit_reported_pods                       gauge, devices from node agents' reports
//   linkfit_handoff_mismatch_total              counter, placed pods holding other devices
//   linkfit_time_to_ready_seconds               gauge
//
// Per-node series: only linkfit_gpus (two series per node), which the dashboard's capacity and
// free-GPUs-per-node panels need. It is not a prometheus-cpp family: each node is one compact
// record (name, interned model, used, free: about 140 B) and the series are written at Render(),
// sorted by node, where two prometheus-cpp gauges cost about 1.25 KB per node. Everything else is
// aggregated over nodes: fragmentation is one cluster ratio, hand-off modes are node counts per
// mode (GET /inspect shows each node's), cache sizes are totals.
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
  void CountApiCall(std::string_view verb, int code) override;
  void CountWatchEvent(std::string_view kind, std::string_view type) override;
  void CountRelist(std::string_view kind, std::string_view reason) override;
  void CountBindOutcome(std::string_view outcome) override;
  void CountBindHeld() override;
  void SetBinderLeaseHeld(bool held) override;
  void CountBinderLease(std::string_view transition) override;
  void SetBindsInDoubt(std::uint64_t binds) override;
  void CountAllocationCollision() override;
  void CountReflectorError(std::string_view kind) override;
  void CountBadObject(std::string_view kind, std::string_view what) override;
  void SetEstimatedPods(std::uint64_t pods) override;
  void SetReportedPods(std::uint64_t pods) override;
  void CountHandoffMismatch() override;
  void SetNodesByHandoffMode(std::string_view mode, std::uint64_t nodes) override;
  void SetPodStoreSize(std::uint64_t pods) override;
  void SetTimeToReady(double seconds) override;

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
