#pragma once

// The kubelet's PodResources API (gRPC on a unix socket, v1.PodResourcesLister/List): which
// device IDs each container of each pod holds, as the kubelet's device manager handed them out.
// Plain C++ types: no protobuf or gRPC in this header.
//
// Thread-safety: ListPodResources may be called concurrently.

#include <chrono>
#include <string>
#include <vector>

#include "linkfit/common/result.h"

namespace linkfit::agent {

struct ContainerDeviceUse {
  std::string name;
  struct Devices {
    std::string resource_name;  // "nvidia.com/gpu", "nvidia.com/mig-3g.40gb", ...
    std::vector<std::string> device_ids;
  };
  std::vector<Devices> devices;
};

struct PodDeviceUse {
  std::string pod_namespace;
  std::string name;
  std::vector<ContainerDeviceUse> containers;
};

// Calls List on the kubelet's socket at `socket_path` (a file path, usually
// /var/lib/kubelet/pod-resources/kubelet.sock; "unix://" is added) and waits at most `timeout`.
// Fails fast when nothing listens there. An error names the socket and the gRPC status; the
// kubelet's fields linkfit does not read (cpu_ids, memory, topology, DRA claims) are skipped.
Result<std::vector<PodDeviceUse>> ListPodResources(const std::string& socket_path,
                                                   std::chrono::milliseconds timeout);

}  // namespace linkfit::agent
