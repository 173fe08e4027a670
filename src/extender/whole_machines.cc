#include "linkfit/extender/whole_machines.h"

#include <algorithm>
#include <bit>
#include <string>

#include "linkfit/alloc/nic_choice.h"

namespace linkfit::extender {
namespace {

int Gpus(topology::GpuMask mask) { return std::popcount(static_cast<unsigned>(mask)); }

// Whether `free` holds k GPUs whose best ring is all NVLink (the best k-set's ring is, whenever
// any k-set's is: placement_table.h, PlacementTable::Meets).
bool HoldsNvlinkSet(const alloc::PlacementTable& table, topology::GpuMask free, int k) {
  const topology::GpuMask best = table.BestOnNode(free, k);
  return best != 0 && table.Meets(best, alloc::Closeness::kNvlink);
}

// The NVLink keepers of at most `largest` GPUs and the MIG keeper that `assignment` breaks.
int BrokenGpuKeeperGpus(const state::NodeState& node, const state::Assignment& assignment,
                        int largest) {
  if (!assignment.mig.empty()) {
    // The largest MIG profile needs a MIG GPU whose slices are all free.
    for (const state::Assignment::MigSlot& slot : assignment.mig) {
      if (node.mig_state(slot.gpu).slice_mask() == 0) return 1;
    }
    return 0;
  }
  const topology::GpuMask touched = assignment.gpus;
  if (touched == 0) return 0;
  const topology::GpuMask free = node.whole_free();
  // An NVLink island (on an NVSwitch or hybrid-mesh machine, the whole machine) is intact while
  // every GPU of it is free for whole placement (none held, shared, in MIG mode or unhealthy); a
  // placement on it breaks it unless it takes all of it.
  int level = 0;
  for (const topology::GpuMask island : node.info().topology().nvlink_islands()) {
    if (Gpus(island) >= 2 && Gpus(island) <= largest && (island & ~free) == 0 &&
        (island & touched) != 0 && (island & ~touched) != 0) {
      level = std::max(level, Gpus(island));
    }
  }
  // On a partly used machine, the all-NVLink sets of the sizes multi-GPU pods ask (powers of
  // two) that its free GPUs still offer: a placement that leaves none of k GPUs where there was
  // one breaks a keeper of k, unless the placement itself is that large.
  const alloc::PlacementTable& table = node.table();
  const auto left = static_cast<topology::GpuMask>(free & ~touched);
  for (int k = 2; k <= std::min(table.gpu_count(), largest); k *= 2) {
    if (k > Gpus(touched) && k > level && HoldsNvlinkSet(table, free, k) &&
        !HoldsNvlinkSet(table, left, k)) {
      level = k;
    }
  }
  return level;
}

}  // namespace

Result<WholeMachinePolicy> ParseWholeMachinePolicy(std::string_view text) {
  if (text == "keep") return WholeMachinePolicy::kKeep;
  if (text == "ring") return WholeMachinePolicy::kRing;
  if (text == "off") return WholeMachinePolicy::kOff;
  return MakeError("whole_machines must be keep, ring or off, not \"" + std::string(text) + "\"");
}

std::string_view ToString(WholeMachinePolicy policy) {
  switch (policy) {
    case WholeMachinePolicy::kKeep:
      return "keep";
    case WholeMachinePolicy::kRing:
      return "ring";
    case WholeMachinePolicy::kOff:
      return "off";
  }
  return "keep";
}

int BrokenKeeperGpus(const state::NodeState& node, const state::Assignment& assignment,
                     const alloc::NicRequest& nics) {
  if (!nics.wanted() || node.nic_count() == 0) {
    return BrokenGpuKeeperGpus(node, assignment, topology::kMaxGpus);
  }
  const int backed = alloc::GpusWithOwnCloseNic(node.table().topology(), node.whole_free(),
                                                node.nic_whole_free(), nics.closeness);
  return BrokenGpuKeeperGpus(node, assignment, backed);
}

bool RingDecides(const GpuRequest& request, WholeMachinePolicy policy) {
  return policy == WholeMachinePolicy::kRing || request.closeness != alloc::Closeness::kNode ||
         request.nics.wanted();
}

void KeptAlternatives::Add(int level, std::uint32_t ring_rank) {
  const auto at = static_cast<std::size_t>(std::clamp(level, 0, kLevels - 1));
  by_level_[at] = std::max(by_level_[at], ring_rank + 1);
}

KeptAlternatives::Rings KeptAlternatives::Below() const {
  Rings below{};
  std::uint32_t best = 0;
  for (std::size_t level = 0; level < below.size(); ++level) {
    below[level] = best;
    best = std::max(best, by_level_[level]);
  }
  return below;
}

bool LosesWholeMachinePoints(int level, std::uint32_t ring_rank,
                             const KeptAlternatives::Rings& below, bool ring_decides) {
  if (level <= 0) return false;
  const std::uint32_t alternative =
      below[static_cast<std::size_t>(std::min(level, KeptAlternatives::kLevels - 1))];
  if (alternative == 0) return false;  // every candidate breaks as much
  return !ring_decides || alternative - 1 >= ring_rank;
}

bool NvlinkRuleApplies(const GpuRequest& request, WholeMachinePolicy policy) {
  return policy != WholeMachinePolicy::kOff && request.kind == GpuRequest::Kind::kWhole &&
         request.count >= 2 && RingDecides(request, policy);
}

bool PcieHopBesideNvlinkRing(std::uint32_t ring_mbps, bool all_nvlink,
                             double best_nvlink_ring_mbps) {
  return !all_nvlink && best_nvlink_ring_mbps > 0 &&
         best_nvlink_ring_mbps >= static_cast<double>(ring_mbps);
}

bool LosesNvlinkPoints(std::uint32_t ring_mbps, bool all_nvlink, double best_nvlink_ring_mbps,
                       bool rule_applies) {
  return rule_applies && PcieHopBesideNvlinkRing(ring_mbps, all_nvlink, best_nvlink_ring_mbps);
}

}  // namespace linkfit::extender
