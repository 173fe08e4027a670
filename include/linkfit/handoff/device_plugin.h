#pragma once

// DevicePlugins: linkfit's device plugin (../shared/design/node-handoff.md §4.2), replacing
// NVIDIA's on linkfit nodes. One gRPC server per resource (plugin_devices.h) on a unix socket
// in the kubelet's device-plugin directory, registered with the kubelet's Registration service.
//
//   GetDevicePluginOptions  GetPreferredAllocation available; PreStartContainer not required
//   ListAndWatch            the resource's devices with health and NUMA node; a new list at
//                           every change of the node's facts (Update), until the plugin stops
//   GetPreferredAllocation  best-effort steering toward the plan (preferred_allocation.h), on a
//                           fresh SteeringView (the kubelet's PodResources List and the node's
//                           plans); no preference when that view cannot be read
//   Allocate                no devices, env or mounts: only the container annotation
//                           linkfit.io/kubelet-ids.<resource> with the IDs the kubelet chose, which
//                           reaches exactly that container's NRI CreateContainer event. IDs this
//                           plugin does not serve are refused (INVALID_ARGUMENT)
//   PreStartContainer       not used (answers empty)
//
// The verify-only mode (`verify`; design §4.5, for runtimes without NRI) makes the plugin the
// injector, as NVIDIA's is: Allocate also sets NVIDIA_VISIBLE_DEVICES to the physical devices the
// kubelet chose (and LINKFIT_GPU_SHARES for shares); for the NIC resources it adds the chosen
// NICs' /dev/infiniband/uverbsN and /dev/infiniband/rdma_cm (where the node has it: `rdma_cm`)
// as devices and, with `nic_env`, NCCL_IB_HCA and UCX_NET_DEVICES (NicEnvironment).
// PreStartContainer is required and refuses to start a container whose devices (GPUs or NICs)
// are not its plan (VerifyPreStart), except in the exempt namespaces. Allocate names no pod
// (the kubelet records the container's devices only after it answers), so what it injects cannot
// depend on the namespace: NIC environment is set for every container (nic_env), whatever the
// NRI plugin's nic_env_exempt_namespaces. Steering makes that rare; a refused pod must be deleted
// and recreated.
//
// When the kubelet restarts it removes every socket in the directory and forgets its plugins:
// KubeletRestarted() says so (its socket was deleted or replaced, or ours is gone), and the
// owner then starts a new DevicePlugins, which serves and registers again.
//
// Thread-safety: Update, KubeletRestarted, stats and the destructor may be called from any thread
// while gRPC threads serve; the SteeringSource is called on gRPC threads.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "linkfit/common/result.h"
#include "linkfit/handoff/handoff.h"
#include "linkfit/handoff/plugin_devices.h"
#include "linkfit/handoff/preferred_allocation.h"
#include "linkfit/topology/spec.h"

namespace linkfit::handoff {

struct DevicePluginConfig {
  std::string directory = "/var/lib/kubelet/device-plugins";
  std::string kubelet_socket = "kubelet.sock";  // inside `directory`
  PluginOptions devices;
  std::chrono::milliseconds register_timeout{5000};
  bool verify = false;  // the verify-only mode (above)
  bool nic_env = true;  // verify mode: NCCL's and UCX's environment for the NICs
  // Verify mode: the node has /dev/infiniband/rdma_cm (the rdma_ucm module is loaded); without
  // it, NICs get their verbs devices only (a device path the host lacks fails the container).
  bool rdma_cm = true;
  // Verify mode: namespaces whose containers start on the kubelet's choice unchecked (the agent's
  // --exempt-namespace; VerifyPreStart). PreStartContainer names no pod: the namespace is that of
  // the pod the kubelet's PodResources List shows holding the IDs.
  std::set<std::string> exempt_namespaces = {};
};

// What GetPreferredAllocation decides on, read when the kubelet asks.
struct SteeringView {
  std::vector<PlannedPod> plans;
  KubeletHoldings kubelet;
};
using SteeringSource = std::function<Result<SteeringView>()>;

struct DevicePluginStats {
  std::uint64_t preferred = 0;      // answers that named a plan
  std::uint64_t no_preference = 0;  // answers without one (ambiguous, unknown, short)
  std::uint64_t allocations = 0;    // containers labelled by Allocate
  std::uint64_t list_updates = 0;   // ListAndWatch lists sent
  std::uint64_t verified = 0;       // verify mode: container starts allowed
  std::uint64_t refused = 0;        // verify mode: starts refused (devices not the plan)
};

class DevicePlugins {
 public:
  virtual ~DevicePlugins() = default;
  // New facts: every resource's list is recomputed and sent to ListAndWatch streams where it
  // changed. A resource that appears (a new MIG profile) gets a server and is registered; one that
  // vanishes keeps its server with no devices, so the kubelet's capacity drops to zero.
  virtual Result<void> Update(const topology::TopologySpec& node) = 0;
  virtual bool KubeletRestarted() const = 0;
  // The resources served, sorted.
  virtual std::vector<std::string> resources() const = 0;
  virtual DevicePluginStats stats() const = 0;
};

// Serves every resource of `node` and registers each with the kubelet; an error names the socket
// or the resource that failed (the kubelet is not there, it refused the registration).
Result<std::unique_ptr<DevicePlugins>> StartDevicePlugins(const DevicePluginConfig& config,
                                                          const topology::TopologySpec& node,
                                                          SteeringSource steering);

// The socket file name of a resource's server ("linkfit-nvidia.com-gpu.sock").
std::string PluginSocketName(const std::string& resource);

}  // namespace linkfit::handoff
