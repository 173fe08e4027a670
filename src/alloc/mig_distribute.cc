// The exact distribution of a multi-instance MIG request over GPUs (mig_distribute.h).

#include "alloc/mig_distribute.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <map>
#include <tuple>
#include <utility>

namespace linkfit::alloc {
namespace {

bool FitsWithin(CountKey part, CountKey whole, std::size_t profiles) {
  for (std::size_t p = 0; p < profiles; ++p) {
    if (CountOf(part, p) > CountOf(whole, p)) return false;
  }
  return true;
}

// The best way to add one count vector of instances to one GPU.
struct Addition {
  int stranded = 0;  // free slices of the GPU stranded
  int loss = 0;      // headroom lost on the GPU, in memory slices
  std::vector<MigInstance> instances;

  bool Better(const Addition& other) const {
    return std::tie(stranded, loss) < std::tie(other.stranded, other.loss);
  }
};

// Every count vector (bounded by `limit`) that can be added to a GPU in `state`, each with the
// placement that strands the fewest slices, then loses the least headroom. Exact: every set of
// instances is visited once, in canonical order (profile ascending, then start ascending).
class AdditionEnumerator {
 public:
  AdditionEnumerator(const MigPlanner& planner, CountKey limit)
      : planner_(planner), limit_(limit) {}

  std::map<CountKey, Addition> Enumerate(const MigGpuState& state) {
    result_.clear();
    before_ = planner_.SliceHeadroom(state);
    stranded_before_ = planner_.StrandedSlices(state);
    path_.clear();
    Visit(state, 0, 0, 0);
    return std::move(result_);
  }

 private:
  void Visit(const MigGpuState& state, std::size_t first_profile, std::size_t first_start,
             CountKey counts) {
    Addition here{planner_.StrandedSlices(state) - stranded_before_,
                  before_ - planner_.SliceHeadroom(state),
                  {}};
    auto [it, inserted] = result_.try_emplace(counts, here);
    if (inserted || here.Better(it->second)) {
      it->second = std::move(here);
      it->second.instances = path_;
    }
    const MigProfileSet& set = planner_.set();
    for (std::size_t p = first_profile; p < set.profiles.size(); ++p) {
      if (CountOf(counts, p) >= CountOf(limit_, p)) continue;
      const std::vector<int>& starts = set.profiles[p].starts;
      for (std::size_t i = (p == first_profile ? first_start : 0); i < starts.size(); ++i) {
        MigGpuState next = state;
        if (!next.Place(set, static_cast<int>(p), starts[i])) continue;
        path_.push_back(MigInstance{static_cast<int>(p), starts[i]});
        Visit(next, p, i + 1, AddCount(counts, p, 1));
        path_.pop_back();
      }
    }
  }

  const MigPlanner& planner_;
  CountKey limit_;
  int before_ = 0;
  int stranded_before_ = 0;
  std::vector<MigInstance> path_;
  std::map<CountKey, Addition> result_;
};

// The cheapest way found so far to leave `remaining` instances after some GPUs.
struct DistributionStep {
  int stranded = 0;      // total slices stranded
  int loss = 0;          // total headroom lost
  int idle_touched = 0;  // empty GPUs that received instances
  int position_sum = 0;  // sum of the GPUs' positions per instance (prefers lower positions)
  CountKey previous = 0;
  CountKey added = 0;

  bool Cheaper(const DistributionStep& other) const {
    return std::tie(idle_touched, stranded, loss, position_sum) <
           std::tie(other.idle_touched, other.stranded, other.loss, other.position_sum);
  }
};

// Upper bounds on dynamic-programming entries and on the (entry, addition) pairs examined, so
// that no request can exhaust memory or hold a scheduling cycle for long. Requests of a few
// instances stay far below them (see MigPlannerTest.LargeRequestsStayWithinBudget).
constexpr std::size_t kMaxDistributionEntries = 200000;
constexpr std::size_t kMaxDistributionWork = 1000000;

}  // namespace

Result<std::optional<std::vector<std::vector<MigInstance>>>> Distribute(
    const MigPlanner& planner, const std::vector<MigGpuState>& states, CountKey request) {
  const MigProfileSet& set = planner.set();
  const std::size_t profiles = set.profiles.size();
  // Free compute and memory slices of GPUs g.. (for pruning hopeless remainders).
  std::vector<int> free_compute(states.size() + 1, 0);
  std::vector<int> free_memory(states.size() + 1, 0);
  for (std::size_t g = states.size(); g-- > 0;) {
    free_compute[g] = free_compute[g + 1] + set.compute_slices - states[g].compute_used();
    free_memory[g] = free_memory[g + 1] + kMigMemorySlices - std::popcount(states[g].slice_mask());
  }
  auto hopeless = [&](CountKey remaining, std::size_t from) {
    int compute = 0;
    int memory = 0;
    for (std::size_t p = 0; p < profiles; ++p) {
      compute += CountOf(remaining, p) * set.profiles[p].compute_slices;
      memory += CountOf(remaining, p) * set.profiles[p].size;
    }
    return compute > free_compute[from] || memory > free_memory[from];
  };
  if (hopeless(request, 0)) return std::optional<std::vector<std::vector<MigInstance>>>();
  for (std::size_t p = 0; p < profiles; ++p) {
    int room = 0;
    for (const MigGpuState& state : states) {
      room += planner.RemainingInstances(state, static_cast<int>(p));
    }
    if (room < CountOf(request, p)) return std::optional<std::vector<std::vector<MigInstance>>>();
  }

  AdditionEnumerator enumerator(planner, request);
  std::vector<std::map<CountKey, Addition>> additions(states.size());
  // layers[g]: the remainders reachable after GPUs 0..g-1, each with its cheapest step.
  std::vector<std::map<CountKey, DistributionStep>> layers;
  layers.reserve(states.size() + 1);
  std::map<CountKey, DistributionStep> current;
  current.emplace(request, DistributionStep{});
  std::size_t entries = 1;
  std::size_t work = 0;
  for (std::size_t g = 0; g < states.size(); ++g) {
    std::size_t same = 0;
    while (same < g && !(states[same] == states[g])) ++same;
    additions[g] = same < g ? additions[same] : enumerator.Enumerate(states[g]);
    std::map<CountKey, DistributionStep> next_layer;
    for (const auto& [remaining, step] : current) {
      work += additions[g].size();
      if (work > kMaxDistributionWork) {
        return MakeError("MIG request is too large to place exactly (search budget of " +
                         std::to_string(kMaxDistributionWork) + " steps exceeded)");
      }
      for (const auto& [added, addition] : additions[g]) {
        if (!FitsWithin(added, remaining, profiles)) continue;
        const CountKey left = remaining - added;
        if (hopeless(left, g + 1)) continue;
        int instances = 0;
        for (std::size_t p = 0; p < profiles; ++p) instances += CountOf(added, p);
        DistributionStep next{step.stranded + addition.stranded,
                              step.loss + addition.loss,
                              step.idle_touched + (instances > 0 && states[g].empty() ? 1 : 0),
                              step.position_sum + instances * static_cast<int>(g),
                              remaining,
                              added};
        auto [it, inserted] = next_layer.try_emplace(left, next);
        if (inserted) {
          if (++entries > kMaxDistributionEntries) {
            return MakeError("MIG request is too large to place exactly (more than " +
                             std::to_string(kMaxDistributionEntries) + " partial distributions)");
          }
        } else if (next.Cheaper(it->second)) {
          it->second = next;
        }
      }
    }
    layers.push_back(std::move(current));
    current = std::move(next_layer);
  }
  if (current.count(0) == 0) return std::optional<std::vector<std::vector<MigInstance>>>();
  layers.push_back(std::move(current));
  std::vector<std::vector<MigInstance>> plan(states.size());
  CountKey key = 0;
  for (std::size_t g = states.size(); g-- > 0;) {
    const std::map<CountKey, DistributionStep>& layer = layers[g + 1];
    const auto step = layer.find(key);
    if (step == layer.end()) return MakeError("internal error: MIG distribution lost a step");
    const auto addition = additions[g].find(step->second.added);
    if (addition == additions[g].end()) {
      return MakeError("internal error: MIG distribution lost an addition");
    }
    plan[g] = addition->second.instances;
    key = step->second.previous;
  }
  return std::optional<std::vector<std::vector<MigInstance>>>(std::move(plan));
}

}  // namespace linkfit::alloc
