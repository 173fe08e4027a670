#pragma once

// A tighter upper bound on the GPUs a scheduler can allocate in one replay of the FGD protocol
// (openb_workload.h), for every policy that places each arriving pod when some node fits it
// (kube-scheduler's rule: a pod is left pending only when no node passes the filters). Pods never
// leave and are never moved, so a node's free CPU, memory and GPU milli only shrink.
//
// Big shares (one GPU, 500 < milli < 1000) cannot share a GPU with each other, and beside a share
// of b milli only shares of at most 1000 - b fit. The LP of openb_bound.h may refuse them; a
// scheduler may not while a GPU can still take one. The bound has two steps.
//
// 1. Forced shares. For a big-share shape S (milli s, CPU c, memory m, models M) with arrivals at
//    positions p_1 < p_2 < ..., S can fail at p_j only if at that moment every node where M allows
//    and one S fits is closed to S: its free CPU < c, or its free memory < m, or every one of its
//    GPUs has free milli < s. That state is made of pods that arrived before p_j. A relaxation of
//    it ("closing LP", per node kind k with N(k) nodes): r(k) nodes closed by CPU/memory and q(k)
//    closed by their GPUs, r + q <= N; pods x of each shape arrived before p_j (at most their
//    arrivals) put on the r group or the q group, within the groups' CPU, memory and GPU milli;
//    every r node has used CPU >= cap - c + 1 or memory >= mem - m + 1, so the r group's pods
//    satisfy sum(cpu / (cap - c + 1) + memory / (mem - m + 1)) >= r; every GPU of a q node holds
//    at least one pod and at least 1001 - s milli, so the q group's pods bring >= q x GPUs pod
//    GPUs and >= q x GPUs x (1001 - s) milli. If its optimum of sum (r + q) x GPUs is below the
//    GPUs of the nodes S fits, S cannot fail at p_j. The optimum grows with j, so a binary search
//    finds j*, the first j where it does not fall short: every S arriving before p_{j*} is placed
//    (the first failure of S comes at p_{j*} or later). forced(S) = j* - 1 (all arrivals if no j).
//
// 2. The packing LP of openb_bound.h over the whole arrivals, with each GPU of a kind in one of
//    three roles: held by a whole-GPU pod (or one GPU of a multi-GPU pod), holding one big share
//    of b milli and small shares (<= 500 milli) of at most 1000 - b in all, or holding small
//    shares of at most 1000. Variables per kind and shape; small shares are split by the role of
//    their GPU, and beside a big share of b only shapes of at most 1000 - b may be counted. Big
//    shares of shape S placed >= forced(S) (a reward M per forced pod, checked to be reached;
//    then the optimum equals the constrained one). CPU, memory per kind as in openb_bound.h.
//
// 3. (Experimental, off by default: window_splits < 0.) Hypotheses on when the most common
//    exclusive big share first fails, each bounded by one program that also knows that nodes
//    closed by CPU keep their GPUs for low-CPU pods only (openb_window_bound.cc). On openb's
//    arrivals the harness's dense simplex reaches its pivot limit on these programs (~8,000
//    columns, 28 Nov 2026), so the figures come from steps 1 and 2.
//
// Every end state of such a policy maps to a feasible point of step 2 with the forced shares
// placed, so the optimum bounds its allocation. Still relaxed: arrival order beyond the forced
// prefixes, integrality, pooling of a kind's nodes (CPU, memory, GPU roles).
//
// Thread-safety: a pure function.

#include <cstdint>
#include <utility>
#include <vector>

#include "harness/cluster.h"
#include "linkfit/common/result.h"

namespace linkfit::bench {

struct ForcedShape {
  int gpu_milli = 0;
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  int arrivals = 0;
  int forced = 0;  // arrivals that every such policy places (step 1)
};

struct ForcedShareBound {
  double allocated_gpu_milli = 0;      // the bound: the smaller of steps 2 and 3
  double forced_prefix_gpu_milli = 0;  // step 2's optimum
  double window_gpu_milli = 0;         // step 3's largest window (0 when not run)
  double ratio = 0;                    // of the cluster's GPU milli
  std::vector<ForcedShape> forced;
  int closing_programs = 0;                        // step 1's LPs solved
  int theta_first_possible_failure = 0;            // step 3's shape: step 1's forced count
  std::pair<int, int> theta_worst_window{-1, -1};  // the window with the largest bound, if any
  int window_programs = 0;
  int window_fallbacks = 0;  // windows bounded by step 2 (the window program missed a reward)
  int pivots = 0;            // all LPs together
};

struct ForcedBoundOptions {
  // Big-share shapes with fewer arrivals are not forced (forced = 0 keeps the bound valid).
  int min_arrivals_to_force = 1;
  // Step 3: first windows over theta's possible first failures, then splits of the largest; a
  // negative number of splits skips step 3.
  int initial_windows = 8;
  int window_splits = -1;
};

Result<ForcedShareBound> OpenbForcedShareBound(const Cluster& cluster,
                                               const std::vector<PodSpec>& arrivals,
                                               const ForcedBoundOptions& options = {});

}  // namespace linkfit::bench
