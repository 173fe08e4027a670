// MIG fragmentation: stranded memory slices per profile, learned profile weights and the
// prioritize term (see mig_fragmentation.h).

#include "linkfit/extender/mig_fragmentation.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

namespace linkfit::extender {
namespace {

constexpr double kSlicesPerGpu = alloc::kMigMemorySlices;

std::size_t Idx(int i) { return static_cast<std::size_t>(i); }

// The planner of `gpu` when it is in MIG mode (its own model's profile set), else nullptr.
const alloc::MigPlanner* MigGpuPlanner(const state::NodeState& node, int gpu) {
  if (gpu < 0 || gpu >= node.info().gpu_count() || ((node.info().mig_enabled >> gpu) & 1) == 0) {
    return nullptr;
  }
  return node.info().MigPlannerOf(gpu);
}

}  // namespace

void MigProfileStats::Record(const GpuRequest& request) {
  if (request.kind != GpuRequest::Kind::kMig || request.count <= 0) return;
  MutexLock lock(mutex_);
  auto it = counts_.find(request.mig_profile);
  if (it == counts_.end()) {
    if (counts_.size() >= kMaxProfileNames) return;
    it = counts_.emplace(request.mig_profile, 0).first;
  }
  const auto instances = static_cast<std::uint64_t>(request.count);
  it->second += instances;
  total_ += instances;
  changes_ += instances;
}

void MigProfileStats::Remove(const GpuRequest& request) {
  if (request.kind != GpuRequest::Kind::kMig || request.count <= 0) return;
  MutexLock lock(mutex_);
  const auto it = counts_.find(request.mig_profile);
  if (it == counts_.end()) return;
  const std::uint64_t instances =
      std::min<std::uint64_t>(it->second, static_cast<std::uint64_t>(request.count));
  it->second -= instances;
  total_ -= instances;
  changes_ += instances;
  if (it->second == 0) counts_.erase(it);
}

MigProfileWeightsPtr MigProfileStats::Weights() const {
  MutexLock lock(mutex_);
  if (weights_ && changes_ < weights_changes_ + std::max<std::uint64_t>(1, weights_total_ / 200)) {
    return weights_;
  }
  weights_changes_ = changes_;
  auto weights = std::make_shared<MigProfileWeights>();
  weights->by_name.reserve(counts_.size());
  for (const auto& [name, count] : counts_) {
    weights->by_name.emplace_back(name, static_cast<double>(count) / static_cast<double>(total_));
  }
  weights_total_ = total_;
  weights_ = std::move(weights);
  return weights_;
}

std::vector<double> WeightsForSet(const alloc::MigProfileSet& set,
                                  const MigProfileWeights& weights) {
  std::vector<double> result(set.profiles.size(), 0.0);
  double sum = 0;
  for (std::size_t p = 0; p < set.profiles.size(); ++p) {
    const auto named =
        std::lower_bound(weights.by_name.begin(), weights.by_name.end(), set.profiles[p].name,
                         [](const std::pair<std::string, double>& entry, const std::string& name) {
                           return entry.first < name;
                         });
    if (named != weights.by_name.end() && named->first == set.profiles[p].name) {
      result[p] = named->second;
      sum += named->second;
    }
  }
  if (result.empty()) return result;
  if (sum <= 0) {
    std::fill(result.begin(), result.end(), 1.0 / static_cast<double>(result.size()));
    return result;
  }
  for (double& weight : result) weight /= sum;
  return result;
}

double MigGpuFragmentation(const alloc::MigPlanner& planner, const alloc::MigGpuState& state,
                           const std::vector<double>& set_weights) {
  double fragmentation = 0;
  const std::size_t profiles = std::min(planner.set().profiles.size(), set_weights.size());
  for (std::size_t p = 0; p < profiles; ++p) {
    if (set_weights[p] <= 0) continue;
    fragmentation += set_weights[p] * planner.StrandedSlices(state, static_cast<int>(p));
  }
  return fragmentation;
}

double MigFragmentation(const state::NodeState& node, const MigProfileWeights& weights) {
  double fragmentation = 0;
  // Each GPU with its own model's profiles and their weights.
  for (const alloc::MigPlanner* planner : node.info().mig_planners) {
    const std::vector<double> set_weights = WeightsForSet(planner->set(), weights);
    for (int g = 0; g < node.info().gpu_count(); ++g) {
      if (MigGpuPlanner(node, g) != planner) continue;
      fragmentation += MigGpuFragmentation(*planner, node.mig_state(g), set_weights);
    }
  }
  return fragmentation;
}

MigFragmentationScorer::MigFragmentationScorer(MigProfileWeightsPtr weights)
    : weights_(weights ? std::move(weights) : std::make_shared<const MigProfileWeights>()) {}

const std::vector<double>& MigFragmentationScorer::SetWeights(const alloc::MigPlanner& planner) {
  for (const auto& [cached, set_weights] : by_planner_) {
    if (cached == &planner) return set_weights;
  }
  by_planner_.emplace_back(&planner, WeightsForSet(planner.set(), *weights_));
  return by_planner_.back().second;
}

MigPlacementTerms MigFragmentationScorer::Score(const state::NodeState& node,
                                                const state::Assignment& assignment) {
  MigPlacementTerms terms;
  if (assignment.kind != state::Assignment::Kind::kMig || assignment.mig.empty()) return terms;
  // The GPUs the assignment touches, with their states after it (a request of several
  // instances may put more than one on a GPU), each with its own model's planner.
  std::array<alloc::MigGpuState, topology::kMaxGpus> after{};
  std::array<const alloc::MigPlanner*, topology::kMaxGpus> planner_of{};
  topology::GpuMask touched = 0;
  for (const state::Assignment::MigSlot& slot : assignment.mig) {
    const alloc::MigPlanner* planner = MigGpuPlanner(node, slot.gpu);
    if (planner == nullptr) return terms;
    if (((touched >> slot.gpu) & 1) == 0) {
      after[Idx(slot.gpu)] = node.mig_state(slot.gpu);
      planner_of[Idx(slot.gpu)] = planner;
      touched = static_cast<topology::GpuMask>(touched | (1u << slot.gpu));
    }
    if (!after[Idx(slot.gpu)].Place(planner->set(), slot.instance.profile, slot.instance.start)) {
      return terms;
    }
  }
  double growth = 0;
  int free_after = 0;
  for (int g = 0; g < node.info().gpu_count(); ++g) {
    if (((touched >> g) & 1) == 0) continue;
    const alloc::MigPlanner& planner = *planner_of[Idx(g)];
    const std::vector<double>& set_weights = SetWeights(planner);
    free_after += alloc::kMigMemorySlices - std::popcount(unsigned{after[Idx(g)].slice_mask()});
    growth += MigGpuFragmentation(planner, after[Idx(g)], set_weights) -
              MigGpuFragmentation(planner, node.mig_state(g), set_weights);
  }
  terms.growth_slices = growth;
  terms.fragmentation = 1.0 / (1.0 + std::exp(growth / kSlicesPerGpu));
  terms.gpu_tightness = 1.0 - free_after / (kSlicesPerGpu * std::popcount(unsigned{touched}));
  return terms;
}

}  // namespace linkfit::extender
