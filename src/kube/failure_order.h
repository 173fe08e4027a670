#pragma once

// The order in which Go's encoding/json writes a map[string]string of node failures (by key
// bytes; the caller keeps the last entry of a repeated key), found without comparing whole
// names where it can: at the caller's ranks when they are dense (a bit per rank), a radix sort
// of the caller's ranks or of eight name bytes past the prefix all names share otherwise; and
// the bitmap walk the ranked filter reply uses too.
//
// Thread-safety: pure functions.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "linkfit/kube/codec.h"

namespace linkfit::kube {

// A failure in sorted order: its index in the failures, and the key it was sorted by (equal for
// equal names).
struct SortEntry {
  std::uint64_t key;
  std::uint32_t index;
};

// Returns the order in which a Go map[string]string prints `failures`: by node name bytes, and
// for a repeated name in input order (the caller keeps the last; the entries of a name may have
// been cut to its last already).
std::vector<SortEntry> SortFailures(const std::vector<NodeFailure>& failures);

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

}  // namespace linkfit::kube
