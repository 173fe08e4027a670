#pragma once

// ClusterCache: every GPU node linkfit knows and every pod that holds devices on one, mirroring
// kube-scheduler's scheduler cache (pkg/scheduler/backend/cache). Filter and prioritize read an
// immutable Snapshot; bind is the one place that changes allocations.
//
// The pod state machine (no timer expiry: an assumption stays until it is confirmed or
// forgotten, because kube-scheduler's TTL expiry double-counted resources):
//
//              Assume (bind: re-check + reserve)     Confirm (binding recorded, or the watch
//   Initial ---------------------------------> Assumed ----- saw the pod bound) -----> Added
//      ^                                          |                                      |
//      |            Forget (the write failed)     |          Remove (deleted, terminal)  |
//      +------------------------------------------+                                      v
//      +<--------------------------------------------------------------------------- Deleted
//
// AddBound() enters Added directly (state rebuilt at start-up from annotations or a state file).
// Every transition is idempotent: Assume of a UID already Assumed/Added on the same node returns
// the existing assignment (a repeated bind is a success, not a second allocation); Forget and
// Remove of an unknown UID do nothing.
//
// Thread-safety: all methods are safe to call concurrently. Writers serialise on one mutex held
// only for in-memory work (a placement is a few table lookups); API calls happen outside it.
// Snapshot() copies one shared_ptr under the lock, so readers never wait for a bind's API call.

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "linkfit/common/metrics.h"
#include "linkfit/common/result.h"
#include "linkfit/state/node_state.h"

namespace linkfit::state {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view text) const {
    return std::hash<std::string_view>{}(text);
  }
};

// An immutable view of every node at one moment.
class Snapshot {
 public:
  using NameIndex = std::unordered_map<std::string, std::size_t, StringHash, std::equal_to<>>;

  Snapshot(std::shared_ptr<const NameIndex> index, std::vector<NodeStatePtr> nodes,
           std::uint64_t generation)
      : index_(std::move(index)), nodes_(std::move(nodes)), generation_(generation) {}

  // Returns the node, or nullptr when linkfit does not know it.
  const NodeState* Find(std::string_view name) const {
    const auto it = index_->find(name);
    return it == index_->end() ? nullptr : nodes_[it->second].get();
  }
  const std::vector<NodeStatePtr>& nodes() const { return nodes_; }
  std::uint64_t generation() const { return generation_; }

 private:
  std::shared_ptr<const NameIndex> index_;
  std::vector<NodeStatePtr> nodes_;
  std::uint64_t generation_ = 0;
};
using SnapshotPtr = std::shared_ptr<const Snapshot>;

enum class PodPhase { kInitial, kAssumed, kAdded };

class ClusterCache {
 public:
  explicit ClusterCache(MetricsSink* metrics = nullptr);

  // Adds a node, or replaces the hardware model of a known one. Pods on a replaced node are
  // re-applied; any that no longer fit are dropped with an error log (detected corruption is
  // loud). Returns the number of pods dropped.
  int UpsertNode(NodeInfoPtr info);
  void RemoveNode(const std::string& name);

  SnapshotPtr Snapshot() const;

  // Computes a placement on the current state of one node (under the cache lock; it must be a
  // pure, fast function).
  using Placer = std::function<Result<Assignment>(const NodeState&)>;
  struct AssumeResult {
    Assignment assignment;
    bool already = false;  // the UID was already Assumed/Added on this node (idempotent bind)
  };
  // Initial -> Assumed. Errors: unknown node, UID bound to another node, the placer's error
  // ("no longer fits"), or an assignment that collides with the current state.
  Result<AssumeResult> Assume(const std::string& uid, const std::string& node,
                              const Placer& placer);
  // Assumed -> Added. No-op in other phases.
  void Confirm(const std::string& uid);
  // Assumed -> Initial, freeing the devices. No-op for Added or unknown UIDs.
  void Forget(const std::string& uid);
  // Assumed/Added -> Deleted, freeing the devices. Returns whether the UID was known.
  bool Remove(const std::string& uid);
  // Initial -> Added for a pod already bound (start-up rebuild). Errors like Assume's.
  Result<void> AddBound(const Assignment& assignment);

  PodPhase Phase(const std::string& uid) const;
  // The assignment of a known pod.
  std::optional<Assignment> Find(const std::string& uid) const;
  // Every Added pod's assignment (what a restart must keep); with `include_assumed`, also the
  // pods whose bind is in flight (a state file written during a bind must not drop them).
  std::vector<Assignment> BoundAssignments(bool include_assumed = false) const;

  struct Sizes {
    std::size_t nodes = 0;
    std::size_t assumed = 0;
    std::size_t added = 0;
  };
  Sizes sizes() const;

 private:
  struct PodEntry {
    PodPhase phase = PodPhase::kInitial;
    std::string node;
  };
  // REQUIRES: mutex_ held.
  void PublishLocked();
  void ReportLocked(const std::string& node_name);
  Result<void> ApplyLocked(const Assignment& assignment);
  void ReleaseLocked(const std::string& uid, const PodEntry& entry);

  MetricsSink* metrics_;
  mutable std::mutex mutex_;
  std::shared_ptr<state::Snapshot::NameIndex> index_;      // GUARDED_BY(mutex_)
  std::vector<NodeStatePtr> nodes_;                 // GUARDED_BY(mutex_)
  std::unordered_map<std::string, PodEntry> pods_;  // GUARDED_BY(mutex_)
  std::uint64_t generation_ = 0;                    // GUARDED_BY(mutex_)
  SnapshotPtr published_;                           // GUARDED_BY(mutex_)
  std::size_t assumed_ = 0;                         // GUARDED_BY(mutex_)
};

}  // namespace linkfit::state
