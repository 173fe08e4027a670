#pragma once

// What a name lookup in NameIndex is made of, inline so that a caller's loop over a request's
// names (NameIndex::ForEachPosition) compiles into one loop with its own work: the hash, the key a
// slot compares first, the byte comparison and the probe. Internal to NameIndex and its batch
// lookups; nothing else should need these.
//
// Thread-safety: pure functions.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace linkfit::state::name_probe {

inline std::uint64_t Load8(const char* bytes) {
  std::uint64_t word;
  std::memcpy(&word, bytes, sizeof(word));
  return word;
}

inline std::uint64_t Load4(const char* bytes) {
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

// A name's length as a slot and an entry record it: below kLongName in the slot alone; from
// kLongName on, the slot says kLongName and the entry holds the length after the position.
constexpr std::uint32_t kLongName = 255;
constexpr std::size_t kPositionBytes = 4;
// The arena's first bytes, so that no entry lies at offset 0 (an empty slot's).
constexpr std::size_t kArenaPad = 4;

// The 32 bits a slot compares first: the hash's top 24 bits and the length (capped).
inline std::uint32_t KeyOf(std::uint64_t hash, std::size_t length) {
  const auto capped = static_cast<std::uint32_t>(std::min<std::size_t>(length, kLongName));
  return (static_cast<std::uint32_t>(hash >> 32) & 0xFFFFFF00u) | capped;
}

// The probe of one name in slots [0, mask] whose entries lie in `arena`: the position + 1
// recorded for it, or 0. Shared by every lookup; a batch passes the table's pointers from its
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

}  // namespace linkfit::state::name_probe
