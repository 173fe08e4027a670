// MIG occupancy, the per-set headroom table and the best-fit planner (see mig.h).

#include "linkfit/alloc/mig.h"

#include "alloc/mig_distribute.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace linkfit::alloc {
namespace {

constexpr int kMaxRequestInstances = 64;

std::uint8_t WindowMask(int start, int size) {
  return static_cast<std::uint8_t>(((1U << static_cast<unsigned>(size)) - 1U)
                                   << static_cast<unsigned>(start));
}

bool IsLegalStart(const MigProfile& profile, int start) {
  return std::find(profile.starts.begin(), profile.starts.end(), start) != profile.starts.end();
}

// Returns the largest number of instances of `profile` that fit in the free slices of `mask`
// within `compute_left` compute slices, ignoring per-profile and per-GPU instance caps.
int GeometricMaximum(const MigProfile& profile, std::uint8_t mask, int compute_left,
                     std::size_t first_start) {
  int best = 0;
  if (compute_left < profile.compute_slices) return 0;
  for (std::size_t i = first_start; i < profile.starts.size(); ++i) {
    const std::uint8_t window = WindowMask(profile.starts[i], profile.size);
    if ((mask & window) != 0) continue;
    best = std::max(best, 1 + GeometricMaximum(profile, static_cast<std::uint8_t>(mask | window),
                                               compute_left - profile.compute_slices, i + 1));
  }
  return best;
}

// The slices covered by the windows of `profile` that are free in `mask`, or none if the
// profile needs more than `compute_left` compute slices.
std::uint8_t CoverableWindows(const MigProfile& profile, std::uint8_t mask, int compute_left) {
  if (compute_left < profile.compute_slices) return 0;
  unsigned covered = 0;
  for (int start : profile.starts) {
    const std::uint8_t window = WindowMask(start, profile.size);
    if ((mask & window) == 0) covered |= window;
  }
  return static_cast<std::uint8_t>(covered);
}

// "0-3,6" for the used slices of a mask.
std::string DescribeSlices(std::uint8_t mask) {
  std::string out;
  int i = 0;
  while (i < kMigMemorySlices) {
    if ((mask & (1U << static_cast<unsigned>(i))) == 0) {
      ++i;
      continue;
    }
    int j = i;
    while (j + 1 < kMigMemorySlices && (mask & (1U << static_cast<unsigned>(j + 1))) != 0) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(i);
    if (j > i) {
      out += '-';
      out += std::to_string(j);
    }
    i = j + 1;
  }
  return out;
}

std::string DescribeGpu(const MigProfileSet& set, const MigGpuView& gpu) {
  std::string out = "GPU " + std::to_string(gpu.index) + " ";
  if (gpu.state.empty()) return out + "has no instances";
  out += "slices " + DescribeSlices(gpu.state.slice_mask()) + " used";
  out += ", " + std::to_string(gpu.state.compute_used()) + "/" +
         std::to_string(set.compute_slices) + " compute slices used";
  return out;
}

// Why `profile` cannot be placed anywhere on a GPU, most specific cause first.
std::string WhyNot(const MigProfileSet& set, const MigGpuState& state, int profile) {
  const MigProfile& p = set.profiles[static_cast<std::size_t>(profile)];
  if (state.profile_count(profile) >= p.max_instances) {
    return "already holds the maximum of " + std::to_string(p.max_instances) + " " + p.name;
  }
  if (p.media_extensions && state.has_media_extensions()) {
    return "already holds a media-extension (+me) instance";
  }
  if (state.instance_count() >= set.max_gpu_instances) {
    return "already holds the maximum of " + std::to_string(set.max_gpu_instances) +
           " GPU instances";
  }
  if (state.compute_used() + p.compute_slices > set.compute_slices) {
    return "has " + std::to_string(set.compute_slices - state.compute_used()) +
           " free compute slices, " + p.name + " needs " + std::to_string(p.compute_slices);
  }
  return "slices " + DescribeSlices(state.slice_mask()) + " used";
}

bool IsIdle(const MigGpuView& gpu) {
  return gpu.pods == 0 && (!gpu.mig_enabled || !gpu.state.empty());
}

std::string ReconfigurationHint(const MigGpuView& gpu, const std::string& what) {
  if (!gpu.mig_enabled) {
    return "idle GPU " + std::to_string(gpu.index) + " could be switched to MIG mode for " + what;
  }
  return "idle GPU " + std::to_string(gpu.index) + " could have its unused MIG instances (slices " +
         DescribeSlices(gpu.state.slice_mask()) + ") destroyed and re-created for " + what;
}

// A candidate placement of one instance, ordered by best fit.
struct Candidate {
  int stranded = 0;      // free slices of the GPU that the placement strands
  int loss = 0;          // headroom lost on the GPU, in memory slices (SliceHeadroom)
  bool partial = false;  // the GPU held instances before
  int gpu_index = 0;     // MigGpuView::index
  int start = 0;
  std::size_t slot = 0;  // position in the planner's GPU vector

  // True iff this candidate is a better fit than `other`. GPUs already holding instances come
  // first (classic best fit: an idle GPU stays whole for a 7g instance or a whole-GPU pod), then
  // the fewest slices stranded (1g at 6 strands slice 7), then the least headroom lost, which
  // also picks the start inside a GPU (3g at 4 keeps 4g at 0).
  bool Better(const Candidate& other) const {
    return std::make_tuple(!partial, stranded, loss, gpu_index, start) <
           std::make_tuple(!other.partial, other.stranded, other.loss, other.gpu_index,
                           other.start);
  }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// MigGpuState

int MigGpuState::profile_count(int profile) const {
  if (profile < 0 || profile >= kMaxMigProfiles) return 0;
  return static_cast<int>((counts_ >> (4U * static_cast<unsigned>(profile))) & 0xFU);
}

bool MigGpuState::CanPlace(const MigProfileSet& set, int profile, int start) const {
  if (profile < 0 || static_cast<std::size_t>(profile) >= set.profiles.size() ||
      profile >= kMaxMigProfiles) {
    return false;
  }
  const MigProfile& p = set.profiles[static_cast<std::size_t>(profile)];
  if (start < 0 || p.size < 1 || start + p.size > kMigMemorySlices) return false;
  if (!IsLegalStart(p, start)) return false;
  if ((slice_mask_ & WindowMask(start, p.size)) != 0) return false;
  if (compute_used_ + p.compute_slices > set.compute_slices) return false;
  if (profile_count(profile) >= std::min(p.max_instances, kMaxMigInstancesPerProfile)) return false;
  if (instances_ >= set.max_gpu_instances) return false;
  if (p.media_extensions && media_extensions_ != 0) return false;
  return true;
}

bool MigGpuState::Place(const MigProfileSet& set, int profile, int start) {
  if (!CanPlace(set, profile, start)) return false;
  const MigProfile& p = set.profiles[static_cast<std::size_t>(profile)];
  slice_mask_ = static_cast<std::uint8_t>(slice_mask_ | WindowMask(start, p.size));
  compute_used_ = static_cast<std::uint8_t>(compute_used_ + p.compute_slices);
  instances_ = static_cast<std::uint8_t>(instances_ + 1);
  counts_ += 1U << (4U * static_cast<unsigned>(profile));
  if (p.media_extensions) media_extensions_ = 1;
  return true;
}

bool MigGpuState::Remove(const MigProfileSet& set, int profile, int start) {
  if (profile < 0 || static_cast<std::size_t>(profile) >= set.profiles.size() ||
      profile >= kMaxMigProfiles) {
    return false;
  }
  const MigProfile& p = set.profiles[static_cast<std::size_t>(profile)];
  if (start < 0 || p.size < 1 || start + p.size > kMigMemorySlices || !IsLegalStart(p, start)) {
    return false;
  }
  const std::uint8_t window = WindowMask(start, p.size);
  if ((slice_mask_ & window) != window || profile_count(profile) == 0 ||
      compute_used_ < p.compute_slices || instances_ == 0 ||
      (p.media_extensions && media_extensions_ == 0)) {
    return false;
  }
  slice_mask_ = static_cast<std::uint8_t>(slice_mask_ & ~window);
  compute_used_ = static_cast<std::uint8_t>(compute_used_ - p.compute_slices);
  instances_ = static_cast<std::uint8_t>(instances_ - 1);
  counts_ -= 1U << (4U * static_cast<unsigned>(profile));
  if (p.media_extensions) media_extensions_ = 0;
  return true;
}

Result<MigGpuState> MigGpuState::FromInstances(const MigProfileSet& set,
                                               std::span<const MigInstance> instances) {
  MigGpuState state;
  for (std::size_t i = 0; i < instances.size(); ++i) {
    const MigInstance& instance = instances[i];
    if (instance.profile < 0 || static_cast<std::size_t>(instance.profile) >= set.profiles.size()) {
      return MakeError("instance " + std::to_string(i) + ": profile index " +
                       std::to_string(instance.profile) + " is not in set " + set.id);
    }
    if (!state.Place(set, instance.profile, instance.start)) {
      const MigProfile& p = set.profiles[static_cast<std::size_t>(instance.profile)];
      return MakeError("instance " + std::to_string(i) + ": " + p.name + " cannot be placed at " +
                       "start " + std::to_string(instance.start) + " (GPU " +
                       (IsLegalStart(p, instance.start) ? WhyNot(set, state, instance.profile)
                                                        : "start is not a legal placement") +
                       ")");
    }
  }
  return state;
}

// ---------------------------------------------------------------------------------------------
// MigPlanner

Result<MigPlanner> MigPlanner::Create(MigProfileSet set) {
  auto valid = ValidateMigProfileSet(set);
  if (!valid) return tl::unexpected(valid.error());
  MigPlanner planner(std::move(set));
  const MigProfileSet& s = planner.set_;
  const std::size_t levels = static_cast<std::size_t>(s.compute_slices) + 1;
  const std::size_t profiles = s.profiles.size();
  try {
    planner.table_.assign(256 * levels * profiles, 0);
    planner.cover_.assign(256 * levels * profiles, 0);
  } catch (const std::exception& e) {
    return MakeError(std::string("cannot allocate the MIG planner tables: ") + e.what());
  }
  for (std::size_t mask = 0; mask < 256; ++mask) {
    for (std::size_t used = 0; used < levels; ++used) {
      const int compute_left = s.compute_slices - static_cast<int>(used);
      for (std::size_t p = 0; p < profiles; ++p) {
        const std::size_t entry = (mask * levels + used) * profiles + p;
        planner.table_[entry] = static_cast<std::uint8_t>(
            GeometricMaximum(s.profiles[p], static_cast<std::uint8_t>(mask), compute_left, 0));
        planner.cover_[entry] =
            CoverableWindows(s.profiles[p], static_cast<std::uint8_t>(mask), compute_left);
      }
    }
  }
  return planner;
}

std::size_t MigPlanner::TableRow(const MigGpuState& state) const {
  const std::size_t levels = static_cast<std::size_t>(set_.compute_slices) + 1;
  return (static_cast<std::size_t>(state.slice_mask()) * levels +
          static_cast<std::size_t>(state.compute_used())) *
         set_.profiles.size();
}

int MigPlanner::RemainingInstances(const MigGpuState& state, int profile) const {
  if (profile < 0 || static_cast<std::size_t>(profile) >= set_.profiles.size()) return 0;
  if (state.compute_used() > set_.compute_slices) return 0;
  const MigProfile& p = set_.profiles[static_cast<std::size_t>(profile)];
  int remaining = table_[TableRow(state) + static_cast<std::size_t>(profile)];
  remaining = std::min(remaining, p.max_instances - state.profile_count(profile));
  remaining = std::min(remaining, set_.max_gpu_instances - state.instance_count());
  if (p.media_extensions) remaining = std::min(remaining, state.has_media_extensions() ? 0 : 1);
  return std::max(remaining, 0);
}

int MigPlanner::Headroom(const MigGpuState& state) const {
  int total = 0;
  for (std::size_t p = 0; p < set_.profiles.size(); ++p) {
    total += RemainingInstances(state, static_cast<int>(p));
  }
  return total;
}

int MigPlanner::SliceHeadroom(const MigGpuState& state) const {
  int total = 0;
  for (std::size_t p = 0; p < set_.profiles.size(); ++p) {
    total += RemainingInstances(state, static_cast<int>(p)) * set_.profiles[p].memory_slices;
  }
  return total;
}

unsigned MigPlanner::CoverableSlices(const MigGpuState& state, std::size_t row,
                                     std::size_t p) const {
  if (state.compute_used() > set_.compute_slices ||
      state.instance_count() >= set_.max_gpu_instances) {
    return 0;
  }
  // The per-profile limits of MigGpuState::CanPlace; the table has the geometry and compute.
  const MigProfile& profile = set_.profiles[p];
  if (state.profile_count(static_cast<int>(p)) >=
      std::min(profile.max_instances, kMaxMigInstancesPerProfile)) {
    return 0;
  }
  if (profile.media_extensions && state.has_media_extensions()) return 0;
  return cover_[row + p];
}

int MigPlanner::StrandedSlices(const MigGpuState& state) const {
  const unsigned free_slices = WindowMask(0, kMigMemorySlices) & ~unsigned{state.slice_mask()};
  const std::size_t row = TableRow(state);
  unsigned coverable = 0;
  for (std::size_t p = 0; p < set_.profiles.size(); ++p) {
    coverable |= CoverableSlices(state, row, p);
  }
  return std::popcount(free_slices & ~coverable);
}

int MigPlanner::StrandedSlices(const MigGpuState& state, int profile) const {
  if (profile < 0 || static_cast<std::size_t>(profile) >= set_.profiles.size()) return 0;
  const unsigned free_slices = WindowMask(0, kMigMemorySlices) & ~unsigned{state.slice_mask()};
  const auto p = static_cast<std::size_t>(profile);
  return std::popcount(free_slices & ~CoverableSlices(state, TableRow(state), p));
}

Result<MigDecision> MigPlanner::Choose(std::span<const MigGpuView> gpus, int profile) const {
  if (profile < 0 || static_cast<std::size_t>(profile) >= set_.profiles.size()) {
    return MakeError("MIG profile index " + std::to_string(profile) + " is not in set " + set_.id);
  }
  const MigProfile& p = set_.profiles[static_cast<std::size_t>(profile)];
  MigDecision decision;
  bool found = false;
  Candidate best;
  for (std::size_t slot = 0; slot < gpus.size(); ++slot) {
    const MigGpuView& gpu = gpus[slot];
    if (!gpu.mig_enabled) continue;
    const int before = SliceHeadroom(gpu.state);
    const int stranded_before = StrandedSlices(gpu.state);
    for (int start : p.starts) {
      MigGpuState after = gpu.state;
      if (!after.Place(set_, profile, start)) continue;
      Candidate candidate{StrandedSlices(after) - stranded_before,
                          before - SliceHeadroom(after),
                          !gpu.state.empty(),
                          gpu.index,
                          start,
                          slot};
      if (!found || candidate.Better(best)) best = candidate;
      found = true;
    }
  }
  if (found) {
    decision.fits = true;
    decision.gpu = best.gpu_index;
    decision.start = best.start;
    return decision;
  }

  std::string details;
  for (const MigGpuView& gpu : gpus) {
    if (!gpu.mig_enabled) continue;
    if (!details.empty()) details += "; ";
    details += "GPU " + std::to_string(gpu.index) + " " + WhyNot(set_, gpu.state, profile);
  }
  decision.reason = details.empty()
                        ? "no GPU is in MIG mode"
                        : "no MIG-enabled GPU has a free " + p.name + " window: " + details;
  // Every profile fits an empty GPU of its set, so every idle GPU is a reconfiguration target.
  for (const MigGpuView& gpu : gpus) {
    if (!IsIdle(gpu)) continue;
    decision.reconfigurable_gpus.push_back(gpu.index);
    decision.reason += "; " + ReconfigurationHint(gpu, p.name);
  }
  return decision;
}

Result<MigRequestDecision> MigPlanner::ChooseRequest(std::span<const MigGpuView> gpus,
                                                     std::span<const int> profiles) const {
  if (profiles.empty()) return MakeError("MIG request has no instances");
  if (profiles.size() > static_cast<std::size_t>(kMaxRequestInstances)) {
    return MakeError("MIG request has " + std::to_string(profiles.size()) + " instances; at most " +
                     std::to_string(kMaxRequestInstances) + " are supported");
  }
  for (int profile : profiles) {
    if (profile < 0 || static_cast<std::size_t>(profile) >= set_.profiles.size()) {
      return MakeError("MIG profile index " + std::to_string(profile) + " is not in set " +
                       set_.id);
    }
  }
  try {
    MigRequestDecision decision;
    if (profiles.size() == 1) {
      // One instance: the same answer as Choose, including its tie-breaks.
      auto single = Choose(gpus, profiles[0]);
      if (!single) return tl::unexpected(single.error());
      decision.fits = single->fits;
      decision.reason = single->reason;
      decision.reconfigurable_gpus = single->reconfigurable_gpus;
      if (single->fits) decision.instances.push_back(*single);
      return decision;
    }

    CountKey request = 0;
    std::string names;
    for (std::size_t i = 0; i < profiles.size(); ++i) {
      request = AddCount(request, static_cast<std::size_t>(profiles[i]), 1);
      if (i > 0) names += " + ";
      names += set_.profiles[static_cast<std::size_t>(profiles[i])].name;
    }
    std::vector<MigGpuState> states;
    std::vector<const MigGpuView*> views;
    for (const MigGpuView& gpu : gpus) {
      if (!gpu.mig_enabled) continue;
      states.push_back(gpu.state);
      views.push_back(&gpu);
    }

    auto plan = Distribute(*this, states, request);
    if (!plan) return tl::unexpected(plan.error());
    if (!plan->has_value()) {
      std::string details;
      for (const MigGpuView* gpu : views) {
        if (!details.empty()) details += "; ";
        details += DescribeGpu(set_, *gpu);
      }
      decision.reason = views.empty()
                            ? "no GPU is in MIG mode"
                            : "the MIG-enabled GPUs cannot hold " + names + " together: " + details;
      // A reconfiguration target is an idle GPU whose reset (to an empty MIG GPU) makes the
      // whole request feasible.
      for (const MigGpuView& gpu : gpus) {
        if (!IsIdle(gpu)) continue;
        std::vector<MigGpuState> trial;
        for (const MigGpuView* view : views) {
          if (view != &gpu) trial.push_back(view->state);
        }
        trial.emplace_back();
        auto retry = Distribute(*this, trial, request);
        if (!retry || !retry->has_value()) continue;
        decision.reconfigurable_gpus.push_back(gpu.index);
        decision.reason += "; " + ReconfigurationHint(gpu, names);
      }
      return decision;
    }

    // Hand the planned instances to the request's items, in request order.
    decision.instances.resize(profiles.size());
    std::vector<bool> taken(profiles.size(), false);
    for (std::size_t slot = 0; slot < views.size(); ++slot) {
      for (const MigInstance& instance : (**plan)[slot]) {
        for (std::size_t i = 0; i < profiles.size(); ++i) {
          if (taken[i] || profiles[i] != instance.profile) continue;
          taken[i] = true;
          decision.instances[i] = MigDecision{true, views[slot]->index, instance.start, {}, {}};
          break;
        }
      }
    }
    if (std::find(taken.begin(), taken.end(), false) != taken.end()) {
      return MakeError("internal error: MIG plan does not cover the request");
    }
    decision.fits = true;
    return decision;
  } catch (const std::exception& e) {
    return MakeError(std::string("MIG request planning failed: ") + e.what());
  }
}

}  // namespace linkfit::alloc
