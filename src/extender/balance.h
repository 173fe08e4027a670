#pragma once

// The balance term B of prioritize (its definition and the measurements behind it are in
// include/linkfit/extender/scoring.h): keep a node's CPU and memory use in step with its GPU use,
// weighing the level of the gap against its change by how scarce CPU and memory are per GPU.
//
// Thread-safety: the functions are pure; a MedianOfFew or CandidateSupply is one thread's.

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

// The median of a multiset of values, as std::nth_element picks it (the element at index size/2
// in sorted order), counted by distinct value while there are few: candidates' CPU and memory per
// GPU take one value per machine type, so thousands of candidates cost a hash probe each instead
// of a selection over thousands. Past kMaxDistinct values it keeps every value. Values compare as
// doubles do (0.0 and -0.0 are one value; there are no NaNs among allocatable figures).
class MedianOfFew {
 public:
  static constexpr std::size_t kMaxDistinct = 16;
  // Adds `times` copies of `value`.
  void Add(double value, std::size_t times = 1) {
    count_ += times;
    if (spilled_) {
      all_.insert(all_.end(), times, value);
      return;
    }
    const std::uint64_t bits = std::bit_cast<std::uint64_t>(value == 0 ? 0.0 : value);
    std::size_t i = static_cast<std::size_t>((bits * 0x9E3779B97F4A7C15u) >> (64 - kSlotBits));
    for (;; i = (i + 1) % kSlots) {
      Slot& slot = slots_[i];
      if (slot.count != 0 && slot.bits == bits) {
        slot.count += times;
        return;
      }
      if (slot.count == 0) break;
    }
    AddDistinct(i, value, times);
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
  void AddDistinct(std::size_t slot, double value, std::size_t times);  // count_ counts them

  std::array<Slot, kSlots> slots_{};
  std::size_t distinct_ = 0;
  bool spilled_ = false;
  std::vector<double> all_;  // every value, once there were more than kMaxDistinct
  std::size_t count_ = 0;
};

// What ScarcityOf reads of the candidates (their CPU and memory allocatable per GPU), gathered
// one candidate at a time and in any order, so that a caller's own pass over the candidates can
// gather it (CandidateFigures; the scorer's own pass when its caller gathers nothing).
// Candidates are counted by what the figures derive from (placement table, CPU and memory
// allocatable: one entry per machine type), so a candidate costs one probe and no division;
// past kMaxKinds kinds each candidate's values are kept instead. It also knows the candidates'
// distinct placement tables (ForEachTable), for the figures kept per table.
class CandidateSupply {
 public:
  static constexpr std::size_t kMaxKinds = 32;
  // `times` candidates of machine kind `kind`.
  void Add(const state::MachineKind& kind, std::size_t times = 1) {  // inline: once per candidate
    if (spilled_) {
      AddValues(kind.table, kind.cpu_allocatable_milli, kind.memory_allocatable_bytes, times);
      AddTable(kind.table);
      return;
    }
    const std::uint64_t key = state::MachineKindHash(kind);
    std::size_t i = static_cast<std::size_t>((key * 0x9E3779B97F4A7C15u) >> (64 - kSlotBits));
    for (;; i = (i + 1) % kSlots) {
      Kind& counted = kinds_[i];
      if (counted.count == 0) break;
      if (counted.table == kind.table && counted.cpu == kind.cpu_allocatable_milli &&
          counted.memory == kind.memory_allocatable_bytes) {
        counted.count += times;
        return;
      }
    }
    AddKind(i, kind, times);
  }
  // Calls f(table) for each distinct placement table among the candidates added (some maybe
  // more than once).
  template <typename F>
  void ForEachTable(F&& f) const {
    for (const Kind& kind : kinds_) {
      if (kind.count != 0) f(kind.table);
    }
    for (const alloc::PlacementTable* table : tables_) f(table);
  }

 private:
  friend Scarcity ScarcityOf(const std::vector<Shape>& shapes, CandidateSupply& supply);
  struct Kind {
    const alloc::PlacementTable* table = nullptr;
    std::int64_t cpu = 0;
    std::int64_t memory = 0;
    std::size_t count = 0;  // 0: empty
  };
  static constexpr int kSlotBits = 7;  // at most a quarter full
  static constexpr std::size_t kSlots = std::size_t{1} << kSlotBits;
  void AddKind(std::size_t slot, const state::MachineKind& kind, std::size_t times);
  void AddValues(const alloc::PlacementTable* table, std::int64_t cpu, std::int64_t memory,
                 std::size_t times);
  void Fold();  // moves the counted kinds into cpu_ and memory_ (their tables into tables_)
  void AddTable(const alloc::PlacementTable* table);

  std::array<Kind, kSlots> kinds_{};
  std::size_t kind_count_ = 0;
  bool spilled_ = false;
  MedianOfFew cpu_;
  MedianOfFew memory_;
  std::vector<const alloc::PlacementTable*> tables_;  // distinct, of the kinds folded
};

// The scarcity of what `supply` gathered (non-const: a median may reorder what it keeps).
Scarcity ScarcityOf(const std::vector<Shape>& shapes, CandidateSupply& supply);

// B for one node: per resource whose allocatable is known, with gap = |GPU share used - share
// of the resource used|: rho x (1 - gap after) + (1 - rho) x (0.5 + (gap before - gap after) / 2),
// averaged over CPU and memory; 1 where nothing can be stranded (no GPUs, nothing known).
double Balance(const state::NodeState& node, const GpuRequest& request, const Scarcity& rho);

}  // namespace linkfit::extender
