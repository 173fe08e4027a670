#include "harness/scheduler.h"

#include <algorithm>

namespace linkfit::bench {

Result<void> Placer::Release(Cluster& cluster, const PodSpec& pod, const Placement& placement) {
  cluster.Release(pod, placement);
  return {};
}

bool TieBreaker::Offer(double score) {
  if (count_ == 0 || score > best_) {
    best_ = score;
    count_ = 1;
    return true;
  }
  if (score < best_) return false;
  ++count_;
  return std::uniform_int_distribution<std::uint64_t>(0, count_ - 1)(*rng_) == 0;
}

PolicyPlacer::PolicyPlacer(PolicyPtr policy, std::uint64_t seed, TieBreak tie_break)
    : policy_(std::move(policy)), rng_(seed), tie_break_(tie_break) {}

const NodeChoice& PolicyPlacer::Evaluate(const Cluster& cluster, int node, const PodSpec& pod) {
  const auto node_index = static_cast<std::size_t>(node);
  if (memo_.size() < cluster.nodes().size()) memo_.resize(cluster.nodes().size());
  std::vector<Memo>& row = memo_[node_index];
  if (pod.shape < 0) {
    static thread_local Memo scratch;
    scratch.choice = policy_->Evaluate(cluster, node, pod);
    return scratch.choice;
  }
  const auto shape = static_cast<std::size_t>(pod.shape);
  if (row.size() <= shape) row.resize(shape + 1);
  Memo& memo = row[shape];
  const std::uint64_t version_plus_one = cluster.node(node).version + 1;
  if (memo.version_plus_one != version_plus_one) {
    memo.choice = policy_->Evaluate(cluster, node, pod);
    memo.version_plus_one = version_plus_one;
  }
  return memo.choice;
}

Result<std::optional<Placement>> PolicyPlacer::Place(Cluster& cluster, const PodSpec& pod) {
  TieBreaker ties(&rng_);
  std::optional<Placement> pick;
  const int node_count = static_cast<int>(cluster.nodes().size());
  if (tie_break_ == TieBreak::kOrdered && rank_.size() != cluster.nodes().size()) {
    std::vector<int> order(cluster.nodes().size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::shuffle(order.begin(), order.end(), rng_);
    rank_.assign(order.size(), 0);
    for (std::size_t i = 0; i < order.size(); ++i) {
      rank_[static_cast<std::size_t>(order[i])] = static_cast<int>(i);
    }
  }
  double best_score = 0;
  int best_rank = -1;
  for (int node = 0; node < node_count; ++node) {
    if (!cluster.InTreeFits(node, pod)) continue;
    const NodeChoice& choice = Evaluate(cluster, node, pod);
    if (!choice.feasible) continue;
    if (tie_break_ == TieBreak::kOrdered) {
      const int rank = rank_[static_cast<std::size_t>(node)];
      if (best_rank < 0 || choice.score > best_score ||
          (choice.score == best_score && rank < best_rank)) {
        best_score = choice.score;
        best_rank = rank;
        pick = choice.placement;
      }
    } else if (ties.Offer(choice.score)) {
      pick = choice.placement;
    }
  }
  if (pick) cluster.Apply(pod, *pick);
  return pick;
}

}  // namespace linkfit::bench
