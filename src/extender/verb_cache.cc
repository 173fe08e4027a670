#include "extender/verb_cache.h"

#include <bit>
#include <string>

#include "linkfit/common/check.h"
#include "linkfit/common/mutex.h"

namespace linkfit::extender {
namespace {

void AppendNumber(std::string& out, std::int64_t value) {
  out += std::to_string(value);
  out += '|';
}

// Doubles by their bits: equal text means the very same figure.
void AppendBits(std::string& out, double value) {
  AppendNumber(out, static_cast<std::int64_t>(std::bit_cast<std::uint64_t>(value)));
}

void AppendAddress(std::string& out, const void* address) {
  AppendNumber(out, static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(address)));
}

// Drops the least recently used table once there are too many.
template <typename Table>
void Bound(std::map<std::string, Table, std::less<>>& tables) {
  if (tables.size() < VerbCache::kMaxTables) return;
  auto oldest = tables.begin();
  for (auto it = tables.begin(); it != tables.end(); ++it) {
    if (it->second.last_use < oldest->second.last_use) oldest = it;
  }
  tables.erase(oldest);
}

}  // namespace

std::string RequestSignature(const GpuRequest& request, const FitOptions& options) {
  std::string out;
  AppendNumber(out, static_cast<int>(request.kind));
  AppendNumber(out, request.count);
  AppendNumber(out, static_cast<int>(request.closeness));
  AppendNumber(out, static_cast<int>(request.policy));
  AppendNumber(out, request.share_milli);
  if (request.nics.wanted()) {  // pods without NICs keep the signature they had before NICs
    AppendNumber(out, -1);
    AppendNumber(out, request.nics.count);
    AppendNumber(out, request.nics.milli);
    AppendNumber(out, static_cast<int>(request.nics.closeness));
    AppendNumber(out, static_cast<int>(request.nics.policy));
    for (std::size_t rail = 0; rail < request.nics.rails.size(); ++rail) {
      if (request.nics.rails.test(rail)) AppendNumber(out, -2 - static_cast<int>(rail));
    }
  }
  // Not the CPU and memory requests: fits never read them (kube-scheduler's filters own them).
  AppendNumber(out, static_cast<int>(options.share_policy));
  AppendNumber(out, options.explain ? 1 : 0);
  // Free text last, each with its length: no two requests write the same signature.
  AppendNumber(out, static_cast<std::int64_t>(request.mig_profile.size()));
  out += request.mig_profile;
  for (const std::string& model : request.gpu_models) {
    AppendNumber(out, static_cast<std::int64_t>(model.size()));
    out += model;
  }
  return out;
}

std::string ScoreContext(const std::string& signature, const GpuRequest& request,
                         const CandidateScorer::Figures& figures, const ShapeList& shapes,
                         const MigProfileWeightsPtr& mig_weights) {
  std::string out;
  AppendNumber(out, request.cpu_milli);  // balance and shape admission read them
  AppendNumber(out, request.memory_bytes);
  AppendBits(out, figures.best_ring);
  AppendBits(out, figures.best_sum);
  AppendBits(out, figures.best_nvlink_ring);
  AppendBits(out, figures.nics_aligned);
  AppendBits(out, figures.idle_ahead_max);
  AppendBits(out, figures.scarcity_cpu);
  AppendBits(out, figures.scarcity_memory);
  for (std::size_t level = 0; level < figures.kept_below.size(); ++level) {
    if (figures.kept_below[level] == 0) continue;  // most levels: no candidate breaks less
    AppendNumber(out, static_cast<std::int64_t>(level));
    AppendNumber(out, figures.kept_below[level]);
  }
  AppendAddress(out, shapes.get());
  AppendAddress(out, mig_weights.get());
  out += signature;
  return out;
}

KeptReason* FitTable::Intern(const std::string& text) {
  if (const auto it = reason_index.find(text); it != reason_index.end()) return it->second;
  const auto number = static_cast<std::uint32_t>(reasons.size());
  KeptReason* reason = &reasons.emplace_back(KeptReason{text, 0, {}, number});
  reason_index.emplace(reason->text, reason);
  reason_texts.push_back(reason->text);
  return reason;
}

FitRef FitTable::Add(const NodeFit& fit, KeptReason* reason, std::uint32_t kind) {
  const auto index = static_cast<std::uint32_t>(fits.size());
  fits.push_back(CachedFit{&fit, reason});
  FitTerms& head = terms.emplace_back();
  LINKFIT_DCHECK(kind <= 0xFFFFFFu, "machine kind number " + std::to_string(kind) +
                                        " does not fit the 24 bits FitTerms keeps");
  head.kind = kind & 0xFFFFFFu;  // kinds are far fewer than 2^24 (a cluster has a handful)
  head.keeper_gpus_broken = fit.keeper_gpus_broken & 0x3Fu;  // at most topology::kMaxGpus
  head.ring_all_nvlink = fit.ring_all_nvlink ? 1 : 0;
  head.nics_aligned = fit.nics_aligned ? 1 : 0;
  head.ring_mbps = fit.quality.ring_mbps;
  head.sum_mbps = fit.quality.sum_mbps;
  reason_by_slot.push_back(reason != nullptr ? reason->number : 0);
  return FitRef(index, fit);
}

void FilterMarks::Prepare(std::size_t names, std::size_t ranks) {
  passing.assign((names + 63) / 64, 0);
  failing.assign((ranks + 63) / 64, 0);
  if (at_rank.size() < ranks) at_rank.resize(ranks);
}

std::uint64_t VerbCache::BeginCall(const state::Snapshot& snapshot,
                                   const state::ClusterCache& cluster) {
  return BeginCall(snapshot.generation(), [&cluster](std::uint64_t from, std::uint64_t to,
                                                     std::vector<std::uint32_t>& positions) {
    return cluster.Changes(from, to, positions);
  });
}

std::uint64_t VerbCache::BeginCall(std::uint64_t generation, const ChangesSince& changed) {
  if (generation != generation_) {
    changed_.clear();
    const bool empty = fits_.empty() && scores_.empty();  // nothing to drop
    if (empty || (generation > generation_ && changed(generation_, generation, changed_))) {
      for (auto& [signature, table] : fits_) {
        for (const std::uint32_t position : changed_) table.by_position.Erase(position);
      }
      for (auto& [context, table] : scores_) {
        for (const std::uint32_t position : changed_) table.by_position.Erase(position);
      }
    } else {
      fits_.clear();
      scores_.clear();
    }
    generation_ = generation;
  }
  return ++calls_;
}

FitTable& VerbCache::Fits(const std::string& signature) {
  auto it = fits_.find(signature);
  if (it == fits_.end()) {
    Bound(fits_);
    it = fits_.emplace(signature, FitTable{}).first;
  } else if (it->second.fits.size() > kMaxFits) {
    it->second = FitTable{};  // at a call's start: nobody holds pointers into it
  }
  it->second.last_use = calls_;
  return it->second;
}

ScoreTable& VerbCache::Scores(const std::string& context, const ShapeList& shapes,
                              const MigProfileWeightsPtr& mig_weights) {
  auto it = scores_.find(context);
  if (it == scores_.end()) {
    Bound(scores_);
    it = scores_.emplace(context, ScoreTable{}).first;
    it->second.shapes = shapes;
    it->second.mig_weights = mig_weights;
  }
  it->second.last_use = calls_;
  return it->second;
}

ScoreTable* VerbCache::FindScores(std::string_view context) {
  const auto it = scores_.find(context);
  if (it == scores_.end()) return nullptr;
  it->second.last_use = calls_;
  return &it->second;
}

VerbCachePool::Lease VerbCachePool::Acquire() { return Lease(*this, Take()); }

std::unique_ptr<VerbCache> VerbCachePool::Take() {
  std::unique_ptr<VerbCache> cache;
  {
    MutexLock lock(mutex_);
    if (!idle_.empty()) {
      cache = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (!cache) cache = std::make_unique<VerbCache>();
  return cache;
}

void VerbCachePool::Return(std::unique_ptr<VerbCache> cache) {
  MutexLock lock(mutex_);
  idle_.push_back(std::move(cache));
}

}  // namespace linkfit::extender
