#pragma once

// MetricsSink: what the domain modules (state, extender) report, independent of Prometheus. The
// server module implements it on a prometheus-cpp registry (server/prometheus_metrics.h) and
// renders it at GET /metrics; tests use NullMetrics or a recording fake.
//
// Thread-safety: implementations must be safe to call from any thread.

#include <cstdint>
#include <string_view>

namespace linkfit {

enum class Verb { kFilter, kPrioritize, kBind, kPreempt };

class MetricsSink {
 public:
  virtual ~MetricsSink() = default;

  // One extender call: its verb, outcome label ("ok", "error", "bad_request", ...) and the time
  // spent in linkfit's own code.
  virtual void ObserveRequest(Verb verb, std::string_view outcome, double seconds) = 0;

  // Filter results per node: how many nodes passed / failed (resolvable) / failed unresolvable.
  virtual void CountFilterNodes(std::uint64_t passed, std::uint64_t failed,
                                std::uint64_t unresolvable) = 0;

  // Cache sizes (nodes known, pods assumed but not confirmed, pods confirmed).
  virtual void SetCacheSizes(std::uint64_t nodes, std::uint64_t assumed_pods,
                             std::uint64_t bound_pods) = 0;

  // Whole-GPU-equivalent devices in use and free on one node, labelled by GPU model.
  virtual void SetNodeDevices(std::string_view node, std::string_view gpu_model, double used,
                              double free) = 0;
  virtual void RemoveNode(std::string_view node) = 0;

  // Cluster fragmentation: the share (0..1) of free whole GPUs that lie outside their node's
  // largest well-connected free set (all hops NVLink on nodes with NVLink, one socket on PCIe-only
  // nodes), i.e. that can only serve small pods (maintained by state::ClusterCache).
  virtual void SetFragmentation(double ratio) = 0;

  // Cluster mode (the defaults drop them; standalone mode never reports them).
  // One API call: verb (list, watch, get, bind, ...) and HTTP code (0: no reply).
  virtual void CountApiCall(std::string_view verb, int code) { (void)verb, (void)code; }
  // One watch event by kind (pods, nodes) and type (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR).
  virtual void CountWatchEvent(std::string_view kind, std::string_view type) {
    (void)kind, (void)type;
  }
  // One (re)list by kind and reason (initial, gone, error).
  virtual void CountRelist(std::string_view kind, std::string_view reason) {
    (void)kind, (void)reason;
  }
  // One bind outcome: bound, rejected, unknown, settled, replaced (the API's record of the pod
  // names other devices: it wins), displaced (a committed record took the devices first).
  virtual void CountBindOutcome(std::string_view outcome) { (void)outcome; }
  // Exactly-once binding (cluster/binder_lease.h): a bind held because this process does not
  // hold the binder lease; whether it holds it; each transition (acquired, taken_over, released,
  // lost); Bindings whose outcome is still unknown.
  virtual void CountBindHeld() {}
  virtual void SetBinderLeaseHeld(bool held) { (void)held; }
  virtual void CountBinderLease(std::string_view transition) { (void)transition; }
  virtual void SetBindsInDoubt(std::uint64_t binds) { (void)binds; }
  // Two pods whose committed records in the API server name one device: must never happen.
  virtual void CountAllocationCollision() {}
  // A list or watch error of a reflector (logged once, by the reflector).
  virtual void CountReflectorError(std::string_view kind) { (void)kind; }
  // An object linkfit could not use: kind (node, pod) and what (topology, allocation, ...).
  virtual void CountBadObject(std::string_view kind, std::string_view what) {
    (void)kind, (void)what;
  }
  // Pods whose devices linkfit estimated (GPU pods another scheduler placed, without a record).
  virtual void SetEstimatedPods(std::uint64_t pods) { (void)pods; }
  // Node agents' reports of the devices pods really hold (linkfit.io/devices-in-use): pods
  // counted from a report, and each time a pod linkfit placed turned out to hold other devices
  // than its allocation said (the node ignored linkfit's choice).
  virtual void SetReportedPods(std::uint64_t pods) { (void)pods; }
  virtual void CountHandoffMismatch() {}
  // Modelled nodes per hand-off mode their agent reports (topology::kHandoffModes, or
  // "unreported"): a gauge per mode, not per node (a per-node series would cost memory at scale;
  // /inspect shows each node's mode).
  virtual void SetNodesByHandoffMode(std::string_view mode, std::uint64_t nodes) {
    (void)mode, (void)nodes;
  }
  // Pods the pod store holds.
  virtual void SetPodStoreSize(std::uint64_t pods) { (void)pods; }
  // Seconds from start-up to ready (the initial lists applied).
  virtual void SetTimeToReady(double seconds) { (void)seconds; }
};

// A sink that drops everything.
class NullMetrics final : public MetricsSink {
 public:
  void ObserveRequest(Verb, std::string_view, double) override {}
  void CountFilterNodes(std::uint64_t, std::uint64_t, std::uint64_t) override {}
  void SetCacheSizes(std::uint64_t, std::uint64_t, std::uint64_t) override {}
  void SetNodeDevices(std::string_view, std::string_view, double, double) override {}
  void RemoveNode(std::string_view) override {}
  void SetFragmentation(double) override {}
};

}  // namespace linkfit
