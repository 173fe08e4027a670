#pragma once

// From the kubelet's device IDs (pod_resources.h) to linkfit's devices (the
// linkfit.io/devices-in-use annotation, kube/annotations.h), on the node's discovered topology:
//
//   "GPU-<uuid>"         (nvidia.com/gpu)               a whole GPU, by its UUID
//   "GPU-<uuid>::<k>"    (time-slicing replicas, any resource)  one replica of a shared GPU
//   "MIG-<uuid>"         (nvidia.com/mig-<profile>, or nvidia.com/gpu under the device plugin's
//                         single strategy)              a MIG instance, by the UUID discovery found
//
// Pods are keyed by UID through `uid_of` ("namespace/name" -> UID; the kubelet names pods only);
// pods whose UID is unknown, IDs of NVIDIA resources that match no device, are skipped with a
// warning naming them; other vendors' resources are ignored. The output is canonical: pods by
// UID, containers by name, devices ascending; containers and pods without devices left out.
//
// Thread-safety: a pure function.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "linkfit/agent/pod_resources.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/topology/spec.h"

namespace linkfit::agent {

using UidLookup = std::function<std::optional<std::string>(const std::string& pod_key)>;

struct DeviceUseReport {
  kube::DevicesInUse devices;
  std::vector<std::string> warnings;
};

DeviceUseReport MapDeviceUse(const std::vector<PodDeviceUse>& pods,
                             const topology::TopologySpec& spec, const UidLookup& uid_of);

}  // namespace linkfit::agent
