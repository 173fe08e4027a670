#include "harness/openb_bound_model.h"

#include <map>
#include <string>
#include <tuple>

namespace linkfit::bench::openb_bound {

LinearProgram SparseProgram::Dense() const {
  LinearProgram program;
  program.columns = static_cast<int>(objective.size());
  program.objective = objective;
  program.bounds = bounds;
  for (const auto& sparse : rows) {
    std::vector<double> row(objective.size(), 0.0);
    for (const auto& [column, value] : sparse) row[static_cast<std::size_t>(column)] += value;
    program.rows.push_back(std::move(row));
  }
  return program;
}

Result<Model> BuildModel(const Cluster& cluster, const std::vector<PodSpec>& arrivals) {
  Model model;
  using ShapeKey = std::tuple<std::int64_t, std::int64_t, int, int, std::vector<std::string>>;
  std::map<ShapeKey, int> shapes;
  for (const PodSpec& pod : arrivals) {
    if (pod.demand == GpuDemand::kMig) return MakeError("bound: MIG pods are not modelled");
    const int gpus = pod.demand == GpuDemand::kNone ? 0 : pod.gpu_count;
    const int milli = pod.demand == GpuDemand::kNone ? 0 : pod.gpu_milli;
    auto [it, added] =
        shapes.try_emplace(ShapeKey{pod.cpu_milli, pod.memory_mib, gpus, milli, pod.gpu_models},
                           static_cast<int>(model.shapes.size()));
    if (added) model.shapes.push_back({&pod, 0});
    ++model.shapes[static_cast<std::size_t>(it->second)].arrivals;
    model.shape_of.push_back(it->second);
  }
  using KindKey = std::tuple<std::int64_t, std::int64_t, int, std::string>;
  std::map<KindKey, int> kinds;
  for (const SimNode& node : cluster.nodes()) {
    if (node.mig_mode || node.mig_gpus != 0) return MakeError("bound: MIG nodes are not modelled");
    auto [it, added] = kinds.try_emplace(
        KindKey{node.cpu_capacity, node.memory_capacity, node.gpu_count, node.gpu_model},
        static_cast<int>(model.kinds.size()));
    if (added) model.kinds.push_back({&node, 0});
    ++model.kinds[static_cast<std::size_t>(it->second)].count;
  }
  return model;
}

std::vector<std::size_t> ArrivalPositions(const Model& model, std::size_t shape) {
  std::vector<std::size_t> positions;
  for (std::size_t i = 0; i < model.shape_of.size(); ++i) {
    if (static_cast<std::size_t>(model.shape_of[i]) == shape) positions.push_back(i);
  }
  return positions;
}

}  // namespace linkfit::bench::openb_bound
