#pragma once

// NodeTopology: the simulator's read-only view of one node's interconnect, distilled from
// linkfit's topology module (see topology_catalog.h): the node's placement table (alloc/
// placement_table.h, for ring metrics exactly as linkfit computes them), NVIDIA go-gpuallocator
// pair scores (for the default-scheduler baseline's device choice), NVLink pairs, NUMA node per
// GPU and the MIG profile set; the placement table's topology model carries the node's RDMA NICs.
//
// Ring metrics follow DESIGN.md §5: ring(S) is the best, over cyclic orders of S, of the slowest
// hop (PlacementTable's ring[S]).
//
// Thread-safety: immutable; share NodeTopologyPtr freely across threads.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "linkfit/alloc/placement_table.h"

namespace linkfit::bench {

using GpuMask = std::uint16_t;

class NodeTopology {
 public:
  // `allocator_score` and `nvlink` are row-major gpu_count x gpu_count matrices.
  NodeTopology(std::string id, alloc::PlacementTablePtr table, std::vector<int> allocator_score,
               std::vector<int> numa_node, std::vector<bool> nvlink, std::string mig_profile_set);

  const std::string& id() const { return id_; }
  int gpu_count() const { return gpu_count_; }
  const std::string& mig_profile_set() const { return mig_profile_set_; }
  std::uint32_t bandwidth_mbps(int a, int b) const {
    return table_->topology().bandwidth_mbps(a, b);
  }
  bool nvlink(int a, int b) const { return nvlink_[Cell(a, b)]; }
  // go-gpuallocator's pair score: PCIe term (SYS 10 ... PIX 50) + 100 per visible NVLink.
  int allocator_score(int a, int b) const { return allocator_score_[Cell(a, b)]; }
  int numa_node(int gpu) const { return numa_node_[static_cast<std::size_t>(gpu)]; }
  // linkfit's placement table and, through it, the topology model (its NICs and their PCIe
  // relation to each GPU).
  const alloc::PlacementTable& table() const { return *table_; }
  const topology::Topology& model() const { return table_->topology(); }

  // ring(S) in MB/s; 0 for sets of fewer than two GPUs.
  std::uint32_t RingMbps(GpuMask set) const;
  // True when S (two GPUs or more) has a ring whose every hop is NVLink: linkfit's kNvlink
  // closeness (PlacementTable::Meets).
  bool RingAllNvlink(GpuMask set) const;
  // The best ring bandwidth over all k-subsets of `free_gpus` (0 if k < 2 or too few GPUs): the
  // ring of the table's best k-set, which ranks rings first.
  std::uint32_t BestRingMbps(GpuMask free_gpus, int k) const;

 private:
  std::size_t Cell(int a, int b) const { return static_cast<std::size_t>(a * gpu_count_ + b); }

  std::string id_;
  alloc::PlacementTablePtr table_;
  int gpu_count_;
  std::vector<int> allocator_score_;
  std::vector<int> numa_node_;
  std::vector<bool> nvlink_;
  std::string mig_profile_set_;
};
using NodeTopologyPtr = std::shared_ptr<const NodeTopology>;

// NVIDIA go-gpuallocator's best-effort choice of `size` GPUs among `available` (the device
// plugin's default): enumerate the partitions of the available GPUs into sets of `size` (padded),
// take the highest-scoring partition and return its best complete set. Returns 0 when impossible.
GpuMask GpuAllocatorBestEffort(const NodeTopology& topology, GpuMask available, int size);

}  // namespace linkfit::bench
