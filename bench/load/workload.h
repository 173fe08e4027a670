#pragma once

// The load client's workload: a standalone cluster file of 8-GPU nodes (a mix of the
// config/topologies fixtures, with existing allocations so that nodes differ) and the objects its
// request bodies carry (full Pod objects; full ~20 KB Node objects for non-cache mode), which
// bench/common/extender_args.h wraps in kube-scheduler's exact wire format.
//
// Thread-safety: pure functions.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace linkfit::load {

struct GeneratedCluster {
  std::string yaml;                // the cluster file (topology paths absolute)
  std::vector<std::string> names;  // every node, interleaved across the topologies
  // Every node's name in a random order drawn from the seed: the order the latency bodies send
  // them in (as the hot-path issue measures: nothing about the cluster's layout lines up with
  // the request's order, so every name's slot, record and kept answer lies somewhere else).
  std::vector<std::string> shuffled_names;
  std::vector<std::string> products;  // nvidia.com/gpu.product of each node in `names`
  int allocations = 0;
};

// `nodes` nodes spread evenly over the 8-GPU fixtures in `topology_dir`; about 60% of them get a
// pre-existing allocation (whole GPUs, a full node, or GPU shares, each with CPU and memory
// requests), drawn from `seed`. Nodes carry their machine's CPU and memory allocatable.
GeneratedCluster MakeCluster(const std::string& topology_dir, int nodes, std::uint64_t seed);

// A pod shape kube-scheduler would send: whole GPUs with an optional linkfit.io/closeness hint.
struct PodShape {
  std::string label;  // e.g. "4 GPUs, nvlink preferred"
  int gpus = 1;
  std::string closeness;  // "" for none
  bool required = false;
  bool nics = false;  // linkfit.io/nics: per-gpu (one RDMA NIC per GPU, at PXB or closer)
};

// The rotation of shapes the latency runs use; with `nics`, each also asks one NIC per GPU.
std::vector<PodShape> PodShapes(bool nics = false);

// A realistic full Pod object (as the scheduler's informer holds it: metadata, containers,
// volumes, tolerations, status; no managedFields). Its bytes are what the load figures measured,
// so it stays this tool's own (the harness builds its pods from a trace). Its metadata.uid ends
// with `serial` as 12 decimal digits, which PatchUid can rewrite in place.
std::string PodJson(const PodShape& shape, std::uint64_t serial);

// Rewrites the 12-digit serial of the first pod UID in `body` (found by UidOffset).
std::size_t UidOffset(std::string_view body);
void PatchUid(std::string& body, std::size_t offset, std::uint64_t serial);
// The main container's CPU request in `body` (five digits and "m"), and a rewrite of it in place
// to 10000m-99999m by `serial`: a pod whose request no earlier pod had.
std::size_t CpuOffset(std::string_view body);
void PatchCpu(std::string& body, std::size_t offset, std::uint64_t serial);

// A Node object of about 20 KB, shaped like a real GPU node (labels, annotations, capacity,
// allocatable, conditions, addresses, node info, a long image list).
std::string NodeObjectJson(const std::string& name, const std::string& product);

// The pod UID used by PodJson for `serial`.
std::string PodUid(std::uint64_t serial);

}  // namespace linkfit::load
