// Step 3 of openb_forced_bound.h: one program per window of hypotheses "the first failure of
// shape theta comes at its arrival i, first <= i < end". Pods are split by when they were placed:
// S, before theta's failing arrival (they must close every node theta fits), and L, after it.
// Per node kind where theta fits, the nodes are split into r closed by CPU/memory and q closed by
// their GPUs (r + q <= N, a reward per node closed; the optimum must close them all); where theta
// does not fit, one group O of all N nodes. In every group the end state's CPU, memory and GPU
// roles bound the pods of S and L together: a GPU holds a whole-GPU pod, or one share of at least
// kExclusiveMilli with shares of at most 1000 - b beside it, or other shares (big shares below
// kExclusiveMilli are counted by their milli only, a relaxation).

#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "harness/openb_bound_model.h"

namespace linkfit::bench::openb_bound {
namespace {

enum class Phase { kS, kL, kAny };

struct Group {
  int size_column = -1;  // r or q; -1 for O (a constant size)
  int cpu = -1;
  int memory = -1;
  int gpu = -1;
  std::map<int, int> beside;  // exclusive size b -> row
  int closed_r = -1;          // R: r <= sum over S of cpu / A + memory / B
  int closed_units = -1;      // G: q x GPUs <= GPUs held by S
  int closed_milli = -1;      // G: q x GPUs x (1001 - s) <= milli held by S
};

struct Rows {
  std::vector<int> s;  // per shape: S <= arrivals before the window's last failure
  std::vector<int> l;  // per shape: L <= arrivals from the window's first failure on
  std::vector<int> t;  // per shape: S + L <= arrivals
  int forced = -1;     // theta's forced pods, in S
};

class WindowProgram {
 public:
  // s_counts / l_counts: per shape, the arrivals S and L may take; `forced`: theta's pods in S.
  WindowProgram(const Model& model, std::size_t theta, std::set<int> exclusive,
                const std::vector<int>& s_counts, const std::vector<int>& l_counts, int forced)
      : model_(model), theta_(theta), exclusive_(std::move(exclusive)) {
    for (std::size_t s = 0; s < model.shapes.size(); ++s) {
      rows_.s.push_back(program_.Row(s_counts[s]));
      rows_.l.push_back(program_.Row(l_counts[s]));
      rows_.t.push_back(program_.Row(model.shapes[s].arrivals));
    }
    if (forced > 0) rows_.forced = program_.Row(forced);
  }

  SparseProgram& program() { return program_; }

  // Every kind's groups and columns; returns the columns r and q (coverage), -1 where none.
  std::vector<std::pair<int, int>> AddKinds(double reward);

  // Rows of one group; `nodes` is the constant node count for O, else the group's size column.
  Group MakeGroup(const SimNode& node, int nodes, int size_column) {
    Group group;
    group.size_column = size_column;
    const double count = size_column < 0 ? nodes : 0;
    group.cpu = program_.Row(count * static_cast<double>(node.cpu_capacity) / kCore);
    group.memory = program_.Row(count * static_cast<double>(node.memory_capacity) / kGib);
    group.gpu = program_.Row(count * node.gpu_count);
    if (size_column >= 0) {
      program_.Set(group.cpu, size_column, -static_cast<double>(node.cpu_capacity) / kCore);
      program_.Set(group.memory, size_column, -static_cast<double>(node.memory_capacity) / kGib);
      program_.Set(group.gpu, size_column, -node.gpu_count);
    }
    for (int size : exclusive_) group.beside[size] = program_.Row(0);
    return group;
  }

  // The columns of shape s in one group and phase, by the role of its GPU.
  void AddShape(std::size_t s, const SimNode& node, const Group& group, Phase phase,
                double reward_if_forced) {
    const Shape& shape = model_.shapes[s];
    const int milli = shape.pod->gpu_milli;
    const bool whole = shape.pod->demand == GpuDemand::kWhole;
    const bool exclusive = shape.Big() && exclusive_.count(milli) > 0;
    if (!shape.HasGpu()) {
      Add(s, node, group, phase, 0, 0);
      return;
    }
    if (whole) {
      Add(s, node, group, phase, shape.Gpus(), shape.pod->gpu_count);
    } else if (exclusive) {
      const double room = (kWholeGpuMilli - milli) / kGpu;
      program_.Set(group.beside.at(milli), Add(s, node, group, phase, shape.Gpus(), 1), -room);
      if (s == theta_ && phase == Phase::kS && rows_.forced >= 0) {
        const int column = Add(s, node, group, phase, shape.Gpus() + reward_if_forced, 1);
        program_.Set(group.beside.at(milli), column, -room);
        program_.Set(rows_.forced, column, 1);
        forced_columns_.push_back(column);
      }
    } else {
      Add(s, node, group, phase, shape.Gpus(), shape.Gpus());
      if (!shape.Small()) return;
      for (int size : exclusive_) {
        if (milli > kWholeGpuMilli - size) continue;
        program_.Set(group.beside.at(size), Add(s, node, group, phase, shape.Gpus(), 0),
                     shape.Gpus());
      }
    }
  }

  const std::vector<int>& forced_columns() const { return forced_columns_; }

 private:
  int Add(std::size_t s, const SimNode& node, const Group& group, Phase phase, double value,
          double gpu_use) {
    const Shape& shape = model_.shapes[s];
    const int column = program_.Column(value);
    if (phase == Phase::kS) program_.Set(rows_.s[s], column, 1);
    if (phase == Phase::kL) program_.Set(rows_.l[s], column, 1);
    program_.Set(rows_.t[s], column, 1);
    program_.Set(group.cpu, column, shape.Cores());
    program_.Set(group.memory, column, shape.Gib());
    program_.Set(group.gpu, column, gpu_use);
    if (phase != Phase::kS) return column;
    const PodSpec& theta = *model_.shapes[theta_].pod;
    if (group.closed_r >= 0) {
      const double close_cores =
          static_cast<double>(node.cpu_capacity - theta.cpu_milli + 1) / kCore;
      const double close_gib =
          static_cast<double>(node.memory_capacity - theta.memory_mib + 1) / kGib;
      program_.Set(group.closed_r, column,
                   -(shape.Cores() / close_cores + shape.Gib() / close_gib));
    }
    if (group.closed_units >= 0) {
      program_.Set(group.closed_units, column, -shape.pod->gpu_count);
      program_.Set(group.closed_milli, column, -shape.Gpus());
    }
    return column;
  }

  const Model& model_;
  std::size_t theta_;
  std::set<int> exclusive_;
  Rows rows_;
  SparseProgram program_;
  std::vector<int> forced_columns_;
};

// Arrivals per shape before position `end`.
std::vector<int> CountBefore(const Model& model, std::size_t end) {
  std::vector<int> counts(model.shapes.size(), 0);
  for (std::size_t i = 0; i < end; ++i) ++counts[static_cast<std::size_t>(model.shape_of[i])];
  return counts;
}

std::vector<std::pair<int, int>> WindowProgram::AddKinds(double reward) {
  const PodSpec& theta = *model_.shapes[theta_].pod;
  const double need_milli = (kWholeGpuMilli + 1 - theta.gpu_milli) / kGpu;
  std::vector<std::pair<int, int>> coverage;
  for (const Kind& kind : model_.kinds) {
    const SimNode& node = *kind.node;
    std::vector<std::pair<Group, std::vector<Phase>>> groups;
    if (!Fits(theta, node)) {
      groups.push_back({MakeGroup(node, kind.count, -1), {Phase::kAny}});
      coverage.emplace_back(-1, -1);
    } else {
      const int r = program_.Column(reward * node.gpu_count);
      const int q = program_.Column(reward * node.gpu_count);
      const int nodes = program_.Row(kind.count);
      program_.Set(nodes, r, 1);
      program_.Set(nodes, q, 1);
      Group r_group = MakeGroup(node, 0, r);
      r_group.closed_r = program_.Row(0);
      program_.Set(r_group.closed_r, r, 1);
      Group q_group = MakeGroup(node, 0, q);
      q_group.closed_units = program_.Row(0);
      program_.Set(q_group.closed_units, q, node.gpu_count);
      q_group.closed_milli = program_.Row(0);
      program_.Set(q_group.closed_milli, q, node.gpu_count * need_milli);
      groups.push_back({r_group, {Phase::kS, Phase::kL}});
      groups.push_back({q_group, {Phase::kS, Phase::kL}});
      coverage.emplace_back(r, q);
    }
    for (const auto& [group, phases] : groups) {
      for (std::size_t s = 0; s < model_.shapes.size(); ++s) {
        const Shape& shape = model_.shapes[s];
        if (!Fits(*shape.pod, node)) continue;
        for (Phase phase : phases) {
          // Pods without GPUs matter only where they close a node: in S on the R group.
          if (!shape.HasGpu() && (phase != Phase::kS || group.closed_r < 0)) continue;
          AddShape(s, node, group, phase, reward);
        }
      }
    }
  }
  return coverage;
}

}  // namespace

Result<std::optional<double>> WindowBound(const Model& model, std::size_t theta, std::size_t first,
                                          std::size_t end, int* pivots) {
  const std::vector<std::size_t> positions = ArrivalPositions(model, theta);
  if (first >= end || end > positions.size()) return MakeError("bound: an empty window");
  const std::vector<int> s_counts = CountBefore(model, positions[end - 1]);
  std::vector<int> l_counts = CountBefore(model, positions[first]);
  for (std::size_t s = 0; s < model.shapes.size(); ++s) {
    l_counts[s] = model.shapes[s].arrivals - l_counts[s];
  }
  std::set<int> exclusive;
  for (const Shape& shape : model.shapes) {
    if (shape.Big() && shape.pod->gpu_milli >= kExclusiveMilli) {
      exclusive.insert(shape.pod->gpu_milli);
    }
  }
  const int forced = static_cast<int>(first);
  // The reward (per GPU closed, per forced pod) must outweigh what closing or forcing costs;
  // checked on the optimum, and raised when it does not.
  for (double reward : {10.0, 1000.0}) {
    WindowProgram window(model, theta, exclusive, s_counts, l_counts, forced);
    const std::vector<std::pair<int, int>> coverage = window.AddKinds(reward);
    auto solved = Maximise(window.program().Dense());
    if (!solved) return tl::unexpected(solved.error());
    *pivots += solved->pivots;
    double closed = 0;
    double to_close = 0;
    for (std::size_t k = 0; k < coverage.size(); ++k) {
      const auto [r, q] = coverage[k];
      if (r < 0) continue;
      const double gpus = model.kinds[k].node->gpu_count;
      to_close += model.kinds[k].Gpus();
      closed +=
          gpus * (solved->x[static_cast<std::size_t>(r)] + solved->x[static_cast<std::size_t>(q)]);
    }
    double placed = 0;
    for (int column : window.forced_columns())
      placed += solved->x[static_cast<std::size_t>(column)];
    if (closed < to_close - 1e-6 * (1 + to_close) || placed < forced - 1e-6) continue;
    return std::optional<double>(solved->value - reward * (to_close + forced));
  }
  return std::optional<double>();
}

}  // namespace linkfit::bench::openb_bound
