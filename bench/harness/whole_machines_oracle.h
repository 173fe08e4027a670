#pragma once

// The oracle of `linkfit-bench whole-machines`: whether a set of pods can all be placed on a
// cluster in its current state, whatever the order, and how many of a case's big pods can be
// placed together with all of its small pods. Exact (an exhaustive search where choices matter,
// a counting rule proved exact where they do not), for the pods the experiment draws:
//
//   - whole-GPU pods of k GPUs, with or without a required `nvlink` closeness (the set's best
//     ring all NVLink, as linkfit's kNvlink and NodeTopology::RingAllNvlink define it); a
//     preferred closeness is no constraint; no GPU model restriction;
//   - pods of one MIG instance (profile by name, on a GPU in MIG mode: a legal start whose
//     memory slices are free, and compute slices left);
//   - CPU and memory that cannot bind: CheckResourcesCannotBind proves it for the case (every
//     node has room for the most CPU and memory its free GPUs can bring), else the oracle fails.
//
// Method. Whole GPUs and MIG instances use disjoint GPUs (a GPU in MIG mode takes no whole pod)
// and CPU and memory never bind, so the two parts are decided apart:
//   whole part: an exhaustive search places every pod of 3 or more GPUs or with a required
//     closeness (largest first) on every node and every GPU set meeting its constraint (on a
//     node where every GPU pair is NVLink, only the lowest free GPUs: all sets of a size are
//     alike there), with failed states memoised; at each leaf the remaining unconstrained pods
//     of 1 and 2 GPUs fit iff  P2 <= sum over nodes of floor(free / 2)  and
//     2 P2 + P1 <= sum of free  (necessary: a 2-GPU pod needs two free GPUs of one node;
//     sufficient: put the 2-GPU pods on free pairs, then the 1-GPU pods on any GPU left).
//   MIG part: an exhaustive search places every instance (largest first) on every MIG GPU and
//     legal start, GPUs in equal states tried once, failed states memoised.
//
// Thread-safety: pure functions (the cluster's topologies memoise rings: one thread at a time).

#include <vector>

#include "harness/cluster.h"
#include "linkfit/common/result.h"

namespace linkfit::bench {

// OK when no node can run out of CPU or memory before its GPUs, whichever of `pods` it takes:
// for every node, free CPU (memory) >= free whole GPUs x the most any whole-GPU pod brings per
// GPU + free MIG compute slices x the most any MIG pod brings (each instance takes >= 1 slice).
// Else an error naming the node.
Result<void> CheckResourcesCannotBind(const Cluster& cluster, const std::vector<PodSpec>& pods);

// Whether every pod of `pods` can be placed on `cluster` as it is now. Errors for pods outside
// the oracle's scope (shares, CPU-only pods, GPU model restrictions, closeness other than
// `nvlink` required) and when CheckResourcesCannotBind fails.
Result<bool> CanPlaceAll(const Cluster& cluster, const std::vector<PodSpec>& pods);

// The most pods of `big` that can be placed together with every pod of `small` (all subsets
// tried; -1 when even `small` alone cannot all be placed).
Result<int> MostBigPodsPlaceable(const Cluster& cluster, const std::vector<PodSpec>& small,
                                 const std::vector<PodSpec>& big);

}  // namespace linkfit::bench
