#pragma once

// The FGD paper's replay protocol on the openb trace (../shared/baselines/README.md):
// the cluster from openb_node_list_gpu_node.csv, the pod list sorted by name, shuffled with the
// run's seed, then topped up with uniform draws (with replacement) until the requested GPUs reach
// `demand_limit` x capacity. No departures; timestamps unused.
//
// Thread-safety: pure functions.

#include <cstdint>
#include <vector>

#include "harness/cluster.h"
#include "harness/trace.h"

namespace linkfit::bench {

// Converts openb records; GPU demand is whole (gpu_milli 1000), a share, or none.
std::vector<PodSpec> ToPodSpecs(const std::vector<PodRecord>& records);

// Builds the cluster from openb GPU nodes (CPU-only rows are skipped). Nodes carry no topology.
Cluster BuildOpenbCluster(const std::vector<NodeRecord>& nodes);

// The arrival sequence for one seed. Every pod gets a unique name and UID ("<name>-<n>" for
// repeated draws); shapes are assigned.
std::vector<PodSpec> FgdArrivals(const std::vector<PodSpec>& trace, std::uint64_t seed,
                                 double capacity_gpus, double demand_limit);

}  // namespace linkfit::bench
