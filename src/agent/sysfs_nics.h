#pragma once

// RDMA NICs from sysfs (the host's /sys, or a tree a test builds): every device under
// class/infiniband, with
//
//   device                        the PCI function (a link into devices/pci<domain>:<bus>/...)
//   device/numa_node              its NUMA node (-1: the kernel does not know)
//   ports/<n>/rate, state, link_layer   of the port it is used through, kept as NicSpec::port:
//                                 the lowest-numbered ACTIVE port, else the lowest-numbered one
//                                 ("400 Gb/sec (4X NDR)", "4: ACTIVE", "InfiniBand" or
//                                 "Ethernet", the latter being RoCE)
//   device/infiniband_verbs/uverbs<k>/ibdev   the verbs device whose ibdev is this device
//   device/net/<ifname>           its network interfaces
//   device/physfn, sriov_numvfs   SR-IOV: a VF's physical function; a PF's enabled VFs
//
// ConnectX-8 Data Direct: the NIC's DMA may go through a separate PCI function (15b3:2100, the
// kernel's mlx5 "data direct" device). The kernel pairs it with its RDMA device by a vendor-unique
// id: the data direct function's from the "VU" keyword of its VPD, the RDMA device's from the
// NIC firmware. sysfs offers no firmware query, so the agent takes the NIC function's own VPD
// "VU" keyword for the latter, on the assumption (not checked on hardware) that the card's VPD
// carries the same id; it reads `vpd` of both functions (readable by root only: an agent without
// it pairs nothing and says so in a warning). rdma-core's mlx5dv_get_data_direct_sysfs_path()
// asks the kernel directly and would be the exact source where libmlx5 is at hand.
//
// The relation of a NIC to a GPU comes from the two PCI paths below devices/, as NVML's
// nvmlDeviceGetTopologyCommonAncestor classes it (and `nvidia-smi topo -m` prints it). A path is
// pci<domain>:<bus> (the host bridge), the root port, then each PCIe switch as its upstream and
// downstream port, then the function:
//
//   PIX   the paths meet at a switch, below which neither crosses another switch
//   PXB   they meet at a switch, and at least one of them crosses a further switch below it
//   PHB   they meet at the host bridge (same pci<domain>:<bus>, different root ports, or one
//         root port without a switch)
//   NODE  different host bridges of one CPU socket (NVML says "within a NUMA node"; on sockets
//         split into several NUMA nodes, as EPYC in NPS4, it reports NODE across them: DGX A100)
//   SYS   different CPU sockets, or a GPU whose path sysfs does not know (never claim closeness)
//
// With a Data Direct function, the relations are those of that function: GPU memory reaches the
// wire through it (GPUDirect RDMA reads and writes are its DMA), so it, not the NIC's own
// function, is what must sit near the GPU.
//
// Thread-safety: free functions; they read files only.

#include <string>
#include <string_view>
#include <vector>

#include "linkfit/topology/spec.h"

namespace linkfit::agent {

// The relation between two PCI paths (as above: {"pci0000:17", "0000:17:01.0", ...,
// "0000:1b:00.0"}) when they lie below different host bridges on the same socket or not.
topology::PcieRelation RelationOfPciPaths(const std::vector<std::string>& a,
                                          const std::vector<std::string>& b, bool same_socket);

// The value of the "VU" keyword of a PCI VPD image (large resource 0x90/0x91, keyword list);
// empty when the image has none or is malformed.
std::string VpdVendorUniqueId(std::string_view vpd);

// The NICs sysfs shows (none: an empty vector), ordered by name with numbers compared as numbers
// (mlx5_2 before mlx5_10); rails follow that order. `spec` supplies the GPUs (their pci_bus_id,
// numa_node and socket) to relate each NIC to.
std::vector<topology::NicSpec> ReadNics(const std::string& sysfs_root,
                                        const topology::TopologySpec& spec,
                                        std::vector<std::string>& warnings);

}  // namespace linkfit::agent
