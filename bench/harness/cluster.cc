#include "harness/cluster.h"

#include <algorithm>
#include <bit>
#include <tuple>

namespace linkfit::bench {
namespace {

std::size_t U(int value) { return static_cast<std::size_t>(value); }

}  // namespace

void AssignShapes(std::vector<PodSpec>& pods) {
  using Key = std::tuple<std::int64_t, std::int64_t, int, int, int, std::string,
                         std::vector<std::string>, std::string, bool, int, int>;
  std::map<Key, int> shapes;
  for (PodSpec& pod : pods) {
    Key key{pod.cpu_milli,  pod.memory_mib, static_cast<int>(pod.demand),
            pod.gpu_count,  pod.gpu_milli,  pod.mig_profile,
            pod.gpu_models, pod.closeness,  pod.closeness_required,
            pod.nic_count,  pod.nic_milli};
    auto [it, inserted] = shapes.emplace(key, static_cast<int>(shapes.size()));
    pod.shape = it->second;
  }
}

GpuMask SimNode::MigGpus() const {
  return mig_mode ? static_cast<GpuMask>((1u << gpu_count) - 1u) : mig_gpus;
}

GpuMask SimNode::IdleGpus() const {
  unsigned mask = 0;
  for (int g = 0; g < gpu_count; ++g) {
    if (gpu_free_milli[U(g)] == kWholeGpuMilli && mig_slices_used[U(g)] == 0 &&
        ((mig_gpus >> g) & 1) == 0) {
      mask |= 1u << g;
    }
  }
  return static_cast<GpuMask>(mask);
}

int SimNode::IdleGpuCount() const { return std::popcount(IdleGpus()); }

std::int64_t SimNode::FreeGpuMilli() const {
  std::int64_t total = 0;
  for (int g = 0; g < gpu_count; ++g) {
    if (((mig_gpus >> g) & 1) == 0) total += gpu_free_milli[U(g)];
  }
  return total;
}

SimNicMask SimNode::NicsWithFree(int milli) const {
  unsigned mask = 0;
  for (int n = 0; n < nic_count; ++n) {
    if (nic_free_milli[U(n)] >= milli) mask |= 1u << n;
  }
  return static_cast<SimNicMask>(mask);
}

bool SimNode::ModelAllowed(const std::vector<std::string>& models) const {
  return models.empty() || std::find(models.begin(), models.end(), gpu_model) != models.end();
}

int PodClass(const PodSpec& pod) {
  if (pod.demand == GpuDemand::kNone) return -1;
  if (pod.demand != GpuDemand::kWhole) return 0;
  if (pod.gpu_count <= 1) return 1;
  if (pod.gpu_count <= 2) return 2;
  if (pod.gpu_count <= 4) return 3;
  return 4;
}

void Cluster::AddNode(SimNode node) {
  node.cpu_free = node.cpu_capacity;
  node.memory_free = node.memory_capacity;
  for (int g = 0; g < node.gpu_count; ++g) node.gpu_free_milli[U(g)] = kWholeGpuMilli;
  for (int n = 0; n < node.nic_count; ++n) node.nic_free_milli[U(n)] = kWholeNicMilli;
  total_gpus_ += node.gpu_count;
  total_gpu_milli_ += std::int64_t{node.gpu_count} * kWholeGpuMilli;
  max_cpu_ = std::max(max_cpu_, node.cpu_capacity);
  max_memory_ = std::max(max_memory_, node.memory_capacity);
  max_gpu_milli_ = std::max(max_gpu_milli_, std::int64_t{node.gpu_count} * kWholeGpuMilli);
  index_[node.name] = static_cast<int>(nodes_.size());
  nodes_.push_back(std::move(node));
}

void Cluster::AddMigProfiles(const std::string& profile_set, std::vector<MigProfile> profiles) {
  mig_profiles_[profile_set] = std::move(profiles);
}

int Cluster::NodeIndex(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? -1 : it->second;
}

const MigProfile* Cluster::FindMigProfile(int node, const std::string& profile) const {
  const SimNode& n = nodes_[U(node)];
  if (!n.topology) return nullptr;
  auto set = mig_profiles_.find(n.topology->mig_profile_set());
  if (set == mig_profiles_.end()) return nullptr;
  for (const MigProfile& candidate : set->second) {
    if (candidate.name == profile) return &candidate;
  }
  return nullptr;
}

bool Cluster::InTreeFits(int node, const PodSpec& pod) const {
  const SimNode& n = nodes_[U(node)];
  if (n.cpu_free < pod.cpu_milli || n.memory_free < pod.memory_mib) return false;
  if (pod.nic_count > 0 && std::popcount(n.NicsWithFree(pod.nic_milli)) < pod.nic_count) {
    return false;
  }
  if (pod.demand == GpuDemand::kNone) return true;
  if (n.gpu_count == 0 || !n.ModelAllowed(pod.gpu_models)) return false;
  if (pod.demand == GpuDemand::kWhole) return n.IdleGpuCount() >= pod.gpu_count;
  return true;
}

bool Cluster::DeviceFits(int node, const PodSpec& pod) const {
  if (!InTreeFits(node, pod)) return false;
  const SimNode& n = nodes_[U(node)];
  switch (pod.demand) {
    case GpuDemand::kNone:
    case GpuDemand::kWhole:
      return true;
    case GpuDemand::kShare: {
      int fitting = 0;
      for (int g = 0; g < n.gpu_count; ++g) {
        if (n.gpu_free_milli[U(g)] >= pod.gpu_milli && n.mig_slices_used[U(g)] == 0 &&
            ((n.mig_gpus >> g) & 1) == 0) {
          ++fitting;
        }
      }
      return fitting >= pod.gpu_count;
    }
    case GpuDemand::kMig:
      return BestFitMig(node, pod).node >= 0;
  }
  return false;
}

Placement Cluster::LowestIdleGpus(int node, const PodSpec& pod) const {
  Placement placement;
  unsigned idle = nodes_[U(node)].IdleGpus();
  unsigned chosen = 0;
  for (int taken = 0; taken < pod.gpu_count && idle != 0; ++taken) {
    chosen |= idle & (~idle + 1u);
    idle &= idle - 1u;
  }
  if (std::popcount(chosen) != pod.gpu_count) return placement;
  placement.node = node;
  placement.gpus = static_cast<GpuMask>(chosen);
  placement.gpu_milli = kWholeGpuMilli;
  return placement;
}

Placement Cluster::BestFitShares(int node, const PodSpec& pod) const {
  Placement placement;
  const SimNode& n = nodes_[U(node)];
  std::vector<std::pair<int, int>> candidates;  // (free milli, gpu)
  for (int g = 0; g < n.gpu_count; ++g) {
    if (n.gpu_free_milli[U(g)] >= pod.gpu_milli && n.mig_slices_used[U(g)] == 0 &&
        ((n.mig_gpus >> g) & 1) == 0) {
      candidates.emplace_back(n.gpu_free_milli[U(g)], g);
    }
  }
  if (static_cast<int>(candidates.size()) < pod.gpu_count) return placement;
  std::sort(candidates.begin(), candidates.end());
  unsigned chosen = 0;
  for (int i = 0; i < pod.gpu_count; ++i) chosen |= 1u << candidates[U(i)].second;
  placement.node = node;
  placement.gpus = static_cast<GpuMask>(chosen);
  placement.gpu_milli = pod.gpu_milli;
  return placement;
}

Placement Cluster::BestFitMig(int node, const PodSpec& pod) const {
  Placement placement;
  const MigProfile* profile = FindMigProfile(node, pod.mig_profile);
  if (profile == nullptr) return placement;
  const SimNode& n = nodes_[U(node)];
  int best_left = kMigSlices + 1;
  const GpuMask mig_gpus = n.MigGpus();
  for (int g = 0; g < n.gpu_count; ++g) {
    if (n.gpu_free_milli[U(g)] != kWholeGpuMilli || ((mig_gpus >> g) & 1) == 0) continue;
    if (n.mig_compute_used[U(g)] + profile->compute_slices > kMigComputeSlices) continue;
    const unsigned used = n.mig_slices_used[U(g)];
    for (int start : profile->starts) {
      const unsigned range = ((1u << profile->memory_slices) - 1u) << start;
      if ((used & range) != 0) continue;
      const int left = kMigSlices - std::popcount(used | range);
      if (left < best_left) {
        best_left = left;
        placement.node = node;
        placement.mig_gpu = g;
        placement.mig_start = start;
        placement.mig_size = profile->memory_slices;
        placement.mig_compute = profile->compute_slices;
      }
    }
  }
  return placement;
}

Placement Cluster::DevicePluginGpus(int node, const PodSpec& pod) const {
  const SimNode& n = nodes_[U(node)];
  if (!n.topology) return LowestIdleGpus(node, pod);
  const GpuMask chosen = GpuAllocatorBestEffort(*n.topology, n.IdleGpus(), pod.gpu_count);
  Placement placement;
  if (std::popcount(chosen) != pod.gpu_count) return placement;
  placement.node = node;
  placement.gpus = chosen;
  placement.gpu_milli = kWholeGpuMilli;
  return placement;
}

void Cluster::Apply(const PodSpec& pod, const Placement& placement) {
  SimNode& n = nodes_[U(placement.node)];
  n.cpu_free -= pod.cpu_milli;
  n.memory_free -= pod.memory_mib;
  for (int g = 0; g < n.gpu_count; ++g) {
    if ((placement.gpus >> g) & 1) {
      n.gpu_free_milli[U(g)] =
          static_cast<std::int16_t>(n.gpu_free_milli[U(g)] - placement.gpu_milli);
      allocated_gpu_milli_ += placement.gpu_milli;
    }
  }
  if (placement.mig_gpu >= 0) {
    const unsigned range = ((1u << placement.mig_size) - 1u) << placement.mig_start;
    n.mig_slices_used[U(placement.mig_gpu)] |= static_cast<std::uint8_t>(range);
    n.mig_compute_used[U(placement.mig_gpu)] =
        static_cast<std::uint8_t>(n.mig_compute_used[U(placement.mig_gpu)] + placement.mig_compute);
  }
  for (int nic = 0; nic < n.nic_count; ++nic) {
    if ((placement.nics >> nic) & 1) {
      n.nic_free_milli[U(nic)] =
          static_cast<std::int16_t>(n.nic_free_milli[U(nic)] - placement.nic_milli);
    }
  }
  const int pod_class = PodClass(pod);
  if (pod_class >= 0) ++n.class_pods[U(pod_class)];
  ++n.pods;
  ++n.version;
}

void Cluster::Preload(const PodSpec& pod, const Placement& placement) {
  Apply(pod, placement);
  preloaded_.push_back({pod, placement});
}

void Cluster::Release(const PodSpec& pod, const Placement& placement) {
  SimNode& n = nodes_[U(placement.node)];
  n.cpu_free += pod.cpu_milli;
  n.memory_free += pod.memory_mib;
  for (int g = 0; g < n.gpu_count; ++g) {
    if ((placement.gpus >> g) & 1) {
      n.gpu_free_milli[U(g)] =
          static_cast<std::int16_t>(n.gpu_free_milli[U(g)] + placement.gpu_milli);
      allocated_gpu_milli_ -= placement.gpu_milli;
    }
  }
  if (placement.mig_gpu >= 0) {
    const unsigned range = ((1u << placement.mig_size) - 1u) << placement.mig_start;
    n.mig_slices_used[U(placement.mig_gpu)] &= static_cast<std::uint8_t>(~range);
    n.mig_compute_used[U(placement.mig_gpu)] =
        static_cast<std::uint8_t>(n.mig_compute_used[U(placement.mig_gpu)] - placement.mig_compute);
  }
  for (int nic = 0; nic < n.nic_count; ++nic) {
    if ((placement.nics >> nic) & 1) {
      n.nic_free_milli[U(nic)] =
          static_cast<std::int16_t>(n.nic_free_milli[U(nic)] + placement.nic_milli);
    }
  }
  const int pod_class = PodClass(pod);
  if (pod_class >= 0) --n.class_pods[U(pod_class)];
  --n.pods;
  ++n.version;
}

}  // namespace linkfit::bench
