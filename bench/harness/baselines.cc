#include <algorithm>
#include <cmath>

#include "harness/policy.h"

namespace linkfit::bench {
namespace {

// Free GPU milli on the node once `placement` is applied.
std::int64_t FreeGpuMilliAfter(const SimNode& node, const Placement& placement) {
  return node.FreeGpuMilli() - std::int64_t{std::popcount(placement.gpus)} * placement.gpu_milli;
}

// The fixed maximum node spec the paper's simulator normalises by (128 cores, 8 GPUs).
constexpr double kMaxSpecCpuMilli = 128000.0;
constexpr double kMaxSpecGpuMilli = 8000.0;

class DefaultSchedulerPolicy : public Policy {
 public:
  std::string name() const override { return "default-scheduler"; }
  NodeChoice Evaluate(const Cluster& cluster, int node, const PodSpec& pod) const override {
    return Feasible(LeastAllocatedScore(cluster.node(node), pod),
                    DefaultDeviceChoice(cluster, node, pod));
  }
};

class RandomPolicy : public Policy {
 public:
  std::string name() const override { return "random"; }
  NodeChoice Evaluate(const Cluster& cluster, int node, const PodSpec& pod) const override {
    return Feasible(0.0, DefaultDeviceChoice(cluster, node, pod));
  }
};

// The FGD paper simulator's DotProductScore as the paper runs it (GPU dimensions merged, normalised
// by the fixed maximum node spec): two dimensions only, CPU and GPU (memory is not scored). Free
// vector (CPU free / 128 cores, GPU milli free on the node / 8 GPUs), request vector (CPU / 128
// cores, total GPU milli / 8 GPUs); score = 1 - dot / 2 (the dimension count), in [0, 1]. The
// simulator hands kube-scheduler int(100 x score) with no normalisation, so nodes within one
// hundredth tie (`integer_scores`). Devices: the simulator's "best" GPU selection (a share on the
// GPU with the least free share that fits, whole GPUs lowest index first), i.e. the default choice.
class DotProdPolicy : public Policy {
 public:
  explicit DotProdPolicy(bool integer_scores) : integer_scores_(integer_scores) {}
  std::string name() const override { return "dotprod"; }
  NodeChoice Evaluate(const Cluster& cluster, int node, const PodSpec& pod) const override {
    const SimNode& n = cluster.node(node);
    const double free_cpu = static_cast<double>(n.cpu_free) / kMaxSpecCpuMilli;
    const double free_gpu = static_cast<double>(n.FreeGpuMilli()) / kMaxSpecGpuMilli;
    const double request_cpu = static_cast<double>(pod.cpu_milli) / kMaxSpecCpuMilli;
    const double request_gpu =
        static_cast<double>(std::int64_t{pod.gpu_count} * pod.gpu_milli) / kMaxSpecGpuMilli;
    const double dot = free_cpu * request_cpu + free_gpu * request_gpu;
    double score = 1.0 - dot / 2.0;
    if (integer_scores_) score = std::trunc(100.0 * score);
    return Feasible(score, DefaultDeviceChoice(cluster, node, pod));
  }

 private:
  bool integer_scores_ = false;
};

class ClusteringPolicy : public Policy {
 public:
  std::string name() const override { return "clustering"; }
  NodeChoice Evaluate(const Cluster& cluster, int node, const PodSpec& pod) const override {
    const SimNode& n = cluster.node(node);
    const Placement placement = DefaultDeviceChoice(cluster, node, pod);
    const int pod_class = PodClass(pod);
    if (pod_class < 0) return Feasible(0.0, placement);
    int other_classes = 0;
    for (std::size_t c = 0; c < n.class_pods.size(); ++c) {
      if (static_cast<int>(c) != pod_class && n.class_pods[c] > 0) ++other_classes;
    }
    const bool has_same = n.class_pods[static_cast<std::size_t>(pod_class)] > 0;
    int band = 0;  // only other classes
    if (has_same && other_classes == 0) {
      band = 3;
    } else if (has_same) {
      band = 2;
    } else if (other_classes == 0) {
      band = 1;  // no GPU pod yet
    }
    const double free_gpus = static_cast<double>(FreeGpuMilliAfter(n, placement)) / 1000.0;
    return Feasible(band * 1000.0 - free_gpus, placement);
  }
};

// The FGD paper simulator's GpuPackingScore. Integer scores on kube-scheduler's 0-100 scale, not
// normalised, in three bands from best to worst:
//   1. the pod fits on GPUs already in use: 100 - (sum over the GPUs it takes of their free share
//      in percent) / 10, integer division, at least 50;
//   2. the node is in use but the pod must open idle GPUs: 50 - the idle GPUs it opens, at least
//      33;
//   3. every GPU of the node is idle: max(33 - GPUs on the node, GPUs on the node).
// The GPUs it takes are the ones the default choice takes (best fit for a share, idle GPUs for
// whole ones). CPU-only pods score 0 everywhere (so in paper mode they go to the first feasible
// node of the seeded order). A MIG instance counts its GPU as in use when the GPU already holds
// one (the simulator has no MIG; band 1 then scores 100).
class PackingPolicy : public Policy {
 public:
  std::string name() const override { return "packing"; }
  NodeChoice Evaluate(const Cluster& cluster, int node, const PodSpec& pod) const override {
    const SimNode& n = cluster.node(node);
    const Placement placement = DefaultDeviceChoice(cluster, node, pod);
    if (pod.demand == GpuDemand::kNone) return Feasible(0.0, placement);
    constexpr std::int64_t kMax = 100;  // framework.MaxNodeScore
    const std::int64_t gpus = n.gpu_count;
    const std::int64_t idle = n.IdleGpuCount();
    if (idle == gpus) {
      return Feasible(static_cast<double>(std::max(kMax / 3 - gpus, gpus)), placement);
    }
    std::int64_t idle_taken = 0;
    std::int64_t free_percent_taken = 0;
    for (int g = 0; g < n.gpu_count; ++g) {
      const auto index = static_cast<std::size_t>(g);
      if (((placement.gpus >> g) & 1) == 0 && placement.mig_gpu != g) continue;
      if (n.gpu_free_milli[index] == kWholeGpuMilli && n.mig_slices_used[index] == 0) {
        ++idle_taken;
      } else if (placement.mig_gpu != g) {
        free_percent_taken += std::int64_t{n.gpu_free_milli[index]} * 100 / kWholeGpuMilli;
      }
    }
    if (idle_taken > 0) {
      return Feasible(static_cast<double>(std::max(kMax / 2 - idle_taken, kMax / 3)), placement);
    }
    return Feasible(static_cast<double>(std::max(kMax - free_percent_taken / 10, kMax / 2)),
                    placement);
  }
};

class BestFitPolicy : public Policy {
 public:
  std::string name() const override { return "bestfit"; }
  NodeChoice Evaluate(const Cluster& cluster, int node, const PodSpec& pod) const override {
    const SimNode& n = cluster.node(node);
    const Placement placement = DefaultDeviceChoice(cluster, node, pod);
    const double free_cpu = static_cast<double>(n.cpu_free - pod.cpu_milli) / 128000.0;
    const double free_gpu = static_cast<double>(FreeGpuMilliAfter(n, placement)) / 8000.0;
    return Feasible(-(0.5 * free_cpu + 0.5 * free_gpu), placement);
  }
};

}  // namespace

NodeChoice Feasible(double score, const Placement& placement) {
  NodeChoice choice;
  choice.feasible = placement.node >= 0;
  choice.score = score;
  choice.placement = placement;
  return choice;
}

const std::vector<std::string>& BaselineNames() {
  static const std::vector<std::string> names = {
      "default-scheduler", "random", "dotprod", "clustering", "packing", "bestfit", "fgd"};
  return names;
}

Result<PolicyPtr> MakeBaseline(const std::string& name, const std::vector<PodSpec>& trace,
                               bool integer_scores) {
  if (name == "default-scheduler") return PolicyPtr(std::make_unique<DefaultSchedulerPolicy>());
  if (name == "random") return PolicyPtr(std::make_unique<RandomPolicy>());
  if (name == "dotprod") return PolicyPtr(std::make_unique<DotProdPolicy>(integer_scores));
  if (name == "clustering") return PolicyPtr(std::make_unique<ClusteringPolicy>());
  if (name == "packing") return PolicyPtr(std::make_unique<PackingPolicy>());
  if (name == "bestfit") return PolicyPtr(std::make_unique<BestFitPolicy>());
  if (name == "fgd") return MakeFgdPolicy(trace, integer_scores);
  return MakeError("unknown policy '" + name + "' (expected linkfit or one of: " +
                   "default-scheduler, random, dotprod, clustering, packing, bestfit, fgd)");
}

Placement DefaultDeviceChoice(const Cluster& cluster, int node, const PodSpec& pod) {
  switch (pod.demand) {
    case GpuDemand::kNone: {
      Placement placement;
      placement.node = node;
      return placement;
    }
    case GpuDemand::kWhole:
      return cluster.DevicePluginGpus(node, pod);
    case GpuDemand::kShare:
      return cluster.BestFitShares(node, pod);
    case GpuDemand::kMig:
      return cluster.BestFitMig(node, pod);
  }
  return {};
}

namespace {

// One resource's score as kube-scheduler computes it (integer arithmetic, 0-100).
std::int64_t ResourceScore(std::int64_t requested, std::int64_t capacity, bool least) {
  if (capacity <= 0 || requested > capacity) return 0;
  return least ? (capacity - requested) * 100 / capacity : requested * 100 / capacity;
}

double AllocationScore(const SimNode& node, const PodSpec& pod, bool least) {
  const std::int64_t cpu_requested = node.cpu_capacity - node.cpu_free + pod.cpu_milli;
  const std::int64_t memory_requested = node.memory_capacity - node.memory_free + pod.memory_mib;
  return static_cast<double>((ResourceScore(cpu_requested, node.cpu_capacity, least) +
                              ResourceScore(memory_requested, node.memory_capacity, least)) /
                             2);
}

}  // namespace

// Mirrors NodeResourcesFit's leastResourceScorer with the default weights (cpu 1, memory 1).
double LeastAllocatedScore(const SimNode& node, const PodSpec& pod) {
  return AllocationScore(node, pod, true);
}

double MostAllocatedScore(const SimNode& node, const PodSpec& pod) {
  return AllocationScore(node, pod, false);
}

}  // namespace linkfit::bench
