#pragma once

// The linkfit.io/ annotation contract: every key linkfit reads or writes, and the codec of the
// allocation record that bind writes and everything else reads (the restart rebuild, standalone
// mode's state file, the node side that hands devices to containers).
//
//   pod hints (README "Pod API")    linkfit.io/gpus, closeness, closeness-policy, mig-profile,
//                                   gpu-share, gpu-model; RDMA NICs: linkfit.io/nics,
//                                   nic-closeness, nic-closeness-policy, nic-share
//   node, written by the node agent linkfit.io/topology: the node's topology document
//                                   linkfit.io/devices-in-use: devices pods really hold
//   pod, written by bind            linkfit.io/allocation: the AllocationRecord below
//
// The allocation record (JSON, version 1). Top-level device keys are the pod's total, which the
// scheduler's cache counts; `containers` says which container gets which of them, which the node
// side hands over (an app container reuses its init containers' devices, as the kubelet does):
//
//   {"v":1,"pod":"ml/train","uid":"6f1c...","node":"dgx-0",
//    "gpus":[4,5],"uuids":["GPU-aa...","GPU-bb..."],                 whole GPUs (index, UUID)
//    "mig":[{"gpu":0,"profile":"3g.40gb","start":4,"uuid":"MIG-..."}], MIG instances
//    "shares":[{"gpu":2,"milli":300}],                                 thousandths of a GPU
//    "nics":[{"name":"mlx5_0","pci_bus_id":"0000:18:00.0","uverbs":"uverbs0","rail":0,
//             "gpu":4},                                                RDMA NICs, any kind
//            {"name":"mlx5_1","rail":1,"milli":250}],
//    "cpu":"4","memory":"16Gi",                                        requests (state file only)
//    "containers":[{"name":"train","gpus":[4,5],"uuids":[...]},
//                  {"name":"setup","init":true,"gpus":[4]}]}
//
// Keys with nothing to say are left out. A NIC names the node's RDMA device (the node's
// topology document says which); `milli` is left out for a whole NIC (1000, held by the pod
// alone: a NIC without `milli` is whole, and "milli":1000 reads the same), `gpu` (the pod's GPU
// the NIC serves) where none is said, `rail`, `pci_bus_id` and `uverbs` where unknown. Records
// without NICs read and write as they did before NICs.
//
// Decoding is strict: an unknown key, a version other than 1, a GPU index outside 0..15, a
// duplicate GPU, a share outside 1..1000, a MIG start outside 0..7, a NIC without a name or
// twice, a NIC's milli outside 1..1000 or rail outside 0..127, or a container holding a device
// the pod does not is an error naming it.
//
// Thread-safety: plain values and pure functions.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/result.h"

namespace linkfit::kube {

// Pod hints.
inline constexpr const char* kAnnotationGpus = "linkfit.io/gpus";
inline constexpr const char* kAnnotationCloseness = "linkfit.io/closeness";
inline constexpr const char* kAnnotationClosenessPolicy = "linkfit.io/closeness-policy";
inline constexpr const char* kAnnotationMigProfile = "linkfit.io/mig-profile";
inline constexpr const char* kAnnotationGpuShare = "linkfit.io/gpu-share";
inline constexpr const char* kAnnotationGpuModel = "linkfit.io/gpu-model";
inline constexpr const char* kAnnotationNics = "linkfit.io/nics";
inline constexpr const char* kAnnotationNicCloseness = "linkfit.io/nic-closeness";
inline constexpr const char* kAnnotationNicClosenessPolicy = "linkfit.io/nic-closeness-policy";
inline constexpr const char* kAnnotationNicShare = "linkfit.io/nic-share";
// A pod's group (label or annotation): pods of one group prefer the NIC rails its members hold.
// The coscheduling plugin's pod-group labels (scheduler-plugins, current and before v0.24) name
// a group too.
inline constexpr const char* kGroup = "linkfit.io/group";
inline constexpr const char* kCoschedulingPodGroup = "scheduling.x-k8s.io/pod-group";
inline constexpr const char* kCoschedulingPodGroupLegacy = "pod-group.scheduling.sigs.k8s.io";
// linkfit.io/nics: one NIC per GPU of the pod (the default when a NIC is asked for).
inline constexpr const char* kNicsPerGpu = "per-gpu";
// Node facts, written by the node agent.
inline constexpr const char* kAnnotationTopology = "linkfit.io/topology";
inline constexpr const char* kAnnotationDevicesInUse = "linkfit.io/devices-in-use";
// The bind result.
inline constexpr const char* kAnnotationAllocation = "linkfit.io/allocation";

// Resources linkfit plans.
inline constexpr const char* kGpuResource = "nvidia.com/gpu";
inline constexpr const char* kMigResourcePrefix = "nvidia.com/mig-";
// The default names of the NIC resources (configurable: nic_resource, nic_share_resource).
inline constexpr const char* kNicResource = "linkfit.io/rdma";
inline constexpr const char* kNicShareResource = "linkfit.io/rdma-share";

inline constexpr int kAllocationRecordVersion = 1;

struct AllocationRecord {
  struct Mig {
    int gpu = 0;
    std::string profile;
    int start = 0;
    std::string uuid;  // the MIG instance's UUID when known
    friend bool operator==(const Mig&, const Mig&) = default;
  };
  struct Share {
    int gpu = 0;
    int milli = 0;
    friend bool operator==(const Share&, const Share&) = default;
  };
  struct Nic {
    std::string name;        // the RDMA device, e.g. "mlx5_0"
    std::string pci_bus_id;  // "" = unknown
    std::string uverbs;      // the verbs character device, e.g. "uverbs0"; "" = unknown
    int rail = -1;           // -1 = unknown
    int milli = 1000;        // thousandths of the NIC; 1000 = whole, held alone
    int gpu = -1;            // the pod's GPU the NIC serves; -1 = none said
    friend bool operator==(const Nic&, const Nic&) = default;
  };
  struct Devices {
    std::vector<int> gpus;           // whole GPUs, by index
    std::vector<std::string> uuids;  // their UUIDs, parallel to gpus (empty when unknown)
    std::vector<Mig> mig;
    std::vector<Share> shares;
    std::vector<Nic> nics;  // with any kind of GPUs, or alone
    bool empty() const { return gpus.empty() && mig.empty() && shares.empty() && nics.empty(); }
    friend bool operator==(const Devices&, const Devices&) = default;
  };
  struct Container {
    std::string name;
    bool init = false;  // an init container (sidecars included)
    Devices devices;
    friend bool operator==(const Container&, const Container&) = default;
  };

  int version = kAllocationRecordVersion;
  std::string pod;  // "namespace/name"
  std::string uid;
  std::string node;
  std::string group;  // the pod's group, "namespace/name" (GpuRequest::group); written when set
  Devices devices;    // the pod's total
  std::vector<Container> containers;
  std::int64_t cpu_milli = 0;  // requests; written only when > 0
  std::int64_t memory_bytes = 0;

  friend bool operator==(const AllocationRecord&, const AllocationRecord&) = default;
};

// linkfit.io/devices-in-use, written by the node agent from the kubelet's PodResources API:
// which devices each container of each pod really holds, keyed by pod UID (version 1):
//
//   {"v":1,"pods":[{"uid":"6f1c...","pod":"ml/train",
//                   "containers":[{"name":"train","gpus":[4,5],
//                                  "mig":[{"gpu":0,"profile":"3g.40gb","start":4,"uuid":"MIG-..."}],
//                                  "shares":[{"gpu":2,"replicas":1}],
//                                  "nics":["mlx5_0"]}]}]}
//
// Pods sorted by UID, containers by name, devices ascending; keys with nothing to say left out.
// `shares` counts the time-slice replicas (device IDs "GPU-uuid::k") a container holds on a GPU.
// `nics` names the RDMA devices the container holds (the kubelet's device IDs of the NIC
// resources, mapped to device names by the agent); it cannot say whether a NIC is held whole or
// shared, nor how much of it, nor which GPU it serves (model::AssignmentOfReport).
// Decoding is strict like the allocation record's.
struct DevicesInUse {
  struct Share {
    int gpu = 0;
    int replicas = 0;
    friend bool operator==(const Share&, const Share&) = default;
  };
  struct Container {
    std::string name;
    std::vector<int> gpus;
    std::vector<AllocationRecord::Mig> mig;
    std::vector<Share> shares;
    std::vector<std::string> nics;  // NIC names, ascending
    friend bool operator==(const Container&, const Container&) = default;
  };
  struct Pod {
    std::string uid;
    std::string pod;  // "namespace/name"
    std::vector<Container> containers;
    friend bool operator==(const Pod&, const Pod&) = default;
  };
  int version = 1;
  std::vector<Pod> pods;
  friend bool operator==(const DevicesInUse&, const DevicesInUse&) = default;
};
std::string EncodeDevicesInUse(const DevicesInUse& devices);
Result<DevicesInUse> DecodeDevicesInUse(std::string_view json);

// Compact JSON, keys in the order shown above.
std::string EncodeAllocationRecord(const AllocationRecord& record);
// Strict decoding, see the file comment. `pod`, `uid` and `node` are required.
Result<AllocationRecord> DecodeAllocationRecord(std::string_view json);

}  // namespace linkfit::kube
