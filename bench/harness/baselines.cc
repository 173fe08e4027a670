#include <algorithm>

#include "harness/policy.h"

namespace linkfit::bench {
namespace {

double Fraction(std::int64_t part, std::int64_t whole) {
  return whole <= 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

// Free GPU milli on the node once `placement` is applied.
std::int64_t FreeGpuMilliAfter(const SimNode& node, const Placement& placement) {
  return node.FreeGpuMilli() - std::int64_t{std::popcount(placement.gpus)} * placement.gpu_milli;
}

NodeChoice Feasible(double score, const Placement& placement) {
  NodeChoice choice;
  choice.feasible = placement.node >= 0;
  choice.score = score;
  choice.placement = placement;
  return choice;
}

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

class DotProdPolicy : public Policy {
 public:
  std::string name() const override { return "dotprod"; }
  NodeChoice Evaluate(const Cluster& cluster, int node, const PodSpec& pod) const override {
    const SimNode& n = cluster.node(node);
    const double cpu =
        Fraction(n.cpu_free, cluster.max_cpu()) * Fraction(pod.cpu_milli, cluster.max_cpu());
    const double memory = Fraction(n.memory_free, cluster.max_memory()) *
                          Fraction(pod.memory_mib, cluster.max_memory());
    const double gpu =
        Fraction(n.FreeGpuMilli(), cluster.max_gpu_milli()) *
        Fraction(std::int64_t{pod.gpu_count} * pod.gpu_milli, cluster.max_gpu_milli());
    return Feasible(1.0 - (cpu + memory + gpu), DefaultDeviceChoice(cluster, node, pod));
  }
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

class PackingPolicy : public Policy {
 public:
  std::string name() const override { return "packing"; }
  NodeChoice Evaluate(const Cluster& cluster, int node, const PodSpec& pod) const override {
    const SimNode& n = cluster.node(node);
    const Placement placement = DefaultDeviceChoice(cluster, node, pod);
    bool only_used_gpus = placement.gpus != 0 || placement.mig_gpu >= 0;
    for (int g = 0; g < n.gpu_count; ++g) {
      const bool chosen = ((placement.gpus >> g) & 1) != 0 || placement.mig_gpu == g;
      const bool used = n.gpu_free_milli[static_cast<std::size_t>(g)] < kWholeGpuMilli ||
                        n.mig_slices_used[static_cast<std::size_t>(g)] != 0;
      if (chosen && !used) only_used_gpus = false;
    }
    const bool node_idle = n.FreeGpuMilli() == std::int64_t{n.gpu_count} * kWholeGpuMilli &&
                           n.IdleGpuCount() == n.gpu_count;
    int band = 0;
    if (only_used_gpus) {
      band = 2;
    } else if (!node_idle) {
      band = 1;
    }
    const double free_gpus = static_cast<double>(FreeGpuMilliAfter(n, placement)) / 1000.0;
    return Feasible(band * 1000.0 - free_gpus, placement);
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

const std::vector<std::string>& BaselineNames() {
  static const std::vector<std::string> names = {
      "default-scheduler", "random", "dotprod", "clustering", "packing", "bestfit", "fgd"};
  return names;
}

Result<PolicyPtr> MakeBaseline(const std::string& name, const std::vector<PodSpec>& trace,
                               bool integer_scores) {
  if (name == "default-scheduler") return PolicyPtr(std::make_unique<DefaultSchedulerPolicy>());
  if (name == "random") return PolicyPtr(std::make_unique<RandomPolicy>());
  if (name == "dotprod") return PolicyPtr(std::make_unique<DotProdPolicy>());
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
