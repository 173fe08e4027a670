#pragma once

// What the openb bounds' programs share (openb_forced_bound.h): the arrivals grouped into pod
// shapes, the cluster into node kinds, and a sparse program made dense for lp.h's Maximise.
//
// Thread-safety: plain values.

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "harness/cluster.h"
#include "harness/lp.h"
#include "linkfit/common/result.h"

namespace linkfit::bench::openb_bound {

// Units inside the programs, to keep their coefficients near 1.
constexpr double kCore = 1000.0;  // CPU milli
constexpr double kGib = 1024.0;   // memory MiB
constexpr double kGpu = 1000.0;   // GPU milli
constexpr int kHalfGpuMilli = 500;
// Step 3 keeps a GPU to itself only for shares of at least this much (few shares fit beside).
constexpr int kExclusiveMilli = 800;

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

inline bool Fits(const PodSpec& pod, const SimNode& node) {
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
  LinearProgram Dense() const;
};

// Groups the arrivals by (CPU, memory, GPUs, share, models) and the nodes by (CPU, memory, GPUs,
// model). Errors on MIG pods or nodes.
Result<Model> BuildModel(const Cluster& cluster, const std::vector<PodSpec>& arrivals);

// The positions in the arrivals of shape `shape`'s pods.
std::vector<std::size_t> ArrivalPositions(const Model& model, std::size_t shape);

// Step 3 of openb_forced_bound.h: the most GPUs (not milli) the window program allows when the
// first failure of shape `theta` comes at one of its arrivals first .. end - 1 (0-based, in
// arrival order). nullopt when the program's optimum does not close every node theta fits or
// leaves a forced pod out (then the caller falls back to a weaker bound).
Result<std::optional<double>> WindowBound(const Model& model, std::size_t theta, std::size_t first,
                                          std::size_t end, int* pivots);

}  // namespace linkfit::bench::openb_bound
