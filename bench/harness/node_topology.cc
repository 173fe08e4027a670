#include "harness/node_topology.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <utility>

namespace linkfit::bench {
namespace {

std::vector<int> Members(GpuMask mask) {
  std::vector<int> members;
  for (int gpu = 0; gpu < 16; ++gpu) {
    if ((mask >> gpu) & 1) members.push_back(gpu);
  }
  return members;
}

}  // namespace

NodeTopology::NodeTopology(std::string id, alloc::PlacementTablePtr table,
                           std::vector<int> allocator_score, std::vector<int> numa_node,
                           std::vector<bool> nvlink, std::string mig_profile_set)
    : id_(std::move(id)),
      table_(std::move(table)),
      gpu_count_(table_->gpu_count()),
      allocator_score_(std::move(allocator_score)),
      numa_node_(std::move(numa_node)),
      nvlink_(std::move(nvlink)),
      mig_profile_set_(std::move(mig_profile_set)) {}

std::uint32_t NodeTopology::RingMbps(GpuMask set) const {
  if (std::popcount(set) < 2) return 0;
  return table_->Quality(set).ring_mbps;
}

bool NodeTopology::RingAllNvlink(GpuMask set) const {
  return std::popcount(set) >= 2 && table_->Meets(set, alloc::Closeness::kNvlink);
}

std::uint32_t NodeTopology::BestRingMbps(GpuMask free_gpus, int k) const {
  if (k < 2 || std::popcount(free_gpus) < k) return 0;
  return table_->Quality(table_->BestOnNode(free_gpus, k)).ring_mbps;
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
