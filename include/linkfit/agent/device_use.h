#pragma once

// From the kubelet's device IDs (pod_resources.h) to linkfit's devices (the
// linkfit.io/devices-in-use annotation, kube/annotations.h), on the node's discovered topology.
// Resources named "nvidia.com/...", the NIC resources (`nic_resources`, linkfit's by default) and
// `gpu_resources` (linkfit's GPU share resource, whose IDs are "GPU-<uuid>::<k>" replicas, where
// the agent serves it) are read; other vendors' resources are ignored. A NIC resource's ID is a
// NIC's name, or "<name>::<k>" for a replica of its share resource: the container holds that NIC
// (`nics`).
//
//   "GPU-<uuid>"                 a whole GPU, by the UUID discovery found
//   "GPU-<uuid>::<k>"            replica k of a time-sliced GPU (counted in `shares`)
//   "MIG-<uuid>"                 a MIG instance, by the UUID discovery found
//   (nvidia.com/mig-<profile>
//                                under the mixed strategy, nvidia.com/gpu under the single one)
//   "MIG-<uuid>::<k>"            a replica of a time-sliced MIG instance: the instance is in use
//   "MIG-GPU-<uuid>/<gi>/<ci>"   the pre-R470 MIG form: matched as a UUID first (old drivers
//                                report that string as the instance's UUID); else, for
//                                nvidia.com/mig-<profile>, the only instance of that profile on
//                                that GPU (the GPU-instance id is not a placement, so two
//                                instances of the profile leave it ambiguous: a warning)
//
// The kubelet names pods only; `uid_of` ("namespace/name" -> UID) keys them. A pod whose UID is
// unknown, an ID of an NVIDIA resource that matches no device of this node, and a second pod with
// the same UID are left out with a warning naming them; the pod's other devices still count.
// The output is canonical: pods by UID, containers by name (a name listed twice is merged),
// devices ascending; containers and pods without devices left out.
//
// Thread-safety: a pure function (uid_of is called on the caller's thread).

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "linkfit/agent/pod_resources.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/topology/spec.h"

namespace linkfit::agent {

// "namespace/name" -> the pod's UID, or nullopt when the pod is not known (yet).
using UidLookup = std::function<std::optional<std::string>(const std::string& pod_key)>;

struct DeviceUseReport {
  kube::DevicesInUse devices;
  std::vector<std::string> warnings;  // one line each, naming the pod, container and ID
};

DeviceUseReport MapDeviceUse(const std::vector<PodDeviceUse>& pods,
                             const topology::TopologySpec& spec, const UidLookup& uid_of,
                             const std::set<std::string>& nic_resources = {kube::kNicResource,
                                                                           kube::kNicShareResource},
                             const std::set<std::string>& gpu_resources = {});

}  // namespace linkfit::agent
