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
//   Shares are carved by the same rules one thousandth at a time (the kubelet hands out one
//   device ID per thousandth): a container requesting the share resource gets the thousandths
//   it requests, taken from the pod's shared GPUs in order, so the kubelet's IDs for it are
//   exactly its plan (two containers asking 250 each of a pod's 500 get 250 each; an app
//   container after an init container reuses the init container's thousandths). A pod that
//   asks only through annotations (linkfit.io/gpus), or devices left over, go to the first app
//   container.
// NICs (NicResources names the resources):
//   - whole NICs (1000): where some container requests a whole-NIC resource, as GPUs are
//     handed out (counts from those requests, left-overs to the first app container);
//   - otherwise (the pod asks NICs by annotation), and for NIC shares where no container
//     requests the NIC share resource: each NIC goes with the container that got the GPU it
//     serves (NicSlot::gpu; an app container before a sidecar), else the first app container;
//   - NIC shares, where some container requests the NIC share resource, are carved like GPU
//     shares, a container's thousandths first from the NICs serving its own GPUs.
//
// Thread-safety: pure functions.

#include <string>
#include <vector>

#include "linkfit/common/result.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/kube/types.h"
#include "linkfit/state/node_state.h"

namespace linkfit::model {

// The resources by which containers ask for RDMA NICs: the config keys nic_resource and
// nic_resources (whole NICs) and nic_share_resource (thousandths of a NIC).
struct NicResources {
  std::vector<std::string> whole = {"linkfit.io/rdma"};
  std::string share = "linkfit.io/rdma-share";
};

// The record of `assignment` on `node` (UUIDs from the node's topology, MIG profile names from
// its profile set, NIC names, bus IDs, verbs devices and rails from its own topology), without
// containers and without CPU/memory.
kube::AllocationRecord RecordOf(const state::Assignment& assignment, const state::NodeInfo& node);

// The assignment a record describes on `node`; NICs are found by name in its own topology.
// Errors: GPU indexes beyond the node, MIG on a node without MIG-capable GPUs or with an unknown
// profile, a record mixing GPU kinds, a NIC name the node does not have (naming it).
Result<state::Assignment> AssignmentOf(const kube::AllocationRecord& record,
                                       const state::NodeInfo& node);

// The assignment a node agent's report of one pod (linkfit.io/devices-in-use) describes on
// `node`: the union of its containers' devices. Replicas say which GPUs a pod shares, not how
// much: each shared GPU counts `share_milli` thousandths (the pod's request; 1 when unknown).
// NIC names say which NICs a pod holds, not how much of each nor which GPU each serves: each
// counts `nic_milli` thousandths (the pod's NIC request; 1000, the whole NIC, when unknown) and
// serves no GPU (-1); pod_store's comparison with the allocation record reads NICs by name.
// Errors as AssignmentOf's, naming the report.
Result<state::Assignment> AssignmentOfReport(const kube::DevicesInUse::Pod& pod,
                                             const std::string& node_name,
                                             const state::NodeInfo& node, int share_milli,
                                             int nic_milli = 1000);

// Splits the pod's devices over its containers (see the file comment): `containers` as
// kube::PodView::containers lists them, init containers first.
std::vector<kube::AllocationRecord::Container> PlanContainers(
    const std::vector<kube::ContainerView>& containers,
    const kube::AllocationRecord::Devices& devices, const std::string& shared_gpu_resource,
    const NicResources& nic_resources = {});
inline std::vector<kube::AllocationRecord::Container> PlanContainers(
    const kube::PodView& pod, const kube::AllocationRecord::Devices& devices,
    const std::string& shared_gpu_resource, const NicResources& nic_resources = {}) {
  return PlanContainers(pod.containers, devices, shared_gpu_resource, nic_resources);
}

}  // namespace linkfit::model
