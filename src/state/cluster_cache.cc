#include "linkfit/state/cluster_cache.h"

#include <algorithm>
#include <iterator>
#include <memory>

#include "linkfit/common/log.h"

namespace linkfit::state {

const std::vector<NodeStatePtr>& Snapshot::nodes() const {
  std::call_once(nodes_once_, [this] {
    nodes_.reserve(size_);
    for (std::size_t i = 0; i < size_; ++i) {
      nodes_.push_back((*chunks_)[i / kChunkSize]->nodes[i % kChunkSize]);
    }
  });
  return nodes_;
}

ClusterCache::ClusterCache(MetricsSink* metrics)
    : metrics_(metrics),
      index_(std::make_shared<NameIndex>()),
      chunks_(std::make_shared<NodeChunks>()),
      kinds_(std::make_shared<MachineKinds>()) {
  MutexLock lock(mutex_);
  ChangedLocked();
}

void ClusterCache::ChangedLocked() {
  dirty_ = true;
  if (metrics_ != nullptr) {
    metrics_->SetCacheSizes(size_, assumed_, pods_.size() - assumed_);
  }
}

std::size_t ClusterCache::PositionLocked(std::string_view name) const { return index_->Find(name); }

const NodeStatePtr& ClusterCache::NodeAtLocked(std::size_t position) const {
  return (*chunks_)[position / kChunkSize]->nodes[position % kChunkSize];
}

void ClusterCache::SetNodeLocked(std::size_t position, NodeStatePtr state) {
  if (!chunks_private_) {
    chunks_ = std::make_shared<NodeChunks>(*chunks_);
    chunks_private_ = true;
  }
  const std::size_t c = position / kChunkSize;
  if (!chunk_private_[c]) {
    (*chunks_)[c] = std::make_shared<NodeChunk>(*(*chunks_)[c]);
    chunk_private_[c] = true;
  }
  NodeChunk& chunk = *(*chunks_)[c];
  chunk.kinds[position % kChunkSize] = KindNumberLocked(state->machine_kind());
  chunk.nodes[position % kChunkSize] = std::move(state);
  // Bounded: past twice the bound the older half goes, and with it the ability to catch up from
  // before the newest change dropped.
  if (changes_.size() >= 2 * kMaxChanges) {
    const auto half = changes_.begin() + static_cast<std::ptrdiff_t>(kMaxChanges);
    changes_floor_ = std::prev(half)->generation;
    changes_.erase(changes_.begin(), half);
  }
  changes_.push_back(PositionChange{generation_ + 1, static_cast<std::uint32_t>(position)});
}

void ClusterCache::ForgetChangesLocked() {
  changes_.clear();
  changes_floor_ = generation_ + 1;  // even a snapshot of the next generation may miss some
}

bool ClusterCache::Changes(std::uint64_t from, std::uint64_t to,
                           std::vector<std::uint32_t>& positions) const {
  MutexLock lock(mutex_);
  if (from < changes_floor_) return false;
  auto it = std::upper_bound(
      changes_.begin(), changes_.end(), from,
      [](std::uint64_t generation, const PositionChange& c) { return generation < c.generation; });
  for (; it != changes_.end() && it->generation <= to; ++it) positions.push_back(it->position);
  return true;
}

std::uint32_t ClusterCache::KindNumberLocked(const MachineKind& kind) {
  const auto [it, added] =
      kind_numbers_.try_emplace(kind, static_cast<std::uint32_t>(kind_numbers_.size()));
  if (added) {
    if (!kinds_private_) {
      kinds_ = std::make_shared<MachineKinds>(*kinds_);
      kinds_private_ = true;
    }
    kinds_->push_back(kind);
  }
  return it->second;
}

void ClusterCache::RenumberKindsLocked() {
  kind_numbers_.clear();
  kinds_ = std::make_shared<MachineKinds>();
  kinds_private_ = true;
  for (std::size_t position = 0; position < size_; ++position) {
    SetNodeLocked(position, NodeAtLocked(position));
  }
}

void ClusterCache::AppendNodeLocked(NodeStatePtr state) {
  if (size_ % kChunkSize == 0) {
    if (!chunks_private_) {
      chunks_ = std::make_shared<NodeChunks>(*chunks_);
      chunks_private_ = true;
    }
    chunks_->push_back(std::make_shared<NodeChunk>());
    chunk_private_.push_back(true);
  }
  ++size_;
  SetNodeLocked(size_ - 1, std::move(state));
}

void ClusterCache::ReportLocked(const std::string& node_name) {
  if (metrics_ == nullptr) return;
  const std::size_t position = PositionLocked(node_name);
  if (position == NameIndex::kNotFound) return;
  const NodeState& node = *NodeAtLocked(position);
  const double used = node.UsedGpuEquivalents();
  metrics_->SetNodeDevices(node.name(), node.info().own_topology().summary_model(), used,
                           node.info().gpu_count() - used);
  // Fragmentation: free whole GPUs outside the node's largest well-connected free set (NVLink on
  // nodes that have it, one socket otherwise) can only serve small pods.
  const topology::GpuMask free = node.whole_free();
  const int free_count = __builtin_popcount(free);
  const alloc::Closeness level = node.info().topology().min_nvlink_mbps() > 0
                                     ? alloc::Closeness::kNvlink
                                     : alloc::Closeness::kSocket;
  int connected = free_count;
  while (connected > 1 && node.info().table->BestMeeting(free, connected, level) == 0) --connected;
  if (position >= free_gpus_.size()) free_gpus_.resize(position + 1);
  FreeGpus& entry = free_gpus_[position];
  free_total_ = free_total_ - entry.free + static_cast<std::uint64_t>(free_count);
  connected_total_ = connected_total_ - entry.connected + static_cast<std::uint64_t>(connected);
  entry = FreeGpus{static_cast<std::uint8_t>(free_count), static_cast<std::uint8_t>(connected)};
  metrics_->SetFragmentation(free_total_ == 0 ? 0.0
                                              : 1.0 - static_cast<double>(connected_total_) /
                                                          static_cast<double>(free_total_));
}

int ClusterCache::UpsertNode(NodeInfoPtr info) {
  MutexLock lock(mutex_);
  const std::string name = info->name;
  auto fresh = std::make_shared<const NodeState>(info);
  NodeStatePtr state = fresh;
  int dropped = 0;
  const std::size_t position = PositionLocked(name);
  if (position == NameIndex::kNotFound) {
    if (!index_private_) {
      index_ = std::make_shared<NameIndex>(*index_);
      index_private_ = true;
    }
    index_->Insert(name, size_);
    AppendNodeLocked(state);
  } else {
    // Loads (pods without GPUs) carry over as they are.
    const NodeState& old = *NodeAtLocked(position);
    state = state->WithLoad(old.load_pods(), old.load_cpu_milli(), old.load_memory_bytes());
    // The same records: the index keeps pointing at what the node holds.
    for (const AssignmentPtr& assignment : NodeAtLocked(position)->pods().records()) {
      auto next = state->Apply(assignment);
      if (next) {
        state = *next;
      } else {
        log::Error("node " + name + " changed: pod " + assignment->PodKey() + " (" +
                   assignment->pod_uid +
                   ") no longer fits and was dropped: " + next.error().message);
        const auto pod = pods_.find(PodUid(assignment->pod_uid));
        if (pod != pods_.end()) {
          if (pod->second.phase == PodPhase::kAssumed) --assumed_;
          UntrackLocked(*pod->second.record);
          pods_.erase(pod);
        }
        ++dropped;
      }
    }
    SetNodeLocked(position, state);
    // Groups' rails as the node now numbers them (Add replaces a member's rails).
    for (const AssignmentPtr& assignment : state->pods().records()) TrackLocked(*assignment);
    // A changed allocatable may leave its old kind behind; keep the registry near the nodes.
    if (kinds_->size() > 2 * size_ + 16) RenumberKindsLocked();
  }
  ReportLocked(name);
  ChangedLocked();
  return dropped;
}

void ClusterCache::RemoveNode(const std::string& name) {
  MutexLock lock(mutex_);
  const std::size_t position = PositionLocked(name);
  if (position == NameIndex::kNotFound) return;
  for (const auto& entry : NodeAtLocked(position)->pods()) {
    const auto pod = pods_.find(PodUid(entry.first));
    if (pod != pods_.end()) {
      if (pod->second.phase == PodPhase::kAssumed) --assumed_;
      UntrackLocked(*pod->second.record);
      pods_.erase(pod);
    }
  }
  // Rebuilt from scratch (node removal is rare): fresh, private structures.
  std::vector<NodeStatePtr> kept;
  kept.reserve(size_);
  for (std::size_t i = 0; i < size_; ++i) {
    if (i != position) kept.push_back(NodeAtLocked(i));
  }
  index_ = std::make_shared<NameIndex>();
  chunks_ = std::make_shared<NodeChunks>();
  kinds_ = std::make_shared<MachineKinds>();
  kind_numbers_.clear();
  chunk_private_.clear();
  index_private_ = true;
  chunks_private_ = true;
  kinds_private_ = true;
  size_ = 0;
  for (NodeStatePtr& node : kept) {
    index_->Insert(node->name(), size_);
    AppendNodeLocked(std::move(node));
  }
  ForgetChangesLocked();  // positions renumbered: nothing kept by position still holds
  if (metrics_ != nullptr) {
    metrics_->RemoveNode(name);
    // The nodes after it moved down one position, and so do their counts.
    if (position < free_gpus_.size()) {
      const auto gone = free_gpus_.begin() + static_cast<std::ptrdiff_t>(position);
      free_total_ -= gone->free;
      connected_total_ -= gone->connected;
      free_gpus_.erase(gone);
    }
  }
  ChangedLocked();
}

SnapshotPtr ClusterCache::Snapshot() const {
  MutexLock lock(mutex_);
  if (dirty_) {
    published_ = std::make_shared<const state::Snapshot>(index_, chunks_, kinds_, size_,
                                                         ++generation_, problems_);
    // From now on the snapshot shares them: the next change copies what it touches.
    dirty_ = false;
    index_private_ = false;
    chunks_private_ = false;
    kinds_private_ = false;
    chunk_private_.assign(chunk_private_.size(), false);
  }
  return published_;
}

Result<AssignmentPtr> ClusterCache::ApplyLocked(AssignmentPtr assignment) {
  const std::size_t position = PositionLocked(assignment->node);
  if (position == NameIndex::kNotFound) {
    return MakeError("node " + assignment->node + " is unknown to linkfit");
  }
  auto next = NodeAtLocked(position)->Apply(assignment);
  if (!next) return tl::unexpected(next.error());
  SetNodeLocked(position, std::move(*next));
  return assignment;
}

Result<ClusterCache::AssumeResult> ClusterCache::Assume(const std::string& uid,
                                                        const std::string& node,
                                                        const Placer& placer) {
  MutexLock lock(mutex_);
  if (const auto pod = pods_.find(PodUid(uid)); pod != pods_.end()) {
    if (pod->second.node() != node) {
      return MakeError("pod " + uid + " is already bound to node " + pod->second.node());
    }
    return AssumeResult{*pod->second.record, true};
  }
  const std::size_t position = PositionLocked(node);
  if (position == NameIndex::kNotFound) return MakeError("node " + node + " is unknown to linkfit");
  auto assignment = placer(*NodeAtLocked(position));
  if (!assignment) return tl::unexpected(assignment.error());
  assignment->pod_uid = uid;
  assignment->node = node;
  auto applied = ApplyLocked(std::make_shared<const Assignment>(*assignment));
  if (!applied) return tl::unexpected(applied.error());
  pods_[PodUid(uid)] = PodEntry{PodPhase::kAssumed, BindStage::kAssumed, *applied};
  TrackLocked(**applied);
  ++assumed_;
  ReportLocked(node);
  ChangedLocked();
  return AssumeResult{std::move(*assignment), false};
}

Result<BindStep> ClusterCache::Advance(const std::string& uid, BindEvent event) {
  Result<BindStep> step;
  {
    MutexLock lock(mutex_);
    const auto pod = pods_.find(PodUid(uid));
    const BindStage from = pod == pods_.end() ? BindStage::kForgotten : pod->second.stage;
    step = NextBindStep(from, event);
    if (!step || step->late) return step;
    switch (step->effect) {
      case BindEffect::kNone:
        pod->second.stage = step->stage;
        break;
      case BindEffect::kConfirm:
        pod->second.stage = step->stage;
        pod->second.phase = PodPhase::kAdded;
        --assumed_;
        ChangedLocked();
        break;
      case BindEffect::kForget:
      case BindEffect::kRemove:
        ReleaseLocked(uid, pod->second);
        UntrackLocked(*pod->second.record);
        pods_.erase(pod);
        ChangedLocked();
        break;
    }
  }
  if (metrics_ != nullptr && !step->outcome.empty()) metrics_->CountBindOutcome(step->outcome);
  return step;
}

BindStage ClusterCache::Stage(const std::string& uid) const {
  MutexLock lock(mutex_);
  const auto pod = pods_.find(PodUid(uid));
  return pod == pods_.end() ? BindStage::kForgotten : pod->second.stage;
}

void ClusterCache::SetNodeProblem(const std::string& name, std::string reason) {
  MutexLock lock(mutex_);
  const bool known = problems_ && problems_->count(name) != 0;
  if (reason.empty() && !known) return;
  auto next = problems_ ? std::make_shared<Snapshot::Problems>(*problems_)
                        : std::make_shared<Snapshot::Problems>();
  if (reason.empty()) {
    next->erase(name);
  } else {
    (*next)[name] = std::move(reason);
  }
  problems_ = std::move(next);
  ChangedLocked();
}

bool ClusterCache::AddLoad(const std::string& node, std::int64_t cpu_milli,
                           std::int64_t memory_bytes) {
  MutexLock lock(mutex_);
  const std::size_t position = PositionLocked(node);
  if (position == NameIndex::kNotFound) return false;
  SetNodeLocked(position, NodeAtLocked(position)->WithLoad(1, cpu_milli, memory_bytes));
  ChangedLocked();
  return true;
}

void ClusterCache::RemoveLoad(const std::string& node, std::int64_t cpu_milli,
                              std::int64_t memory_bytes) {
  MutexLock lock(mutex_);
  const std::size_t position = PositionLocked(node);
  if (position == NameIndex::kNotFound) return;
  SetNodeLocked(position, NodeAtLocked(position)->WithLoad(-1, -cpu_milli, -memory_bytes));
  ChangedLocked();
}

Result<void> ClusterCache::ReplaceBound(const Assignment& assignment) {
  MutexLock lock(mutex_);
  const auto pod = pods_.find(PodUid(assignment.pod_uid));
  if (pod == pods_.end()) return AddConfirmedLocked(assignment);
  // Take the old assignment out, try the new one, and put the old one back if it collides.
  const AssignmentPtr old = pod->second.record;
  const std::size_t old_position = PositionLocked(old->node);
  if (old_position != NameIndex::kNotFound) {
    SetNodeLocked(old_position, NodeAtLocked(old_position)->Remove(assignment.pod_uid));
  }
  auto applied = ApplyLocked(std::make_shared<const Assignment>(assignment));
  if (!applied) {
    if (old_position != NameIndex::kNotFound) (void)ApplyLocked(old);
    return tl::unexpected(applied.error());
  }
  if (pod->second.phase == PodPhase::kAssumed) --assumed_;
  const std::string old_node = old->node;
  // A bind the record ends here was replaced by it; an ended one keeps how it ended.
  const BindStage stage = BindEnded(pod->second.stage) ? pod->second.stage : BindStage::kReplaced;
  UntrackLocked(*old);
  pod->second = PodEntry{PodPhase::kAdded, stage, *applied};
  TrackLocked(**applied);
  ReportLocked(old_node);
  ReportLocked(assignment.node);
  ChangedLocked();
  return {};
}

void ClusterCache::Confirm(const std::string& uid) {
  MutexLock lock(mutex_);
  const auto pod = pods_.find(PodUid(uid));
  if (pod == pods_.end() || pod->second.phase != PodPhase::kAssumed) return;
  pod->second.phase = PodPhase::kAdded;
  pod->second.stage = BindStage::kConfirmed;
  --assumed_;
  ChangedLocked();
}

void ClusterCache::ReleaseLocked(const std::string& uid, const PodEntry& entry) {
  const std::size_t position = PositionLocked(entry.node());
  if (position != NameIndex::kNotFound) {
    SetNodeLocked(position, NodeAtLocked(position)->Remove(uid));
  }
  if (entry.phase == PodPhase::kAssumed) --assumed_;
  ReportLocked(entry.node());
}

void ClusterCache::TrackLocked(const Assignment& record) {
  if (record.group.empty() || record.nics.empty()) return;
  const std::size_t position = PositionLocked(record.node);
  if (position == NameIndex::kNotFound) return;
  group_rails_.Add(record.group, record.pod_uid,
                   GroupRails::RailsOf(record, *NodeAtLocked(position)));
}

void ClusterCache::UntrackLocked(const Assignment& record) {
  group_rails_.Remove(record.group, record.pod_uid);
}

alloc::NicMask ClusterCache::GroupRailsOf(std::string_view group) const {
  MutexLock lock(mutex_);
  return group_rails_.Of(group);
}

void ClusterCache::Forget(const std::string& uid) {
  MutexLock lock(mutex_);
  const auto pod = pods_.find(PodUid(uid));
  if (pod == pods_.end() || pod->second.phase != PodPhase::kAssumed) return;
  ReleaseLocked(uid, pod->second);
  UntrackLocked(*pod->second.record);
  pods_.erase(pod);
  ChangedLocked();
}

bool ClusterCache::Remove(const std::string& uid) {
  MutexLock lock(mutex_);
  const auto pod = pods_.find(PodUid(uid));
  if (pod == pods_.end()) return false;
  ReleaseLocked(uid, pod->second);
  UntrackLocked(*pod->second.record);
  pods_.erase(pod);
  ChangedLocked();
  return true;
}

RemoveOutcome ClusterCache::RemoveBound(const std::string& uid) {
  MutexLock lock(mutex_);
  const auto pod = pods_.find(PodUid(uid));
  if (pod == pods_.end()) return RemoveOutcome::kUnknown;
  if (pod->second.phase == PodPhase::kAssumed) return RemoveOutcome::kBindInFlight;
  ReleaseLocked(uid, pod->second);
  UntrackLocked(*pod->second.record);
  pods_.erase(pod);
  ChangedLocked();
  return RemoveOutcome::kRemoved;
}

Result<void> ClusterCache::AddBound(const Assignment& assignment) {
  MutexLock lock(mutex_);
  if (pods_.count(PodUid(assignment.pod_uid)) != 0) {
    return MakeError("pod " + assignment.pod_uid + " is already known");
  }
  return AddConfirmedLocked(assignment);
}

Result<void> ClusterCache::AddConfirmedLocked(const Assignment& assignment) {
  auto applied = ApplyLocked(std::make_shared<const Assignment>(assignment));
  if (!applied) return tl::unexpected(applied.error());
  pods_[PodUid(assignment.pod_uid)] = PodEntry{PodPhase::kAdded, BindStage::kConfirmed, *applied};
  TrackLocked(**applied);
  ReportLocked(assignment.node);
  ChangedLocked();
  return {};
}

PodPhase ClusterCache::Phase(const std::string& uid) const {
  MutexLock lock(mutex_);
  const auto pod = pods_.find(PodUid(uid));
  return pod == pods_.end() ? PodPhase::kInitial : pod->second.phase;
}

std::optional<Assignment> ClusterCache::Find(const std::string& uid) const {
  MutexLock lock(mutex_);
  const auto pod = pods_.find(PodUid(uid));
  if (pod == pods_.end()) return std::nullopt;
  return *pod->second.record;  // what its node holds
}

std::vector<Assignment> ClusterCache::BoundAssignments(bool include_assumed) const {
  MutexLock lock(mutex_);
  std::vector<Assignment> out;
  for (std::size_t i = 0; i < size_; ++i) {
    for (const auto& [uid, assignment] : NodeAtLocked(i)->pods()) {
      const auto pod = pods_.find(PodUid(uid));
      if (pod != pods_.end() && (include_assumed || pod->second.phase == PodPhase::kAdded)) {
        out.push_back(assignment);
      }
    }
  }
  return out;
}

ClusterCache::Sizes ClusterCache::sizes() const {
  MutexLock lock(mutex_);
  return Sizes{size_, assumed_, pods_.size() - assumed_};
}

}  // namespace linkfit::state
