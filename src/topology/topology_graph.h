#pragma once

// The interconnect graph of one node (private to the topology module): a Boost.Graph whose
// vertices are GPUs, PCIe switches, host bridges, NUMA nodes, sockets and NVSwitches, and whose
// edges are NVLink bundles, PCIe links and inter-socket links. BuildTopology derives the NVLink
// islands and PCIe-switch groups from it once per topology.
//
// Thread-safety: pure functions over their arguments.

#include <string>
#include <vector>

#include "linkfit/topology/spec.h"
#include "linkfit/topology/topology.h"

namespace linkfit::topology::internal {

struct GraphDerivations {
  std::vector<GpuMask> nvlink_islands;      // connected components of the NVLink subgraph
  std::vector<GpuMask> pcie_switch_groups;  // GPUs below each PCIe switch (2+ GPUs, distinct)
  int vertex_count = 0;
  int edge_count = 0;
};

// Builds the graph for a validated spec (GPU indexes 0..n-1, one link per pair) and derives the
// islands and switch groups. Switch groups come from the PCIe tree when every GPU has a
// pcie_path, otherwise from the pair relations (GPUs joined by PIX/PXB share a switch).
GraphDerivations DeriveFromGraph(const TopologySpec& spec, std::vector<std::string>& warnings);

}  // namespace linkfit::topology::internal
