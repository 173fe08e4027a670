#pragma once

// What linkfit's device plugin tells the kubelet (../shared/design/node-handoff.md §4.2), as plain
// values: the resources it serves with their device IDs, and the device IDs a plan names.
//
//   resource                    device IDs                      on which GPUs
//   nvidia.com/gpu              the GPU's UUID ("GPU-...")       GPUs not in MIG mode
//   nvidia.com/mig-<profile>    the MIG instance's UUID          GPUs in MIG mode, per instance
//   the share resource          "<GPU UUID>::<k>", k = 0..999    GPUs not in MIG mode
//   (linkfit.io/gpu-share)      (one replica per thousandth)
//
// IDs are real, so PodResources and DCGM attribute devices correctly whenever the kubelet's pick
// matches the plan. A GPU without a known UUID is not served (nothing could name it). Health and
// NUMA node come from the agent's discovery; a MIG instance is as healthy as its GPU.
//
// The share resource counts thousandths of a GPU, as the extender reads it (a pod asking
// `linkfit.io/gpu-share: 300` gets 300 replica IDs of one GPU): the kubelet's capacity then equals
// what linkfit plans. The kubelet does not know that a GPU's whole ID and its replicas are the same
// device; linkfit's extender and the NRI plugin do, and they decide.
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
};

// Every resource the node offers, sorted by name; nvidia.com/gpu and the share resource are always
// present (with no devices when every GPU is in MIG mode), so their capacity drops to zero.
std::vector<PluginResource> PluginInventory(const topology::TopologySpec& node,
                                            const PluginOptions& options);

// The part of a planned container's devices that one resource covers.
struct PlannedResource {
  std::vector<std::string> ids;                     // whole GPUs or MIG instances, by UUID
  std::vector<std::pair<std::string, int>> shares;  // share resource: GPU UUID, thousandths
  // What the plan asks of this resource (the kubelet's count for the container), named or not.
  int wanted = 0;
  // Every planned device is named (a device the node cannot name is left out of ids/shares).
  bool complete() const;
};

// The devices of `planned` under `resource`, UUIDs from the plan or else from the node's facts
// (a MIG instance by GPU, profile and start). A device the node cannot name is left out and the
// result is incomplete: no preference is given for it.
PlannedResource PlannedFor(const kube::AllocationRecord::Devices& planned,
                           const std::string& resource, const topology::TopologySpec& node,
                           const PluginOptions& options);

// The container annotation Allocate returns: linkfit.io/kubelet-ids.<resource> = the IDs the
// kubelet chose, comma-separated (the NRI plugin compares them with the plan).
std::map<std::string, std::string> KubeletIdsAnnotation(const std::string& resource,
                                                        const std::vector<std::string>& ids);

}  // namespace linkfit::handoff
