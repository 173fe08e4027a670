#include "harness/whole_machines_oracle.h"

#include <algorithm>
#include <bit>
#include <set>
#include <string>

namespace linkfit::bench {
namespace {

std::size_t U(int value) { return static_cast<std::size_t>(value); }

bool RequiresNvlink(const PodSpec& pod) {
  return pod.closeness_required && pod.closeness == "nvlink";
}

Result<void> CheckScope(const PodSpec& pod) {
  if (pod.demand != GpuDemand::kWhole && pod.demand != GpuDemand::kMig) {
    return MakeError("oracle: pod " + pod.name + " asks for neither whole GPUs nor a MIG instance");
  }
  if (!pod.gpu_models.empty()) return MakeError("oracle: pod " + pod.name + " names GPU models");
  if (pod.closeness_required && pod.closeness != "nvlink") {
    return MakeError("oracle: pod " + pod.name + " requires closeness " + pod.closeness);
  }
  if (pod.demand == GpuDemand::kWhole && (pod.gpu_count < 1 || pod.gpu_milli != kWholeGpuMilli)) {
    return MakeError("oracle: pod " + pod.name + " asks for no whole GPU");
  }
  return {};
}

// True when every pair of the node's GPUs is joined by NVLink (an NVSwitch machine): every set
// of k free GPUs is then alike for the oracle's constraints and counts.
bool AllPairsNvlink(const SimNode& node) {
  if (!node.topology) return false;
  for (int a = 0; a < node.gpu_count; ++a) {
    for (int b = a + 1; b < node.gpu_count; ++b) {
      if (!node.topology->nvlink(a, b)) return false;
    }
  }
  return true;
}

// --- Whole GPUs. ---

class WholeSearch {
 public:
  WholeSearch(const Cluster& cluster, std::vector<const PodSpec*> searched, int ones, int twos)
      : cluster_(cluster), searched_(std::move(searched)), ones_(ones), twos_(twos) {
    for (const SimNode& node : cluster.nodes()) {
      free_.push_back(node.IdleGpus());
      symmetric_.push_back(AllPairsNvlink(node));
    }
    std::stable_sort(searched_.begin(), searched_.end(), [](const PodSpec* a, const PodSpec* b) {
      return a->gpu_count > b->gpu_count;
    });
  }

  bool Run() { return Place(0); }

 private:
  // The unconstrained 1- and 2-GPU pods fit the free GPUs left (the counting rule, header).
  bool RestFits() const {
    int pairs = 0;
    int total = 0;
    for (const GpuMask mask : free_) {
      const int count = std::popcount(static_cast<unsigned>(mask));
      pairs += count / 2;
      total += count;
    }
    return twos_ <= pairs && 2 * twos_ + ones_ <= total;
  }

  std::string Key(std::size_t index) const {
    std::string key(1, static_cast<char>(index));
    for (const GpuMask mask : free_) {
      key += static_cast<char>(mask & 0xff);
      key += static_cast<char>(mask >> 8);
    }
    return key;
  }

  bool Place(std::size_t index) {
    if (index == searched_.size()) return RestFits();
    const std::string key = Key(index);
    if (failed_.count(key) != 0) return false;
    const PodSpec& pod = *searched_[index];
    const int k = pod.gpu_count;
    for (std::size_t n = 0; n < free_.size(); ++n) {
      const GpuMask free = free_[n];
      if (std::popcount(static_cast<unsigned>(free)) < k) continue;
      const SimNode& node = cluster_.node(static_cast<int>(n));
      if (symmetric_[n]) {
        unsigned set = 0;
        unsigned left = free;
        for (int taken = 0; taken < k; ++taken) {
          set |= left & (~left + 1u);
          left &= left - 1u;
        }
        if (TryOn(n, static_cast<GpuMask>(set), index)) return true;
        continue;
      }
      for (unsigned set = free; set != 0; set = (set - 1) & free) {
        if (std::popcount(set) != k) continue;
        if (RequiresNvlink(pod) &&
            (!node.topology || !node.topology->RingAllNvlink(static_cast<GpuMask>(set)))) {
          continue;
        }
        if (TryOn(n, static_cast<GpuMask>(set), index)) return true;
      }
    }
    failed_.insert(key);
    return false;
  }

  bool TryOn(std::size_t node, GpuMask set, std::size_t index) {
    if (RequiresNvlink(*searched_[index]) && searched_[index]->gpu_count >= 2) {
      const SimNode& n = cluster_.node(static_cast<int>(node));
      if (!n.topology || !n.topology->RingAllNvlink(set)) return false;
    }
    free_[node] = static_cast<GpuMask>(free_[node] & ~set);
    const bool placed = Place(index + 1);
    free_[node] = static_cast<GpuMask>(free_[node] | set);
    return placed;
  }

  const Cluster& cluster_;
  std::vector<const PodSpec*> searched_;
  const int ones_;
  const int twos_;
  std::vector<GpuMask> free_;
  std::vector<bool> symmetric_;
  std::set<std::string> failed_;
};

bool WholeFits(const Cluster& cluster, const std::vector<const PodSpec*>& pods) {
  std::vector<const PodSpec*> searched;
  int ones = 0;
  int twos = 0;
  for (const PodSpec* pod : pods) {
    if (pod->gpu_count >= 3 || RequiresNvlink(*pod)) {
      searched.push_back(pod);
    } else if (pod->gpu_count == 2) {
      ++twos;
    } else {
      ++ones;
    }
  }
  return WholeSearch(cluster, std::move(searched), ones, twos).Run();
}

// --- MIG instances. ---

struct MigGpu {
  int node = 0;
  int gpu = 0;
  unsigned slices = 0;  // memory slices used
  int compute = 0;      // compute slices used
};

class MigSearch {
 public:
  MigSearch(const Cluster& cluster, std::vector<const PodSpec*> pods)
      : cluster_(cluster), pods_(std::move(pods)) {
    for (int n = 0; n < static_cast<int>(cluster.nodes().size()); ++n) {
      const SimNode& node = cluster.node(n);
      for (int g = 0; g < node.gpu_count; ++g) {
        if (((node.MigGpus() >> g) & 1) == 0 || node.gpu_free_milli[U(g)] != kWholeGpuMilli) {
          continue;
        }
        gpus_.push_back({n, g, node.mig_slices_used[U(g)], node.mig_compute_used[U(g)]});
      }
    }
    // Largest first; the profile is looked up on each GPU's node (its profile set).
    std::stable_sort(pods_.begin(), pods_.end(),
                     [&](const PodSpec* a, const PodSpec* b) { return Size(*a) > Size(*b); });
  }

  bool Run() { return Place(0); }

 private:
  int Size(const PodSpec& pod) const {
    for (const MigGpu& gpu : gpus_) {
      if (const MigProfile* profile = cluster_.FindMigProfile(gpu.node, pod.mig_profile)) {
        return profile->memory_slices;
      }
    }
    return 0;
  }

  // GPUs in equal states on nodes of one profile set are interchangeable.
  std::string StateOf(const MigGpu& gpu) const {
    const SimNode& node = cluster_.node(gpu.node);
    return (node.topology ? node.topology->mig_profile_set() : std::string()) + ":" +
           std::to_string(gpu.slices) + "/" + std::to_string(gpu.compute);
  }

  std::string Key(std::size_t index) const {
    std::vector<std::string> states;
    for (const MigGpu& gpu : gpus_) states.push_back(StateOf(gpu));
    std::sort(states.begin(), states.end());
    std::string key = std::to_string(index);
    for (const std::string& state : states) key += "|" + state;
    return key;
  }

  bool Place(std::size_t index) {
    if (index == pods_.size()) return true;
    const std::string key = Key(index);
    if (failed_.count(key) != 0) return false;
    const PodSpec& pod = *pods_[index];
    std::set<std::string> tried;
    for (MigGpu& gpu : gpus_) {
      const MigProfile* profile = cluster_.FindMigProfile(gpu.node, pod.mig_profile);
      if (profile == nullptr || gpu.compute + profile->compute_slices > kMigComputeSlices) continue;
      if (!tried.insert(StateOf(gpu)).second) continue;
      for (const int start : profile->starts) {
        const unsigned range = ((1u << profile->memory_slices) - 1u) << start;
        if ((gpu.slices & range) != 0) continue;
        gpu.slices |= range;
        gpu.compute += profile->compute_slices;
        const bool placed = Place(index + 1);
        gpu.slices &= ~range;
        gpu.compute -= profile->compute_slices;
        if (placed) return true;
      }
    }
    failed_.insert(key);
    return false;
  }

  const Cluster& cluster_;
  std::vector<const PodSpec*> pods_;
  std::vector<MigGpu> gpus_;
  std::set<std::string> failed_;
};

Result<bool> PlaceAll(const Cluster& cluster, const std::vector<const PodSpec*>& pods) {
  std::vector<const PodSpec*> whole;
  std::vector<const PodSpec*> mig;
  for (const PodSpec* pod : pods) {
    if (auto scope = CheckScope(*pod); !scope) return tl::unexpected(scope.error());
    (pod->demand == GpuDemand::kMig ? mig : whole).push_back(pod);
  }
  std::vector<PodSpec> copies;
  for (const PodSpec* pod : pods) copies.push_back(*pod);
  if (auto room = CheckResourcesCannotBind(cluster, copies); !room) {
    return tl::unexpected(room.error());
  }
  return WholeFits(cluster, whole) && MigSearch(cluster, std::move(mig)).Run();
}

}  // namespace

Result<void> CheckResourcesCannotBind(const Cluster& cluster, const std::vector<PodSpec>& pods) {
  std::int64_t cpu_per_gpu = 0;
  std::int64_t memory_per_gpu = 0;
  std::int64_t cpu_per_instance = 0;
  std::int64_t memory_per_instance = 0;
  for (const PodSpec& pod : pods) {
    if (pod.demand == GpuDemand::kMig) {
      cpu_per_instance = std::max(cpu_per_instance, pod.cpu_milli);
      memory_per_instance = std::max(memory_per_instance, pod.memory_mib);
    } else {
      const std::int64_t gpus = std::max(1, pod.gpu_count);
      cpu_per_gpu = std::max(cpu_per_gpu, (pod.cpu_milli + gpus - 1) / gpus);
      memory_per_gpu = std::max(memory_per_gpu, (pod.memory_mib + gpus - 1) / gpus);
    }
  }
  for (const SimNode& node : cluster.nodes()) {
    const std::int64_t whole = node.IdleGpuCount();
    std::int64_t compute = 0;
    for (int g = 0; g < node.gpu_count; ++g) {
      if ((node.MigGpus() >> g) & 1) compute += kMigComputeSlices - node.mig_compute_used[U(g)];
    }
    if (node.cpu_free < whole * cpu_per_gpu + compute * cpu_per_instance ||
        node.memory_free < whole * memory_per_gpu + compute * memory_per_instance) {
      return MakeError("oracle: CPU or memory could run out on " + node.name +
                       " before its GPUs (the oracle assumes they cannot)");
    }
  }
  return {};
}

Result<bool> CanPlaceAll(const Cluster& cluster, const std::vector<PodSpec>& pods) {
  std::vector<const PodSpec*> all;
  for (const PodSpec& pod : pods) all.push_back(&pod);
  return PlaceAll(cluster, all);
}

Result<int> MostBigPodsPlaceable(const Cluster& cluster, const std::vector<PodSpec>& small,
                                 const std::vector<PodSpec>& big) {
  if (big.size() > 12) return MakeError("oracle: more than 12 big pods in a case");
  int best = -1;
  for (unsigned subset = 0; subset < (1u << big.size()); ++subset) {
    const int size = std::popcount(subset);
    if (size <= best) continue;
    std::vector<const PodSpec*> pods;
    for (const PodSpec& pod : small) pods.push_back(&pod);
    for (std::size_t i = 0; i < big.size(); ++i) {
      if ((subset >> i) & 1) pods.push_back(&big[i]);
    }
    auto placeable = PlaceAll(cluster, pods);
    if (!placeable) return tl::unexpected(placeable.error());
    if (*placeable) best = size;
  }
  return best;
}

}  // namespace linkfit::bench
