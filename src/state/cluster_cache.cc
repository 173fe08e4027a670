#include "linkfit/state/cluster_cache.h"

#include "linkfit/common/log.h"

namespace linkfit::state {

ClusterCache::ClusterCache(MetricsSink* metrics)
    : metrics_(metrics), index_(std::make_shared<state::Snapshot::NameIndex>()) {
  std::lock_guard<std::mutex> lock(mutex_);
  PublishLocked();
}

void ClusterCache::PublishLocked() {
  ++generation_;
  published_ = std::make_shared<const state::Snapshot>(index_, nodes_, generation_);
  if (metrics_ != nullptr) {
    metrics_->SetCacheSizes(nodes_.size(), assumed_, pods_.size() - assumed_);
  }
}

void ClusterCache::ReportLocked(const std::string& node_name) {
  if (metrics_ == nullptr) return;
  const auto it = index_->find(node_name);
  if (it == index_->end()) return;
  const NodeState& node = *nodes_[it->second];
  const double used = node.UsedGpuEquivalents();
  metrics_->SetNodeDevices(node.name(), node.info().topology().gpu(0).model, used,
                           node.info().gpu_count() - used);
}

int ClusterCache::UpsertNode(NodeInfoPtr info) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string name = info->name;
  auto fresh = std::make_shared<const NodeState>(info);
  NodeStatePtr state = fresh;
  int dropped = 0;
  const auto it = index_->find(name);
  if (it == index_->end()) {
    auto index = std::make_shared<state::Snapshot::NameIndex>(*index_);
    index->emplace(name, nodes_.size());
    index_ = std::move(index);
    nodes_.push_back(state);
  } else {
    for (const auto& [uid, assignment] : nodes_[it->second]->pods()) {
      auto next = state->Apply(assignment);
      if (next) {
        state = *next;
      } else {
        log::Error("node " + name + " changed: pod " + assignment.PodKey() + " (" + uid +
                   ") no longer fits and was dropped: " + next.error().message);
        const auto pod = pods_.find(uid);
        if (pod != pods_.end()) {
          if (pod->second.phase == PodPhase::kAssumed) --assumed_;
          pods_.erase(pod);
        }
        ++dropped;
      }
    }
    nodes_[it->second] = state;
  }
  ReportLocked(name);
  PublishLocked();
  return dropped;
}

void ClusterCache::RemoveNode(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = index_->find(name);
  if (it == index_->end()) return;
  for (const auto& entry : nodes_[it->second]->pods()) {
    const auto pod = pods_.find(entry.first);
    if (pod != pods_.end()) {
      if (pod->second.phase == PodPhase::kAssumed) --assumed_;
      pods_.erase(pod);
    }
  }
  std::vector<NodeStatePtr> nodes;
  auto index = std::make_shared<state::Snapshot::NameIndex>();
  for (const NodeStatePtr& node : nodes_) {
    if (node->name() == name) continue;
    index->emplace(node->name(), nodes.size());
    nodes.push_back(node);
  }
  nodes_ = std::move(nodes);
  index_ = std::move(index);
  if (metrics_ != nullptr) metrics_->RemoveNode(name);
  PublishLocked();
}

SnapshotPtr ClusterCache::Snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return published_;
}

Result<void> ClusterCache::ApplyLocked(const Assignment& assignment) {
  const auto it = index_->find(assignment.node);
  if (it == index_->end()) return MakeError("node " + assignment.node + " is unknown to linkfit");
  auto next = nodes_[it->second]->Apply(assignment);
  if (!next) return tl::unexpected(next.error());
  nodes_[it->second] = std::move(*next);
  return {};
}

Result<ClusterCache::AssumeResult> ClusterCache::Assume(const std::string& uid,
                                                        const std::string& node,
                                                        const Placer& placer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (const auto pod = pods_.find(uid); pod != pods_.end()) {
    if (pod->second.node != node) {
      return MakeError("pod " + uid + " is already bound to node " + pod->second.node);
    }
    const auto it = index_->find(node);
    const auto existing = nodes_[it->second]->pods().find(uid);
    return AssumeResult{existing->second, true};
  }
  const auto it = index_->find(node);
  if (it == index_->end()) return MakeError("node " + node + " is unknown to linkfit");
  auto assignment = placer(*nodes_[it->second]);
  if (!assignment) return tl::unexpected(assignment.error());
  assignment->pod_uid = uid;
  assignment->node = node;
  if (auto applied = ApplyLocked(*assignment); !applied) return tl::unexpected(applied.error());
  pods_[uid] = PodEntry{PodPhase::kAssumed, node};
  ++assumed_;
  ReportLocked(node);
  PublishLocked();
  return AssumeResult{std::move(*assignment), false};
}

void ClusterCache::Confirm(const std::string& uid) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto pod = pods_.find(uid);
  if (pod == pods_.end() || pod->second.phase != PodPhase::kAssumed) return;
  pod->second.phase = PodPhase::kAdded;
  --assumed_;
  PublishLocked();
}

void ClusterCache::ReleaseLocked(const std::string& uid, const PodEntry& entry) {
  const auto it = index_->find(entry.node);
  if (it != index_->end()) nodes_[it->second] = nodes_[it->second]->Remove(uid);
  if (entry.phase == PodPhase::kAssumed) --assumed_;
  ReportLocked(entry.node);
}

void ClusterCache::Forget(const std::string& uid) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto pod = pods_.find(uid);
  if (pod == pods_.end() || pod->second.phase != PodPhase::kAssumed) return;
  ReleaseLocked(uid, pod->second);
  pods_.erase(pod);
  PublishLocked();
}

bool ClusterCache::Remove(const std::string& uid) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto pod = pods_.find(uid);
  if (pod == pods_.end()) return false;
  ReleaseLocked(uid, pod->second);
  pods_.erase(pod);
  PublishLocked();
  return true;
}

Result<void> ClusterCache::AddBound(const Assignment& assignment) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (pods_.count(assignment.pod_uid) != 0) {
    return MakeError("pod " + assignment.pod_uid + " is already known");
  }
  if (auto applied = ApplyLocked(assignment); !applied) return tl::unexpected(applied.error());
  pods_[assignment.pod_uid] = PodEntry{PodPhase::kAdded, assignment.node};
  ReportLocked(assignment.node);
  PublishLocked();
  return {};
}

PodPhase ClusterCache::Phase(const std::string& uid) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto pod = pods_.find(uid);
  return pod == pods_.end() ? PodPhase::kInitial : pod->second.phase;
}

std::optional<Assignment> ClusterCache::Find(const std::string& uid) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto pod = pods_.find(uid);
  if (pod == pods_.end()) return std::nullopt;
  const auto it = index_->find(pod->second.node);
  if (it == index_->end()) return std::nullopt;
  const auto& pods = nodes_[it->second]->pods();
  const auto found = pods.find(uid);
  if (found == pods.end()) return std::nullopt;
  return found->second;
}

std::vector<Assignment> ClusterCache::BoundAssignments(bool include_assumed) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Assignment> out;
  for (const NodeStatePtr& node : nodes_) {
    for (const auto& [uid, assignment] : node->pods()) {
      const auto pod = pods_.find(uid);
      if (pod != pods_.end() && (include_assumed || pod->second.phase == PodPhase::kAdded)) {
        out.push_back(assignment);
      }
    }
  }
  return out;
}

ClusterCache::Sizes ClusterCache::sizes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return Sizes{nodes_.size(), assumed_, pods_.size() - assumed_};
}

}  // namespace linkfit::state
