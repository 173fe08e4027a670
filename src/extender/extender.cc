// Extender filter (extender.h): a verdict for every candidate, as marks (verdicts.h). In steady
// state (every name known, each fit kept) one pass over the names marks them all.

#include "linkfit/extender/extender.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "extender/verb_cache.h"
#include "extender/verb_steps.h"
#include "linkfit/common/bit_marks.h"

namespace linkfit::extender {
namespace {

constexpr std::string_view kUnknownNode =
    "node is unknown to linkfit (no GPU topology published for it)";

struct MarkCounts {
  std::size_t passed = 0;
  std::size_t failed = 0;        // FailedNodes entries, a name sent twice counted twice
  std::size_t unresolvable = 0;  // FailedAndUnresolvableNodes entries, likewise
  std::size_t unknown_fits = 0;  // names whose fit `fits` does not keep yet
};

// Marks every name of a call by its kept fit (at[i]: the name's position; every name known):
// passing ones by index, failing ones by rank, with how they fail. No branch per name (pass or
// fail follows no pattern a predictor could learn): every name's entry is written at its rank,
// and only a failing one's bit is set. When a fit is not kept yet (unknown_fits > 0), the marks
// are not to be used: compute the fits, then mark again.
MarkCounts MarkKnownNames(const std::uint32_t* at, std::size_t n, const FitTable& fits,
                          const std::uint32_t* ranks, FilterMarks& marks) {
  const FitRef* const kept = fits.by_position.data();
  const std::size_t kept_positions = fits.by_position.positions();
  const std::uint32_t* const reason_by_slot = fits.reason_by_slot.data();
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
      at_rank[rank] = FilterVerdicts::Pack(static_cast<std::uint32_t>(i),
                                           reason_by_slot[fit.slot()], fit.unresolvable());
      failing[rank / 64] |= (passes ^ 1) << (rank % 64);
      never += fit.unresolvable() ? 1u : 0u;
      unknown += fit.unknown();
    }
    passing[first / 64] = passing_here;
  }
  const std::size_t passed = CountMarked(std::span(marks.passing.data(), (n + 63) / 64));
  return MarkCounts{passed, n - passed - never, never, unknown};
}

}  // namespace

// Marks a FilterVerdicts (whose friend it is) for one call of Extender::Filter: one function per
// case, each setting the marks, the reasons and the counts.
struct VerdictMarker {
  FilterVerdicts& verdicts;
  FilterMarks& marks;
  const VerbCall& call;
  // The snapshot's ranks, looked up once (Snapshot::Ranks passes a once_flag on every call).
  const std::vector<std::uint32_t>& ranks = call.snapshot.Ranks();

  std::size_t names() const { return call.names.size(); }

  // Points the verdicts at the marks, `rank_count` ranks' worth of failures, and counts.
  void Publish(std::size_t rank_count, const MarkCounts& counts) {
    verdicts.passing_ = std::span(marks.passing.data(), (names() + 63) / 64);
    verdicts.failing_ = std::span(marks.failing.data(), (rank_count + 63) / 64);
    verdicts.at_rank_ = marks.at_rank.data();
    verdicts.passed = counts.passed;
    verdicts.failed = counts.failed;
    verdicts.unresolvable = counts.unresolvable;
  }

  // Every name passes.
  void PassAll() {
    marks.Prepare(names(), 0);
    for (std::size_t i = 0; i < names(); ++i) {
      marks.passing[i / 64] |= std::uint64_t{1} << (i % 64);
    }
    Publish(0, MarkCounts{names(), 0, 0, 0});
  }

  // Every name fails for good, saying `reason`.
  void FailAll(std::string reason) {
    marks.Prepare(names(), ranks.size());
    verdicts.own_reasons_.push_back(verdicts.own_texts_.emplace_front(std::move(reason)));
    verdicts.reasons_ = verdicts.own_reasons_;
    const std::uint32_t* const at = call.positions;
    for (std::size_t i = 0; i < names(); ++i) {
      const auto index = static_cast<std::uint32_t>(i);
      if (at[i] == state::NameIndex::kNoPosition) {
        verdicts.unranked_.push_back({index, 0, true});
        continue;
      }
      const std::uint32_t rank = ranks[at[i]];
      marks.at_rank[rank] = FilterVerdicts::Pack(index, 0, true);
      marks.failing[rank / 64] |= std::uint64_t{1} << (rank % 64);
    }
    Publish(ranks.size(), MarkCounts{0, 0, names(), 0});
  }

  // Every name known (the steady state): one pass by the kept fits; where a fit is not kept yet,
  // `compute_missing` computes the missing ones and the names are marked again.
  template <typename ComputeMissing>
  void MarkKnown(const FitTable& fits, ComputeMissing&& compute_missing) {
    marks.Prepare(names(), ranks.size());
    MarkCounts counts = MarkKnownNames(call.positions, names(), fits, ranks.data(), marks);
    if (counts.unknown_fits > 0) {
      compute_missing();
      marks.Prepare(names(), ranks.size());
      counts = MarkKnownNames(call.positions, names(), fits, ranks.data(), marks);
    }
    verdicts.reasons_ = fits.reason_texts;
    Publish(ranks.size(), counts);
  }

  // Some names unknown (fits computed): those fail for good, listed with the reason (no rank;
  // the snapshot's problem with the node where it has one); not the steady state, so each name
  // is marked on its own.
  void MarkWithUnknown(const FitTable& fits) {
    marks.Prepare(names(), ranks.size());
    verdicts.own_reasons_ = fits.reason_texts;
    const auto unknown_reason = static_cast<std::uint32_t>(verdicts.own_reasons_.size());
    verdicts.own_reasons_.push_back(kUnknownNode);
    const std::uint32_t* const at = call.positions;
    MarkCounts counts;
    for (std::size_t i = 0; i < names(); ++i) {
      const auto index = static_cast<std::uint32_t>(i);
      if (at[i] == state::NameIndex::kNoPosition) {
        std::uint32_t reason = unknown_reason;
        if (const std::string* problem = call.snapshot.Problem(call.names[i]); problem != nullptr) {
          reason = static_cast<std::uint32_t>(verdicts.own_reasons_.size());
          verdicts.own_reasons_.push_back(verdicts.own_texts_.emplace_front(*problem));
        }
        verdicts.unranked_.push_back({index, reason, true});
        ++counts.unresolvable;
        continue;
      }
      const FitRef fit = fits.by_position.Find(at[i]);
      if (fit.fits()) {
        marks.passing[i / 64] |= std::uint64_t{1} << (i % 64);
        ++counts.passed;
        continue;
      }
      const std::uint32_t rank = ranks[at[i]];
      marks.at_rank[rank] =
          FilterVerdicts::Pack(index, fits.reason_by_slot[fit.slot()], fit.unresolvable());
      marks.failing[rank / 64] |= std::uint64_t{1} << (rank % 64);
      ++(fit.unresolvable() ? counts.unresolvable : counts.failed);
    }
    verdicts.reasons_ = verdicts.own_reasons_;
    Publish(ranks.size(), counts);
  }
};

FilterVerdicts::FilterVerdicts(VerbCachePool& pool, std::unique_ptr<VerbCache> cache)
    : pool_(&pool), cache_(std::move(cache)) {}
FilterVerdicts::FilterVerdicts(FilterVerdicts&& other) noexcept = default;
FilterVerdicts::~FilterVerdicts() {
  if (cache_) pool_->Return(std::move(cache_));
}

Extender::Extender(state::ClusterCache& cache, ExtenderOptions options, Binder& binder,
                   PodSource& pods, MetricsSink& metrics)
    : cache_(cache),
      options_(std::move(options)),
      binder_(binder),
      pods_(pods),
      metrics_(metrics),
      caches_(std::make_unique<VerbCachePool>()) {}

Extender::~Extender() = default;

Result<GpuRequest> Extender::ParseRequest(const kube::PodView& pod) const {
  Result<GpuRequest> request = ParseGpuRequest(pod, options_.defaults);
  if (request) WithGroupRails(*request);
  return request;
}

void Extender::WithGroupRails(GpuRequest& request) const {
  if (request.nics.wanted() && !request.group.empty()) {
    request.nics.rails = cache_.GroupRailsOf(request.group);
  }
}

FilterVerdicts Extender::Filter(const VerbCall& call) const {
  FilterVerdicts verdicts(*caches_, caches_->Take());
  VerbCache& cache = *verdicts.cache_;
  VerdictMarker marker{verdicts, cache.filter_marks(), call};
  if (call.request && !call.request->WantsDevices()) {
    marker.PassAll();  // no GPUs, no NICs: nothing for linkfit to refuse
  } else if (!call.request) {
    marker.FailAll(call.request.error().message);  // a bad hint is never ignored
  } else {
    cache.BeginCall(call.snapshot, cache_);
    FitTable& fits = cache.Fits(RequestSignature(*call.request, options_.fit));
    fits.by_position.Reserve(call.snapshot.size());
    if (call.unknown == 0) {
      marker.MarkKnown(fits, [&] {
        ComputeMissingFits(fits, *call.request, call.snapshot, call.positions, call.names.size(),
                           options_.fit);
      });
    } else {
      ComputeMissingFits(fits, *call.request, call.snapshot, call.positions, call.names.size(),
                         options_.fit);
      marker.MarkWithUnknown(fits);
    }
  }
  metrics_.CountFilterNodes(verdicts.passed, verdicts.failed, verdicts.unresolvable);
  return verdicts;
}

}  // namespace linkfit::extender
