#pragma once

// Policies that score one node for one pod, the way a kube-scheduler Score plugin does, and say
// which devices the pod would get there. The baselines of ../shared/baselines/README.md:
//
//   default-scheduler  NodeResourcesFit LeastAllocated (mean of free CPU and memory after the
//                      pod, x100); devices chosen afterwards by NVIDIA's go-gpuallocator.
//   random             every feasible node scores the same; the seeded tie-break picks one.
//   dotprod            1 - <free, request> / 2 over CPU and GPU (merged), each normalised by the
//                      maximum node spec (128 cores, 8 GPUs); memory is not scored.
//   clustering         bands by the pod classes already on the node, then less free GPU.
//   packing            partially used GPUs, then partially used nodes, then idle nodes, on the
//                      simulator's integer 0-100 scale; CPU-only pods score 0 everywhere.
//   bestfit            minimises 0.5 x free CPU / 128 cores + 0.5 x free GPUs / 8 after the pod.
//   fgd                minimises the growth of the node's fragmentation for the typical pods.
//
// Whole GPUs are chosen as the device plugin would (go-gpuallocator when the node has a topology);
// shares go to the best-fitting GPU, except where a policy says otherwise (fgd).
//
// Thread-safety: Evaluate is const and keeps no state; a Policy may be shared by one simulation.

#include <memory>
#include <string>
#include <vector>

#include "harness/cluster.h"
#include "linkfit/common/result.h"

namespace linkfit::bench {

struct NodeChoice {
  bool feasible = false;
  double score = 0;  // higher is better
  Placement placement;
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string name() const = 0;
  // REQUIRES: cluster.InTreeFits(node, pod).
  virtual NodeChoice Evaluate(const Cluster& cluster, int node, const PodSpec& pod) const = 0;
};

using PolicyPtr = std::unique_ptr<Policy>;

// The baseline names in report order.
const std::vector<std::string>& BaselineNames();

// Builds a baseline by name. `trace` is the workload's distinct pod list (fgd derives its typical
// pod shapes from it).
// `integer_scores`: report scores as the FGD paper's simulator does (fgd: floor(100 x
// sigmoid(fragmentation decrease in GPUs)); dotprod: int(100 x score)), which merges near-equal
// nodes into ties. (packing's scores are integers in both modes.)
Result<PolicyPtr> MakeBaseline(const std::string& name, const std::vector<PodSpec>& trace,
                               bool integer_scores = false);

// The devices a baseline gives a pod on a node (device plugin for whole GPUs, best fit otherwise).
Placement DefaultDeviceChoice(const Cluster& cluster, int node, const PodSpec& pod);

// A node's answer: feasible when the placement names a node, with `score`.
NodeChoice Feasible(double score, const Placement& placement);

// kube-scheduler's LeastAllocated score of the node after adding the pod, 0-100.
double LeastAllocatedScore(const SimNode& node, const PodSpec& pod);
// kube-scheduler's MostAllocated score of the node after adding the pod, 0-100.
double MostAllocatedScore(const SimNode& node, const PodSpec& pod);

PolicyPtr MakeFgdPolicy(const std::vector<PodSpec>& trace, bool integer_score = false);

}  // namespace linkfit::bench
