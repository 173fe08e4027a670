#pragma once

// NameIndex: node name -> position, the lookup filter and prioritize make for every name
// kube-scheduler sends (DESIGN.md §11: 1,000-5,000 per request). An open-addressing hash table
// with linear probing and a power-of-two capacity kept at most half full; each 16-byte slot holds
// the name's hash tag, its position and where its bytes lie in one contiguous arena, so a lookup
// reads one slot and one name and never divides (std::unordered_map chases a node pointer per
// probe and divides by a prime).
//
// Names are only ever added: the cache rebuilds the index when it removes a node.
//
// Thread-safety: const methods may be called concurrently; Insert needs exclusive access.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace linkfit::state {

class NameIndex {
 public:
  static constexpr std::size_t kNotFound = static_cast<std::size_t>(-1);

  NameIndex() = default;
  // A copy is for adding names: it does not carry the ranks (they would not hold after an add).
  // (No move: a moved-from index would have no ranking; moving copies.)
  NameIndex(const NameIndex& other);
  NameIndex& operator=(const NameIndex& other);

  // Returns the position recorded for `name`, or kNotFound.
  std::size_t Find(std::string_view name) const { return Find(name, Hash(name)); }
  // The same with the name's hash (Hash) computed by the caller, who may have prefetched the
  // slot it lands on (PrefetchSlot): a batch of lookups then overlaps its cache misses.
  std::size_t Find(std::string_view name, std::uint64_t hash) const;
  void PrefetchSlot(std::uint64_t hash) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[hash & (slots_.size() - 1)]);
  }
  // The second step of a batch: reads the slot `hash` lands on (prefetched some lookups ago) and
  // starts loading the name it points at, which Find compares next.
  void PrefetchName(std::uint64_t hash) const {
    if (slots_.empty()) return;
    const Slot& slot = slots_[hash & (slots_.size() - 1)];
    if (slot.position != 0) __builtin_prefetch(arena_.data() + slot.offset);
  }
  static std::uint64_t Hash(std::string_view name);

  // Records `name` at `position`. REQUIRES: `name` is not in the index.
  void Insert(std::string_view name, std::size_t position);

  std::size_t size() const { return size_; }

  // For each position, the rank of its name among all the index's names in byte order (what Go
  // sorts map keys by), so that a reply's nodes sort without reading their names. Computed on
  // the first call (n log n) and kept; safe to call concurrently. REQUIRES: no Insert after the
  // first call (the cache publishes an index and copies it to add).
  const std::vector<std::uint32_t>& Ranks() const;

 private:
  struct Slot {
    std::uint32_t tag = 0;       // high half of the hash
    std::uint32_t position = 0;  // position + 1; 0 marks an empty slot
    std::uint32_t offset = 0;    // the name in arena_
    std::uint32_t length = 0;
  };
  void Grow();

  std::vector<Slot> slots_;
  std::string arena_;
  std::size_t size_ = 0;
  struct Ranking {
    std::once_flag once;
    std::vector<std::uint32_t> ranks;
  };
  std::unique_ptr<Ranking> ranking_ = std::make_unique<Ranking>();
};

}  // namespace linkfit::state
