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
// Filter, prioritize, preempt and explain are const: they read one snapshot and the PodSource's
// demand and change nothing of the cluster's state. Filter and prioritize keep what they learn
// of nodes across calls (fits and scores by node position, extender/verb_cache.h), dropped at a
// call's start for the nodes that changed since the last call (state::ClusterCache::Changes).
// Bind resolves the pod through the PodSource (pod_source.h), which is the memo of earlier
// requests in standalone mode and the pod watch in cluster mode.
//
// Thread-safety: every method may be called concurrently.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "linkfit/common/metrics.h"
#include "linkfit/extender/binder.h"
#include "linkfit/extender/gpu_request.h"
#include "linkfit/extender/mig_fragmentation.h"
#include "linkfit/extender/node_fit.h"
#include "linkfit/extender/pod_source.h"
#include "linkfit/extender/scoring.h"
#include "linkfit/extender/whole_machines.h"
#include "linkfit/kube/codec.h"
#include "linkfit/state/cluster_cache.h"

namespace linkfit::extender {

class VerbCachePool;

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

  // Filter and prioritize of a request decoded with kube::NameCheck::kAtDecode. (Given names read
  // as sent that need decoding, Filter answers an error and PrioritizeScores zeros.)
  kube::FilterResult Filter(const kube::ExtenderArgs& args) const;
  std::vector<kube::HostPriority> Prioritize(const kube::ExtenderArgs& args) const;
  // Prioritize's scores alone: scores[i] is args.node_names[i]'s (what the wire writes beside the
  // request's own names, kube::EncodeHostScores).
  std::vector<std::uint32_t> PrioritizeScores(const kube::ExtenderArgs& args) const;

  // The same for a request decoded with kube::NameCheck::kByCaller, the wire's hot path: a name
  // linkfit knows is one of its own, found by its bytes and written as it is (while every node
  // name is, state::Snapshot::names_written_as_is), so only the names it does not know are looked
  // at. nullopt when one of those holds an escape (kube-scheduler's never do: node names are DNS
  // names): decode the request with kAtDecode and call again. Nothing is counted or kept for a
  // call that answers nullopt. A request decoded with kAtDecode always has its answer.
  std::optional<kube::FilterResult> FilterNamesAsSent(const kube::ExtenderArgs& args) const;
  // FilterNamesAsSent's reply, encoded (kube::EncodeFilterResult of its result, byte for byte):
  // what the wire sends. In steady state (a list of names linkfit knows, each fit kept) built in
  // one pass over the names as a kube::RankedFilterReply, without the result's lists; otherwise
  // the result, encoded. nullopt as there.
  std::optional<std::string> FilterReplyNamesAsSent(const kube::ExtenderArgs& args) const;
  struct Scores {
    std::vector<std::uint32_t> scores;  // as PrioritizeScores
    bool names_escape_free = false;     // a reply may write every name as it is
  };
  std::optional<Scores> PrioritizeNamesAsSent(const kube::ExtenderArgs& args) const;
  // Whether a request's names are best read as sent: while every node name linkfit knows is
  // written as it is. Otherwise FilterNamesAsSent and PrioritizeNamesAsSent answer nullopt for
  // every request, and decoding each name at once costs less than decoding every request twice.
  bool ReadsNamesAsSent() const { return cache_.Snapshot()->names_written_as_is(); }
  // Returns "" on success, else the error for ExtenderBindingResult.Error.
  std::string Bind(const kube::BindingArgs& args);
  std::vector<kube::NodeVictims> Preempt(const kube::PreemptionArgs& args) const;

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

  state::ClusterCache& cache_;
  const ExtenderOptions options_;
  Binder& binder_;
  PodSource& pods_;
  MetricsSink& metrics_;
  std::unique_ptr<VerbCachePool> caches_;  // filter's and prioritize's; leased per call
};

}  // namespace linkfit::extender
