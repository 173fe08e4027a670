#pragma once

// What linkfit's device plugin tells the kubelet (../shared/design/node-handoff.md §4.2), as plain
// values: the resources it serves with their device IDs, and the device IDs a plan names.
//
//   resource                    device IDs                      on which GPUs
//   nvidia.com/gpu              the GPU's UUID ("GPU-...")       GPUs not in MIG mode
//   nvidia.com/mig-<profile>    the MIG instance's UUID          GPUs in MIG mode, per instance
//   the share resource          "<GPU UUID>::<k>", k = 0..999    GPUs not in MIG mode
//   (linkfit.io/gpu-share)      (one replica per thousandth)
//   the NIC resource            the RDMA device's name           RDMA NICs that are not SR-IOV
//   (linkfit.io/rdma)           ("mlx5_0")                       virtual functions (the SR-IOV
//   the NIC share resource      "<NIC name>::<k>", k = 0..999    CNI's to hand out, never
//   (linkfit.io/rdma-share)     (one replica per thousandth)     planned by linkfit)
//
// A NIC is healthy while its port is ACTIVE (or its state is unknown: a document typed by hand);
// its NUMA node is sysfs's. NIC names never start with "GPU-" or "MIG-", so one NIC-or-GPU ID
// names one device.
//
// IDs are real, so PodResources and DCGM attribute devices correctly whenever the kubelet's pick
// matches the plan. A GPU without a known UUID is not served (nothing could name it). Health and
// NUMA node come from the agent's discovery; a MIG instance is as healthy as its GPU.
//
// A share resource counts thousandths, as the extender reads it: a container's thousandths of all
// its shared GPUs (or NICs) together (`linkfit.io/gpu-share: 600` with `linkfit.io/gpus: 2` gets
// 600 replica IDs, 300 of each GPU): the kubelet's count then equals what linkfit plans. The
// kubelet does not know that a GPU's whole ID and its replicas are the same device; linkfit's
// extender and the NRI plugin do, and they decide.
//
// Thread-safety: pure functions on values.

#include <map>
#include <string>
#include <vector>

#include "linkfit/kube/annotations.h"
#include "linkfit/topology/spec.h"

namespace linkfit::handoff {

// The container annotation prefix of the kubelet's chosen IDs (Allocate's label).
inline constexpr const char* kAnnotationKubeletIdsPrefix = "linkfit.io/kubelet-ids.";
inline constexpr int kShareReplicasPerGpu = 1000;
inline constexpr const char* kDefaultShareResource = "linkfit.io/gpu-share";
inline constexpr int kShareReplicasPerNic = 1000;
// Where RDMA devices live, on the host and in a container.
inline constexpr const char* kInfinibandDir = "/dev/infiniband/";
inline constexpr const char* kRdmaCmPath = "/dev/infiniband/rdma_cm";

struct PluginDevice {
  std::string id;
  bool healthy = true;
  int numa_node = -1;  // -1: no NUMA affinity reported
  friend bool operator==(const PluginDevice&, const PluginDevice&) = default;
};

struct PluginResource {
  std::string name;
  std::vector<PluginDevice> devices;
  friend bool operator==(const PluginResource&, const PluginResource&) = default;
};

struct PluginOptions {
  // The share resource's name ("" = none served).
  std::string share_resource = kDefaultShareResource;
  // The NIC resources' names (kube::kNicResource, kube::kNicShareResource by default; "" = that
  // one is not served). A node without RDMA NICs serves neither.
  std::string nic_resource = "linkfit.io/rdma";
  std::string nic_share_resource = "linkfit.io/rdma-share";
};

// Whether a NIC is served and planned: not an SR-IOV virtual function.
bool ServedNic(const topology::NicSpec& nic);
// Whether a NIC's port is up: "ACTIVE", or a state nobody reported.
bool NicPortUp(const topology::NicSpec& nic);

// Every resource the node offers, sorted by name; nvidia.com/gpu and the share resource are always
// present (with no devices when every GPU is in MIG mode), so their capacity drops to zero; the
// NIC resources are present where the node has RDMA NICs.
std::vector<PluginResource> PluginInventory(const topology::TopologySpec& node,
                                            const PluginOptions& options);

// The part of a planned container's devices that one resource covers.
struct PlannedResource {
  std::vector<std::string> ids;  // whole GPUs or MIG instances, by UUID
  // A share resource: the GPU UUID (or NIC name) and thousandths.
  std::vector<std::pair<std::string, int>> shares;
  // What the plan asks of this resource (the kubelet's count for the container), named or not.
  int wanted = 0;
  // Every planned device is named (a device the node cannot name is left out of ids/shares).
  bool complete() const;
};

// The devices of `planned` under `resource`, UUIDs from the plan or else from the node's facts
// (a MIG instance by GPU, profile and start); NICs by name, whole ones (1000 thousandths) under the
// NIC resource, shares under the NIC share resource. A device the node cannot name is left out and
// the result is incomplete: no preference is given for it.
PlannedResource PlannedFor(const kube::AllocationRecord::Devices& planned,
                           const std::string& resource, const topology::TopologySpec& node,
                           const PluginOptions& options);

// The container annotation Allocate returns: linkfit.io/kubelet-ids.<resource> = the IDs the
// kubelet chose, comma-separated (the NRI plugin compares them with the plan).
std::map<std::string, std::string> KubeletIdsAnnotation(const std::string& resource,
                                                        const std::vector<std::string>& ids);

}  // namespace linkfit::handoff
