#pragma once

// The balance term B of prioritize (its definition and the measurements behind it are in
// include/linkfit/extender/scoring.h): keep a node's CPU and memory use in step with its GPU use,
// weighing the level of the gap against its change by how scarce CPU and memory are per GPU.
//
// Thread-safety: pure functions.

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
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
// GPU take one value per machine type, so thousands of candidates cost a hash probe each instead
// of a selection over thousands. Past kMaxDistinct values it keeps every value. Values compare as
// doubles do (0.0 and -0.0 are one value; there are no NaNs among allocatable figures).
class MedianOfFew {
 public:
  static constexpr std::size_t kMaxDistinct = 16;
  void Add(double value) {  // inline: called twice per candidate
    ++count_;
    if (spilled_) {
      all_.push_back(value);
      return;
    }
    const std::uint64_t bits = std::bit_cast<std::uint64_t>(value == 0 ? 0.0 : value);
    std::size_t i = static_cast<std::size_t>((bits * 0x9E3779B97F4A7C15u) >> (64 - kSlotBits));
    for (;; i = (i + 1) % kSlots) {
      Slot& slot = slots_[i];
      if (slot.count != 0 && slot.bits == bits) {
        ++slot.count;
        return;
      }
      if (slot.count == 0) break;
    }
    AddDistinct(i, value);
  }
  bool empty() const { return count_ == 0; }
  // REQUIRES: !empty().
  double Median();

 private:
  // A hash table of the distinct values by their bits, at most a quarter full.
  static constexpr int kSlotBits = 6;
  static constexpr std::size_t kSlots = std::size_t{1} << kSlotBits;
  struct Slot {
    std::uint64_t bits = 0;
    std::size_t count = 0;  // 0: empty
  };
  void AddDistinct(std::size_t slot, double value);  // count_ already counts it

  std::array<Slot, kSlots> slots_{};
  std::size_t distinct_ = 0;
  bool spilled_ = false;
  std::vector<double> all_;  // every value, once there were more than kMaxDistinct
  std::size_t count_ = 0;
};

// B for one node: per resource whose allocatable is known, with gap = |GPU share used - share
// of the resource used|: rho x (1 - gap after) + (1 - rho) x (0.5 + (gap before - gap after) / 2),
// averaged over CPU and memory; 1 where nothing can be stranded (no GPUs, nothing known).
double Balance(const state::NodeState& node, const GpuRequest& request, const Scarcity& rho);

}  // namespace linkfit::extender
