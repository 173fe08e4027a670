#pragma once

// Turns linkfit topology documents (config/topologies/*.json, or nvidia-smi text) into the
// simulator's NodeTopology, through linkfit's own modules: LoadTopologyFile, BuildTopology, then
// the topology's placement table (alloc/placement_table.h), so that the harness measures rings
// as linkfit computes them.
//
// Thread-safety: pure function.

#include <string>

#include "harness/node_topology.h"
#include "linkfit/common/result.h"

namespace linkfit::bench {

Result<NodeTopologyPtr> LoadNodeTopology(const std::string& path);

// The absolute, normalized path of the shipped topology document config/topologies/`file`.
std::string ShippedTopologyPath(const std::string& repo_root, const std::string& file);

}  // namespace linkfit::bench
