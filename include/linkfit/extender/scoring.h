#pragma once

// Prioritize scores. For each node where the pod fits, three terms in [0, 1]:
//
//   T  topology: whole-GPU pods of 2+ GPUs: 0.8 * ring / best ring + 0.2 * sum / best sum, the
//      best taken over the candidate nodes, so the node with the fastest set gets 1. Other pods: 1.
//   P  packing, in bands (the Packing baseline of the FGD paper, made continuous):
//      (band + tightness) / 3 with band 2 when a share lands only on GPUs already shared, 1 when
//      the node is already partly used, 0 when the pod opens an idle node; tightness = 1 - the
//      whole-GPU equivalents left free on the node afterwards / 8 (clamped). Partly used nodes
//      fill up first (best fit) and idle nodes stay whole for large pods.
//   F  fragmentation: sigmoid(-growth), growth = the rise of the node's FGD-style fragmentation
//      (Weng et al., ATC'23) in whole GPUs under the request shapes linkfit has seen (ShapeStats):
//      for each shape, the free GPU capacity that can no longer serve it, weighted by how often
//      the shape occurs. 0.5 = no change; the same absolute scale for every request and node
//      (no min-max over candidates, which blew tiny differences up to the whole range).
//      Whole GPUs average it with the topology look-ahead kept: 1 - (best rings still available
//      in the free set, lost by this choice) / (those rings on the idle node).
//
//   score = round(score_range * (wt*T + wp*P + wf*F) / (wt + wp + wf))
//
// What linkfit cannot see: CPU and memory (kube-scheduler's in-tree plugins own them). On the
// openb trace that matters (GPUs stranded on nodes whose CPU is gone), so the scheduler profile
// decides how it is handled; bench/RESULTS.md measures the options.
//
// The weights and score_range come from the config (policy.weights, policy.score_range);
// kube-scheduler multiplies the score by the extender's weight x 10 and does not clamp it, so a
// score_range of 100 gives ten times the resolution of the nominal 0-10.
//
// Thread-safety: ShapeStats is safe to update and read concurrently (relaxed atomics; a score
// may see a slightly stale distribution). ScoreNodes is a pure function.

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "linkfit/extender/gpu_request.h"
#include "linkfit/extender/node_fit.h"
#include "linkfit/state/node_state.h"

namespace linkfit::extender {

struct ScoreWeights {
  double topology = 1.0;
  double packing = 1.0;
  double fragmentation = 1.0;
};

// A request shape for fragmentation: `gpus` whole GPUs (milli == 1000) or one GPU share of
// `milli` thousandths.
struct Shape {
  int gpus = 1;
  int milli = 1000;
  double weight = 0;  // share of requests with this shape
};

class ShapeStats {
 public:
  ShapeStats();
  // Counts one request (pods seen by filter; retries count again, which is harmless).
  void Record(const GpuRequest& request);
  // The most frequent shapes covering 95% of requests, weights summing to 1. Before any request
  // is seen: whole 1, 2, 4 and 8 GPUs and half a GPU, equally weighted.
  std::vector<Shape> Typical() const;

 private:
  static constexpr int kShareBins = 20;  // 50-milli buckets
  std::array<std::atomic<std::uint64_t>, topology::kMaxGpus + 1> whole_{};
  std::array<std::atomic<std::uint64_t>, kShareBins + 1> share_{};
};

// FGD fragmentation of a node for the given shapes, in thousandths of a GPU.
double Fragmentation(const state::NodeState& node, const std::vector<Shape>& shapes);

struct Candidate {
  const state::NodeState* node = nullptr;
  NodeFit fit;  // fits == true
};

// The score of a node for a pod that asks for no GPU: score_range x (1 - free whole-GPU
// equivalents / 8, clamped), so CPU-only pods fill nodes whose GPUs are already in use and leave
// the CPU of nodes with free GPUs to GPU pods.
std::int64_t CpuOnlyScore(const state::NodeState& node, int score_range);

// Scores every candidate; returns integers in [0, score_range], in candidate order.
std::vector<std::int64_t> ScoreNodes(const GpuRequest& request,
                                     const std::vector<Candidate>& candidates,
                                     const std::vector<Shape>& shapes, const ScoreWeights& weights,
                                     int score_range);

}  // namespace linkfit::extender
