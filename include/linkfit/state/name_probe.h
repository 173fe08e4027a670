#pragma once

// What a name lookup in NameIndex is made of, inline so that a caller's loop over a request's
// names (NameIndex::ForEachPosition) compiles into one loop with its own work: the hash and the
// probe. Internal to NameIndex and its batch lookups; nothing else should need these.
//
// Thread-safety: pure functions.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

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

constexpr std::uint64_t kSeed = 0x243F6A8885A308D3u;  // NameIndex::Hash's
constexpr std::uint64_t kOdd1 = 0xA0761D6478BD642Fu;
constexpr std::uint64_t kOdd2 = 0xE7037ED1A0B428DBu;
constexpr std::uint64_t kOdd3 = 0x8EBC6AF09C88C6E3u;

// Sixteen bytes a step, each pair of words folded in by a 128-bit multiply; the tail is the last
// sixteen bytes (eight, four) overlapping what came before, never a byte before the name, so there
// is no byte-by-byte loop and no call (std::hash's MurmurHash2 cost more than the rest of a
// lookup). Every byte reaches the result, and so does `seed` (NameIndex's, chosen at random). The
// low bits pick the slot; all 64 are the name's fingerprint.
[[gnu::always_inline]] inline std::uint64_t HashOf(std::string_view name, std::uint64_t seed) {
  const char* p = name.data();
  const std::size_t n = name.size();
  seed ^= n * kOdd3;
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

// The probe of one name in slots [0, mask] (a power of two less one): the position + 1 of the
// first slot whose fingerprint and length are the name's, or 0. An empty slot, which ends every
// probe, records position + 1 = 0, so that it answers "unknown" without a test of its own
// whatever its other fields hold.
template <typename Slot>
[[gnu::always_inline]] inline std::uint32_t Probe(const Slot* slots, std::size_t mask,
                                                  std::uint64_t hash, std::size_t length) {
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& slot = slots[i];
    if (slot.hash == hash && slot.length == length) return slot.position_plus_one;
    if (slot.position_plus_one == 0) return 0;
  }
}

}  // namespace linkfit::state::name_probe
