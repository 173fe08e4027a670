#include "harness/openb_workload.h"

#include <algorithm>
#include <random>

namespace linkfit::bench {

std::vector<PodSpec> ToPodSpecs(const std::vector<PodRecord>& records) {
  std::vector<PodSpec> pods;
  pods.reserve(records.size());
  for (const PodRecord& record : records) {
    PodSpec pod;
    pod.name = record.name;
    pod.uid = record.name;
    pod.cpu_milli = record.cpu_milli;
    pod.memory_mib = record.memory_mib;
    pod.gpu_models = record.gpu_models;
    if (record.num_gpu > 0) {
      pod.demand = record.gpu_milli >= kWholeGpuMilli ? GpuDemand::kWhole : GpuDemand::kShare;
      pod.gpu_count = record.num_gpu;
      pod.gpu_milli = record.gpu_milli;
    }
    pods.push_back(std::move(pod));
  }
  AssignShapes(pods);
  return pods;
}

Cluster BuildOpenbCluster(const std::vector<NodeRecord>& nodes) {
  Cluster cluster;
  for (const NodeRecord& record : nodes) {
    if (record.gpu_count <= 0) continue;
    SimNode node;
    node.name = record.name;
    node.gpu_model = record.gpu_model;
    node.cpu_capacity = record.cpu_milli;
    node.memory_capacity = record.memory_mib;
    node.gpu_count = record.gpu_count;
    cluster.AddNode(std::move(node));
  }
  return cluster;
}

std::vector<PodSpec> FgdArrivals(const std::vector<PodSpec>& trace, std::uint64_t seed,
                                 double capacity_gpus, double demand_limit) {
  std::vector<PodSpec> pods = trace;
  std::sort(pods.begin(), pods.end(),
            [](const PodSpec& a, const PodSpec& b) { return a.name < b.name; });
  std::mt19937_64 rng(seed);
  std::shuffle(pods.begin(), pods.end(), rng);
  double requested = 0;
  for (const PodSpec& pod : pods) requested += pod.RequestedGpus();
  const double target = demand_limit * capacity_gpus;
  if (!trace.empty()) {
    std::uniform_int_distribution<std::size_t> draw(0, trace.size() - 1);
    std::size_t copy = 0;
    while (requested < target) {
      PodSpec pod = trace[draw(rng)];
      ++copy;
      pod.name.append("-").append(std::to_string(copy));
      pod.uid = pod.name;
      requested += pod.RequestedGpus();
      pods.push_back(std::move(pod));
    }
  }
  return pods;
}

}  // namespace linkfit::bench
