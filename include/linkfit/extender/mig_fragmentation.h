#pragma once

// MIG fragmentation for prioritize: the FGD measure (Weng et al., ATC'23) applied to the memory
// slices of MIG-mode GPUs.
//
//   stranded(GPU, p)  the free memory slices of the GPU that no instance of profile p can cover:
//                     every legal start of p whose range holds the slice is blocked (a slice in
//                     use, or p cannot be placed there at all: compute slices, p's
//                     max_instances, the GPU's instance limit, the one `+me` instance)
//   F(node)           sum over the node's MIG-mode GPUs and the profiles of its set of
//                     weight(p) x stranded(GPU, p), in memory slices
//
// The weights are how often each profile is requested (MigProfileStats, learned like ShapeStats
// learns request shapes), normalised over the profiles of the node's set; before any profile of
// the set is seen, uniform over the set. For the 7g profile every free slice of a GPU that holds
// anything is stranded, so its weight keeps whole GPUs free while 7g instances are wanted; for
// 1g almost nothing is, so a mix of small instances packs them tightly.
//
// The prioritize term is FGD's: 1 / (1 + exp(growth)), growth = F(after) - F(before) in whole
// GPUs (8 memory slices = 1 GPU), on an absolute scale (0.5 = no change, no min-max over the
// candidates). Only the GPUs an assignment touches change, so the growth is computed exactly
// from their before and after states (a few dozen slice-mask checks per candidate).
//
// Packing for MIG is best fit per GPU: prioritize takes the tightness of the GPUs the instances
// land on, not the node's. Node-level tightness sent a small instance to the fullest node even
// when it had to partition a fresh GPU there, and partly used GPUs elsewhere stayed partly used.
//
// Thread-safety: MigProfileStats is safe to update and read concurrently (a mutex held for a map
// update; Weights() hands out an immutable snapshot rebuilt when the counts have grown by
// 0.5 %). MigFragmentationScorer is a value meant for one scoring call on one thread (it caches
// each profile set's weights); the free functions are pure.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "linkfit/alloc/mig.h"
#include "linkfit/common/mutex.h"
#include "linkfit/extender/gpu_request.h"
#include "linkfit/state/node_state.h"

namespace linkfit::extender {

// How often each MIG profile has been requested, by profile name ("3g.20gb"): weights summing
// to 1, in name order. Empty before any MIG request is seen.
struct MigProfileWeights {
  std::vector<std::pair<std::string, double>> by_name;
};
using MigProfileWeightsPtr = std::shared_ptr<const MigProfileWeights>;

class MigProfileStats {
 public:
  // Counts the instances of a MIG request (request.count of request.mig_profile); other kinds
  // are ignored. Retries count again, which is harmless. Names come from pods (untrusted): once
  // kMaxProfileNames distinct names are known, new ones are not counted.
  void Record(const GpuRequest& request);
  // Uncounts a request counted before (a pod that left).
  void Remove(const GpuRequest& request);
  // The current weights (never null).
  MigProfileWeightsPtr Weights() const;

  static constexpr std::size_t kMaxProfileNames = 256;

 private:
  mutable Mutex mutex_;
  std::map<std::string, std::uint64_t> counts_ LINKFIT_GUARDED_BY(mutex_);
  std::uint64_t total_ LINKFIT_GUARDED_BY(mutex_) = 0;
  std::uint64_t changes_ LINKFIT_GUARDED_BY(mutex_) = 0;  // : instances counted in or out
  mutable MigProfileWeightsPtr weights_ LINKFIT_GUARDED_BY(mutex_);
  mutable std::uint64_t weights_total_ LINKFIT_GUARDED_BY(mutex_) = 0;
  mutable std::uint64_t weights_changes_ LINKFIT_GUARDED_BY(mutex_) = 0;
};

// The weight of each profile of `set` (by index), summing to 1: the named weights of the set's
// profiles renormalised, or uniform over the set when none of them has a weight.
std::vector<double> WeightsForSet(const alloc::MigProfileSet& set,
                                  const MigProfileWeights& weights);

// MIG fragmentation of one GPU in memory slices: sum of set_weights[p] x
// planner.StrandedSlices(state, p), the free slices no instance of profile p can cover.
// REQUIRES: set_weights.size() == planner.set().profiles.size().
double MigGpuFragmentation(const alloc::MigPlanner& planner, const alloc::MigGpuState& state,
                           const std::vector<double>& set_weights);

// MIG fragmentation of a node in memory slices: MigGpuFragmentation summed over its MIG-mode
// GPUs of the node's profile set. 0 for a node that is not MIG-capable.
double MigFragmentation(const state::NodeState& node, const MigProfileWeights& weights);

// What prioritize reads of one MIG candidate.
struct MigPlacementTerms {
  double growth_slices = 0;    // F(after) - F(before), memory slices
  double fragmentation = 0.5;  // 1 / (1 + exp(growth_slices / 8))
  // 1 - the free memory slices left on the GPUs it touches / their slices: best fit per GPU,
  // as the best-fit baseline (a partitioned GPU it fills scores above a fresh GPU it opens).
  double gpu_tightness = 0;
};

// Scores MIG assignments against one weight snapshot; caches the per-set weights.
class MigFragmentationScorer {
 public:
  explicit MigFragmentationScorer(MigProfileWeightsPtr weights);

  // The terms for placing `assignment` (kind kMig, from FitOnNode on `node`) on `node`. An
  // assignment that is not MIG, on a node without a MIG planner, or whose instances do not fit
  // the node's state (a caller bug) gives the neutral terms (growth 0, fragmentation 0.5).
  MigPlacementTerms Score(const state::NodeState& node, const state::Assignment& assignment);

 private:
  const std::vector<double>& SetWeights(const alloc::MigPlanner& planner);

  MigProfileWeightsPtr weights_;
  std::vector<std::pair<const alloc::MigPlanner*, std::vector<double>>> by_planner_;
};

}  // namespace linkfit::extender
