#pragma once

// Extender: kube-scheduler's four extender verbs over the ClusterCache. Filter and prioritize take
// a VerbCall and answer verdicts and scores (verdicts.h; wire/ decodes requests and writes
// replies); bind and preempt take the decoded wire arguments.
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
// Filter, prioritize, preempt and explain are const: they read one snapshot and the PodSource's
// demand and change nothing of the cluster's state. One thing they read beside the snapshot: for a
// pod of a group that asks NICs, the rails its members hold now (ClusterCache::GroupRailsOf, under
// the cache's lock, ParseRequest), a preference that may be a bind newer than the snapshot. Filter
// and prioritize keep what they learn of nodes across calls (fits and scores by node position,
// extender/verb_cache.h), dropped at a call's start for the nodes that changed since the last call
// (state::ClusterCache::Changes). Bind resolves the pod through the PodSource (pod_source.h), which
// is the memo of earlier requests in standalone mode and the pod watch in cluster mode.
//
// Thread-safety: every method may be called concurrently.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/metrics.h"
#include "linkfit/extender/binder.h"
#include "linkfit/extender/gpu_request.h"
#include "linkfit/extender/mig_fragmentation.h"
#include "linkfit/extender/node_fit.h"
#include "linkfit/extender/pod_source.h"
#include "linkfit/extender/scoring.h"
#include "linkfit/extender/verdicts.h"
#include "linkfit/extender/whole_machines.h"
#include "linkfit/kube/types.h"
#include "linkfit/state/cluster_cache.h"

namespace linkfit::extender {

class VerbCachePool;

// One node kube-scheduler offers for preemption and the pods it would evict there (borrowed for
// the call).
struct PreemptionCandidate {
  std::string_view node;
  std::vector<std::string_view> victim_uids;
};

struct ExtenderOptions {
  RequestDefaults defaults;
  FitOptions fit;
  ScoreWeights weights;
  int score_range = 140;
};

class Extender {
 public:
  // `binder`, `pods` and `metrics` must outlive the Extender.
  Extender(state::ClusterCache& cache, ExtenderOptions options, Binder& binder, PodSource& pods,
           MetricsSink& metrics);
  ~Extender();

  // The pod's request as filter and prioritize read it (ParseGpuRequest with the configured
  // defaults): a caller parses it once a call and hands it to both.
  Result<GpuRequest> ParseRequest(const kube::PodView& pod) const;
  // Sets the rails a pod asking NICs prefers: those its group's members hold now.
  void WithGroupRails(GpuRequest& request) const;
  // Filter: a verdict for every candidate of `call` (nodes linkfit does not know fail for good,
  // saying why), the names counted by outcome.
  FilterVerdicts Filter(const VerbCall& call) const;
  // Prioritize: scores[i] is call.names[i]'s, 0 for a name where the pod does not fit.
  std::vector<std::uint32_t> Prioritize(const VerbCall& call) const;
  // Binds the pod to the node: "" on success, else why not (the error kube-scheduler is told).
  std::string Bind(const BindTarget& target);
  // Returns the indices of the candidates to keep: those with victims where evicting them frees
  // devices on which the pod fits (a pod without GPUs keeps every candidate with victims; a pod
  // whose request is bad keeps none).
  std::vector<std::size_t> Preempt(const kube::PodView& pod,
                                   std::span<const PreemptionCandidate> candidates) const;

  // Frees a bound pod's devices (standalone departures): kRemoved, kUnknown for a UID that holds
  // nothing, kBindInFlight (nothing freed) while the pod's bind is still being recorded.
  state::RemoveOutcome Release(const std::string& pod_uid);

  // One line per known node saying whether and how the pod fits, and, where it would lose the
  // whole-machine points (whole_machines.h), what it would break and which node keeps it.
  std::vector<std::string> Explain(const kube::PodView& pod) const;

  state::ClusterCache& cache() const { return cache_; }
  const ExtenderOptions& options() const { return options_; }

 private:
  // Explain's clause for a node that loses the whole-machine points among `fits` (by snapshot
  // position).
  std::string WholeMachineLoss(const state::NodeState& node, const NodeFit& fit,
                               const std::vector<NodeFit>& fits, const state::Snapshot& snapshot,
                               bool ring_decides) const;
  // Explain's clause ("; loses 70 of 140 points: ...") for a fit whose NICs lose prioritize's N
  // term to another of `fits`; empty when they do not.
  std::string NicLoss(const NodeFit& fit, const std::vector<NodeFit>& fits,
                      const state::Snapshot& snapshot) const;

  state::ClusterCache& cache_;
  const ExtenderOptions options_;
  Binder& binder_;
  PodSource& pods_;
  MetricsSink& metrics_;
  std::unique_ptr<VerbCachePool> caches_;  // filter's and prioritize's; leased per call
};

}  // namespace linkfit::extender
