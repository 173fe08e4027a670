#pragma once

// ByteSet: a set of byte values (256 bits), e.g. the bytes that occur in a collection of names,
// so that a question about the bytes of every name ("does any hold a byte of this set?") is a
// few word operations instead of a pass over the names.
//
// Thread-safety: a plain value.

#include <array>
#include <cstdint>
#include <string_view>

namespace linkfit {

struct ByteSet {
  std::array<std::uint64_t, 4> words{};

  constexpr void Add(unsigned char byte) { words[byte >> 6] |= std::uint64_t{1} << (byte & 63); }
  constexpr void AddAll(std::string_view text) {
    for (const char ch : text) Add(static_cast<unsigned char>(ch));
  }
  constexpr bool Contains(unsigned char byte) const {
    return (words[byte >> 6] >> (byte & 63) & 1) != 0;
  }
  constexpr bool Intersects(const ByteSet& other) const {
    return ((words[0] & other.words[0]) | (words[1] & other.words[1]) |
            (words[2] & other.words[2]) | (words[3] & other.words[3])) != 0;
  }
  friend constexpr bool operator==(const ByteSet&, const ByteSet&) = default;
};

// The set of the bytes for which `in_set(byte)` holds.
template <typename Predicate>
constexpr ByteSet ByteSetOf(Predicate in_set) {
  ByteSet set;
  for (unsigned value = 0; value < 256; ++value) {
    if (in_set(static_cast<unsigned char>(value))) set.Add(static_cast<unsigned char>(value));
  }
  return set;
}

}  // namespace linkfit
