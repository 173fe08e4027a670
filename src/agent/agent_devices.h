#pragma once

// The agent's source of real device use: the kubelet's PodResources, mapped to linkfit's devices
// on the node's current topology (device_use.h), for NodeAgent's DevicesFn.
//
// Thread-safety: the returned function is called from the agent loop only.

#include <set>
#include <string>

#include "linkfit/agent/device_use.h"
#include "linkfit/agent/node_agent.h"

namespace linkfit::agent {

// `nic_resources`: the NIC resources whose IDs name RDMA NICs (the device plugin's);
// `gpu_resources`: other resources whose IDs name GPUs (the device plugin's share resource).
NodeAgent::DevicesFn MakeDevicesFn(std::string socket_path, UidLookup uid_of,
                                   std::set<std::string> nic_resources,
                                   std::set<std::string> gpu_resources = {});

}  // namespace linkfit::agent
