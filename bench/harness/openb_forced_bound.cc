#include "harness/openb_forced_bound.h"

#include <array>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "harness/lp.h"

namespace linkfit::bench {
namespace {

// Units inside the programs, to keep their coefficients near 1.
constexpr double kCore = 1000.0;  // CPU milli
constexpr double kGib = 1024.0;   // memory MiB
constexpr double kGpu = 1000.0;   // GPU milli
constexpr int kHalfGpuMilli = 500;

struct Kind {
  const SimNode* node = nullptr;
  int count = 0;
  double Gpus() const { return static_cast<double>(count) * node->gpu_count; }
};

struct Shape {
  const PodSpec* pod = nullptr;
  int arrivals = 0;
  bool HasGpu() const { return pod->demand != GpuDemand::kNone && pod->gpu_count > 0; }
  bool Big() const { return pod->demand == GpuDemand::kShare && pod->gpu_milli > kHalfGpuMilli; }
  bool Small() const { return pod->demand == GpuDemand::kShare && pod->gpu_milli <= kHalfGpuMilli; }
  double Gpus() const { return pod->gpu_count * static_cast<double>(pod->gpu_milli) / kGpu; }
  double Cores() const { return static_cast<double>(pod->cpu_milli) / kCore; }
  double Gib() const { return static_cast<double>(pod->memory_mib) / kGib; }
};

struct Model {
  std::vector<Kind> kinds;
  std::vector<Shape> shapes;
  std::vector<int> shape_of;  // per arrival
};

bool Fits(const PodSpec& pod, const SimNode& node) {
  return pod.cpu_milli <= node.cpu_capacity && pod.memory_mib <= node.memory_capacity &&
         pod.gpu_count <= node.gpu_count && node.ModelAllowed(pod.gpu_models);
}

// A program built column by column and row by row, made dense for Maximise at the end.
struct SparseProgram {
  std::vector<double> objective;
  std::vector<std::vector<std::pair<int, double>>> rows;
  std::vector<double> bounds;

  int Column(double value) {
    objective.push_back(value);
    return static_cast<int>(objective.size()) - 1;
  }
  int Row(double bound) {
    rows.emplace_back();
    bounds.push_back(bound);
    return static_cast<int>(rows.size()) - 1;
  }
  void Set(int row, int column, double value) {
    if (value != 0) rows[static_cast<std::size_t>(row)].emplace_back(column, value);
  }
  LinearProgram Dense() const {
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
};

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

// Step 1's closing LP (openb_forced_bound.h): the most GPUs of the nodes where `theta` fits that
// pods of the given counts per shape can leave closed to it. Sets *open_gpus to those nodes' GPUs.
Result<LpSolution> ClosingProgram(const Model& model, const std::vector<int>& counts,
                                  const PodSpec& theta, double* open_gpus) {
  SparseProgram program;
  std::vector<int> shape_row(model.shapes.size(), -1);
  for (std::size_t s = 0; s < model.shapes.size(); ++s) {
    if (counts[s] > 0) shape_row[s] = program.Row(counts[s]);
  }
  *open_gpus = 0;
  const double need_milli = (kWholeGpuMilli + 1 - theta.gpu_milli) / kGpu;
  for (const Kind& kind : model.kinds) {
    const SimNode& node = *kind.node;
    if (!Fits(theta, node)) continue;
    *open_gpus += kind.Gpus();
    const double cap_cores = static_cast<double>(node.cpu_capacity) / kCore;
    const double cap_gib = static_cast<double>(node.memory_capacity) / kGib;
    const double close_cores = static_cast<double>(node.cpu_capacity - theta.cpu_milli + 1) / kCore;
    const double close_gib =
        static_cast<double>(node.memory_capacity - theta.memory_mib + 1) / kGib;
    const int r = program.Column(node.gpu_count);
    const int q = program.Column(node.gpu_count);
    const int nodes_row = program.Row(kind.count);
    program.Set(nodes_row, r, 1);
    program.Set(nodes_row, q, 1);
    // Per group: CPU, memory, GPU milli within the group's nodes.
    std::array<int, 3> r_rows{program.Row(0), program.Row(0), program.Row(0)};
    std::array<int, 3> q_rows{program.Row(0), program.Row(0), program.Row(0)};
    const std::array<double, 3> caps{cap_cores, cap_gib, static_cast<double>(node.gpu_count)};
    for (std::size_t i = 0; i < 3; ++i) {
      program.Set(r_rows[i], r, -caps[i]);
      program.Set(q_rows[i], q, -caps[i]);
    }
    const int r_closed = program.Row(0);  // r <= sum of cpu/close_cores + memory/close_gib
    program.Set(r_closed, r, 1);
    const int q_pods = program.Row(0);  // q x GPUs <= GPUs the pods hold
    program.Set(q_pods, q, node.gpu_count);
    const int q_milli = program.Row(0);  // q x GPUs x (1001 - s) <= GPU milli the pods hold
    program.Set(q_milli, q, node.gpu_count * need_milli);
    for (std::size_t s = 0; s < model.shapes.size(); ++s) {
      const Shape& shape = model.shapes[s];
      if (counts[s] <= 0 || !Fits(*shape.pod, node)) continue;
      const std::array<double, 3> use{shape.Cores(), shape.Gib(), shape.Gpus()};
      const int x_r = program.Column(0);
      program.Set(shape_row[s], x_r, 1);
      for (std::size_t i = 0; i < 3; ++i) program.Set(r_rows[i], x_r, use[i]);
      program.Set(r_closed, x_r, -(shape.Cores() / close_cores + shape.Gib() / close_gib));
      if (!shape.HasGpu()) continue;
      const int x_q = program.Column(0);
      program.Set(shape_row[s], x_q, 1);
      for (std::size_t i = 0; i < 3; ++i) program.Set(q_rows[i], x_q, use[i]);
      program.Set(q_pods, x_q, -shape.pod->gpu_count);
      program.Set(q_milli, x_q, -shape.Gpus());
    }
  }
  if (program.objective.empty()) return LpSolution{};
  return Maximise(program.Dense());
}

// Step 1 for one big-share shape: how many of its arrivals every such policy places.
Result<int> ForcedArrivals(const Model& model, std::size_t shape, int* programs, int* pivots) {
  std::vector<std::size_t> positions;
  for (std::size_t i = 0; i < model.shape_of.size(); ++i) {
    if (static_cast<std::size_t>(model.shape_of[i]) == shape) positions.push_back(i);
  }
  const PodSpec& theta = *model.shapes[shape].pod;
  // Can the nodes be closed to theta by the pods that arrived before positions[j]?
  auto closable = [&](std::size_t j) -> Result<bool> {
    std::vector<int> counts(model.shapes.size(), 0);
    for (std::size_t i = 0; i < positions[j]; ++i) {
      ++counts[static_cast<std::size_t>(model.shape_of[i])];
    }
    double open_gpus = 0;
    auto solved = ClosingProgram(model, counts, theta, &open_gpus);
    if (!solved) return tl::unexpected(solved.error());
    ++*programs;
    *pivots += solved->pivots;
    // Rounding counts against the bound: a value a hair short is taken as closed.
    return solved->value >= open_gpus * (1 - 1e-9) - 1e-6;
  };
  std::size_t low = 0;
  std::size_t high = positions.size();  // the answer is in [low, high]; high = never closable
  while (low < high) {
    const std::size_t mid = low + (high - low) / 2;
    auto closed = closable(mid);
    if (!closed) return tl::unexpected(closed.error());
    if (*closed) {
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  return static_cast<int>(low);
}

// Step 2's packing LP with the forced shares (openb_forced_bound.h); the value includes `reward`
// per forced pod, and *reached is false when the optimum leaves some forced pod out.
Result<LpSolution> PackingProgram(const Model& model, const std::vector<int>& forced, double reward,
                                  bool* reached) {
  SparseProgram program;
  std::set<int> big_sizes;
  for (const Shape& shape : model.shapes) {
    if (shape.Big()) big_sizes.insert(shape.pod->gpu_milli);
  }
  std::vector<int> shape_row(model.shapes.size(), -1);
  std::vector<int> forced_row(model.shapes.size(), -1);
  for (std::size_t s = 0; s < model.shapes.size(); ++s) {
    if (!model.shapes[s].HasGpu()) continue;
    shape_row[s] = program.Row(model.shapes[s].arrivals);
    if (forced[s] > 0) forced_row[s] = program.Row(forced[s]);
  }
  std::vector<std::vector<int>> forced_columns(model.shapes.size());
  for (const Kind& kind : model.kinds) {
    const SimNode& node = *kind.node;
    const int cpu_row = program.Row(kind.count * static_cast<double>(node.cpu_capacity) / kCore);
    const int memory_row =
        program.Row(kind.count * static_cast<double>(node.memory_capacity) / kGib);
    // GPUs held whole, GPUs holding a big share, and small shares on GPUs of neither kind.
    const int gpu_row = program.Row(kind.Gpus());
    std::map<int, int> beside_row;  // big size b: small shares beside b <= (1000 - b) per big pod
    for (int size : big_sizes) beside_row[size] = program.Row(0);
    for (std::size_t s = 0; s < model.shapes.size(); ++s) {
      const Shape& shape = model.shapes[s];
      if (!shape.HasGpu() || !Fits(*shape.pod, node)) continue;
      auto add = [&](double value, double gpu_use) {
        const int column = program.Column(value);
        program.Set(shape_row[s], column, 1);
        program.Set(cpu_row, column, shape.Cores());
        program.Set(memory_row, column, shape.Gib());
        program.Set(gpu_row, column, gpu_use);
        return column;
      };
      if (shape.Small()) {
        add(shape.Gpus(), shape.Gpus());
        for (int size : big_sizes) {
          if (shape.pod->gpu_milli > kWholeGpuMilli - size) continue;
          program.Set(beside_row[size], add(shape.Gpus(), 0), shape.Gpus());
        }
      } else if (shape.Big()) {
        const double room = (kWholeGpuMilli - shape.pod->gpu_milli) / kGpu;
        program.Set(beside_row[shape.pod->gpu_milli], add(shape.Gpus(), 1), -room);
        if (forced[s] <= 0) continue;
        const int column = add(shape.Gpus() + reward, 1);
        program.Set(beside_row[shape.pod->gpu_milli], column, -room);
        program.Set(forced_row[s], column, 1);
        forced_columns[s].push_back(column);
      } else {
        add(shape.Gpus(), shape.pod->gpu_count);  // whole GPUs
      }
    }
  }
  auto solved = Maximise(program.Dense());
  if (!solved) return solved;
  *reached = true;
  for (std::size_t s = 0; s < model.shapes.size(); ++s) {
    double placed = 0;
    for (int column : forced_columns[s]) placed += solved->x[static_cast<std::size_t>(column)];
    if (placed < forced[s] - 1e-6) *reached = false;
  }
  return solved;
}

}  // namespace

Result<ForcedShareBound> OpenbForcedShareBound(const Cluster& cluster,
                                               const std::vector<PodSpec>& arrivals,
                                               const ForcedBoundOptions& options) {
  auto model = BuildModel(cluster, arrivals);
  if (!model) return tl::unexpected(model.error());
  ForcedShareBound bound;
  std::vector<int> forced(model->shapes.size(), 0);
  int forced_pods = 0;
  for (std::size_t s = 0; s < model->shapes.size(); ++s) {
    const Shape& shape = model->shapes[s];
    if (!shape.Big() || shape.arrivals < options.min_arrivals_to_force) continue;
    auto count = ForcedArrivals(*model, s, &bound.closing_programs, &bound.pivots);
    if (!count) return tl::unexpected(count.error());
    forced[s] = *count;
    forced_pods += *count;
    bound.forced.push_back({shape.pod->gpu_milli, shape.pod->cpu_milli, shape.pod->memory_mib,
                            shape.arrivals, *count});
  }
  // The reward must outweigh what a forced pod displaces; checked, and raised when it does not.
  for (double reward : {10.0, 1000.0}) {
    bool reached = false;
    auto solved = PackingProgram(*model, forced, reward, &reached);
    if (!solved) return tl::unexpected(solved.error());
    bound.pivots += solved->pivots;
    if (!reached) continue;
    bound.allocated_gpu_milli = (solved->value - reward * forced_pods) * kGpu;
    bound.ratio = bound.allocated_gpu_milli / static_cast<double>(cluster.total_gpu_milli());
    return bound;
  }
  return MakeError("bound: the forced shares do not fit the packing program");
}

}  // namespace linkfit::bench
