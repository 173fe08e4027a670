#pragma once

// The in-process baselines of the `nic` experiment (issue 37): pods of whole GPUs asking RDMA
// NICs (whole or a share each). Each scores a node as kube-scheduler's NodeResourcesFit
// LeastAllocated does (seeded random among the best) and says which GPUs and NICs the pod gets:
//
//   numa-only  the kubelet's TopologyManager `single-numa-node` (with a NUMA-aware scheduler
//              filter, so that pods go only where the kubelet admits them): GPUs and NICs from one
//              NUMA node, the first free ones in device order, on the lowest NUMA node that holds
//              them all. A pod wider than every NUMA node of the machine (which single-numa-node
//              refuses everywhere) takes the fewest NUMA nodes that can hold it, as `restricted`
//              admits it, lowest first.
//   pcie-root  DRA-style: each GPU is paired with a NIC under the same PCIe root complex (the
//              `resource.kubernetes.io/pcieRoot` attribute matched per GPU-NIC pair; same root =
//              PIX, PXB or PHB between the two), the first such assignment in device order (GPU,
//              then NIC), searched with backtracking as the DRA allocator does. Pairs need one
//              NIC per GPU: a pod asking another number of NICs fits nowhere under it.
//   random     a node drawn uniformly among those where the pod fits; GPUs as the device plugin
//              gives them (go-gpuallocator), NICs as the kubelet gives them (KubeletNics).
//
// Thread-safety: as Policy (const, no state).

#include <string>
#include <vector>

#include "harness/policy.h"
#include "linkfit/common/result.h"

namespace linkfit::bench {

// The names above, in report order.
const std::vector<std::string>& NicBaselineNames();

Result<PolicyPtr> MakeNicBaseline(const std::string& name);

}  // namespace linkfit::bench
