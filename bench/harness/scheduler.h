#pragma once

// The part of the simulator that plays kube-scheduler for one pod at a time (DESIGN.md §10):
// in-tree filters, scores, a seeded random tie-break among the best nodes (mirroring
// kube-scheduler's selectHost reservoir sampling), then the bind that commits the devices into the
// simulator's Cluster. A Placer either runs a baseline Policy in-process or asks a real
// `linkfit serve` over HTTP (MakeExtenderPlacer, experiment.h).
//
// Thread-safety: none; one Placer drives one Cluster.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "harness/cluster.h"
#include "harness/policy.h"
#include "linkfit/common/result.h"

namespace linkfit::bench {

// A pod leaving a replay: at `time` the pod at `index` of the replay's list departs. The queue pops
// the earliest first, ties by index.
struct Departure {
  double time = 0;
  std::size_t index = 0;
  bool operator>(const Departure& other) const {
    return time != other.time ? time > other.time : index > other.index;
  }
};
using DepartureQueue = std::priority_queue<Departure, std::vector<Departure>, std::greater<>>;

class Placer {
 public:
  virtual ~Placer() = default;
  virtual std::string name() const = 0;
  // Schedules `pod`; on success the placement is already applied to `cluster`. nullopt means the
  // pod fits nowhere (pending/failed). An error means the run cannot go on (e.g. the extender
  // died).
  virtual Result<std::optional<Placement>> Place(Cluster& cluster, const PodSpec& pod) = 0;
  // Frees a departed pod's devices (in the cluster and wherever else the placer keeps state).
  virtual Result<void> Release(Cluster& cluster, const PodSpec& pod, const Placement& placement);
  // Round-trip times in milliseconds per extender verb ("filter", "prioritize", "bind"); empty for
  // in-process policies.
  virtual std::map<std::string, std::vector<double>> VerbLatenciesMs() const { return {}; }
};

using PlacerPtr = std::unique_ptr<Placer>;

// Seeded reservoir sampling over the highest score (kube-scheduler's selectHost).
class TieBreaker {
 public:
  explicit TieBreaker(std::mt19937_64* rng) : rng_(rng) {}
  // Offers a candidate; returns true when it becomes the current pick.
  bool Offer(double score);
  bool has_pick() const { return count_ > 0; }

 private:
  std::mt19937_64* rng_;
  double best_ = 0;
  std::uint64_t count_ = 0;
};

// How a placer picks among nodes with the same best score.
//   kRandom   kube-scheduler's selectHost: seeded reservoir sampling (uniform among the best).
//   kOrdered  the first of the best in a seeded random permutation of the nodes, fixed for the
//             whole run. This is how the FGD paper's simulator behaves in effect: it renames
//             every node with a seeded random-permutation prefix, so equal scores resolve to the
//             same node again and again (ties pack instead of spreading).
enum class TieBreak { kRandom, kOrdered };

// Runs a baseline policy in-process. Node scores are memoised per (node version, pod shape),
// which is exact because every policy's Evaluate depends only on the node and the pod's shape.
class PolicyPlacer : public Placer {
 public:
  PolicyPlacer(PolicyPtr policy, std::uint64_t seed, TieBreak tie_break = TieBreak::kRandom);
  std::string name() const override { return policy_->name(); }
  Result<std::optional<Placement>> Place(Cluster& cluster, const PodSpec& pod) override;

 private:
  struct Memo {
    std::uint64_t version_plus_one = 0;  // 0 = empty
    NodeChoice choice;
  };
  const NodeChoice& Evaluate(const Cluster& cluster, int node, const PodSpec& pod);

  PolicyPtr policy_;
  std::mt19937_64 rng_;
  TieBreak tie_break_;
  std::vector<int> rank_;                // kOrdered: node -> position in the seeded permutation
  std::vector<std::vector<Memo>> memo_;  // [node][shape]
};

}  // namespace linkfit::bench
