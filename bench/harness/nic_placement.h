#pragma once

// The simulator's side of RDMA NICs (issue 37, the `nic` experiment): whether a pod's GPUs and
// NICs are aligned, whether an aligned choice existed, the network rate a pod gets, the NICs the
// kubelet would hand a pod whose GPUs someone else chose, and the NICs linkfit recorded for a pod
// in its allocation record.
//
// Aligned: each GPU of the pod can be paired with a NIC of the pod at PIX or PXB (the distance at
// which NCCL uses GPUDirect RDMA by default), each GPU with its own NIC when the pod holds at
// least as many NICs as GPUs, any of them otherwise (alloc/nic_choice.h's rule). The pairing is
// the best one (a bipartite matching), whoever chose the devices.
//
// Thread-safety: pure functions of their arguments (RecordedNics reads a file).

#include <string>

#include "harness/cluster.h"
#include "linkfit/common/result.h"

namespace linkfit::bench {

// Whether GPU `gpu` and NIC `nic` of the node are at PIX or PXB.
bool GpuDirectPair(const NodeTopology& topology, int gpu, int nic);

// Whether the placement's GPUs and NICs on `node` are aligned (true for a pod without NICs).
bool PlacementAligned(const SimNode& node, const Placement& placement);

// Whether `pod` (whole GPUs and NICs) has an aligned choice among the node's idle GPUs and the
// NICs that can take its share now: a brute force over GPU sets (and NIC sets when the pod asks
// fewer NICs than GPUs), independent of linkfit's joint choice, which the tests compare it with.
// CPU and memory are not looked at.
bool AlignedChoiceExists(const SimNode& node, const PodSpec& pod);

// The network rate model. A GPU paired with a NIC at PIX/PXB sends at the NIC's rate times the
// share held (GPUDirect RDMA); any other pair is staged through host memory, at the lesser of that
// and `staged_gbps[pcie_gen]` (the GPU's PCIe generation). A pod's rate is the least over its
// GPUs, under the pairing that makes it largest (an all-reduce ring runs at its slowest member).
struct NetworkModel {
  double nic_gbps = 0;         // GB/s of one of the node's NICs
  double staged_gbps[6] = {};  // by PCIe generation 0-5 (0: unknown, taken as 4)
};
double PodNetworkGbps(const SimNode& node, const Placement& placement, const NetworkModel& model);

// The NICs the kubelet's device manager hands a pod holding `gpus` on `node` (TopologyManager
// best-effort): NICs that can take the share, those on the NUMA nodes of the pod's GPUs first,
// then the others, each group in device order. Returns 0 when fewer than the pod asks can.
SimNicMask KubeletNics(const SimNode& node, GpuMask gpus, const PodSpec& pod);

// The NICs linkfit's allocation record names for pod `uid`, read from the standalone state file
// `state_file` (every allocation as a linkfit.io/allocation record). Fails when the file or the
// record is missing or unreadable, a NIC name is not the node's, or a share is not the pod's.
Result<SimNicMask> RecordedNics(const std::string& state_file, const PodSpec& pod,
                                const SimNode& node);

}  // namespace linkfit::bench
