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
// Within Assumed, a bind moves through the stages of state/bind_lifecycle.h (Advance), whose
// effects are the transitions drawn here.
// AddBound() enters Added directly (state rebuilt at start-up from annotations or a state file).
// Every transition is idempotent: Assume of a UID already Assumed/Added on the same node returns
// the existing assignment (a repeated bind is a success, not a second allocation); Forget and
// Remove of an unknown UID do nothing.
//
// Thread-safety: all methods are safe to call concurrently. Writers serialise on one mutex held
// only for in-memory work (a placement is a few table lookups); API calls happen outside it.
// Snapshot() copies one shared_ptr under the lock, so readers never wait for a bind's API call.
//
// Cost: snapshots are published lazily (the first Snapshot() after a change builds one) and share
// the node list copy-on-write in chunks of kChunkSize nodes, so a change copies one chunk and the
// chunk table (about 150 pointers at 5,000 nodes) instead of every node, and loading N nodes is
// O(N) rather than O(N^2).

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>
#include "linkfit/common/mutex.h"

#include "linkfit/common/metrics.h"
#include "linkfit/common/result.h"
#include "linkfit/state/bind_lifecycle.h"
#include "linkfit/state/group_rails.h"
#include "linkfit/state/name_index.h"
#include "linkfit/state/node_state.h"
#include "linkfit/state/pod_uid.h"

namespace linkfit::state {

// Nodes are held in fixed-size chunks that snapshots share (see ClusterCache). Beside each node
// pointer, what prioritize reads of every node by position, in a dense array of its own: a
// request touches all of a cluster's positions in random order, so what it costs from memory is
// the bytes per position.
inline constexpr std::size_t kChunkSize = 64;
struct NodeChunk {
  std::array<NodeStatePtr, kChunkSize> nodes;
  std::array<std::uint32_t, kChunkSize> kinds{};  // the number of nodes[i]'s MachineKind
};
using NodeChunks = std::vector<std::shared_ptr<NodeChunk>>;

// One name of a request, looked up: its node's position (NameIndex::kNoPosition where linkfit
// does not know the name).
using NodeRef = NameIndex::Found;

// An immutable view of every node at one moment.
class Snapshot {
 public:
  using Problems = std::map<std::string, std::string, std::less<>>;
  Snapshot(std::shared_ptr<const NameIndex> index, std::shared_ptr<const NodeChunks> chunks,
           std::shared_ptr<const MachineKinds> kinds, std::size_t size, std::uint64_t generation,
           std::shared_ptr<const Problems> problems = nullptr)
      : index_(std::move(index)),
        chunks_(std::move(chunks)),
        kinds_(std::move(kinds)),
        size_(size),
        generation_(generation),
        problems_(std::move(problems)) {}

  // Returns the node, or nullptr when linkfit does not know it.
  const NodeState* Find(std::string_view name) const {
    const std::size_t position = index_->Find(name);
    if (position == NameIndex::kNotFound) return nullptr;
    return NodeAt(position);
  }
  // The position of the node named `name` (exact: compares the bytes), or NameIndex::kNoPosition.
  std::uint32_t PositionOf(std::string_view name) const {
    const std::size_t position = index_->Find(name);
    return position == NameIndex::kNotFound ? NameIndex::kNoPosition
                                            : static_cast<std::uint32_t>(position);
  }
  // The node at a position a lookup returned.
  const NodeState* NodeAt(std::size_t position) const {
    return ChunkOf(position).nodes[position % kChunkSize].get();
  }
  // The number of the node's machine kind at a position: kinds()[KindAt(position)] equals
  // NodeAt(position)->machine_kind().
  std::uint32_t KindAt(std::size_t position) const {
    return ChunkOf(position).kinds[position % kChunkSize];
  }
  const MachineKinds& kinds() const { return *kinds_; }
  // The same table, held: snapshots share it until a node of a new kind comes (copied then), so
  // that a caller may tell by its address whether two snapshots number the kinds alike.
  const std::shared_ptr<const MachineKinds>& shared_kinds() const { return kinds_; }
  // Starts loading what NodeAt(position) reads first (the node's pointer), for a caller that
  // will visit several nodes by position: with the pointer loaded a few visits ahead, it can
  // prefetch the node itself (`__builtin_prefetch(NodeAt(position))`) before it needs it.
  void PrefetchNodeAt(std::size_t position) const {
    __builtin_prefetch(&ChunkOf(position).nodes[position % kChunkSize]);
  }
  // Calls visit(i, position) for each of `names` in order (NameIndex::ForEachPosition: the
  // lookups, overlapping their cache misses, with the caller's work per name in their loop).
  // Returns how many of the names are unknown.
  template <typename Visit>
  std::size_t ForEachPosition(const std::vector<std::string_view>& names, Visit&& visit) const {
    return index_->ForEachPosition(names.data(), names.size(), std::forward<Visit>(visit));
  }
  // Every byte value that occurs in some node's name (NameIndex::name_bytes).
  const ByteSet& name_bytes() const { return index_->name_bytes(); }
  // For each position, its name's rank among all the snapshot's names in byte order
  // (NameIndex::Ranks: computed once per set of names, then kept).
  const std::vector<std::uint32_t>& Ranks() const { return index_->Ranks(); }
  // Every node in insertion order (built on first use; filter and prioritize never need it).
  const std::vector<NodeStatePtr>& nodes() const;
  std::size_t size() const { return size_; }
  // Snapshots are numbered from 1 in the order the cache publishes them (ClusterCache::Changes).
  std::uint64_t generation() const { return generation_; }
  // Why linkfit cannot model a node it was told about (a topology annotation that does not
  // parse), or nullptr.
  const std::string* Problem(std::string_view name) const {
    if (!problems_) return nullptr;
    const auto it = problems_->find(name);
    return it == problems_->end() ? nullptr : &it->second;
  }
  const std::shared_ptr<const Problems>& problems() const { return problems_; }

 private:
  const NodeChunk& ChunkOf(std::size_t position) const {
    return *(*chunks_)[position / kChunkSize];
  }

  std::shared_ptr<const NameIndex> index_;
  std::shared_ptr<const NodeChunks> chunks_;
  std::shared_ptr<const MachineKinds> kinds_;
  std::size_t size_ = 0;
  std::uint64_t generation_ = 0;
  std::shared_ptr<const Problems> problems_;
  mutable std::once_flag nodes_once_;
  mutable std::vector<NodeStatePtr> nodes_;  // written once, under nodes_once_
};
using SnapshotPtr = std::shared_ptr<const Snapshot>;

enum class PodPhase { kInitial, kAssumed, kAdded };
// What RemoveBound did.
enum class RemoveOutcome { kRemoved, kUnknown, kBindInFlight };

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
  // The bind of pod `uid` moves on (state/bind_lifecycle.h): the step is looked up from the
  // pod's stage and its effect carried out in one atomic step; its outcome is counted in the
  // metrics sink. A pod the cache does not hold is in stage kForgotten (any event is late).
  // Errors: the pair is not in the lifecycle's diagram (nothing changes).
  Result<BindStep> Advance(const std::string& uid, BindEvent event);
  // kForgotten for a pod the cache does not hold; Added pods are kConfirmed or kReplaced.
  BindStage Stage(const std::string& uid) const;
  // Stage kAccepted: the write was accepted, and a repeated bind is a success.
  bool BindDone(const std::string& uid) const { return Stage(uid) == BindStage::kAccepted; }
  // Assumed -> Added. No-op in other phases.
  void Confirm(const std::string& uid);
  // Assumed -> Initial, freeing the devices. No-op for Added or unknown UIDs.
  void Forget(const std::string& uid);
  // Assumed/Added -> Deleted, freeing the devices. Returns whether the UID was known.
  bool Remove(const std::string& uid);
  // Added -> Deleted, freeing the devices; an Assumed pod (its bind is in flight) is left as it
  // is and reported, so that a departure cannot free devices a bind is still recording (the
  // bind would then report success for devices nobody holds). One atomic step.
  RemoveOutcome RemoveBound(const std::string& uid);
  // Initial -> Added for a pod already bound (start-up rebuild). Errors like Assume's.
  Result<void> AddBound(const Assignment& assignment);
  // Sets what a known pod holds to `assignment` and makes it Added (the API server's record
  // differs from the cache's: the record wins), or adds it. On a collision nothing changes and
  // the error says why.
  Result<void> ReplaceBound(const Assignment& assignment);

  // Records (non-empty reason) or clears why a node cannot be modelled (Snapshot::Problem).
  void SetNodeProblem(const std::string& name, std::string reason);

  PodPhase Phase(const std::string& uid) const;

  // Cluster mode's pods without GPUs count only by their CPU and memory requests on their node
  // (NodeState::WithLoad): no per-pod record here or in the node. The caller (the pod store)
  // remembers what it added. AddLoad is false when the node is unknown.
  bool AddLoad(const std::string& node, std::int64_t cpu_milli, std::int64_t memory_bytes);
  void RemoveLoad(const std::string& node, std::int64_t cpu_milli, std::int64_t memory_bytes);
  // The assignment of a known pod.
  std::optional<Assignment> Find(const std::string& uid) const;
  // The NIC rails the known pods of `group` (Assignment::group) hold, assumed ones included.
  alloc::NicMask GroupRailsOf(std::string_view group) const;
  // Every Added pod's assignment (what a restart must keep); with `include_assumed`, also the
  // pods whose bind is in flight (a state file written during a bind must not drop them).
  std::vector<Assignment> BoundAssignments(bool include_assumed = false) const;

  struct Sizes {
    std::size_t nodes = 0;
    std::size_t assumed = 0;
    std::size_t added = 0;
  };
  Sizes sizes() const;

  // Appends to `positions` every position whose node changed after snapshot generation `from`
  // up to snapshot generation `to` (a position may come more than once), for a reader that keeps
  // answers by position across snapshots and must drop those of changed nodes. False, with
  // `positions` unspecified, when the cache cannot say: it keeps the last kMaxChanges changes,
  // and a removed node renumbers positions (everything kept by position is then stale).
  // REQUIRES: from <= to <= the latest published generation.
  bool Changes(std::uint64_t from, std::uint64_t to, std::vector<std::uint32_t>& positions) const;
  static constexpr std::size_t kMaxChanges = 4096;

 private:
  // A known pod: its phase and the record its node holds (the same shared Assignment, so the
  // index costs a pointer, not a copy).
  struct PodEntry {
    PodPhase phase = PodPhase::kInitial;
    BindStage stage = BindStage::kConfirmed;  // refines kAssumed: how far its bind went
    AssignmentPtr record;                     // never null
    const std::string& node() const { return record->node; }
  };
  void ChangedLocked() LINKFIT_REQUIRES(mutex_);
  std::size_t PositionLocked(std::string_view name) const
      LINKFIT_REQUIRES(mutex_);  // NameIndex::kNotFound if unknown
  const NodeStatePtr& NodeAtLocked(std::size_t position) const LINKFIT_REQUIRES(mutex_);
  // Replaces the node at `position` (recorded in changes_), copying the chunk table and the
  // chunk first when a published snapshot may still share them.
  void SetNodeLocked(std::size_t position, NodeStatePtr state) LINKFIT_REQUIRES(mutex_);
  // Forgets every recorded change: no reader can catch up from before now.
  void ForgetChangesLocked() LINKFIT_REQUIRES(mutex_);
  void AppendNodeLocked(NodeStatePtr state) LINKFIT_REQUIRES(mutex_);
  // The number of `kind`, numbered on first sight. Kinds are never renumbered while nodes hold
  // them; the registry starts afresh when the cache rebuilds its positions (RemoveNode) or holds
  // more kinds than twice its nodes (kinds left behind by changed allocatables).
  std::uint32_t KindNumberLocked(const MachineKind& kind) LINKFIT_REQUIRES(mutex_);
  void RenumberKindsLocked() LINKFIT_REQUIRES(mutex_);
  void ReportLocked(const std::string& node_name) LINKFIT_REQUIRES(mutex_);
  // Adds the pod to its node; returns the record the node now holds.
  Result<AssignmentPtr> ApplyLocked(AssignmentPtr assignment) LINKFIT_REQUIRES(mutex_);
  void ReleaseLocked(const std::string& uid, const PodEntry& entry) LINKFIT_REQUIRES(mutex_);
  // A pod linkfit did not know, bound as the API says: applied to its node and kept as added
  // and confirmed (AddBound, and ReplaceBound of an unknown pod).
  Result<void> AddConfirmedLocked(const Assignment& assignment) LINKFIT_REQUIRES(mutex_);
  // Keep group_rails_ in step with pods_: a record entering pods_, and one leaving it.
  void TrackLocked(const Assignment& record) LINKFIT_REQUIRES(mutex_);
  void UntrackLocked(const Assignment& record) LINKFIT_REQUIRES(mutex_);

  MetricsSink* metrics_;
  mutable Mutex mutex_;
  std::shared_ptr<NameIndex> index_ LINKFIT_GUARDED_BY(mutex_);
  std::shared_ptr<NodeChunks> chunks_ LINKFIT_GUARDED_BY(mutex_);
  std::shared_ptr<MachineKinds> kinds_ LINKFIT_GUARDED_BY(mutex_);
  struct KindHasher {
    std::size_t operator()(const MachineKind& kind) const { return MachineKindHash(kind); }
  };
  std::unordered_map<MachineKind, std::uint32_t, KindHasher> kind_numbers_
      LINKFIT_GUARDED_BY(mutex_);
  std::size_t size_ LINKFIT_GUARDED_BY(mutex_) = 0;
  // Positions whose node changed, each with the generation of the first snapshot that shows
  // the change (the next to be published), oldest first; every change of a generation above
  // changes_floor_ is here.
  struct PositionChange {
    std::uint64_t generation = 0;
    std::uint32_t position = 0;
  };
  std::vector<PositionChange> changes_ LINKFIT_GUARDED_BY(mutex_);
  std::uint64_t changes_floor_ LINKFIT_GUARDED_BY(mutex_) = 0;
  std::unordered_map<PodUid, PodEntry, PodUid::Hasher> pods_ LINKFIT_GUARDED_BY(mutex_);
  std::shared_ptr<const Snapshot::Problems> problems_
      LINKFIT_GUARDED_BY(mutex_);  // copied on change
  std::size_t assumed_ LINKFIT_GUARDED_BY(mutex_) = 0;
  GroupRails group_rails_ LINKFIT_GUARDED_BY(mutex_);
  // Per node, by position: free whole GPUs and those in its largest well-connected free set,
  // and their totals, for the fragmentation gauge (only maintained when metrics_ is set). Two
  // bytes a node, not a map entry holding a copy of its name.
  struct FreeGpus {
    std::uint8_t free = 0;  // a node has at most topology::kMaxGpus GPUs
    std::uint8_t connected = 0;
  };
  std::vector<FreeGpus> free_gpus_ LINKFIT_GUARDED_BY(mutex_);
  std::uint64_t free_total_ LINKFIT_GUARDED_BY(mutex_) = 0;
  std::uint64_t connected_total_ LINKFIT_GUARDED_BY(mutex_) = 0;
  // Copy-on-write bookkeeping: what was created since the last publication is private to the
  // cache and changed in place; everything else may be shared with a snapshot and is copied
  // before a change. No reference counts are consulted, so no reader's release races a write.
  mutable bool index_private_ LINKFIT_GUARDED_BY(mutex_) = false;
  mutable bool chunks_private_ LINKFIT_GUARDED_BY(mutex_) = false;
  mutable bool kinds_private_ LINKFIT_GUARDED_BY(mutex_) = false;
  mutable std::vector<bool> chunk_private_ LINKFIT_GUARDED_BY(mutex_);
  // Lazy publication: Snapshot() builds a new one when something changed since the last.
  mutable bool dirty_ LINKFIT_GUARDED_BY(mutex_) = true;
  mutable std::uint64_t generation_ LINKFIT_GUARDED_BY(mutex_) = 0;
  mutable SnapshotPtr published_ LINKFIT_GUARDED_BY(mutex_);
};

}  // namespace linkfit::state
