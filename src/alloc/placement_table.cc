#include "linkfit/alloc/placement_table.h"

#include <algorithm>
#include <array>

#include "linkfit/common/strings.h"

namespace linkfit::alloc {
namespace {

int PopCount(unsigned mask) { return __builtin_popcount(mask); }
int LowestBit(unsigned mask) { return __builtin_ctz(mask); }

constexpr std::uint8_t kInfiniteRank = 255;

}  // namespace

std::vector<int> MaskToIndexes(GpuMask mask) {
  std::vector<int> out;
  for (unsigned m = mask; m != 0; m &= m - 1) out.push_back(LowestBit(m));
  return out;
}

GpuMask IndexesToMask(const std::vector<int>& indexes) {
  unsigned mask = 0;
  for (int i : indexes) {
    if (i >= 0 && i < topology::kMaxGpus) mask |= 1u << i;
  }
  return static_cast<GpuMask>(mask);
}

PlacementTablePtr PlacementTable::Build(topology::TopologyPtr topology) {
  std::shared_ptr<PlacementTable> table(new PlacementTable());
  table->topology_ = std::move(topology);
  table->n_ = table->topology_->gpu_count();
  table->BuildSetQualities();
  table->BuildBestSets();
  return table;
}

// ring[S] by a bottleneck Hamiltonian-path DP over ranks of the distinct bandwidth values:
// path[S][v] is the best bottleneck of a path that starts at S's lowest GPU, visits all of S and
// ends at v. ring[S] closes the best path back to the start.
void PlacementTable::BuildSetQualities() {
  const topology::Topology& topo = *topology_;
  const std::size_t n = static_cast<std::size_t>(n_);
  const std::size_t size = std::size_t{1} << n;

  std::vector<std::uint32_t> values;
  for (int a = 0; a < n_; ++a) {
    for (int b = a + 1; b < n_; ++b) values.push_back(topo.bandwidth_mbps(a, b));
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  std::vector<std::uint8_t> rank(n * n, 0);
  for (int a = 0; a < n_; ++a) {
    for (int b = 0; b < n_; ++b) {
      if (a == b) continue;
      const auto it = std::lower_bound(values.begin(), values.end(), topo.bandwidth_mbps(a, b));
      rank[static_cast<std::size_t>(a) * n + static_cast<std::size_t>(b)] =
          static_cast<std::uint8_t>(1 + (it - values.begin()));
    }
  }
  auto rank_value = [&](std::uint8_t r) { return r == 0 ? 0u : values[r - 1u]; };

  ring_.assign(size, 0);
  sum_.assign(size, 0);
  span_.assign(size, 0);
  std::vector<std::uint8_t> path(size * n, 0);

  std::array<unsigned, topology::kMaxGpus> numa_bit{};
  const auto& numa_groups = topo.numa_groups();
  for (std::size_t g = 0; g < numa_groups.size(); ++g) {
    for (int gpu : MaskToIndexes(numa_groups[g])) {
      numa_bit[static_cast<std::size_t>(gpu)] = 1u << g;
    }
  }

  for (std::size_t s = 1; s < size; ++s) {
    const unsigned set = static_cast<unsigned>(s);
    const int low = LowestBit(set);
    const unsigned rest = set & (set - 1);
    // sum and span grow from the set without its lowest GPU.
    std::uint32_t added = 0;
    for (unsigned m = rest; m != 0; m &= m - 1) added += topo.bandwidth_mbps(low, LowestBit(m));
    sum_[s] = sum_[rest] + added;
    unsigned numa = numa_bit[static_cast<std::size_t>(low)];
    for (unsigned m = rest; m != 0; m &= m - 1)
      numa |= numa_bit[static_cast<std::size_t>(LowestBit(m))];
    span_[s] = static_cast<std::uint8_t>(PopCount(numa));

    if (rest == 0) {
      path[s * n + static_cast<std::size_t>(low)] = kInfiniteRank;
      continue;
    }
    for (unsigned m = rest; m != 0; m &= m - 1) {
      const int v = LowestBit(m);
      const std::size_t prev = static_cast<std::size_t>(set & ~(1u << v));
      std::uint8_t best = 0;
      for (unsigned p = static_cast<unsigned>(prev); p != 0; p &= p - 1) {
        const int u = LowestBit(p);
        const std::uint8_t reach = path[prev * n + static_cast<std::size_t>(u)];
        if (reach == 0) continue;
        const std::uint8_t hop =
            rank[static_cast<std::size_t>(u) * n + static_cast<std::size_t>(v)];
        best = std::max(best, std::min(reach, hop));
      }
      path[s * n + static_cast<std::size_t>(v)] = best;
    }
    if (PopCount(set) == 2) {
      ring_[s] = topo.bandwidth_mbps(low, LowestBit(rest));
      continue;
    }
    std::uint8_t best_ring = 0;
    for (unsigned m = rest; m != 0; m &= m - 1) {
      const int v = LowestBit(m);
      const std::uint8_t closing =
          rank[static_cast<std::size_t>(v) * n + static_cast<std::size_t>(low)];
      best_ring = std::max(best_ring, std::min(path[s * n + static_cast<std::size_t>(v)], closing));
    }
    ring_[s] = rank_value(best_ring);
  }
}

bool PlacementTable::Better(GpuMask a, GpuMask b, GpuMask free) const {
  if (ring_[a] != ring_[b]) return ring_[a] > ring_[b];
  if (sum_[a] != sum_[b]) return sum_[a] > sum_[b];
  if (span_[a] != span_[b]) return span_[a] < span_[b];
  const std::uint64_t look_a = lookahead_[static_cast<GpuMask>(free & ~a)];
  const std::uint64_t look_b = lookahead_[static_cast<GpuMask>(free & ~b)];
  if (look_a != look_b) return look_a > look_b;
  // Lowest GPU indexes: the set holding the lowest GPU where the two differ.
  const unsigned differ = static_cast<unsigned>(a ^ b);
  return differ != 0 && (a & (1u << LowestBit(differ))) != 0;
}

void PlacementTable::BuildBestSets() {
  const std::size_t n = static_cast<std::size_t>(n_);
  const std::size_t size = std::size_t{1} << n;
  best_.assign(size * n, 0);
  lookahead_.assign(size, 0);
  constexpr std::uint64_t kSecondaryMask = (std::uint64_t{1} << 35) - 1;
  std::array<GpuMask, topology::kMaxGpus + 1> best{};
  for (std::size_t f = 1; f < size; ++f) {
    const GpuMask free = static_cast<GpuMask>(f);
    best.fill(0);
    // Every non-empty subset S of F, each compared with the best of its size so far.
    for (unsigned s = free; s != 0; s = (s - 1) & free) {
      const GpuMask set = static_cast<GpuMask>(s);
      const std::size_t k = static_cast<std::size_t>(PopCount(s));
      if (best[k] == 0 || Better(set, best[k], free)) best[k] = set;
    }
    const int count = PopCount(free);
    std::uint64_t ring_total = 0;
    std::uint64_t sum_total = 0;
    for (int k = 1; k <= count; ++k) {
      const GpuMask chosen = best[static_cast<std::size_t>(k)];
      best_[f * n + static_cast<std::size_t>(k - 1)] = chosen;
      ring_total += ring_[chosen];
      sum_total += sum_[chosen];
    }
    lookahead_[f] = (ring_total << 35) | std::min(sum_total, kSecondaryMask);
  }
}

bool PlacementTable::Meets(GpuMask set, Closeness level) const {
  if (PopCount(set) <= 1) return true;
  const topology::Topology& topo = *topology_;
  auto within_one = [set](const std::vector<GpuMask>& groups) {
    return std::any_of(groups.begin(), groups.end(), [set](GpuMask g) { return (set & ~g) == 0; });
  };
  switch (level) {
    case Closeness::kNvlink:
      // Every NVLink pair is faster than every PCIe-only pair (topology.h), so the best ring is
      // all NVLink exactly when its bottleneck beats the fastest PCIe-only pair.
      return ring_[set] > topo.max_pcie_only_mbps();
    case Closeness::kPcieSwitch:
      return within_one(topo.pcie_switch_groups());
    case Closeness::kNuma:
      return within_one(topo.numa_groups());
    case Closeness::kSocket:
      return within_one(topo.socket_groups());
    case Closeness::kNode:
      return true;
  }
  return true;
}

GpuMask PlacementTable::BestMeeting(GpuMask free, int k, Closeness level) const {
  const GpuMask overall = BestOnNode(free, k);
  if (overall == 0 || k == 1 || level == Closeness::kNode) return overall;
  if (level == Closeness::kNvlink) return Meets(overall, level) ? overall : 0;
  const topology::Topology& topo = *topology_;
  const std::vector<GpuMask>& groups = level == Closeness::kPcieSwitch ? topo.pcie_switch_groups()
                                       : level == Closeness::kNuma     ? topo.numa_groups()
                                                                       : topo.socket_groups();
  // Every k-set inside a group's free GPUs, compared as BestOnNode compares (the look-ahead over
  // the node's whole free set, not the group's: the group's own best can leave the node worse
  // off). Where the group holds every free GPU its best is the node's (one lookup); otherwise a
  // group is a part of the node: at most 8 GPUs on the machines linkfit knows, 256 subsets.
  GpuMask chosen = 0;
  for (GpuMask group : groups) {
    const auto inside = static_cast<GpuMask>(free & group);
    if (inside == free) {
      const GpuMask best = BestOnNode(free, k);
      if (best != 0 && (chosen == 0 || Better(best, chosen, free))) chosen = best;
      continue;
    }
    for (unsigned s = inside; s != 0; s = (s - 1) & inside) {
      const auto set = static_cast<GpuMask>(s);
      if (PopCount(set) == k && (chosen == 0 || Better(set, chosen, free))) chosen = set;
    }
  }
  return chosen;
}

std::size_t PlacementTable::MemoryBytes() const {
  return ring_.size() * sizeof(std::uint32_t) + sum_.size() * sizeof(std::uint32_t) + span_.size() +
         best_.size() * sizeof(GpuMask) + lookahead_.size() * sizeof(std::uint64_t);
}

namespace {

std::string DescribeMiss(const PlacementTable& table, GpuMask free, int k, Closeness level,
                         GpuMask best, bool hardware_cannot) {
  const topology::Topology& topo = table.topology();
  const int free_count = PopCount(free);
  const std::string prefix = Plural(free_count, "free GPU") + ", ";
  const std::string want = std::to_string(k);
  switch (level) {
    case Closeness::kNvlink:
      if (hardware_cannot) return "node has no " + want + " GPUs joined by NVLink";
      return prefix + "best ring of " + want + " has a PCIe hop (" +
             std::to_string(table.Quality(best).ring_mbps / 1000) + " GB/s)";
    case Closeness::kPcieSwitch:
      if (hardware_cannot) return "node has no " + want + " GPUs under one PCIe switch";
      return prefix + "no " + want + " of them under one PCIe switch";
    case Closeness::kNuma:
      if (hardware_cannot) return "node has no " + want + " GPUs on one NUMA node";
      return prefix + "no " + want + " of them on one NUMA node (best set spans " +
             Plural(topo.NumaSpan(best), "NUMA node") + ")";
    case Closeness::kSocket:
      if (hardware_cannot) return "node has no " + want + " GPUs on one socket";
      return prefix + "best ring crosses sockets";
    case Closeness::kNode:
      break;
  }
  return prefix + "closeness not met";
}

}  // namespace

WholeGpuPlacement PlaceWholeGpus(const PlacementTable& table, GpuMask free,
                                 const WholeGpuRequest& request) {
  WholeGpuPlacement out;
  const int k = request.gpus;
  const int n = table.gpu_count();
  free = static_cast<GpuMask>(free & table.topology().all_gpus());
  if (k < 1) {
    out.reason = "requests " + std::to_string(k) + " GPUs";
    out.unresolvable = true;
    return out;
  }
  if (k > n) {
    out.reason = "node has " + Plural(n, "GPU") + ", " + std::to_string(k) + " requested";
    out.unresolvable = true;
    return out;
  }
  const int free_count = PopCount(free);
  if (free_count < k) {
    if (request.explain) {
      out.reason = Plural(free_count, "free GPU") + ", " + std::to_string(k) + " requested";
    }
    return out;
  }
  const GpuMask best = table.BestOnNode(free, k);
  GpuMask chosen = best;
  out.closeness_met = true;
  if (request.closeness != Closeness::kNode && k > 1) {
    const GpuMask meeting = table.BestMeeting(free, k, request.closeness);
    if (meeting != 0) {
      chosen = meeting;
    } else {
      const bool hardware_cannot =
          table.BestMeeting(table.topology().all_gpus(), k, request.closeness) == 0;
      if (request.explain) {
        out.reason = DescribeMiss(table, free, k, request.closeness, best, hardware_cannot);
      }
      out.closeness_met = false;
      if (request.policy == ClosenessPolicy::kRequired) {
        out.unresolvable = hardware_cannot;
        return out;
      }
    }
  }
  out.fits = true;
  out.gpus = chosen;
  out.quality = table.Quality(chosen);
  return out;
}

}  // namespace linkfit::alloc
