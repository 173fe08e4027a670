#pragma once

// NameIndex: node name -> position, the lookup filter and prioritize make for every name
// kube-scheduler sends (DESIGN.md §11: 1,000-5,000 per request). An open-addressing hash table
// with linear probing and a power-of-two capacity kept at most three quarters full. Each 16-byte
// slot holds a name's 64-bit hash (its fingerprint), its length and its position; the names
// themselves lie in one arena, found by position. A batch lookup (ForEachPosition, the verbs'
// hot path) reads one slot a name and nothing else: the name it answers is the known name with
// the same length and fingerprint. Find (one name, the exact paths: bind, watch events, the
// cache's bookkeeping) also compares the bytes.
//
// Why a fingerprint is enough for the verbs. Two known names never share one: Insert compares
// bytes whenever length and fingerprint agree, and on a true collision picks a new seed and
// rehashes every name, so every known name is always found as itself. An unknown name (a node
// linkfit does not model, or has not seen yet) is taken for a known one only if its 64-bit hash
// under this index's random seed equals a known name's of the same length: at 5,000 names about
// once in 3.7e15 unknown names, and not something a chosen name can aim at, as the seed is
// drawn at start-up (the hash's one seed-independent weakness, an 8-byte word equal to one of its
// odd constants, needs bytes outside the letters, digits, '-' and '.' a node name may hold). Even
// then nothing is committed: bind finds its node by Find, which is exact, and fails. The comparison
// of bytes this saves was a second, dependent cache miss a name (the name's entry) and 30 % of a
// lookup's instructions (bench/RESULTS.md, 27 Nov 2026).
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

#include "linkfit/common/byte_set.h"
#include "linkfit/state/name_probe.h"

namespace linkfit::state {

class NameIndex {
 public:
  static constexpr std::size_t kNotFound = static_cast<std::size_t>(-1);

  // A copy is for adding names: it does not carry the ranks (they would not hold after an add).
  // (No move: a moved-from index would have no ranking; moving copies.)
  NameIndex(const NameIndex& other);
  NameIndex& operator=(const NameIndex& other);

  // An index whose hash seed is drawn at random once per process.
  NameIndex();
  // For tests: the given seed, and fingerprints cut to their low `fingerprint_bits` bits (1-64),
  // so that collisions between known names, which Insert must resolve, can be made to happen.
  // REQUIRES: far more fingerprints than the square of the names (else no seed separates them).
  NameIndex(std::uint64_t seed, int fingerprint_bits);

  // Returns the position recorded for `name`, or kNotFound. Exact: compares the bytes.
  std::size_t Find(std::string_view name) const;
  // Looks up names[0..count) in order and calls visit(i, position) for each, position being
  // kNoPosition where the name is unknown; a name is matched by length and fingerprint (see
  // above). One tight loop that overlaps the lookups' cache misses: each name's slot is loaded
  // kAhead names before it is compared (a request's 1,000-5,000 names land all over the slots,
  // and when other work between requests has pushed the table out of cache, each load comes from
  // memory: only many loads in flight at once hide that). Inline, so that the caller's work per
  // name (storing the position, counting) costs no call. A caller that then loads its own tables
  // by position does so in a loop of its own: here each of those loads would wait for its name's
  // lookup, and fewer would be in flight (measured slower).
  // Returns how many of the names are unknown (counted here, in a register: a count the caller
  // kept behind a reference was read and written in memory once a name).
  static constexpr std::uint32_t kNoPosition = static_cast<std::uint32_t>(-1);
  template <typename Visit>
  std::size_t ForEachPosition(const std::string_view* names, std::size_t count,
                              Visit&& visit) const;
  // ForEachPosition's answers written to found[i].
  struct Found {
    std::uint32_t position = kNoPosition;
    bool known() const { return position != kNoPosition; }
  };
  void FindAll(const std::string_view* names, std::size_t count, Found* found) const;
  // The hash under name_probe::kSeed (a fixed function, for tests of it).
  static std::uint64_t Hash(std::string_view name);

  // Records `name` at `position`. REQUIRES: `name` is not in the index.
  void Insert(std::string_view name, std::size_t position);

  std::size_t size() const { return size_; }
  // Every byte value that occurs in some recorded name (a copy keeps it), so that a caller can
  // ask a question of every name's bytes at once: the extender protocol trusts the names it
  // finds here without looking at their bytes only while none holds a byte its replies escape.
  const ByteSet& name_bytes() const { return name_bytes_; }
  // How many times a collision between two known names made the index pick a new seed.
  std::size_t reseeds() const { return reseeds_; }

  // For each position, the rank of its name among all the index's names in byte order, so that
  // a caller sorts nodes by name without reading the names (a reply's maps are sorted so). Computed
  // on the first call (n log n) and kept; safe to call concurrently. REQUIRES: no Insert after the
  // first call (the cache publishes an index and copies it to add).
  const std::vector<std::uint32_t>& Ranks() const;

 private:
  struct Slot {
    std::uint64_t hash = 0;               // the fingerprint: HashOf under seed_, cut by hash_mask_
    std::uint32_t length = 0;             // of the name
    std::uint32_t position_plus_one = 0;  // 0: an empty slot
  };
  [[gnu::always_inline]] std::uint64_t HashOf(std::string_view name) const {
    return name_probe::HashOf(name, seed_) & hash_mask_;
  }
  std::string_view NameAt(std::uint32_t position) const;
  // Places `position`'s name in slots_; false if a slot holds another name of the same length
  // and fingerprint (nothing placed then). A slot of the same name is pointed at `position`.
  bool Place(std::uint32_t position);
  // Picks another seed and places every name again, until no two collide.
  void Reseed();
  void Grow();

  std::uint64_t seed_;
  std::uint64_t hash_mask_ = ~std::uint64_t{0};
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> entries_;  // by position: its name's entry in arena_ (0: none)
  std::string arena_;                   // entries: the length (4 bytes), then the bytes
  std::size_t size_ = 0;
  std::size_t reseeds_ = 0;
  ByteSet name_bytes_;
  struct Ranking {
    std::once_flag once;
    std::vector<std::uint32_t> ranks;
  };
  std::unique_ptr<Ranking> ranking_ = std::make_unique<Ranking>();
};

// Aligned to a cache line: where the loop below lands relative to 64-byte boundaries decided
// a third of prioritize's time (the same code placed 96 bytes further on by an unrelated change
// took ForEachPosition from 18 % to 35 % of prioritize @ 5,000 on the AMD EPYC VM:
// bench/RESULTS.md, 27 Nov 2026).
template <typename Visit>
[[gnu::aligned(64)]] std::size_t NameIndex::ForEachPosition(const std::string_view* names,
                                                            std::size_t count,
                                                            Visit&& visit) const {
  if (slots_.empty()) {
    for (std::size_t i = 0; i < count; ++i) visit(i, kNoPosition);
    return count;
  }
  // The fingerprints of the names between the one compared and the one whose slot is loaded,
  // in a ring (a request's 5,000 in an array were 40 KB written and read back).
  constexpr std::size_t kAhead = 32;
  constexpr std::size_t kRing = 64;  // a power of two above kAhead
  static_assert(kRing > kAhead && (kRing & (kRing - 1)) == 0);
  const Slot* const slots = slots_.data();
  const std::size_t mask = slots_.size() - 1;
  // In locals: the caller's stores (positions, by its own pointer) would otherwise make the
  // compiler load the members again for every name.
  const std::uint64_t seed = seed_;
  const std::uint64_t hash_mask = hash_mask_;
  std::size_t unknown = 0;
  std::uint64_t hashes[kRing];
  const auto load_slot = [&](std::size_t i) __attribute__((always_inline)) {
    const std::uint64_t hash = name_probe::HashOf(names[i], seed) & hash_mask;
    hashes[i % kRing] = hash;
    __builtin_prefetch(&slots[hash & mask]);
  };
  // position + 1, or 0 for an unknown name: minus one is the position or kNoPosition
  const auto answer = [&](std::size_t i) __attribute__((always_inline)) {
    const std::uint32_t found = name_probe::Probe(slots, mask, hashes[i % kRing], names[i].size());
    unknown += found == 0 ? 1u : 0u;
    visit(i, found - 1);
  };
  const std::size_t first = count < kAhead ? count : kAhead;
  for (std::size_t i = 0; i < first; ++i) load_slot(i);
  // Every name but the last kAhead without a test of how far ahead there are names.
  std::size_t i = 0;
  for (; i + kAhead < count; ++i) {
    load_slot(i + kAhead);
    answer(i);
  }
  for (; i < count; ++i) answer(i);
  return unknown;
}

}  // namespace linkfit::state
