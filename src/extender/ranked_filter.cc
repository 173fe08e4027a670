// Extender::FilterReplyNamesAsSent: filter's steady state, a list of names linkfit knows whose
// fits the cache keeps, answered in one pass over the names that marks each one (FilterMarks)
// and a writer that reads the marks (kube::EncodeRankedFilterReply). FilterNamesAsSent builds
// the same reply as lists (a view per passing name, a NodeFailure per failing one, sorted by
// rank when written); it answers every other request, and tests hold the two to the same bytes.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "extender/verb_cache.h"
#include "extender/verb_steps.h"
#include "linkfit/extender/extender.h"

namespace linkfit::extender {
namespace {

struct MarkCounts {
  std::size_t passed = 0;
  std::size_t failed = 0;        // FailedNodes entries, a name sent twice counted twice
  std::size_t unresolvable = 0;  // FailedAndUnresolvableNodes entries, likewise
  std::size_t unknown_fits = 0;  // names whose fit `fits` does not keep yet
};

// Marks every name of a request by its kept fit (at[i]: the name's position; every name known):
// passing ones by index, failing ones by rank, with how they fail. No branch per name (pass or
// fail follows no pattern a predictor could learn): every name's entry is written at its rank,
// and only a failing one's bit is set. When a fit is not kept yet (unknown_fits > 0), the marks
// are not to be used: compute the fits, then mark again.
MarkCounts Mark(const std::uint32_t* at, std::size_t n, const FitTable& fits,
                const std::uint32_t* ranks, FilterMarks& marks) {
  const FitRef* const kept = fits.by_position.data();
  const std::size_t kept_positions = fits.by_position.positions();
  const std::uint16_t* const reason_by_slot = fits.reason_by_slot.data();
  std::uint64_t* const passing = marks.passing.data();
  std::uint64_t* const failing = marks.failing.data();
  std::uint64_t* const at_rank = marks.at_rank.data();
  std::size_t never = 0;
  std::size_t unknown = 0;
  for (std::size_t first = 0; first < n; first += 64) {
    const std::size_t end = std::min(n, first + 64);
    std::uint64_t passing_here = 0;
    for (std::size_t i = first; i < end; ++i) {
      const std::uint32_t position = at[i];
      const FitRef fit = position < kept_positions ? kept[position] : FitRef();
      const std::uint64_t passes = fit.fits() ? 1 : 0;
      passing_here |= passes << (i - first);
      const std::uint32_t rank = ranks[position];
      at_rank[rank] = kube::RankedFilterReply::AtRank(
          static_cast<std::uint32_t>(i), reason_by_slot[fit.slot()], fit.unresolvable());
      failing[rank / 64] |= (passes ^ 1) << (rank % 64);
      never += fit.unresolvable() ? 1u : 0u;
      unknown += fit.unknown();
    }
    passing[first / 64] = passing_here;
  }
  std::size_t passed = 0;
  for (std::size_t word = 0; word < (n + 63) / 64; ++word) {
    passed += static_cast<std::size_t>(std::popcount(passing[word]));
  }
  return MarkCounts{passed, n - passed - never, never, unknown};
}

}  // namespace

std::optional<std::string> Extender::FilterReplyNamesAsSent(const kube::ExtenderArgs& args) const {
  const auto as_lists = [&]() -> std::optional<std::string> {
    const std::optional<kube::FilterResult> result = FilterNamesAsSent(args);
    if (!result) return std::nullopt;
    return kube::EncodeFilterResult(*result);
  };
  if (kube::ReplyListFor(args) != kube::NodeListKind::kNames || args.node_names.empty()) {
    return as_lists();
  }
  const auto request = ParseGpuRequest(args.pod, options_.defaults);
  if (!request || request->kind == GpuRequest::Kind::kNone) return as_lists();
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  const std::size_t n = args.node_names.size();
  const std::unique_ptr<std::uint32_t[]> positions(new std::uint32_t[n]);  // all written
  std::uint32_t* const at = positions.get();
  // A name linkfit does not know has no rank, and is listed by its bytes: the lists' way (the
  // lookups made again there; none in the usual request).
  if (LookUp(*snapshot, args.node_names, at) > 0) return as_lists();
  const std::optional<bool> as_is = NamesWrittenAsIs(args, snapshot.get(), at, 0);
  if (!as_is) return std::nullopt;
  const std::vector<std::uint32_t>& ranks = snapshot->Ranks();
  const VerbCachePool::Lease cache = caches_->Acquire();
  cache->BeginCall(*snapshot, cache_);
  FitTable& fits = cache->Fits(RequestSignature(*request, options_.fit));
  fits.by_position.Reserve(snapshot->size());
  FilterMarks& marks = cache->filter_marks();
  marks.Prepare(n, ranks.size());
  MarkCounts counts = Mark(at, n, fits, ranks.data(), marks);
  if (counts.unknown_fits > 0) {
    ComputeMissingFits(fits, *request, *snapshot, at, n, options_.fit);
    marks.Prepare(n, ranks.size());
    counts = Mark(at, n, fits, ranks.data(), marks);
  }
  if (fits.reason_texts.size() > FitTable::kMaxReasonNumbers) return as_lists();  // never seen
  metrics_.CountFilterNodes(counts.passed, counts.failed, counts.unresolvable);
  kube::RankedFilterReply reply;
  reply.names = args.node_names;
  reply.names_escape_free = *as_is;
  reply.passing = marks.passing;
  reply.failing = marks.failing;
  reply.at_rank = marks.at_rank.data();
  reply.reasons = fits.reason_texts;
  return kube::EncodeRankedFilterReply(reply);
}

}  // namespace linkfit::extender
