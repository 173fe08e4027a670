#pragma once

// The order in which Go's encoding/json writes a map[string]string of node failures (by key
// bytes; the caller keeps the last entry of a repeated key), found without comparing whole
// names where it can: at the caller's ranks when they are dense (a bit per rank), a radix sort
// of the caller's ranks or of eight name bytes past the prefix all names share otherwise; and
// the bitmap walk the ranked filter reply uses too.
//
// Thread-safety: pure functions.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "linkfit/common/bit_marks.h"
#include "linkfit/wire/codec.h"

namespace linkfit::wire {

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

}  // namespace linkfit::wire
