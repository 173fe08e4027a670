#pragma once

// Between the allocation record (kube/annotations.h: what bind writes on the pod and what the
// restart rebuild, the state file and the node side read) and the cache's Assignment, on one
// node's model. Also plans which container of the pod gets which device.
//
// Container plan (what the node side hands over), mirroring the kubelet's device manager:
//   - a sidecar (init container with restartPolicy Always) takes its devices for the pod's
//     lifetime: nobody after it reuses them;
//   - a regular init container takes the first devices not held by sidecars (init containers
//     run one at a time, so they reuse each other's);
//   - app containers then take devices in order, the init containers' first (the kubelet
//     reuses init containers' devices for app containers).
//   Counts come from each container's nvidia.com/gpu and nvidia.com/mig-<profile> requests.
//   Shares of a GPU go to every container that requests the share resource. A pod that asks
//   only through annotations (linkfit.io/gpus), or devices left over, go to the first app
//   container.
//
// Thread-safety: pure functions.

#include <string>
#include <vector>

#include "linkfit/common/result.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/kube/types.h"
#include "linkfit/state/node_state.h"

namespace linkfit::model {

// The record of `assignment` on `node` (UUIDs from the node's topology, MIG profile names from
// its profile set), without containers and without CPU/memory.
kube::AllocationRecord RecordOf(const state::Assignment& assignment, const state::NodeInfo& node);

// The assignment a record describes on `node`. Errors: GPU indexes beyond the node, MIG on a
// node without MIG-capable GPUs or with an unknown profile, a record mixing device kinds.
Result<state::Assignment> AssignmentOf(const kube::AllocationRecord& record,
                                       const state::NodeInfo& node);

// The assignment a node agent's report of one pod (linkfit.io/devices-in-use) describes on
// `node`: the union of its containers' devices. Replicas say which GPUs a pod shares, not how
// much: each shared GPU counts `share_milli` thousandths (the pod's request; 1 when unknown).
// Errors as AssignmentOf's, naming the report.
Result<state::Assignment> AssignmentOfReport(const kube::DevicesInUse::Pod& pod,
                                             const std::string& node_name,
                                             const state::NodeInfo& node, int share_milli);

// Splits the pod's devices over its containers (see the file comment): `containers` as
// kube::PodView::containers lists them, init containers first.
std::vector<kube::AllocationRecord::Container> PlanContainers(
    const std::vector<kube::ContainerView>& containers,
    const kube::AllocationRecord::Devices& devices, const std::string& shared_gpu_resource);
inline std::vector<kube::AllocationRecord::Container> PlanContainers(
    const kube::PodView& pod, const kube::AllocationRecord::Devices& devices,
    const std::string& shared_gpu_resource) {
  return PlanContainers(pod.containers, devices, shared_gpu_resource);
}

}  // namespace linkfit::model
