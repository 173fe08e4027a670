#pragma once

// The simulator's cluster: nodes with CPU (milli), memory (MiB), a GPU model, GPUs with per-GPU
// free share (thousandths; 1000 = idle, 0 = owned whole), MIG memory-slice masks, and an optional
// interconnect topology, and RDMA NICs with per-NIC free share (thousandths). Pods ask for
// nothing, k whole GPUs, a share of k GPUs, or one MIG instance, and optionally n RDMA NICs (each
// whole or a share). A Placement says exactly which devices a pod holds, so departures free them.
//
// Fit rules (the FGD paper's, ../shared/baselines/README.md): CPU and memory must fit; the GPU
// model must be allowed; k whole GPUs need k idle GPUs; a share needs k GPUs with that much free
// share each; a MIG profile needs a legal start whose slices are free on a GPU not used otherwise;
// n NICs of m thousandths need n distinct NICs with m free each (the scheduler is taken to see
// per-NIC capacity, as linkfit and DRA's consumable capacity do).
//
// Thread-safety: none; one simulation owns one Cluster.

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "harness/node_topology.h"
#include "linkfit/alloc/mig.h"

namespace linkfit::bench {

inline constexpr int kMaxNodeGpus = 16;
inline constexpr int kWholeGpuMilli = 1000;
inline constexpr int kMigSlices = alloc::kMigMemorySlices;
// Compute slices of a MIG GPU: 7 on every model the harness simulates (A100, H100; the profile
// sets in config/mig say so per geometry).
inline constexpr int kMigComputeSlices = 7;
inline constexpr int kMaxNodeNics = 16;
inline constexpr int kWholeNicMilli = 1000;

// A set of one node's NICs, bit i = NIC i (the topology model's order).
using SimNicMask = std::uint16_t;

// The harness's MIG profiles are linkfit's, read by alloc::LoadMigProfileSetFile.
using alloc::MigProfile;

enum class GpuDemand { kNone, kWhole, kShare, kMig };

struct PodSpec {
  std::string name;
  std::string uid;
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  GpuDemand demand = GpuDemand::kNone;
  int gpu_count = 0;  // GPUs (whole or shared); 1 for MIG
  int gpu_milli = 0;  // per GPU: 1000 for whole GPUs, < 1000 for shares
  std::string mig_profile;
  std::vector<std::string> gpu_models;  // allowed models; empty = any
  std::string closeness;                // linkfit.io/closeness hint, empty = none
  bool closeness_required = false;
  double arrival_s = 0;
  double duration_s = 0;  // 0 = never departs
  int nic_count = 0;      // RDMA NICs asked for; 0 = none
  int nic_milli = 0;      // thousandths of each NIC: 1000 = whole (held alone), less = a share
  int shape = -1;         // dense id of the pod's resource shape (for score memoisation)

  // Requested GPUs (k x milli / 1000; MIG counts as 0).
  double RequestedGpus() const { return gpu_count * gpu_milli / 1000.0; }
};

// Assigns dense shape ids: pods with equal requests and hints share one.
void AssignShapes(std::vector<PodSpec>& pods);

struct Placement {
  int node = -1;
  GpuMask gpus = 0;   // GPUs held (whole or shared)
  int gpu_milli = 0;  // per GPU in `gpus`
  int mig_gpu = -1;
  int mig_start = -1;
  int mig_size = 0;
  int mig_compute = 0;
  SimNicMask nics = 0;  // NICs held, each `nic_milli` thousandths
  int nic_milli = 0;
};

struct SimNode {
  std::string name;
  std::string gpu_model;
  std::int64_t cpu_capacity = 0;
  std::int64_t cpu_free = 0;
  std::int64_t memory_capacity = 0;
  std::int64_t memory_free = 0;
  int gpu_count = 0;
  std::array<std::int16_t, kMaxNodeGpus> gpu_free_milli{};
  int nic_count = 0;  // RDMA NICs the simulator tracks (0: NICs ignored)
  std::array<std::int16_t, kMaxNodeNics> nic_free_milli{};
  std::array<std::uint8_t, kMaxNodeGpus> mig_slices_used{};
  std::array<std::uint8_t, kMaxNodeGpus> mig_compute_used{};
  NodeTopologyPtr topology;  // may be null (openb nodes in experiments that ignore topology)
  // The topology document linkfit serve reads for this node (absolute path); empty: the linkfit
  // placer synthesises a single-socket PCIe (PHB) document of gpu_count GPUs.
  std::string topology_file;
  // The port rate (Gb/s) linkfit serve is told for every NIC of topology_file, as a node agent
  // reads it from sysfs (fixtures carry none); 0: the document as it is.
  double nic_rate_gbps = 0;
  bool mig_mode = false;  // every GPU in MIG mode (linkfit's cluster file says `mig: all`)
  // Or only these GPUs in MIG mode (`mig: [indexes]`): whole GPUs and shares never land on them,
  // MIG instances only there, and they are not counted among the GPUs the device plugin
  // advertises (IdleGpus, FreeGpuMilli).
  GpuMask mig_gpus = 0;
  int pods = 0;
  // Pods per class for the Clustering baseline: share, 1, 2, 4, 8 GPUs (others go to the nearest).
  std::array<int, 5> class_pods{};
  std::uint64_t version = 0;  // bumped on every change (score memo invalidation)

  // The GPUs in MIG mode (every GPU under mig_mode).
  GpuMask MigGpus() const;
  // Idle GPUs: full share free and no MIG instance, outside mig_gpus.
  GpuMask IdleGpus() const;
  int IdleGpuCount() const;
  std::int64_t FreeGpuMilli() const;
  // NICs with at least `milli` thousandths free.
  SimNicMask NicsWithFree(int milli) const;
  bool ModelAllowed(const std::vector<std::string>& models) const;
};

// The Clustering class of a pod (index into SimNode::class_pods), or -1 for CPU-only pods.
int PodClass(const PodSpec& pod);

class Cluster {
 public:
  void AddNode(SimNode node);
  void AddMigProfiles(const std::string& profile_set, std::vector<MigProfile> profiles);

  std::vector<SimNode>& nodes() { return nodes_; }
  const std::vector<SimNode>& nodes() const { return nodes_; }
  const SimNode& node(int index) const { return nodes_[static_cast<std::size_t>(index)]; }
  int NodeIndex(const std::string& name) const;

  std::int64_t total_gpu_milli() const { return total_gpu_milli_; }
  std::int64_t allocated_gpu_milli() const { return allocated_gpu_milli_; }
  int total_gpus() const { return total_gpus_; }
  std::int64_t max_cpu() const { return max_cpu_; }
  std::int64_t max_memory() const { return max_memory_; }
  std::int64_t max_gpu_milli() const { return max_gpu_milli_; }

  // kube-scheduler's in-tree filters: CPU, memory, GPU model label, and the GPU count the device
  // plugin advertises (whole GPUs only; shares and MIG are left to the extender or the policy).
  bool InTreeFits(int node, const PodSpec& pod) const;
  // The exact device-level fit (the FGD paper's rule, plus MIG).
  bool DeviceFits(int node, const PodSpec& pod) const;

  // The MIG profile of `pod` on the node's profile set, or null.
  const MigProfile* FindMigProfile(int node, const std::string& profile) const;

  // Device choices shared by baselines. Each returns a placement with node = -1 when impossible.
  // k idle GPUs, lowest indexes first.
  Placement LowestIdleGpus(int node, const PodSpec& pod) const;
  // Shares on the k GPUs with the least free share that still fits (best fit).
  Placement BestFitShares(int node, const PodSpec& pod) const;
  // A MIG instance: among legal (GPU, start) pairs, the one leaving the fewest free slices on its
  // GPU (best fit), lowest GPU and start first.
  Placement BestFitMig(int node, const PodSpec& pod) const;
  // Whole GPUs by go-gpuallocator (needs a topology; falls back to the lowest idle GPUs).
  Placement DevicePluginGpus(int node, const PodSpec& pod) const;

  // Commits or undoes a placement. REQUIRES: the devices are free (Apply) or held (Release).
  void Apply(const PodSpec& pod, const Placement& placement);
  void Release(const PodSpec& pod, const Placement& placement);

  // A pod already running before the replay starts: applied here, and written as an allocation
  // into linkfit's cluster file (cluster_file.h), so both sides start from the same state.
  struct Preloaded {
    PodSpec pod;
    Placement placement;
  };
  void Preload(const PodSpec& pod, const Placement& placement);
  const std::vector<Preloaded>& preloaded() const { return preloaded_; }

 private:
  std::vector<SimNode> nodes_;
  std::map<std::string, int> index_;
  std::map<std::string, std::vector<MigProfile>> mig_profiles_;
  std::vector<Preloaded> preloaded_;
  std::int64_t total_gpu_milli_ = 0;
  std::int64_t allocated_gpu_milli_ = 0;
  int total_gpus_ = 0;
  std::int64_t max_cpu_ = 1;
  std::int64_t max_memory_ = 1;
  std::int64_t max_gpu_milli_ = 1;
};

}  // namespace linkfit::bench
