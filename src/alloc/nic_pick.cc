// ChooseNics: the NICs for a GPU set already chosen (terms 4-9 of the objective in
// nic_choice.h), by a dynamic program when every GPU gets its own NIC and by enumeration when
// fewer NICs than GPUs are asked.

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "alloc/nic_score.h"
#include "linkfit/alloc/nic_choice.h"
#include "linkfit/common/strings.h"

namespace linkfit::alloc {
namespace {

using topology::GpuMask;

// The choice for k >= g: every GPU of `gpus` paired with its own NIC, k - g more NICs unpaired.
// States: (GPUs paired so far, extra NICs taken so far), NICs visited in index order; each NIC
// is skipped, taken as an extra, or paired with a GPU not yet paired. Scores add up and compare
// the same after a common addition (the NIC masks of two partial choices never meet the NICs
// still to come), so keeping the best score per state is exact.
NicChoice PairEveryGpu(const NicTerms& terms, int k, NicScore& chosen_score) {
  const int g = static_cast<int>(terms.gpus.size());
  const int extras = k - g;
  const std::size_t paired_states = std::size_t{1} << g;
  const std::size_t states = paired_states * static_cast<std::size_t>(extras + 1);
  const std::size_t nics = terms.candidates.size();
  struct Cell {
    bool reached = false;
    NicScore score;
  };
  std::vector<Cell> current(states);
  NicChoice choice;
  if (current.empty()) return choice;
  current.front().reached = true;
  // The action that reached each state after each NIC: -2 skipped, -1 extra, j paired with
  // terms.gpus[j].
  std::vector<std::int8_t> action(nics * states, -2);
  std::vector<Cell> next;
  for (std::size_t i = 0; i < nics; ++i) {
    next = current;  // skipping NIC i; reuses next's storage
    std::int8_t* acted = &action[i * states];
    auto offer = [&](std::size_t to, const NicScore& score, std::int8_t how) {
      if (!next[to].reached || BetterNics(score, next[to].score)) {
        next[to] = Cell{true, score};
        acted[to] = how;
      }
    };
    for (std::size_t from = 0; from < states; ++from) {
      if (!current[from].reached) continue;
      const std::size_t paired = from % paired_states;
      const std::size_t taken = from / paired_states;
      if (static_cast<int>(taken) < extras) {
        offer(from + paired_states, current[from].score.Plus(terms.Extra(i)), -1);
      }
      for (int j = 0; j < g; ++j) {
        if (((paired >> j) & 1) != 0) continue;
        offer(from | (std::size_t{1} << j), current[from].score.Plus(terms.Pair(i, j)),
              static_cast<std::int8_t>(j));
      }
    }
    current.swap(next);
  }
  std::size_t state = states - 1;
  if (!current[state].reached) return choice;
  choice.fits = true;
  chosen_score = current[state].score;
  choice.close_gpus = chosen_score.close;
  for (std::size_t i = nics; i-- > 0;) {
    const std::int8_t how = action[i * states + state];
    if (how == -2) continue;
    NicPick pick{terms.candidates[i], terms.milli, -1};
    if (how == -1) {
      pick.gpu = terms.ClosestGpu(i);
      state -= paired_states;
    } else {
      pick.gpu = terms.gpus[static_cast<std::size_t>(how)];
      state &= ~(std::size_t{1} << how);
      if (!terms.Close(i, how)) choice.far_gpus |= static_cast<GpuMask>(1u << pick.gpu);
    }
    choice.nics.push_back(pick);
  }
  std::reverse(choice.nics.begin(), choice.nics.end());
  return choice;
}

// Calls visit(chosen) for every k-subset of 0..n-1, ascending.
template <typename Visit>
void ForEachCombination(std::size_t n, std::size_t k, Visit&& visit) {
  std::vector<std::size_t> chosen(k);
  for (std::size_t i = 0; i < k; ++i) chosen[i] = i;
  if (k > n) return;
  while (true) {
    visit(chosen);
    std::size_t i = k;
    while (i > 0 && chosen[i - 1] == n - k + i - 1) --i;
    if (i == 0) return;
    ++chosen[i - 1];
    for (std::size_t j = i; j < k; ++j) chosen[j] = chosen[j - 1] + 1;
  }
}

// The choice for k < g: each GPU uses the closest NIC of the set. NICs alike for this GPU set
// (same relations to its GPUs, same share free, same damage) are interchangeable but for their
// index, so only the first k of each kind are tried.
NicChoice ShareNicsAmongGpus(const NicTerms& terms, int k, NicScore& chosen_score) {
  std::map<std::vector<int>, int> kinds;
  std::vector<std::size_t> tried;
  for (std::size_t i = 0; i < terms.candidates.size(); ++i) {
    if (++kinds[terms.KindOf(i)] <= k) tried.push_back(i);
  }
  NicChoice choice;
  NicScore best;
  std::vector<std::size_t> best_set;
  ForEachCombination(tried.size(), static_cast<std::size_t>(k),
                     [&](const std::vector<std::size_t>& chosen) {
                       std::vector<std::size_t> set;
                       for (std::size_t c : chosen) set.push_back(tried[c]);
                       const NicScore score = terms.Covering(set);
                       if (!choice.fits || BetterNics(score, best)) {
                         choice.fits = true;
                         best = score;
                         best_set = std::move(set);
                       }
                     });
  if (!choice.fits) return choice;
  chosen_score = best;
  choice.close_gpus = best.close;
  const std::vector<int> serving = terms.ServedGpus(best_set);
  choice.far_gpus = terms.FarGpus(best_set);
  for (std::size_t c = 0; c < best_set.size(); ++c) {
    choice.nics.push_back(NicPick{terms.candidates[best_set[c]], terms.milli, serving[c]});
  }
  return choice;
}

}  // namespace

std::string DescribeUnavailableNics(const topology::Topology& topology, const NicAvailability& nics,
                                    int milli, NicMask only) {
  std::vector<int> in_use;
  std::vector<int> excluded;
  for (int n = 0; n < topology.nic_count(); ++n) {
    const auto at = static_cast<std::size_t>(n);
    if (!only.test(at)) continue;
    if (nics.excluded.test(at)) {
      excluded.push_back(n);
    } else if (nics.free_milli[at] < milli) {
      in_use.push_back(n);
    }
  }
  auto listed = [](const std::vector<int>& list) {
    return std::string(list.size() == 1 ? "NIC " : "NICs ") + JoinInts(list);
  };
  std::string text;
  if (!in_use.empty()) text = listed(in_use) + " in use";
  if (!excluded.empty()) {
    text += (text.empty() ? "" : "; ") + listed(excluded) +
            (excluded.size() == 1 ? " down or a virtual function" : " down or virtual functions");
  }
  return text;
}

namespace {

// NicChoice::staged_at_rate of a choice that is not aligned.
bool StagedAtRate(const topology::Topology& topology, const NicChoice& choice) {
  for (int gpu = 0; gpu < topology.gpu_count(); ++gpu) {
    if (((choice.far_gpus >> gpu) & 1) == 0) continue;
    const auto own = std::find_if(choice.nics.begin(), choice.nics.end(),
                                  [gpu](const NicPick& pick) { return pick.gpu == gpu; });
    if (own == choice.nics.end()) return false;
    const std::uint64_t share_mbps =
        std::uint64_t{topology.nic_mbps(own->nic)} * static_cast<std::uint64_t>(own->milli) / 1000;
    if (share_mbps == 0 || share_mbps > topology.staged_mbps(gpu)) return false;
  }
  return true;
}

}  // namespace

NicChoice ChooseNics(const topology::Topology& topology, GpuMask gpus, GpuMask free_after,
                     const NicAvailability& nics, const NicRequest& request) {
  NicScore score;
  const int g = __builtin_popcount(gpus);
  const int k = request.CountFor(g);
  const NicTerms terms(topology, gpus, free_after, nics, request);
  const int usable = topology.nic_count() - static_cast<int>(nics.excluded.count());
  if (static_cast<int>(terms.candidates.size()) < k) {
    NicChoice none;
    none.unresolvable = usable < k;
    none.reason = "needs " + Plural(k, "NIC") +
                  (request.milli == NicRequest::kWhole
                       ? " to itself"
                       : " with " + std::to_string(request.milli) + "/1000 free") +
                  ", " + std::to_string(terms.candidates.size()) + " of " +
                  std::to_string(topology.nic_count()) + " can take it";
    const std::string why = DescribeUnavailableNics(topology, nics, request.milli, NicMask().set());
    if (!why.empty()) none.reason += " (" + why + ")";
    return none;
  }
  NicChoice choice = k >= g ? PairEveryGpu(terms, k, score) : ShareNicsAmongGpus(terms, k, score);
  choice.aligned = choice.close_gpus == g;
  if (!choice.aligned) {
    const GpuMask far = choice.far_gpus;
    choice.reason = "no NIC " + std::string(Describe(request.closeness)) + " for GPUs " +
                    JoinInts(MaskToIndexes(far));
    const std::string why =
        DescribeUnavailableNics(topology, nics, request.milli, terms.ReachOf(far));
    if (!why.empty()) choice.reason += " (" + why + ")";
    if (request.policy == ClosenessPolicy::kRequired) {
      choice.fits = false;
      choice.nics.clear();
    } else {
      choice.staged_at_rate = StagedAtRate(topology, choice);
    }
  }
  return choice;
}

}  // namespace linkfit::alloc
