#pragma once

// An upper bound on the GPUs any policy can allocate in one replay of the FGD protocol
// (openb_workload.h): a linear-programming relaxation over node kinds and pod shapes.
//
//   variables   x[s][k] >= 0: pods of shape s (CPU, memory, GPUs, GPU share, GPU models) placed
//               on nodes of kind k (CPU, memory, GPU count, GPU model), only where one such pod
//               fits one such node (CPU, memory, model, GPU count);
//   maximise    sum of x[s][k] x GPUs(s) x share(s)       (GPU milli allocated)
//   subject to  sum over k of x[s][k] <= arrivals of shape s in the replay;
//               per kind k, with N(k) nodes: the CPU, the memory and the GPU milli of the pods
//               placed there <= N(k) x the node's.
//
// Every placement a policy can reach at the end of a replay (any order, any node choice, pods
// dropped or not) is a feasible integer point of this program, so its optimum bounds the
// allocation from above. It relaxes: the order of arrivals (a policy places online, the bound
// chooses afterwards), integrality (fractions of pods), and packing within nodes and GPUs (a
// kind's nodes are pooled: a pod may use CPU of one node and GPUs of another, a share may span
// GPUs, an 8-GPU pod needs only 8 GPUs of the kind's pool). CPU-only pods allocate no GPU and are
// left out (dropping them never lowers a bound on GPUs).
//
// Thread-safety: a pure function.

#include <vector>

#include "harness/cluster.h"
#include "linkfit/common/result.h"

namespace linkfit::bench {

struct GpuBound {
  double allocated_gpu_milli = 0;  // the program's optimum
  double ratio = 0;                // of the cluster's GPU milli
  int shapes = 0;
  int kinds = 0;
  int pivots = 0;
};

Result<GpuBound> OpenbGpuBound(const Cluster& cluster, const std::vector<PodSpec>& arrivals);

}  // namespace linkfit::bench
