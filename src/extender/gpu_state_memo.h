#pragma once

// Work per distinct node state: within one filter or prioritize call, nodes whose GPUs are alike
// (state::NodeState::SameGpuState: same placement table, MIG and health configuration, same GPUs
// held, shared and partitioned) get the same fit and the same GPU-side score terms. A cluster has
// a few topologies and a few hundred occupancy patterns against thousands of nodes, so each
// distinct state is computed once. The hash is kept with the node state; a lookup probes a flat
// table of hashes and compares the state only against an entry whose hash matches.
//
// Thread-safety: none; one instance per call.

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "linkfit/state/node_state.h"

namespace linkfit::extender {

template <typename Value>
class GpuStateMemo {
 public:
  // What a value may depend on besides the GPU state (e.g. which shapes the node's CPU and memory
  // admit before and after the pod lands, the fit it is scored with); zero when nothing.
  struct Extra {
    std::uint64_t first = 0;
    std::uint64_t second = 0;
    const void* third = nullptr;
    bool operator==(const Extra&) const = default;
  };

  // The value for `node`'s GPU state and `extra`, computed by `compute()` the first time. The
  // reference stays valid for the memo's lifetime.
  template <typename Compute>
  const Value& Of(const state::NodeState& node, Extra extra, Compute&& compute) {
    std::uint64_t hash = node.gpu_state_hash() ^ (extra.first * 0x9E3779B97F4A7C15u);
    hash ^= (extra.second + (hash << 6) + (hash >> 2)) * 0xC2B2AE3D27D4EB4Fu;
    hash ^= reinterpret_cast<std::uintptr_t>(extra.third) >> 4;
    hash ^= hash >> 29;
    if (slots_.empty()) slots_.assign(kInitialSlots, Slot{});
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
      Slot& slot = slots_[i];
      if (slot.entry == 0) {
        entries_.push_back(Entry{&node, extra, std::forward<Compute>(compute)()});
        slot = Slot{hash, static_cast<std::uint32_t>(entries_.size())};
        const Value& value = entries_.back().value;
        if (entries_.size() * 2 > slots_.size()) Grow();
        return value;
      }
      if (slot.hash != hash) continue;
      const Entry& entry = entries_[slot.entry - 1];
      if (entry.extra == extra &&
          (entry.node == &node || state::NodeState::SameGpuState(*entry.node, node))) {
        return entry.value;
      }
    }
  }

  std::size_t size() const { return entries_.size(); }

 private:
  static constexpr std::size_t kInitialSlots = 256;
  struct Slot {
    std::uint64_t hash = 0;
    std::uint32_t entry = 0;  // 1 + index into entries_; 0: empty
  };
  struct Entry {
    const state::NodeState* node;  // the first node seen in this state
    Extra extra;
    Value value;
  };

  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{});
    const std::size_t mask = slots_.size() - 1;
    for (const Slot& slot : old) {
      if (slot.entry == 0) continue;
      std::size_t i = slot.hash & mask;
      while (slots_[i].entry != 0) i = (i + 1) & mask;
      slots_[i] = slot;
    }
  }

  std::vector<Slot> slots_;
  std::deque<Entry> entries_;  // stable addresses: callers keep references to values
};

}  // namespace linkfit::extender
