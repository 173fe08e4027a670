#pragma once

// Extender: kube-scheduler's four extender verbs on decoded wire types, over the ClusterCache.
//
//   Filter      read-only: one snapshot, FitOnNode per named node; FailedNodes for what freeing
//               devices could fix, FailedAndUnresolvableNodes for what never fits.
//   Prioritize  read-only: ScoreNodes over the nodes where the pod fits.
//   Bind        the commit point: re-check on current state and assume (ClusterCache::Assume),
//               record through the Binder outside the lock, then confirm; on any failure forget.
//               Idempotent per pod UID.
//   Preempt     keeps the candidate nodes where evicting the named victims frees a set that
//               satisfies the pod (victims and their order unchanged).
//
// Standalone mode has no pod informer, so the request of each pod is remembered from its latest
// filter/prioritize call (by UID, bounded) for bind to resolve.
//
// Thread-safety: every method may be called concurrently.

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "linkfit/common/metrics.h"
#include "linkfit/extender/binder.h"
#include "linkfit/extender/gpu_request.h"
#include "linkfit/extender/mig_fragmentation.h"
#include "linkfit/extender/node_fit.h"
#include "linkfit/extender/scoring.h"
#include "linkfit/kube/codec.h"
#include "linkfit/state/cluster_cache.h"

namespace linkfit::extender {

struct ExtenderOptions {
  RequestDefaults defaults;
  FitOptions fit;
  ScoreWeights weights;
  int score_range = 140;
  std::size_t remembered_pods = 65536;
};

class Extender {
 public:
  // `binder` and `metrics` must outlive the Extender.
  Extender(state::ClusterCache& cache, ExtenderOptions options, Binder& binder,
           MetricsSink& metrics);

  kube::FilterResult Filter(const kube::ExtenderArgs& args);
  std::vector<kube::HostPriority> Prioritize(const kube::ExtenderArgs& args);
  // Returns "" on success, else the error for ExtenderBindingResult.Error.
  std::string Bind(const kube::BindingArgs& args);
  std::vector<kube::NodeVictims> Preempt(const kube::PreemptionArgs& args);

  // Frees a bound pod's devices (standalone departures): kRemoved, kUnknown for a UID that holds
  // nothing, kBindInFlight (nothing freed) while the pod's bind is still being recorded.
  state::RemoveOutcome Release(const std::string& pod_uid);

  // One line per known node saying whether and how the pod fits.
  std::vector<std::string> Explain(const kube::PodView& pod);

  state::ClusterCache& cache() { return cache_; }

 private:
  struct PendingPod {
    GpuRequest request;
    std::string pod_namespace;
    std::string pod_name;
  };
  void Remember(const kube::PodView& pod, const GpuRequest& request);
  std::optional<PendingPod> Recall(const std::string& uid);

  state::ClusterCache& cache_;
  ExtenderOptions options_;
  Binder& binder_;
  MetricsSink& metrics_;
  ShapeStats shapes_;
  MigProfileStats mig_profiles_;

  std::mutex pending_mutex_;
  std::unordered_map<std::string, PendingPod> pending_;  // GUARDED_BY(pending_mutex_)
  std::deque<std::string> pending_order_;                // GUARDED_BY(pending_mutex_)
};

}  // namespace linkfit::extender
