#include "linkfit/state/name_index.h"

#include <algorithm>
#include <cstring>
#include <memory>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace linkfit::state {

namespace {

std::uint64_t Load8(const char* bytes) {
  std::uint64_t word;
  std::memcpy(&word, bytes, sizeof(word));
  return word;
}

std::uint64_t Load4(const char* bytes) {
  std::uint32_t word;
  std::memcpy(&word, bytes, sizeof(word));
  return word;
}

// The 128-bit product of a and b, folded to 64 bits (wyhash's mixing step). On x86-64 by one
// `mul`: in FindAll's loop GCC 12 stored each unsigned __int128 product to the stack and loaded
// it back (a store-forwarding round trip in every step of the hash's chain), which made the
// hashes cost a third more.
[[gnu::always_inline]] inline std::uint64_t Fold(std::uint64_t a, std::uint64_t b) {
#if defined(__x86_64__) && defined(__GNUC__)
  std::uint64_t low;
  std::uint64_t high;
  asm("mulq %3" : "=a"(low), "=d"(high) : "a"(a), "rm"(b) : "cc");
  return low ^ high;
#else
  __extension__ using Wide = unsigned __int128;  // GCC and Clang on 64-bit targets
  const Wide product = static_cast<Wide>(a) * b;
  return static_cast<std::uint64_t>(product) ^ static_cast<std::uint64_t>(product >> 64);
#endif
}

constexpr std::uint64_t kSeed = 0x243F6A8885A308D3u;
constexpr std::uint64_t kOdd1 = 0xA0761D6478BD642Fu;
constexpr std::uint64_t kOdd2 = 0xE7037ED1A0B428DBu;
constexpr std::uint64_t kOdd3 = 0x8EBC6AF09C88C6E3u;

// Byte equality of two names of `size` bytes by words (memcmp is a call through the PLT, and
// most of its cost at 10-60 bytes). From 8 to 32 bytes without a loop: the first and last 16
// bytes (SSE2, part of x86-64; two words each elsewhere), overlapping, so that names of a cluster
// whose lengths differ by a digit or two do not mispredict a loop's exit; longer names by whole
// words, then the last word overlapping.
[[gnu::always_inline]] inline bool Equal(const char* a, const char* b, std::size_t size) {
  if (size >= 16 && size <= 32) {
#if defined(__SSE2__)
    const auto load = [](const char* p) {
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    };
    const __m128i same = _mm_and_si128(_mm_cmpeq_epi8(load(a), load(b)),
                                       _mm_cmpeq_epi8(load(a + size - 16), load(b + size - 16)));
    return _mm_movemask_epi8(same) == 0xFFFF;
#else
    return ((Load8(a) ^ Load8(b)) | (Load8(a + 8) ^ Load8(b + 8)) |
            (Load8(a + size - 16) ^ Load8(b + size - 16)) |
            (Load8(a + size - 8) ^ Load8(b + size - 8))) == 0;
#endif
  }
  if (size >= 8 && size < 16) {
    return ((Load8(a) ^ Load8(b)) | (Load8(a + size - 8) ^ Load8(b + size - 8))) == 0;
  }
  if (size >= 8) {
    for (std::size_t i = 0; i + 8 < size; i += 8) {
      if (Load8(a + i) != Load8(b + i)) return false;
    }
    return Load8(a + size - 8) == Load8(b + size - 8);
  }
  if (size >= 4) return Load4(a) == Load4(b) && Load4(a + size - 4) == Load4(b + size - 4);
  for (std::size_t i = 0; i < size; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// Sixteen bytes a step, each pair of words folded in by a 128-bit multiply; the tail is the last
// sixteen bytes (eight, four) overlapping what came before, never a byte before the name, so there
// is no byte-by-byte loop and no call (std::hash's MurmurHash2 cost more than the rest of a
// lookup). Every byte reaches the result. The low bits pick the slot, the high half is the tag.
[[gnu::always_inline]] inline std::uint64_t HashOf(std::string_view name) {
  const char* p = name.data();
  const std::size_t n = name.size();
  std::uint64_t seed = kSeed ^ (n * kOdd3);
  if (n > 16) {
    if (n <= 32) {  // most node names: the loop below, once, without its control
      seed = Fold(Load8(p) ^ kOdd1, Load8(p + 8) ^ seed);
    } else {
      for (std::size_t i = 0; i + 16 < n; i += 16) {
        seed = Fold(Load8(p + i) ^ kOdd1, Load8(p + i + 8) ^ seed);
      }
    }
    seed = Fold(Load8(p + n - 16) ^ kOdd2, Load8(p + n - 8) ^ seed);
  } else if (n >= 8) {
    seed = Fold(Load8(p) ^ kOdd2, Load8(p + n - 8) ^ seed);
  } else if (n >= 4) {
    seed = Fold((Load4(p) << 32 | Load4(p + n - 4)) ^ kOdd2, seed ^ kOdd1);
  } else if (n > 0) {
    const std::uint64_t bytes = static_cast<std::uint64_t>(static_cast<unsigned char>(p[0])) << 16 |
                                static_cast<std::uint64_t>(static_cast<unsigned char>(p[n / 2]))
                                    << 8 |
                                static_cast<unsigned char>(p[n - 1]);
    seed = Fold(bytes ^ kOdd2, seed ^ kOdd1);
  }
  return Fold(seed ^ kOdd3, n ^ kOdd1);
}
}  // namespace

std::uint64_t NameIndex::Hash(std::string_view name) { return HashOf(name); }

NameIndex::NameIndex(const NameIndex& other)
    : slots_(other.slots_), arena_(other.arena_), size_(other.size_) {}

NameIndex& NameIndex::operator=(const NameIndex& other) {
  if (this != &other) {
    slots_ = other.slots_;
    arena_ = other.arena_;
    size_ = other.size_;
    ranking_ = std::make_unique<Ranking>();
  }
  return *this;
}

namespace {

// A name's length as a slot and an entry record it: below kLongName in the slot alone; from
// kLongName on, the slot says kLongName and the entry holds the length after the position.
constexpr std::uint32_t kLongName = 255;
constexpr std::size_t kPositionBytes = 4;
// The arena's first bytes, so that no entry lies at offset 0 (an empty slot's).
constexpr std::size_t kArenaPad = 4;

// The 32 bits a slot compares first: the hash's top 24 bits and the length (capped).
std::uint32_t KeyOf(std::uint64_t hash, std::size_t length) {
  const auto capped = static_cast<std::uint32_t>(std::min<std::size_t>(length, kLongName));
  return (static_cast<std::uint32_t>(hash >> 32) & 0xFFFFFF00u) | capped;
}

// The probe of one name in slots [0, mask] whose entries lie in `arena`: the position + 1
// recorded for it, or 0. Shared by both lookups; the batch passes the table's pointers from its
// locals. A slot whose key matches is nearly always the name (24 bits of hash and the length
// agree), so the entry's position and bytes are read together.
template <typename Slot>
[[gnu::always_inline]] inline std::uint32_t Probe(const Slot* slots, std::size_t mask,
                                                  const char* arena, std::string_view name,
                                                  std::uint64_t hash) {
  const std::uint32_t key = KeyOf(hash, name.size());
  const bool long_name = name.size() >= kLongName;
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& slot = slots[i];
    if (slot.offset == 0) return 0;
    if (slot.key != key) continue;
    const char* entry = arena + slot.offset;
    const char* bytes = entry + kPositionBytes;
    if (long_name) {
      if (Load4(bytes) != name.size()) continue;
      bytes += sizeof(std::uint32_t);
    }
    if (Equal(bytes, name.data(), name.size())) {
      return static_cast<std::uint32_t>(Load4(entry)) + 1;
    }
  }
}

}  // namespace

std::string_view NameIndex::NameOf(const Slot& slot) const {
  const char* bytes = arena_.data() + slot.offset + kPositionBytes;
  std::size_t length = slot.key & 0xFFu;
  if (length == kLongName) {
    length = Load4(bytes);
    bytes += sizeof(std::uint32_t);
  }
  return {bytes, length};
}

std::uint32_t NameIndex::PositionOf(const Slot& slot) const {
  return static_cast<std::uint32_t>(Load4(arena_.data() + slot.offset));
}

const std::vector<std::uint32_t>& NameIndex::Ranks() const {
  std::call_once(ranking_->once, [this] {
    std::vector<const Slot*> used;
    used.reserve(size_);
    std::uint32_t positions = 0;
    for (const Slot& slot : slots_) {
      if (slot.offset == 0) continue;
      used.push_back(&slot);
      positions = std::max(positions, PositionOf(slot) + 1);
    }
    std::sort(used.begin(), used.end(),
              [this](const Slot* a, const Slot* b) { return NameOf(*a) < NameOf(*b); });
    std::vector<std::uint32_t>& ranks = ranking_->ranks;
    ranks.assign(positions, 0);
    for (std::size_t rank = 0; rank < used.size(); ++rank) {
      ranks[PositionOf(*used[rank])] = static_cast<std::uint32_t>(rank);
    }
  });
  return ranking_->ranks;
}

std::size_t NameIndex::Find(std::string_view name) const {
  if (slots_.empty()) return kNotFound;
  const std::uint32_t found =
      Probe(slots_.data(), slots_.size() - 1, arena_.data(), name, HashOf(name));
  return found == 0 ? kNotFound : found - 1;
}

void NameIndex::FindAll(const std::string_view* names, std::size_t count, Found* found) const {
  if (slots_.empty()) {
    std::fill(found, found + count, Found{});
    return;
  }
  constexpr std::size_t kSlotAhead = 48;
  constexpr std::size_t kNameAhead = 24;
  const Slot* const slots = slots_.data();
  const std::size_t mask = slots_.size() - 1;
  const char* const arena = arena_.data();
  // Not zeroed first (a request's 5,000 hashes are 40 KB): every one is written before it is read.
  const std::unique_ptr<std::uint64_t[]> hashes(new std::uint64_t[count]);
  for (std::size_t i = 0; i < count; ++i) hashes[i] = HashOf(names[i]);
  for (std::size_t i = 0; i < count; ++i) {
    if (i + kSlotAhead < count) __builtin_prefetch(&slots[hashes[i + kSlotAhead] & mask]);
    if (i + kNameAhead < count) {
      const Slot& ahead = slots[hashes[i + kNameAhead] & mask];
      __builtin_prefetch(arena + ahead.offset);  // an empty slot's offset 0 is harmless
    }
    // position + 1, or 0 for an unknown name: minus one is the position or kNoPosition
    found[i].position = Probe(slots, mask, arena, names[i], hashes[i]) - 1;
  }
}

void NameIndex::Insert(std::string_view name, std::size_t position) {
  if ((size_ + 1) * 4 > slots_.size() * 3) Grow();
  if (arena_.empty()) arena_.assign(kArenaPad, '\0');
  const std::uint64_t hash = Hash(name);
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = hash & mask;
  while (slots_[i].offset != 0) i = (i + 1) & mask;
  slots_[i] = Slot{KeyOf(hash, name.size()), static_cast<std::uint32_t>(arena_.size())};
  const auto append4 = [this](std::size_t value) {
    const auto word = static_cast<std::uint32_t>(value);
    arena_.append(reinterpret_cast<const char*>(&word), sizeof(word));
  };
  append4(position);
  if (name.size() >= kLongName) append4(name.size());
  arena_.append(name);
  ++size_;
}

void NameIndex::Grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
  const std::size_t mask = slots_.size() - 1;
  for (const Slot& slot : old) {
    if (slot.offset == 0) continue;
    std::size_t i = Hash(NameOf(slot)) & mask;
    while (slots_[i].offset != 0) i = (i + 1) & mask;
    slots_[i] = slot;
  }
}

}  // namespace linkfit::state
