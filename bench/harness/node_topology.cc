#include "harness/node_topology.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <limits>
#include <utility>

namespace linkfit::bench {
namespace {

constexpr std::uint32_t kNotComputed = std::numeric_limits<std::uint32_t>::max();

std::vector<int> Members(GpuMask mask) {
  std::vector<int> members;
  for (int gpu = 0; gpu < 16; ++gpu) {
    if ((mask >> gpu) & 1) members.push_back(gpu);
  }
  return members;
}

// Returns true when the graph on `members` whose edges satisfy `edge` has a Hamiltonian cycle
// (bitmask dynamic programme over subsets: reach[subset] = possible end vertices of a path that
// starts at members[0] and visits exactly `subset`).
bool HasHamiltonianCycle(const std::vector<int>& members,
                         const std::function<bool(int, int)>& edge) {
  const std::size_t k = members.size();
  if (k < 2) return false;
  if (k == 2) return edge(members[0], members[1]);
  std::vector<std::uint32_t> adjacency(k, 0);
  for (std::size_t i = 0; i < k; ++i) {
    for (std::size_t j = 0; j < k; ++j) {
      if (i != j && edge(members[i], members[j])) adjacency[i] |= 1u << j;
    }
  }
  const std::size_t subsets = std::size_t{1} << k;
  std::vector<std::uint32_t> reach(subsets, 0);
  reach[1] = 1u;
  for (std::size_t subset = 1; subset < subsets; subset += 2) {  // always contains vertex 0
    std::uint32_t ends = reach[subset];
    while (ends != 0) {
      const int end = std::countr_zero(ends);
      ends &= ends - 1;
      std::uint32_t next =
          adjacency[static_cast<std::size_t>(end)] & ~static_cast<std::uint32_t>(subset);
      while (next != 0) {
        const int vertex = std::countr_zero(next);
        next &= next - 1;
        reach[subset | (std::size_t{1} << vertex)] |= 1u << vertex;
      }
    }
  }
  return (reach[subsets - 1] & adjacency[0]) != 0;
}

}  // namespace

NodeTopology::NodeTopology(std::string id, int gpu_count, std::vector<std::uint32_t> bandwidth_mbps,
                           std::vector<int> allocator_score, std::vector<int> numa_node,
                           std::vector<bool> nvlink, std::string mig_profile_set)
    : id_(std::move(id)),
      gpu_count_(gpu_count),
      bandwidth_(std::move(bandwidth_mbps)),
      allocator_score_(std::move(allocator_score)),
      numa_node_(std::move(numa_node)),
      nvlink_(std::move(nvlink)),
      mig_profile_set_(std::move(mig_profile_set)),
      ring_memo_(std::size_t{1} << gpu_count, kNotComputed),
      nvlink_ring_memo_(std::size_t{1} << gpu_count, -1) {}

std::uint32_t NodeTopology::ComputeRing(GpuMask set, bool nvlink_only) const {
  const std::vector<int> members = Members(set);
  if (nvlink_only) {
    return HasHamiltonianCycle(members, [this](int a, int b) { return nvlink(a, b); }) ? 1u : 0u;
  }
  std::vector<std::uint32_t> thresholds;
  for (int a : members) {
    for (int b : members) {
      if (a < b) thresholds.push_back(bandwidth_mbps(a, b));
    }
  }
  std::sort(thresholds.begin(), thresholds.end(), std::greater<>());
  thresholds.erase(std::unique(thresholds.begin(), thresholds.end()), thresholds.end());
  for (std::uint32_t threshold : thresholds) {
    if (HasHamiltonianCycle(members, [this, threshold](int a, int b) {
          return bandwidth_mbps(a, b) >= threshold;
        })) {
      return threshold;
    }
  }
  return 0;
}

std::uint32_t NodeTopology::RingMbps(GpuMask set) const {
  if (std::popcount(set) < 2) return 0;
  std::uint32_t& memo = ring_memo_[set];
  if (memo == kNotComputed) memo = ComputeRing(set, false);
  return memo;
}

bool NodeTopology::RingAllNvlink(GpuMask set) const {
  if (std::popcount(set) < 2) return false;
  std::int8_t& memo = nvlink_ring_memo_[set];
  if (memo < 0) memo = ComputeRing(set, true) != 0 ? 1 : 0;
  return memo == 1;
}

std::uint32_t NodeTopology::BestRingMbps(GpuMask free_gpus, int k) const {
  if (k < 2 || std::popcount(free_gpus) < k) return 0;
  std::uint32_t best = 0;
  // Enumerates the submasks of free_gpus with popcount k.
  for (unsigned subset = free_gpus; subset != 0; subset = (subset - 1) & free_gpus) {
    if (std::popcount(subset) == k) best = std::max(best, RingMbps(static_cast<GpuMask>(subset)));
  }
  return best;
}

namespace {

struct PartitionSearch {
  const NodeTopology& topology;
  int size;
  std::vector<std::vector<int>> current;
  std::vector<std::vector<int>> best;
  long best_score = -1;

  long SetScore(const std::vector<int>& set) const {
    long score = 0;
    for (std::size_t i = 0; i < set.size(); ++i) {
      for (std::size_t j = i + 1; j < set.size(); ++j) {
        if (set[i] >= 0 && set[j] >= 0) score += topology.allocator_score(set[i], set[j]);
      }
    }
    return score;
  }

  void Iterate(const std::vector<int>& remaining) {
    if (remaining.empty()) {
      long score = 0;
      for (const auto& set : current) score += SetScore(set);
      if (score > best_score) {
        best_score = score;
        best = current;
      }
      return;
    }
    // Every set of `size` containing remaining[0], the others in lexicographic order.
    const std::vector<int> rest(remaining.begin() + 1, remaining.end());
    std::vector<std::size_t> pick;
    std::function<void(std::size_t)> choose = [&](std::size_t from) {
      if (static_cast<int>(pick.size()) == size - 1) {
        std::vector<int> set = {remaining[0]};
        std::vector<int> left;
        std::size_t p = 0;
        for (std::size_t i = 0; i < rest.size(); ++i) {
          if (p < pick.size() && pick[p] == i) {
            set.push_back(rest[i]);
            ++p;
          } else {
            left.push_back(rest[i]);
          }
        }
        current.push_back(set);
        Iterate(left);
        current.pop_back();
        return;
      }
      for (std::size_t i = from; i < rest.size(); ++i) {
        pick.push_back(i);
        choose(i + 1);
        pick.pop_back();
      }
    };
    choose(0);
  }
};

}  // namespace

GpuMask GpuAllocatorBestEffort(const NodeTopology& topology, GpuMask available, int size) {
  std::vector<int> devices = Members(available);
  if (size <= 0 || size > static_cast<int>(devices.size())) return 0;
  auto to_mask = [](const std::vector<int>& set) {
    unsigned mask = 0;
    for (int gpu : set) {
      if (gpu >= 0) mask |= 1u << gpu;
    }
    return static_cast<GpuMask>(mask);
  };
  if (size == 1) return static_cast<GpuMask>(1u << devices.front());
  if (size == static_cast<int>(devices.size())) return to_mask(devices);
  while (devices.size() % static_cast<std::size_t>(size) != 0) devices.push_back(-1);
  PartitionSearch search{topology, size, {}, {}, -1};
  search.Iterate(devices);
  const std::vector<int>* best_set = nullptr;
  long best_score = -1;
  for (const auto& set : search.best) {
    if (std::count(set.begin(), set.end(), -1) != 0) continue;
    const long score = search.SetScore(set);
    if (score > best_score) {
      best_score = score;
      best_set = &set;
    }
  }
  return best_set == nullptr ? GpuMask{0} : to_mask(*best_set);
}

}  // namespace linkfit::bench
