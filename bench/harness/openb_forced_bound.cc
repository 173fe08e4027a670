#include "harness/openb_forced_bound.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "harness/lp.h"
#include "harness/openb_bound_model.h"

namespace linkfit::bench {
namespace {

using namespace openb_bound;  // NOLINT(google-build-using-namespace)

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
  const std::vector<std::size_t> positions = ArrivalPositions(model, shape);
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

// Step 2's optimum in GPUs with the given forced counts.
Result<double> PackingBound(const Model& model, const std::vector<int>& forced, int* pivots) {
  int forced_pods = 0;
  for (int count : forced) forced_pods += count;
  // The reward must outweigh what a forced pod displaces; checked, and raised when it does not.
  for (double reward : {10.0, 1000.0}) {
    bool reached = false;
    auto solved = PackingProgram(model, forced, reward, &reached);
    if (!solved) return tl::unexpected(solved.error());
    *pivots += solved->pivots;
    if (reached) return solved->value - reward * forced_pods;
  }
  return MakeError("bound: the forced shares do not fit the packing program");
}

// Step 3: the largest bound over the hypotheses on theta's first failure (none before arrival
// `first_possible`, step 1; "never" means all its arrivals placed), by windows of hypotheses,
// splitting the window with the largest bound while the budget of programs lasts.
Result<double> WindowSearch(const Model& model, std::size_t theta, std::vector<int> forced,
                            const ForcedBoundOptions& options, ForcedShareBound& bound) {
  const std::size_t arrivals = static_cast<std::size_t>(model.shapes[theta].arrivals);
  forced[theta] = static_cast<int>(arrivals);
  auto never = PackingBound(model, forced, &bound.pivots);
  if (!never) return never;
  struct Window {
    std::size_t first;
    std::size_t end;
    double value;
  };
  auto evaluate = [&](std::size_t first, std::size_t end) -> Result<Window> {
    ++bound.window_programs;
    auto value = WindowBound(model, theta, first, end, &bound.pivots);
    if (!value) return tl::unexpected(value.error());
    if (*value) return Window{first, end, **value};
    ++bound.window_fallbacks;  // step 2 with the window's forced prefix: weaker, still valid
    forced[theta] = static_cast<int>(first);
    auto fallback = PackingBound(model, forced, &bound.pivots);
    if (!fallback) return tl::unexpected(fallback.error());
    return Window{first, end, *fallback};
  };
  std::vector<Window> windows;
  const std::size_t start = static_cast<std::size_t>(bound.theta_first_possible_failure);
  const std::size_t parts = std::min<std::size_t>(
      static_cast<std::size_t>(std::max(1, options.initial_windows)), arrivals - start);
  for (std::size_t p = 0; p < parts; ++p) {
    auto window = evaluate(start + (arrivals - start) * p / parts,
                           start + (arrivals - start) * (p + 1) / parts);
    if (!window) return tl::unexpected(window.error());
    windows.push_back(*window);
  }
  for (int split = 0; split < options.window_splits && !windows.empty(); ++split) {
    auto worst =
        std::max_element(windows.begin(), windows.end(),
                         [](const Window& a, const Window& b) { return a.value < b.value; });
    if (worst->end - worst->first < 2 || worst->value <= *never) break;
    const Window whole = *worst;
    windows.erase(worst);
    const std::size_t middle = whole.first + (whole.end - whole.first) / 2;
    for (auto [first, end] : {std::pair{whole.first, middle}, std::pair{middle, whole.end}}) {
      auto window = evaluate(first, end);
      if (!window) return tl::unexpected(window.error());
      windows.push_back(*window);
    }
  }
  double value = *never;
  for (const Window& window : windows) {
    if (window.value > value) {
      value = window.value;
      bound.theta_worst_window = {static_cast<int>(window.first), static_cast<int>(window.end)};
    }
  }
  return value;
}

}  // namespace

Result<ForcedShareBound> OpenbForcedShareBound(const Cluster& cluster,
                                               const std::vector<PodSpec>& arrivals,
                                               const ForcedBoundOptions& options) {
  auto model = BuildModel(cluster, arrivals);
  if (!model) return tl::unexpected(model.error());
  ForcedShareBound bound;
  std::vector<int> forced(model->shapes.size(), 0);
  std::size_t theta = model->shapes.size();  // the exclusive big share with the most arrivals
  for (std::size_t s = 0; s < model->shapes.size(); ++s) {
    const Shape& shape = model->shapes[s];
    if (!shape.Big() || shape.arrivals < options.min_arrivals_to_force) continue;
    auto count = ForcedArrivals(*model, s, &bound.closing_programs, &bound.pivots);
    if (!count) return tl::unexpected(count.error());
    forced[s] = *count;
    bound.forced.push_back({shape.pod->gpu_milli, shape.pod->cpu_milli, shape.pod->memory_mib,
                            shape.arrivals, *count});
    if (shape.pod->gpu_milli >= kExclusiveMilli &&
        (theta == model->shapes.size() || shape.arrivals > model->shapes[theta].arrivals)) {
      theta = s;
    }
  }
  auto step2 = PackingBound(*model, forced, &bound.pivots);
  if (!step2) return tl::unexpected(step2.error());
  bound.forced_prefix_gpu_milli = *step2 * kGpu;
  double value = *step2;
  if (theta < model->shapes.size() && options.window_splits >= 0) {
    bound.theta_first_possible_failure = forced[theta];
    auto step3 = WindowSearch(*model, theta, forced, options, bound);
    if (!step3) return tl::unexpected(step3.error());
    bound.window_gpu_milli = *step3 * kGpu;
    value = std::min(value, *step3);  // both bound every such policy
  }
  bound.allocated_gpu_milli = value * kGpu;
  bound.ratio = bound.allocated_gpu_milli / static_cast<double>(cluster.total_gpu_milli());
  return bound;
}

}  // namespace linkfit::bench
