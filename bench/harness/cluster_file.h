#pragma once

// Writes the simulator's cluster as the standalone cluster file `linkfit serve --cluster` reads
// (issue 3 §3): one entry per node with its topology document, its GPU model label and its GPUs in
// MIG mode, and the cluster's preloaded pods (Cluster::Preload) as allocations. Nodes
// without a topology file get a synthesised single-socket PCIe document (every pair PHB, one NUMA
// node) of their GPU count, written once per (GPU count, model) next to the cluster file; nodes
// with a NIC rate (SimNode::nic_rate_gbps) a copy of their document with that rate on every NIC,
// as a node agent would publish it. The YAML
// is standalone::EncodeClusterFile's, beside the reader.
//
// Thread-safety: pure function over its arguments (writes files under `dir`).

#include <string>

#include "harness/cluster.h"
#include "linkfit/common/result.h"

namespace linkfit::bench {

// Returns the path of the cluster file written into `dir`.
Result<std::string> WriteClusterFile(const Cluster& cluster, const std::string& dir);

// The topology document (JSON text) of a single-socket PCIe node of `gpu_count` `model` GPUs.
Result<std::string> SynthesizedPcieDocument(int gpu_count, const std::string& model);

// A fresh private temporary directory (mkdtemp under $TMPDIR or /tmp).
Result<std::string> MakeTempDir(const std::string& prefix);

}  // namespace linkfit::bench
