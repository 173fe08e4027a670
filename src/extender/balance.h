#pragma once

// The balance term B of prioritize (its definition and the measurements behind it are in
// include/linkfit/extender/scoring.h): keep a node's CPU and memory use in step with its GPU use,
// weighing the level of the gap against its change by how scarce CPU and memory are per GPU.
//
// Thread-safety: pure functions.

#include <vector>

#include "linkfit/extender/gpu_request.h"
#include "linkfit/extender/scoring.h"
#include "linkfit/state/node_state.h"

namespace linkfit::extender {

// How much CPU and memory GPU requests bring per whole GPU (the learned shapes' weighted mean),
// against what the candidate nodes have per GPU (the median): rho = (demand / supply)^2,
// clamped to [0, 1]. Near 1, CPU or memory runs out about as fast as GPUs (openb); near 0, GPU
// pods ask for little of it and GPUs are the only scarce resource. 0 before any shape with CPU
// or memory is known.
struct Scarcity {
  double cpu = 0;
  double memory = 0;
};

Scarcity ScarcityOf(const std::vector<Shape>& shapes, const std::vector<Candidate>& candidates);

// The median of a multiset of values, as std::nth_element picks it (the element at index size/2
// in sorted order), counted by distinct value while there are few: candidates' CPU and memory per
// GPU take one value per machine type, so thousands of candidates cost a few comparisons each
// instead of a selection over thousands. Past kMaxDistinct values it keeps every value.
class MedianOfFew {
 public:
  static constexpr std::size_t kMaxDistinct = 16;
  void Add(double value);
  bool empty() const { return count_ == 0; }
  // REQUIRES: !empty().
  double Median();

 private:
  struct Distinct {
    double value;
    std::size_t count;
  };
  std::vector<Distinct> distinct_;
  std::vector<double> all_;  // every value, once there were more than kMaxDistinct
  std::size_t count_ = 0;
};

// B for one node: per resource whose allocatable is known, with gap = |GPU share used - share
// of the resource used|: rho x (1 - gap after) + (1 - rho) x (0.5 + (gap before - gap after) / 2),
// averaged over CPU and memory; 1 where nothing can be stranded (no GPUs, nothing known).
double Balance(const state::NodeState& node, const GpuRequest& request, const Scarcity& rho);

}  // namespace linkfit::extender
