#pragma once

// Marks kept as bits in 64-bit words (bit i % 64 of words[i / 64] marks item i): counting them
// and visiting them in order. Filter marks its names this way, and the reply writers read them.
//
// Thread-safety: pure functions.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

namespace linkfit {

inline std::size_t CountMarked(std::span<const std::uint64_t> words) {
  std::size_t marked = 0;
  for (const std::uint64_t word : words) marked += static_cast<std::size_t>(std::popcount(word));
  return marked;
}

// Calls visit(i) for each bit set in `words`, in order: i is the bit's number.
template <typename Visit>
void ForEachMarked(std::span<const std::uint64_t> words, Visit&& visit) {
  for (std::size_t word = 0; word < words.size(); ++word) {
    for (std::uint64_t bits = words[word]; bits != 0; bits &= bits - 1) {
      visit(64 * word + static_cast<std::size_t>(std::countr_zero(bits)));
    }
  }
}

}  // namespace linkfit
