// PlaceWholeGpusWithNics: a whole-GPU pod's GPUs and NICs chosen together (the objective in
// nic_choice.h): every GPU set of the asked size is checked for alignment, and the sets tied on
// the GPU side get a NIC choice each.

#include <bitset>
#include <cstdint>
#include <string>
#include <vector>

#include "alloc/nic_score.h"
#include "linkfit/alloc/nic_choice.h"
#include "linkfit/common/strings.h"

namespace linkfit::alloc {
namespace {

using topology::GpuMask;

// The NICs that can take the request and the GPUs each reaches at the asked closeness.
struct Reach {
  std::vector<GpuMask> gpus_of;  // per NIC that can take the request
};

Reach ReachOfTakers(const topology::Topology& topology, const NicAvailability& nics,
                    const NicRequest& request) {
  Reach reach;
  for (int n = 0; n < topology.nic_count(); ++n) {
    const auto at = static_cast<std::size_t>(n);
    if (nics.excluded.test(at) || nics.free_milli[at] < request.milli) continue;
    unsigned mask = 0;
    for (int g = 0; g < topology.gpu_count(); ++g) {
      if (Within(topology.nic_relation(n, g), request.closeness)) mask |= 1u << g;
    }
    reach.gpus_of.push_back(static_cast<GpuMask>(mask));
  }
  return reach;
}

// Kuhn's augmenting path from GPU `gpu` (bit index), NICs matched so far in `owner`.
bool Augment(const Reach& reach, int gpu, std::vector<int>& owner, std::vector<bool>& seen) {
  for (std::size_t n = 0; n < reach.gpus_of.size(); ++n) {
    if (((reach.gpus_of[n] >> gpu) & 1) == 0 || seen[n]) continue;
    seen[n] = true;
    if (owner[n] < 0 || Augment(reach, owner[n], owner, seen)) {
      owner[n] = gpu;
      return true;
    }
  }
  return false;
}

// Whether up to `budget` of the NIC reach masks `masks` (from index `from`) cover `left`.
bool Covers(const std::vector<GpuMask>& masks, std::size_t from, GpuMask left, int budget) {
  if (left == 0) return true;
  if (budget == 0) return false;
  for (std::size_t i = from; i < masks.size(); ++i) {
    if ((masks[i] & left) != 0 &&
        Covers(masks, i + 1, static_cast<GpuMask>(left & ~masks[i]), budget - 1)) {
      return true;
    }
  }
  return false;
}

// How many GPUs of `gpus` get a NIC of their own in a maximum matching (Kuhn's, GPU by GPU).
int MatchedGpus(const Reach& reach, GpuMask gpus) {
  std::vector<int> owner(reach.gpus_of.size(), -1);
  int matched = 0;
  for (int gpu = 0; gpu < topology::kMaxGpus; ++gpu) {
    if (((gpus >> gpu) & 1) == 0) continue;
    std::vector<bool> seen(reach.gpus_of.size(), false);
    if (Augment(reach, gpu, owner, seen)) ++matched;
  }
  return matched;
}

bool AlignedWith(const Reach& reach, GpuMask gpus, int nic_count) {
  if (static_cast<int>(reach.gpus_of.size()) < nic_count) return false;
  const int g = __builtin_popcount(gpus);
  if (nic_count >= g) return MatchedGpus(reach, gpus) == g;
  std::vector<GpuMask> distinct;
  for (GpuMask mask : reach.gpus_of) {
    const auto within = static_cast<GpuMask>(mask & gpus);
    bool seen = within == 0;
    for (GpuMask d : distinct) seen = seen || d == within;
    if (!seen) distinct.push_back(within);
  }
  return Covers(distinct, 0, gpus, nic_count);
}

// Every k-subset of `free`, as masks.
std::vector<GpuMask> SetsOfSize(GpuMask free, int k) {
  std::vector<int> bits = MaskToIndexes(free);
  std::vector<GpuMask> sets;
  const int n = static_cast<int>(bits.size());
  for (unsigned pick = (1u << k) - 1; pick < (1u << n);) {
    unsigned set = 0;
    for (int i = 0; i < n; ++i) {
      if (((pick >> i) & 1) != 0) set |= 1u << bits[static_cast<std::size_t>(i)];
    }
    sets.push_back(static_cast<GpuMask>(set));
    const unsigned low = pick & -pick;  // Gosper's next combination
    const unsigned ripple = pick + low;
    pick = ripple | (((pick ^ ripple) >> 2) / low);
  }
  return sets;
}

// -1 when `a` is better on the GPU side (ring, sum, span, look-ahead), 1 when `b` is, 0 if tied.
int CompareGpuSide(const PlacementTable& table, GpuMask a, GpuMask b, GpuMask free) {
  const SetQuality qa = table.Quality(a);
  const SetQuality qb = table.Quality(b);
  if (qa.ring_mbps != qb.ring_mbps) return qa.ring_mbps > qb.ring_mbps ? -1 : 1;
  if (qa.sum_mbps != qb.sum_mbps) return qa.sum_mbps > qb.sum_mbps ? -1 : 1;
  if (qa.numa_span != qb.numa_span) return qa.numa_span < qb.numa_span ? -1 : 1;
  const std::uint64_t la = table.Lookahead(static_cast<GpuMask>(free & ~a));
  const std::uint64_t lb = table.Lookahead(static_cast<GpuMask>(free & ~b));
  if (la != lb) return la > lb ? -1 : 1;
  return 0;
}

// Keeps the sets of `sets` for which `keep` holds, when at least one does.
template <typename Keep>
void PreferWhere(std::vector<GpuMask>& sets, Keep&& keep) {
  std::vector<GpuMask> kept;
  for (GpuMask set : sets) {
    if (keep(set)) kept.push_back(set);
  }
  if (!kept.empty()) sets = std::move(kept);
}

// The set with the lowest GPU where two differ is the better (PlacementTable's last tie-break).
bool LowerGpus(GpuMask a, GpuMask b) {
  const unsigned differ = static_cast<unsigned>(a ^ b);
  return differ != 0 && (a & (differ & -differ)) != 0;
}

// The NICs of `choice` on the rails `rails`.
int OnRails(const topology::Topology& topology, const NicChoice& choice,
            const std::bitset<topology::kMaxNics>& rails) {
  int count = 0;
  for (const NicPick& pick : choice.nics) {
    const int rail = topology.nics()[static_cast<std::size_t>(pick.nic)].rail;
    const bool on =
        rail >= 0 && rail < topology::kMaxNics && rails.test(static_cast<std::size_t>(rail));
    count += on ? 1 : 0;
  }
  return count;
}

// Of GPU sets tied on the GPU side: the one whose best NICs lie most on the pod's rails (when it
// names any), then the one with the lowest GPUs.
GpuMask BestOfTied(const topology::Topology& topology, const std::vector<GpuMask>& tied,
                   GpuMask free, const NicAvailability& nics, const NicRequest& request) {
  GpuMask best = tied.front();
  int best_rails = -1;
  for (GpuMask set : tied) {
    int rails = 0;
    if (request.rails.any()) {
      rails = OnRails(topology,
                      ChooseNics(topology, set, static_cast<GpuMask>(free & ~set), nics, request),
                      request.rails);
    }
    if (rails > best_rails || (rails == best_rails && LowerGpus(set, best))) {
      best = set;
      best_rails = rails;
    }
  }
  return best;
}

// The joint placement when no GPU set can have its NICs at the asked closeness and the pod
// requires it.
NicChoice NoAlignedSet(const PlacementTable& table, GpuMask free, const NicAvailability& nics,
                       const WholeGpuRequest& gpus, const NicRequest& request) {
  const topology::Topology& topology = table.topology();
  const bool level_applies = gpus.closeness != Closeness::kNode && gpus.gpus > 1;
  const bool gpus_required = level_applies && gpus.policy == ClosenessPolicy::kRequired;
  NicChoice none;
  none.reason = "no " + std::to_string(gpus.gpus) + " free GPUs" +
                (gpus_required ? " meeting " + std::string(ToString(gpus.closeness)) : "") +
                " with a NIC " + std::string(Describe(request.closeness)) + " each";
  const NicTerms terms(topology, 0, 0, nics, request);
  const std::string why =
      DescribeUnavailableNics(topology, nics, request.milli, terms.ReachOf(free));
  if (!why.empty()) none.reason += ": " + why;
  // Unresolvable when it fails with every GPU and NIC free.
  NicAvailability idle = nics;
  for (std::size_t n = 0; n < idle.free_milli.size(); ++n) {
    idle.free_milli[n] = idle.excluded.test(n) ? 0 : NicRequest::kWhole;
  }
  const Reach reach = ReachOfTakers(topology, idle, request);
  const int nic_count = request.CountFor(gpus.gpus);
  none.unresolvable = true;
  for (GpuMask set : SetsOfSize(topology.all_gpus(), gpus.gpus)) {
    if (gpus_required && !table.Meets(set, gpus.closeness)) continue;
    if (AlignedWith(reach, set, nic_count)) {
      none.unresolvable = false;
      break;
    }
  }
  return none;
}

}  // namespace

JointPlacement PlaceWholeGpusWithNics(const PlacementTable& table, GpuMask free,
                                      const NicAvailability& nics, const WholeGpuRequest& gpus,
                                      const NicRequest& request) {
  JointPlacement out;
  out.gpus = PlaceWholeGpus(table, free, gpus);
  if (!out.gpus.fits) return out;  // the GPUs alone do not fit: their reason stands
  const topology::Topology& topology = table.topology();
  free = static_cast<GpuMask>(free & topology.all_gpus());
  const int nic_count = request.CountFor(gpus.gpus);
  const Reach reach = ReachOfTakers(topology, nics, request);
  if (static_cast<int>(reach.gpus_of.size()) < nic_count) {  // too few NICs: ChooseNics says so
    out.nics = ChooseNics(topology, out.gpus.gpus, static_cast<GpuMask>(free & ~out.gpus.gpus),
                          nics, request);
    return out;
  }
  // The table's pick is the best meeting set when one exists, else the best set: when it is
  // aligned, no other set can come before it, unless the pod's rails prefer a set tied with it.
  if (request.rails.none() && AlignedWith(reach, out.gpus.gpus, nic_count)) {
    out.nics = ChooseNics(topology, out.gpus.gpus, static_cast<GpuMask>(free & ~out.gpus.gpus),
                          nics, request);
    return out;
  }
  const bool level_applies = gpus.closeness != Closeness::kNode && gpus.gpus > 1;
  auto meets = [&](GpuMask set) { return !level_applies || table.Meets(set, gpus.closeness); };
  auto aligned = [&](GpuMask set) { return AlignedWith(reach, set, nic_count); };
  std::vector<GpuMask> sets = SetsOfSize(free, gpus.gpus);
  if (level_applies && gpus.policy == ClosenessPolicy::kRequired) {
    std::erase_if(sets, [&](GpuMask set) { return !meets(set); });
  }
  if (request.policy == ClosenessPolicy::kRequired) {
    std::erase_if(sets, [&](GpuMask set) { return !aligned(set); });
    if (sets.empty()) {
      out.nics = NoAlignedSet(table, free, nics, gpus, request);
      return out;
    }
  }
  PreferWhere(sets, meets);
  PreferWhere(sets, aligned);
  std::vector<GpuMask> tied{sets.front()};
  for (std::size_t i = 1; i < sets.size(); ++i) {
    const int order = CompareGpuSide(table, sets[i], tied.front(), free);
    if (order < 0) tied.clear();
    if (order <= 0) tied.push_back(sets[i]);
  }
  const GpuMask best = BestOfTied(topology, tied, free, nics, request);
  out.nics = ChooseNics(topology, best, static_cast<GpuMask>(free & ~best), nics, request);
  const bool met_before = out.gpus.closeness_met;
  out.gpus.gpus = best;
  out.gpus.quality = table.Quality(best);
  out.gpus.closeness_met = meets(best);
  if (out.gpus.closeness_met) {
    out.gpus.reason.clear();
  } else if (met_before) {  // the NIC requirement ruled out the sets meeting it
    out.gpus.reason = "no " + std::to_string(gpus.gpus) + " free GPUs meeting " +
                      std::string(ToString(gpus.closeness)) + " have a NIC " +
                      std::string(Describe(request.closeness)) + " each";
  }
  return out;
}

int GpusWithOwnCloseNic(const topology::Topology& topology, GpuMask gpus, const NicMask& nics,
                        NicCloseness closeness) {
  Reach reach;
  for (int n = 0; n < topology.nic_count(); ++n) {
    if (!nics.test(static_cast<std::size_t>(n))) continue;
    unsigned mask = 0;
    for (int g = 0; g < topology.gpu_count(); ++g) {
      if (Within(topology.nic_relation(n, g), closeness)) mask |= 1u << g;
    }
    if ((mask & gpus) != 0) reach.gpus_of.push_back(static_cast<GpuMask>(mask & gpus));
  }
  return MatchedGpus(reach, gpus);
}

}  // namespace linkfit::alloc
