#include "linkfit/extender/scoring.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace linkfit::extender {
namespace {

// Free milli of every GPU usable by the shape (shares: not whole-held, not MIG).
struct FreeView {
  std::array<int, topology::kMaxGpus> free{};
  int gpus = 0;
  int whole_free = 0;
};

FreeView ViewOf(const state::NodeState& node) {
  FreeView view;
  view.gpus = node.info().gpu_count();
  const topology::GpuMask eligible = node.share_eligible();
  for (int g = 0; g < view.gpus; ++g) {
    const int free = ((eligible >> g) & 1u) ? 1000 - node.shared_milli(g) : 0;
    view.free[static_cast<std::size_t>(g)] = free;
    if (free == 1000) ++view.whole_free;
  }
  return view;
}

double FragmentationOf(const FreeView& view, const std::vector<Shape>& shapes) {
  double total_free = 0;
  for (int g = 0; g < view.gpus; ++g) total_free += view.free[static_cast<std::size_t>(g)];
  double fragmentation = 0;
  for (const Shape& shape : shapes) {
    double fragment = 0;
    if (shape.milli < 1000) {
      bool fits = false;
      for (int g = 0; g < view.gpus; ++g)
        fits = fits || view.free[static_cast<std::size_t>(g)] >= shape.milli;
      if (!fits) {
        fragment = total_free;
      } else {
        for (int g = 0; g < view.gpus; ++g) {
          const int free = view.free[static_cast<std::size_t>(g)];
          if (free > 0 && free < shape.milli) fragment += free;
        }
      }
    } else if (view.whole_free >= shape.gpus) {
      for (int g = 0; g < view.gpus; ++g) {
        const int free = view.free[static_cast<std::size_t>(g)];
        if (free > 0 && free < 1000) fragment += free;
      }
    } else {
      fragment = total_free;
    }
    fragmentation += shape.weight * fragment;
  }
  return fragmentation;
}

// Packing measures free capacity left on the node up to this many whole GPUs (8-GPU nodes span
// the range; emptier 16-GPU nodes saturate at "not tight at all").
constexpr double kPackingScaleGpus = 8.0;
// Sigmoid slope of the fragmentation term per whole GPU of growth (FGD uses 1).
constexpr double kFragmentationSlope = 1.0;

double LookaheadRing(const alloc::PlacementTable& table, topology::GpuMask free) {
  return static_cast<double>(table.Lookahead(free) >> 35);
}

}  // namespace

ShapeStats::ShapeStats() {
  for (auto& counter : whole_) counter.store(0, std::memory_order_relaxed);
  for (auto& counter : share_) counter.store(0, std::memory_order_relaxed);
}

void ShapeStats::Record(const GpuRequest& request) {
  if (request.kind == GpuRequest::Kind::kWhole) {
    whole_[static_cast<std::size_t>(std::clamp(request.count, 1, topology::kMaxGpus))].fetch_add(
        1, std::memory_order_relaxed);
  } else if (request.kind == GpuRequest::Kind::kShared) {
    const int bin = std::clamp((request.share_milli + 49) / 50, 1, kShareBins);
    share_[static_cast<std::size_t>(bin)].fetch_add(static_cast<std::uint64_t>(request.count),
                                                    std::memory_order_relaxed);
  }
}

std::vector<Shape> ShapeStats::Typical() const {
  std::vector<Shape> shapes;
  double total = 0;
  for (int k = 1; k <= topology::kMaxGpus; ++k) {
    const auto count = whole_[static_cast<std::size_t>(k)].load(std::memory_order_relaxed);
    if (count > 0) shapes.push_back({k, 1000, static_cast<double>(count)});
    total += static_cast<double>(count);
  }
  for (int bin = 1; bin <= kShareBins; ++bin) {
    const auto count = share_[static_cast<std::size_t>(bin)].load(std::memory_order_relaxed);
    if (count > 0) shapes.push_back({1, bin * 50, static_cast<double>(count)});
    total += static_cast<double>(count);
  }
  if (total == 0) {
    return {{1, 1000, 0.2}, {2, 1000, 0.2}, {4, 1000, 0.2}, {8, 1000, 0.2}, {1, 500, 0.2}};
  }
  std::sort(shapes.begin(), shapes.end(),
            [](const Shape& a, const Shape& b) { return a.weight > b.weight; });
  std::vector<Shape> typical;
  double covered = 0;
  for (const Shape& shape : shapes) {
    typical.push_back(shape);
    covered += shape.weight;
    if (covered >= 0.95 * total) break;
  }
  for (Shape& shape : typical) shape.weight /= covered;
  return typical;
}

double Fragmentation(const state::NodeState& node, const std::vector<Shape>& shapes) {
  return FragmentationOf(ViewOf(node), shapes);
}

std::int64_t CpuOnlyScore(const state::NodeState& node, int score_range) {
  const double free = std::max(0.0, node.info().gpu_count() - node.UsedGpuEquivalents());
  return std::lround((1.0 - std::min(free, kPackingScaleGpus) / kPackingScaleGpus) * score_range);
}

std::vector<std::int64_t> ScoreNodes(const GpuRequest& request,
                                     const std::vector<Candidate>& candidates,
                                     const std::vector<Shape>& shapes, const ScoreWeights& weights,
                                     int score_range) {
  const std::size_t n = candidates.size();
  std::vector<double> topology_term(n, 1.0);
  std::vector<double> packing(n, 0.0);
  std::vector<double> fragmentation(n, 0.5);
  const bool multi_gpu = request.kind == GpuRequest::Kind::kWhole && request.count >= 2;
  double best_ring = 0;
  double best_sum = 0;
  for (const Candidate& c : candidates) {
    best_ring = std::max(best_ring, static_cast<double>(c.fit.quality.ring_mbps));
    best_sum = std::max(best_sum, static_cast<double>(c.fit.quality.sum_mbps));
  }
  for (std::size_t i = 0; i < n; ++i) {
    const state::NodeState& node = *candidates[i].node;
    const state::Assignment& a = candidates[i].fit.assignment;
    if (multi_gpu && best_ring > 0) {
      topology_term[i] = 0.8 * candidates[i].fit.quality.ring_mbps / best_ring +
                         0.2 * (best_sum > 0 ? candidates[i].fit.quality.sum_mbps / best_sum : 1.0);
    }
    // Packing, by bands: 2 = the pod only uses GPUs already in use (shares on a shared GPU),
    // 1 = the node is already partly used, 0 = it opens an idle node. Within a band, the fewer
    // whole-GPU equivalents left free on the node afterwards, the better (best fit).
    const double gpus = node.info().gpu_count();
    const double used_before = node.UsedGpuEquivalents();
    const double free_after = std::max(0.0, gpus - used_before - request.GpuEquivalents());
    int band = used_before > 0 ? 1 : 0;
    if (request.kind == GpuRequest::Kind::kShared && !a.shares.empty()) {
      bool all_shared = true;
      for (const state::Assignment::ShareSlot& slot : a.shares) {
        all_shared = all_shared && node.shared_milli(slot.gpu) > 0;
      }
      if (all_shared) band = 2;
    }
    packing[i] = (band + (1.0 - std::min(free_after, kPackingScaleGpus) / kPackingScaleGpus)) / 3.0;
    if (request.kind == GpuRequest::Kind::kWhole || request.kind == GpuRequest::Kind::kShared) {
      FreeView before = ViewOf(node);
      FreeView after = before;
      double look = 1.0;
      if (a.kind == state::Assignment::Kind::kWhole) {
        for (int g = 0; g < before.gpus; ++g) {
          if ((a.gpus >> g) & 1u) {
            after.free[static_cast<std::size_t>(g)] = 0;
            --after.whole_free;
          }
        }
        const topology::GpuMask free = node.whole_free();
        const double lost =
            LookaheadRing(*node.info().table, free) -
            LookaheadRing(*node.info().table, static_cast<topology::GpuMask>(free & ~a.gpus));
        // Scaled by what the idle node offers, so losing an NVLink pair costs more than
        // losing a PCIe pair on the same kind of node.
        const auto all = static_cast<topology::GpuMask>((1u << before.gpus) - 1u);
        const double idle_ahead = LookaheadRing(*node.info().table, all);
        look = idle_ahead > 0 ? 1.0 - std::clamp(lost / idle_ahead, 0.0, 1.0) : 1.0;
      } else {
        for (const state::Assignment::ShareSlot& slot : a.shares) {
          int& free = after.free[static_cast<std::size_t>(slot.gpu)];
          if (free == 1000) --after.whole_free;
          free -= slot.milli;
        }
      }
      // FGD's own scale: the growth of expected fragmentation in whole GPUs through a sigmoid
      // (0.5 = no change), so the term is comparable across requests and never amplifies a
      // tiny difference to the full range the way a min-max over candidates would.
      const double growth_gpus =
          (FragmentationOf(after, shapes) - FragmentationOf(before, shapes)) / 1000.0;
      const double frag = 1.0 / (1.0 + std::exp(growth_gpus * kFragmentationSlope));
      fragmentation[i] = a.kind == state::Assignment::Kind::kWhole ? 0.5 * frag + 0.5 * look : frag;
    }
  }
  const double weight_total = weights.topology + weights.packing + weights.fragmentation;
  std::vector<std::int64_t> scores(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const double combined =
        weight_total <= 0 ? 0.0
                          : (weights.topology * topology_term[i] + weights.packing * packing[i] +
                             weights.fragmentation * fragmentation[i]) /
                                weight_total;
    scores[i] =
        static_cast<std::int64_t>(std::lround(std::clamp(combined, 0.0, 1.0) * score_range));
  }
  return scores;
}

}  // namespace linkfit::extender
