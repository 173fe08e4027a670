#pragma once

// NameIndex: node name -> position, the lookup filter and prioritize make for every name
// kube-scheduler sends (DESIGN.md §11: 1,000-5,000 per request). An open-addressing hash table
// with linear probing and a power-of-two capacity kept at most three quarters full; each 8-byte
// slot holds 24 bits of the name's hash, its length (up to 254; 255 marks a longer name) and where
// its entry lies in one contiguous arena: the position, then (for a longer name) the length, then
// the bytes. A lookup reads one slot and one entry and never divides (std::unordered_map chases a
// node pointer per probe and divides by a prime). Small slots and three quarters rather than half
// full: a request touches slots all over the table, so the table's size is what it costs from
// memory (at 5,000 names 64 KiB, where 16-byte slots at half full took 256), while a probe's few
// extra slots mostly lie in the line already loaded; the position rides with the bytes, which the
// exact comparison reads anyway.
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

#include "linkfit/state/name_probe.h"

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
  std::size_t Find(std::string_view name) const;
  // Looks up names[0..count) in order and calls visit(i, position) for each, position being
  // kNoPosition where the name is unknown. One tight loop that overlaps the lookups' cache
  // misses: each name's slot is loaded 48 names before it is compared and the bytes it points at
  // 24 before (a request's 1,000-5,000 names land all over the slots, and when other work between
  // requests has pushed the table out of cache, each load comes from memory: only many loads in
  // flight at once hide that). Inline, so that the caller's work per name (storing the position,
  // counting) costs no call. A caller that then loads its own tables by position does so in a
  // loop of its own: here each of those loads would wait for its name's lookup, and fewer would
  // be in flight (measured slower).
  static constexpr std::uint32_t kNoPosition = static_cast<std::uint32_t>(-1);
  template <typename Visit>
  void ForEachPosition(const std::string_view* names, std::size_t count, Visit&& visit) const;
  // ForEachPosition's answers written to found[i].
  struct Found {
    std::uint32_t position = kNoPosition;
    bool known() const { return position != kNoPosition; }
  };
  void FindAll(const std::string_view* names, std::size_t count, Found* found) const;
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
    std::uint32_t key = 0;     // KeyOf: hash bits and length
    std::uint32_t offset = 0;  // the entry in arena_; 0 marks an empty slot (arena_ starts padded)
  };
  // The name of a used slot, and its position.
  std::string_view NameOf(const Slot& slot) const;
  std::uint32_t PositionOf(const Slot& slot) const;
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

template <typename Visit>
void NameIndex::ForEachPosition(const std::string_view* names, std::size_t count,
                                Visit&& visit) const {
  if (slots_.empty()) {
    for (std::size_t i = 0; i < count; ++i) visit(i, kNoPosition);
    return;
  }
  // The hashes of the names between the one compared and the one whose slot is loaded, in a ring
  // (a request's 5,000 hashes in an array were 40 KB written and read back).
  constexpr std::size_t kSlotAhead = 48;
  constexpr std::size_t kNameAhead = 24;
  constexpr std::size_t kRing = 64;  // a power of two above kSlotAhead
  static_assert(kRing > kSlotAhead && (kRing & (kRing - 1)) == 0);
  const Slot* const slots = slots_.data();
  const std::size_t mask = slots_.size() - 1;
  const char* const arena = arena_.data();
  std::uint64_t hashes[kRing];
  const std::size_t first = count < kSlotAhead ? count : kSlotAhead;
  for (std::size_t i = 0; i < first; ++i) {
    hashes[i] = name_probe::HashOf(names[i]);
    __builtin_prefetch(&slots[hashes[i] & mask]);
  }
  // position + 1, or 0 for an unknown name: minus one is the position or kNoPosition
  const auto answer = [&](std::size_t i) __attribute__((always_inline)) {
    visit(i, name_probe::Probe(slots, mask, arena, names[i], hashes[i % kRing]) - 1);
  };
  const auto load_bytes = [&](std::size_t i) __attribute__((always_inline)) {
    const Slot& ahead = slots[hashes[i % kRing] & mask];
    __builtin_prefetch(arena + ahead.offset);  // an empty slot's offset 0 is harmless
  };
  // Every name but the last kSlotAhead without a test of how far ahead there are names.
  std::size_t i = 0;
  for (; i + kSlotAhead < count; ++i) {
    const std::uint64_t ahead = name_probe::HashOf(names[i + kSlotAhead]);
    hashes[(i + kSlotAhead) % kRing] = ahead;
    __builtin_prefetch(&slots[ahead & mask]);
    load_bytes(i + kNameAhead);
    answer(i);
  }
  for (; i < count; ++i) {
    if (i + kNameAhead < count) load_bytes(i + kNameAhead);
    answer(i);
  }
}

}  // namespace linkfit::state
