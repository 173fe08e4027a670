#pragma once

// PlacementTable: exact whole-GPU placement for one topology, precomputed once so that asking
// about a node is a table lookup.
//
// The objective (DESIGN.md §5). For a set S of k >= 2 GPUs:
//   ring(S)  the largest, over cyclic orders of S, of the smallest pair bandwidth between
//            neighbours (one NCCL ring); for k = 2 it is b(i,j)
//   sum(S)   the sum of b(i,j) over all pairs of S
//   span(S)  the number of NUMA nodes S touches
// Sets compare on (ring desc, sum desc, span asc); among equals, the set that leaves the free set
// best able to serve future requests wins (look-ahead: the sum over sizes j of the best ring, then
// best sum, still available in F \ S), then the lowest GPU indexes.
//
// Tables, for n GPUs (n <= 16), indexed by masks (bit i = GPU i):
//   ring[S], sum[S], span[S]   for all 2^n sets (ring by a bottleneck Hamiltonian-path DP)
//   best[F][k]                 the winning k-set inside free set F, for every F and k
//   lookahead[R]               the future value of a remaining free set R
// best[] is built by visiting every (F, S subset of F) pair once: 3^n steps (6,561 for 8 GPUs,
// 43M for 16), in increasing F so that lookahead[F \ S] is final when it is read.
//
// Thread-safety: immutable after Build(); share PlacementTablePtr freely across threads.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "linkfit/alloc/closeness.h"
#include "linkfit/topology/topology.h"

namespace linkfit::alloc {

using topology::GpuMask;

struct SetQuality {
  std::uint32_t ring_mbps = 0;  // 0 for single GPUs and the empty set
  std::uint32_t sum_mbps = 0;
  int numa_span = 0;
  friend bool operator==(const SetQuality&, const SetQuality&) = default;
};

class PlacementTable;
using PlacementTablePtr = std::shared_ptr<const PlacementTable>;

class PlacementTable {
 public:
  // Builds every table for `topology`. Cost: microseconds for 8 GPUs, well under a second for 16.
  static PlacementTablePtr Build(topology::TopologyPtr topology);

  const topology::Topology& topology() const { return *topology_; }
  const topology::TopologyPtr& topology_ptr() const { return topology_; }
  int gpu_count() const { return n_; }

  SetQuality Quality(GpuMask set) const { return SetQuality{ring_[set], sum_[set], span_[set]}; }

  // The best k-set inside `free` over the whole node (no closeness constraint); 0 when fewer than
  // k GPUs are free or k is out of range. REQUIRES: free is within the node's GPUs.
  GpuMask BestOnNode(GpuMask free, int k) const {
    if (k <= 0 || k > n_) return 0;
    return best_[static_cast<std::size_t>(free) * static_cast<std::size_t>(n_) +
                 static_cast<std::size_t>(k - 1)];
  }

  // The best k-set inside `free` that meets `level` (0 if none does), in BestOnNode's order (the
  // look-ahead over all of `free`). For group levels (pcie-switch, numa, socket): the k-subsets
  // of each group's free GPUs (a lookup for a group holding every free GPU).
  GpuMask BestMeeting(GpuMask free, int k, Closeness level) const;

  // Whether a set meets a closeness level.
  bool Meets(GpuMask set, Closeness level) const;

  // The look-ahead value of a remaining free set (higher is better).
  std::uint64_t Lookahead(GpuMask remaining) const { return lookahead_[remaining]; }

  // Approximate memory held by the tables, for the cache-size metrics.
  std::size_t MemoryBytes() const;

 private:
  PlacementTable() = default;
  void BuildSetQualities();
  void BuildBestSets();
  bool Better(GpuMask a, GpuMask b, GpuMask free) const;  // a strictly better than b inside free

  topology::TopologyPtr topology_;
  int n_ = 0;
  std::vector<std::uint32_t> ring_;
  std::vector<std::uint32_t> sum_;
  std::vector<std::uint8_t> span_;
  std::vector<GpuMask> best_;  // [free * n + (k - 1)]
  std::vector<std::uint64_t> lookahead_;
};

// A request for whole GPUs on one node.
struct WholeGpuRequest {
  int gpus = 1;
  Closeness closeness = Closeness::kNode;
  ClosenessPolicy policy = ClosenessPolicy::kPreferred;
  // False: leave WholeGpuPlacement::reason empty (callers that only score the placement).
  bool explain = true;
};

struct WholeGpuPlacement {
  bool fits = false;
  GpuMask gpus = 0;
  SetQuality quality;
  bool closeness_met = false;
  // Why it does not fit (or which preference was missed), in words for FailedNodes and explain.
  std::string reason;
  // True when no change of occupancy could ever make it fit on this node (more GPUs than the node
  // has, or a required level the node's hardware cannot meet): FailedAndUnresolvableNodes.
  bool unresolvable = false;
};

// Chooses the GPUs for `request` among `free` GPUs: exact for the objective above. Costs a few
// table lookups.
WholeGpuPlacement PlaceWholeGpus(const PlacementTable& table, GpuMask free,
                                 const WholeGpuRequest& request);

// Indexes of the GPUs in a mask, ascending.
std::vector<int> MaskToIndexes(GpuMask mask);
GpuMask IndexesToMask(const std::vector<int>& indexes);

}  // namespace linkfit::alloc
