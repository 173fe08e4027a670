#include "harness/openb_bound.h"

#include <map>
#include <string>
#include <tuple>

#include "harness/lp.h"

namespace linkfit::bench {

Result<GpuBound> OpenbGpuBound(const Cluster& cluster, const std::vector<PodSpec>& arrivals) {
  using ShapeKey = std::tuple<std::int64_t, std::int64_t, int, int, std::vector<std::string>>;
  std::map<ShapeKey, std::pair<const PodSpec*, int>> shapes;
  for (const PodSpec& pod : arrivals) {
    if (pod.demand == GpuDemand::kNone) continue;
    if (pod.demand == GpuDemand::kMig) return MakeError("bound: MIG pods are not modelled");
    auto [it, added] = shapes.try_emplace(
        ShapeKey{pod.cpu_milli, pod.memory_mib, pod.gpu_count, pod.gpu_milli, pod.gpu_models}, &pod,
        0);
    ++it->second.second;
  }
  using KindKey = std::tuple<std::int64_t, std::int64_t, int, std::string>;
  std::map<KindKey, std::pair<const SimNode*, int>> kinds;
  for (const SimNode& node : cluster.nodes()) {
    if (node.mig_mode || node.mig_gpus != 0) return MakeError("bound: MIG nodes are not modelled");
    auto [it, added] = kinds.try_emplace(
        KindKey{node.cpu_capacity, node.memory_capacity, node.gpu_count, node.gpu_model}, &node, 0);
    ++it->second.second;
  }
  // Columns: the (shape, kind) pairs where one pod fits one node.
  struct Column {
    std::size_t shape;
    std::size_t kind;
  };
  std::vector<Column> columns;
  std::vector<std::pair<const PodSpec*, int>> shape_list;
  std::vector<std::pair<const SimNode*, int>> kind_list;
  for (const auto& [key, value] : shapes) shape_list.push_back(value);
  for (const auto& [key, value] : kinds) kind_list.push_back(value);
  for (std::size_t s = 0; s < shape_list.size(); ++s) {
    const PodSpec& pod = *shape_list[s].first;
    for (std::size_t k = 0; k < kind_list.size(); ++k) {
      const SimNode& node = *kind_list[k].first;
      if (pod.cpu_milli <= node.cpu_capacity && pod.memory_mib <= node.memory_capacity &&
          pod.gpu_count <= node.gpu_count && node.ModelAllowed(pod.gpu_models)) {
        columns.push_back({s, k});
      }
    }
  }
  if (columns.empty()) return GpuBound{};
  LinearProgram program;
  program.columns = static_cast<int>(columns.size());
  const std::size_t n = columns.size();
  for (const Column& column : columns) {
    const PodSpec& pod = *shape_list[column.shape].first;
    program.objective.push_back(static_cast<double>(pod.gpu_count) * pod.gpu_milli);
  }
  for (std::size_t s = 0; s < shape_list.size(); ++s) {
    std::vector<double> row(n, 0.0);
    for (std::size_t c = 0; c < n; ++c) row[c] = columns[c].shape == s ? 1.0 : 0.0;
    program.rows.push_back(std::move(row));
    program.bounds.push_back(shape_list[s].second);
  }
  for (std::size_t k = 0; k < kind_list.size(); ++k) {
    const SimNode& node = *kind_list[k].first;
    const double count = kind_list[k].second;
    std::vector<double> cpu(n, 0.0);
    std::vector<double> memory(n, 0.0);
    std::vector<double> gpu(n, 0.0);
    for (std::size_t c = 0; c < n; ++c) {
      if (columns[c].kind != k) continue;
      const PodSpec& pod = *shape_list[columns[c].shape].first;
      cpu[c] = static_cast<double>(pod.cpu_milli);
      memory[c] = static_cast<double>(pod.memory_mib);
      gpu[c] = static_cast<double>(pod.gpu_count) * pod.gpu_milli;
    }
    program.rows.push_back(std::move(cpu));
    program.bounds.push_back(count * static_cast<double>(node.cpu_capacity));
    program.rows.push_back(std::move(memory));
    program.bounds.push_back(count * static_cast<double>(node.memory_capacity));
    program.rows.push_back(std::move(gpu));
    program.bounds.push_back(count * node.gpu_count * static_cast<double>(kWholeGpuMilli));
  }
  auto solved = Maximise(program);
  if (!solved) return tl::unexpected(solved.error());
  GpuBound bound;
  bound.allocated_gpu_milli = solved->value;
  bound.ratio = solved->value / static_cast<double>(cluster.total_gpu_milli());
  bound.shapes = static_cast<int>(shape_list.size());
  bound.kinds = static_cast<int>(kind_list.size());
  bound.pivots = solved->pivots;
  return bound;
}

}  // namespace linkfit::bench
