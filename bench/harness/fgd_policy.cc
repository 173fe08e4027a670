// FGD (Weng et al., ATC'23): place each pod where the expected fragmentation of the node, for the
// distribution of "typical" pod shapes, grows least.
//
// F(node, m) for a shape m: if m fits on the node (CPU, GPU model, GPUs), the free share of every
// GPU whose free share is below m's per-GPU need; if m does not fit or m is CPU-only, all free GPU
// share of the node. Fragmentation(node) = sum_m p_m F(node, m) over the typical shapes (the most
// frequent (cpu, gpu_milli, num_gpu, model) shapes covering 95 % of the trace, renormalised).

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "harness/policy.h"

namespace linkfit::bench {
namespace {

struct TypicalShape {
  std::int64_t cpu_milli = 0;
  int num_gpu = 0;
  int gpu_milli = 0;
  std::vector<std::string> gpu_models;
  double weight = 0;
};

// The GPU state the fragmentation measure reads: free share per GPU plus the free CPU.
struct GpuState {
  std::array<std::int16_t, kMaxNodeGpus> free{};
  int gpu_count = 0;
  std::int64_t cpu_free = 0;
};

class FgdPolicy : public Policy {
 public:
  FgdPolicy(std::vector<TypicalShape> shapes, bool integer_score)
      : shapes_(std::move(shapes)), integer_score_(integer_score) {}

  std::string name() const override { return "fgd"; }

  NodeChoice Evaluate(const Cluster& cluster, int node, const PodSpec& pod) const override {
    const SimNode& n = cluster.node(node);
    NodeChoice choice;
    if (pod.demand == GpuDemand::kMig) return choice;  // FGD has no notion of MIG
    GpuState before;
    before.free = n.gpu_free_milli;
    for (int g = 0; g < n.gpu_count; ++g) {
      if ((n.mig_gpus >> g) & 1) before.free[Gpu(g)] = 0;  // MIG GPUs take no whole GPU or share
    }
    before.gpu_count = n.gpu_count;
    before.cpu_free = n.cpu_free;
    const double fragmentation_before = Fragmentation(n, before);
    GpuState after = before;
    after.cpu_free -= pod.cpu_milli;

    if (pod.demand != GpuDemand::kShare) {
      const Placement placement = DefaultDeviceChoice(cluster, node, pod);
      if (placement.node < 0) return choice;
      for (int g = 0; g < n.gpu_count; ++g) {
        if ((placement.gpus >> g) & 1) after.free[Gpu(g)] = 0;
      }
      choice.feasible = true;
      choice.score = Score(fragmentation_before - Fragmentation(n, after));
      choice.placement = placement;
      return choice;
    }
    // A share: try each distinct free level (GPUs with equal free share are interchangeable) and
    // keep the one whose fragmentation grows least; k > 1 shared GPUs take the k best in turn.
    Placement placement;
    placement.node = node;
    placement.gpu_milli = pod.gpu_milli;
    for (int taken = 0; taken < pod.gpu_count; ++taken) {
      int best_gpu = -1;
      double best_fragmentation = 0;
      std::int16_t tried[kMaxNodeGpus] = {};
      int tried_count = 0;
      for (int g = 0; g < n.gpu_count; ++g) {
        if ((placement.gpus >> g) & 1) continue;
        if (after.free[Gpu(g)] < pod.gpu_milli || n.mig_slices_used[Gpu(g)] != 0) continue;
        if (std::find(tried, tried + tried_count, after.free[Gpu(g)]) != tried + tried_count) {
          continue;
        }
        tried[tried_count++] = after.free[Gpu(g)];
        GpuState trial = after;
        trial.free[Gpu(g)] = static_cast<std::int16_t>(trial.free[Gpu(g)] - pod.gpu_milli);
        const double fragmentation = -Score(fragmentation_before - Fragmentation(n, trial));
        if (best_gpu < 0 || fragmentation < best_fragmentation) {
          best_gpu = g;
          best_fragmentation = fragmentation;
        }
      }
      if (best_gpu < 0) return choice;
      placement.gpus = static_cast<GpuMask>(placement.gpus | (1u << best_gpu));
      after.free[Gpu(best_gpu)] =
          static_cast<std::int16_t>(after.free[Gpu(best_gpu)] - pod.gpu_milli);
    }
    choice.feasible = true;
    choice.score = Score(fragmentation_before - Fragmentation(n, after));
    choice.placement = placement;
    return choice;
  }

 private:
  // The score of a fragmentation decrease (milli-GPUs; negative = growth): the decrease itself,
  // or, as the paper's simulator reports it to kube-scheduler, floor(100 x sigmoid(GPUs)).
  double Score(double decrease) const {
    if (!integer_score_) return decrease;
    return std::floor(100.0 / (1.0 + std::exp(-decrease / 1000.0)));
  }

  static std::size_t Gpu(int g) { return static_cast<std::size_t>(g); }

  double Fragmentation(const SimNode& node, const GpuState& state) const {
    std::int64_t total_free = 0;
    int idle = 0;
    for (int g = 0; g < state.gpu_count; ++g) {
      total_free += state.free[Gpu(g)];
      if (state.free[Gpu(g)] == kWholeGpuMilli) ++idle;
    }
    double fragmentation = 0;
    for (const TypicalShape& shape : shapes_) {
      bool fits = shape.num_gpu > 0 && state.cpu_free >= shape.cpu_milli &&
                  node.ModelAllowed(shape.gpu_models);
      if (fits) {
        if (shape.gpu_milli >= kWholeGpuMilli) {
          fits = idle >= shape.num_gpu;
        } else {
          fits = false;
          for (int g = 0; g < state.gpu_count && !fits; ++g) {
            fits = state.free[Gpu(g)] >= shape.gpu_milli;
          }
        }
      }
      std::int64_t fragment = 0;
      if (!fits) {
        fragment = total_free;
      } else {
        for (int g = 0; g < state.gpu_count; ++g) {
          if (state.free[Gpu(g)] < shape.gpu_milli) fragment += state.free[Gpu(g)];
        }
      }
      fragmentation += shape.weight * static_cast<double>(fragment);
    }
    return fragmentation;
  }

  std::vector<TypicalShape> shapes_;
  bool integer_score_ = false;
};

}  // namespace

PolicyPtr MakeFgdPolicy(const std::vector<PodSpec>& trace, bool integer_score) {
  using Key = std::tuple<std::int64_t, int, int, std::vector<std::string>>;
  std::map<Key, int> counts;
  for (const PodSpec& pod : trace) {
    ++counts[Key{pod.cpu_milli, pod.gpu_count, pod.gpu_milli, pod.gpu_models}];
  }
  std::vector<std::pair<int, Key>> ordered;
  for (const auto& [key, count] : counts) ordered.emplace_back(count, key);
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<TypicalShape> shapes;
  const double total = static_cast<double>(trace.size());
  double covered = 0;
  for (const auto& [count, key] : ordered) {
    if (covered >= 0.95 * total) break;
    covered += count;
    TypicalShape shape;
    std::tie(shape.cpu_milli, shape.num_gpu, shape.gpu_milli, shape.gpu_models) = key;
    shape.weight = count;
    shapes.push_back(std::move(shape));
  }
  for (TypicalShape& shape : shapes) shape.weight /= covered;
  return std::make_unique<FgdPolicy>(std::move(shapes), integer_score);
}

}  // namespace linkfit::bench
