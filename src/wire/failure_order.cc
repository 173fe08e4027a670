#include "wire/failure_order.h"

#include <algorithm>
#include <array>
#include <memory>
#include <string_view>
#include <utility>

#include "linkfit/common/json_write.h"

namespace linkfit::wire {
namespace {

using json_write::LoadBigEndian;
using json_write::LoadLittleEndian;

// Returns the length of the common prefix of `a` and `b`, at most `limit` (<= both sizes).
std::size_t CommonPrefixLength(std::string_view a, std::string_view b, std::size_t limit) {
  std::size_t i = 0;
  for (; i + 8 <= limit; i += 8) {
    const std::uint64_t diff = LoadLittleEndian(a.data() + i) ^ LoadLittleEndian(b.data() + i);
    if (diff != 0) return i + static_cast<std::size_t>(std::countr_zero(diff)) / 8;
  }
  while (i < limit && a[i] == b[i]) ++i;
  return i;
}

// The sort key of `node`: node[common, common + 8) big-endian, zero-padded past the name's end,
// where `common` is the length of the prefix all names share.
std::uint64_t SortKey(std::string_view node, std::size_t common) {
  const std::size_t rest = node.size() - common;
  if (rest >= 8) return LoadBigEndian(node.data() + common);
  if (rest == 0) return 0;
  if (node.size() >= 8) return LoadBigEndian(node.data() + node.size() - 8) << (8 * (8 - rest));
  char padded[8] = {};
  for (std::size_t i = 0; i < rest; ++i) padded[i] = node[common + i];
  return LoadBigEndian(padded);
}

// Below this many failures, the radix sort's fixed cost (8 x 256 counts to clear and sum)
// outweighs what it saves over a comparison sort.
constexpr std::size_t kRadixSortMin = 64;

// Sorts entries[0, n) by key, stably: a least-significant-digit radix sort over the key's bytes,
// skipping the bytes on which all keys agree (the zero padding of short names, for one).
void RadixSortByKey(SortEntry* entries, std::size_t n, std::vector<SortEntry>& scratch) {
  std::array<std::array<std::uint32_t, 256>, 8> counts{};
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t key = entries[i].key;
    ++counts[0][key & 0xFF];
    ++counts[1][(key >> 8) & 0xFF];
    ++counts[2][(key >> 16) & 0xFF];
    ++counts[3][(key >> 24) & 0xFF];
    ++counts[4][(key >> 32) & 0xFF];
    ++counts[5][(key >> 40) & 0xFF];
    ++counts[6][(key >> 48) & 0xFF];
    ++counts[7][key >> 56];
  }
  scratch.resize(std::max(scratch.size(), n));
  SortEntry* from = entries;
  SortEntry* to = scratch.data();
  for (std::size_t byte = 0; byte < 8; ++byte) {
    const unsigned shift = static_cast<unsigned>(8 * byte);
    std::array<std::uint32_t, 256>& count = counts[byte];
    if (count[(from[0].key >> shift) & 0xFF] == n) continue;
    std::uint32_t next = 0;  // turns the counts into each bucket's first position
    for (std::uint32_t& c : count) next += std::exchange(c, next);
    for (std::size_t i = 0; i < n; ++i) to[count[(from[i].key >> shift) & 0xFF]++] = from[i];
    std::swap(from, to);
  }
  if (from != entries) std::copy(from, from + n, entries);
}

// Sorts entries[0, n) by name bytes and, for a repeated name, by index (what a stable sort gives;
// the caller keeps the last). Keys are the 8 bytes after the longest prefix the names share; names
// whose keys tie share 8 more bytes, and are sorted again from there (names like pool-a-n1 ...
// pool-a-n714 need two rounds), so whole names are compared only when one name ends where another
// goes on.
void SortByName(SortEntry* entries, std::size_t n, const std::vector<NodeFailure>& failures,
                std::vector<SortEntry>& scratch) {
  const std::string_view first = failures[entries[0].index].node;
  std::size_t shortest = first.size();
  for (std::size_t i = 1; i < n; ++i) {
    shortest = std::min(shortest, failures[entries[i].index].node.size());
  }
  std::size_t common = shortest;  // the longest prefix every name shares
  for (std::size_t i = 1; i < n && common > 0; ++i) {
    common = CommonPrefixLength(first, failures[entries[i].index].node, common);
  }
  const auto by_rest = [&failures, common](const SortEntry& a, const SortEntry& b) {
    const int rest =
        failures[a.index].node.substr(common).compare(failures[b.index].node.substr(common));
    return rest != 0 ? rest < 0 : a.index < b.index;
  };
  if (common == shortest) {  // one name is a prefix of the others (or they are all equal)
    std::sort(entries, entries + n, by_rest);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    entries[i].key = SortKey(failures[entries[i].index].node, common);
  }
  if (n < kRadixSortMin) {
    std::sort(entries, entries + n, [&by_rest](const SortEntry& a, const SortEntry& b) {
      return a.key != b.key ? a.key < b.key : by_rest(a, b);
    });
    return;
  }
  RadixSortByKey(entries, n, scratch);
  for (std::size_t run = 0; run < n;) {
    std::size_t end = run + 1;
    while (end < n && entries[end].key == entries[run].key) ++end;
    // Equal keys: the names agree on at least one more byte, so the next round gets further.
    if (end - run > 1) SortByName(entries + run, end - run, failures, scratch);
    run = end;
  }
}

// Whether failures ranked [0, highest_rank] are sorted faster by placing each at its rank
// (PlaceByRank) than by a radix sort: when the ranks are not spread far wider than the failures
// (a request's failures among a cluster's names always are not).
bool PlacingByRankPays(std::size_t failures, std::uint32_t highest_rank) {
  return highest_rank / 64 <= failures + 1024;
}

// Sorts failures ranked by the caller (equal ranks for equal names) into `sorted`, keeping for a
// repeated name only its last failure: each failure's index is written at its rank, a bitmap
// marks the ranks written, and the ranks are read back in order. One pass over the failures and
// one over the bitmap (a rank in 64 is a bit), where a radix sort passed over them twice and
// counted eight key bytes of each.
void PlaceByRank(const std::vector<NodeFailure>& failures, std::uint32_t highest_rank,
                 std::vector<SortEntry>& sorted) {
  const std::size_t words = highest_rank / 64 + 1;
  std::vector<std::uint64_t> ranked(words);
  // Read only where `ranked` marks a rank written: left uninitialised.
  const std::unique_ptr<std::uint32_t[]> at_rank(new std::uint32_t[std::size_t{highest_rank} + 1]);
  for (std::size_t i = 0; i < failures.size(); ++i) {
    const std::uint32_t rank = failures[i].order;
    at_rank[rank] = static_cast<std::uint32_t>(i);  // a later failure of the same name wins
    ranked[rank / 64] |= std::uint64_t{1} << (rank % 64);
  }
  sorted.clear();
  ForEachMarked(ranked, [&](std::size_t rank) { sorted.push_back({rank, at_rank[rank]}); });
}

}  // namespace

std::vector<SortEntry> SortFailures(const std::vector<NodeFailure>& failures) {
  std::uint32_t highest_order = 0;  // kUnordered if any failure has no rank
  for (const NodeFailure& failure : failures) {
    highest_order = std::max(highest_order, failure.order);
  }
  const bool ordered = highest_order != NodeFailure::kUnordered;
  std::vector<SortEntry> sorted;
  sorted.reserve(failures.size());
  if (ordered && PlacingByRankPays(failures.size(), highest_order)) {
    PlaceByRank(failures, highest_order, sorted);
    return sorted;
  }
  for (std::size_t i = 0; i < failures.size(); ++i) {
    sorted.push_back({failures[i].order, static_cast<std::uint32_t>(i)});
  }
  std::vector<SortEntry> scratch;
  if (ordered) {  // the caller's ranks spread wide: one stable sort of integers, no name read
    RadixSortByKey(sorted.data(), sorted.size(), scratch);
    return sorted;
  }
  // By name. Keys start equal: runs SortByName leaves to a comparison sort keep equal keys, so
  // that the caller's check for a repeated name (equal keys, then equal names) still holds.
  for (SortEntry& entry : sorted) entry.key = 0;
  if (!sorted.empty()) SortByName(sorted.data(), sorted.size(), failures, scratch);
  return sorted;
}

}  // namespace linkfit::wire
