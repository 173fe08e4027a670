#pragma once

// Turns linkfit topology documents (config/topologies/*.json, or nvidia-smi text) into the
// simulator's NodeTopology, through linkfit's own topology module: LoadTopologyFile, then
// BuildTopology for the bandwidth matrix (so the harness measures rings with the same numbers
// linkfit optimises).
//
// Thread-safety: pure function.

#include <string>

#include "harness/node_topology.h"
#include "linkfit/common/result.h"

namespace linkfit::bench {

Result<NodeTopologyPtr> LoadNodeTopology(const std::string& path);

}  // namespace linkfit::bench
