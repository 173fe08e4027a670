#include "linkfit/extender/whole_machines.h"

#include <algorithm>
#include <bit>
#include <string>
#include <vector>

namespace linkfit::extender {
namespace {

int Gpus(topology::GpuMask mask) { return std::popcount(static_cast<unsigned>(mask)); }

// Whether `free` holds k GPUs whose best ring is all NVLink (the best k-set's ring is, whenever
// any k-set's is: placement_table.h, PlacementTable::Meets).
bool HoldsNvlinkSet(const alloc::PlacementTable& table, topology::GpuMask free, int k) {
  const topology::GpuMask best = table.BestOnNode(free, k);
  return best != 0 && table.Meets(best, alloc::Closeness::kNvlink);
}

// Kuhn's augmenting path from NIC `nic` (index into `reach`: per NIC, the GPUs it may serve);
// `owner`: per GPU, the NIC index + 1 matched to it so far (0: none).
bool Augment(const std::vector<topology::GpuMask>& reach, std::size_t nic,
             std::array<std::size_t, topology::kMaxGpus>& owner, topology::GpuMask& seen) {
  for (unsigned gpus = reach[nic] & ~seen; gpus != 0; gpus &= gpus - 1) {
    const int gpu = std::countr_zero(gpus);
    seen = static_cast<topology::GpuMask>(seen | (1u << gpu));
    std::size_t& holder = owner[static_cast<std::size_t>(gpu)];
    if (holder == 0 || Augment(reach, holder - 1, owner, seen)) {
      holder = nic + 1;
      return true;
    }
  }
  return false;
}

// The most of the GPUs `gpus` that can each have a NIC of `whole` (bit i: NIC i is free whole)
// at `closeness` of their own (a bipartite matching): the largest pod asking one whole NIC per
// GPU that these GPUs and NICs could still align.
int AlignedWholeNicGpus(const topology::Topology& topology, topology::GpuMask gpus,
                        const alloc::NicMask& whole, alloc::NicCloseness closeness) {
  std::vector<topology::GpuMask> reach;
  for (int n = 0; n < topology.nic_count(); ++n) {
    if (!whole.test(static_cast<std::size_t>(n))) continue;
    unsigned close = 0;
    for (int g = 0; g < topology.gpu_count(); ++g) {
      if (((gpus >> g) & 1) != 0 && alloc::Within(topology.nic_relation(n, g), closeness)) {
        close |= 1u << g;
      }
    }
    if (close != 0) reach.push_back(static_cast<topology::GpuMask>(close));
  }
  std::array<std::size_t, topology::kMaxGpus> owner{};
  int matched = 0;
  for (std::size_t nic = 0; nic < reach.size() && matched < Gpus(gpus); ++nic) {
    topology::GpuMask seen = 0;
    if (Augment(reach, nic, owner, seen)) ++matched;
  }
  return matched;
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
  if (!nics.wanted() || node.nic_count() == 0) return BrokenGpuKeeperGpus(node, assignment);
  const int backed = AlignedWholeNicGpus(node.table().topology(), node.whole_free(),
                                         node.nic_whole_free(), nics.closeness);
  return BrokenGpuKeeperGpus(node, assignment, backed);
}

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

bool LosesNvlinkPoints(std::uint32_t ring_mbps, bool all_nvlink, double best_nvlink_ring_mbps,
                       bool ring_decides) {
  return ring_decides && !all_nvlink && best_nvlink_ring_mbps > 0 &&
         best_nvlink_ring_mbps >= static_cast<double>(ring_mbps);
}

}  // namespace linkfit::extender
