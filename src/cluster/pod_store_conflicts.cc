// PodStore: where a committed record meets other claims on its devices. A record beats an
// assumption (a bind not accepted yet) and a guess; a node's report beats a record; two committed
// records of one device are an allocation collision, counted and reported once. The state
// machine and the locking contract are in pod_store.h; these are its REQUIRES(mutex_) steps.

#include <set>

#include "cluster/device_compare.h"
#include "linkfit/alloc/placement_table.h"
#include "linkfit/cluster/pod_store.h"
#include "linkfit/common/log.h"
#include "linkfit/common/mutex.h"
#include "linkfit/common/strings.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/model/allocation.h"

namespace linkfit::cluster {

bool PodStore::ReplaceEvictingLocked(const state::Assignment& assignment,
                                     const std::string& node_name) {
  if (cache_.ReplaceBound(assignment)) return true;
  if (EvictWeakerLocked(assignment, node_name)) return true;
  // A committed record (or a node's report) beats an assumption: binds that planned these
  // devices and have not been accepted lose them.
  if (assignment.estimated || !DisplaceAssumedLocked(assignment, node_name)) return false;
  if (cache_.ReplaceBound(assignment)) return true;
  return EvictWeakerLocked(assignment, node_name);
}

bool PodStore::DisplaceAssumedLocked(const state::Assignment& assignment,
                                     const std::string& node_name) {
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  const state::NodeState* node = snapshot->Find(node_name);
  if (node == nullptr) return false;
  // The binds not accepted yet that share a GPU with the record; only those whose devices
  // cannot sit beside it lose them (a MIG slice or a share elsewhere on the same GPU stays).
  std::vector<state::Assignment> sharing;
  for (const auto& [uid, held] : node->pods()) {
    if (uid == assignment.pod_uid || (held.gpus & assignment.gpus) == 0) continue;
    const state::BindStage stage = cache_.Stage(uid);
    if (stage != state::BindStage::kAssumed && stage != state::BindStage::kWriting &&
        stage != state::BindStage::kUnknown) {
      continue;
    }
    sharing.push_back(held);
  }
  if (sharing.empty()) return false;
  // The node without them (and without the pod's own old claim), with the record, then each
  // of them put back in turn while it still fits.
  state::NodeStatePtr trial = node->Remove(assignment.pod_uid);
  for (const state::Assignment& held : sharing) trial = trial->Remove(held.pod_uid);
  std::vector<const state::Assignment*> displaced;
  if (auto with_record = trial->Apply(assignment)) {
    trial = std::move(*with_record);
    for (const state::Assignment& held : sharing) {
      if (auto kept = trial->Apply(held)) {
        trial = std::move(*kept);
      } else {
        displaced.push_back(&held);
      }
    }
  } else {
    // The record collides with more than these binds (guessed or reported devices too): they
    // all make way, and the caller moves the weaker pods.
    for (const state::Assignment& held : sharing) displaced.push_back(&held);
  }
  for (const state::Assignment* held : displaced) {
    AdvanceBind(held->pod_uid, state::BindEvent::kRecordTookDevices);
    log::Warning("pod " + assignment.PodKey() + "'s committed record on " + node_name +
                 " names devices that linkfit had planned for " + held->PodKey() +
                 " (bind not accepted yet): the record counts, the plan is dropped");
  }
  return !displaced.empty();
}

void PodStore::ReportCollisionLocked(const std::string& uid, const Entry& entry,
                                     const state::Assignment& assignment) {
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  const state::NodeState* node = snapshot->Find(assignment.node);
  std::string others;
  bool committed = false;  // a blocker counted from its own record, not guessed or reported
  if (node != nullptr) {
    for (const auto& [other, held] : node->pods()) {
      if (other == uid || (held.gpus & assignment.gpus) == 0) continue;
      others += (others.empty() ? "" : ", ") + held.PodKey() + " (" + other + ")";
      committed = committed || (!held.estimated && !held.reported);
    }
  }
  const std::string pod_key = entry.pod_namespace.str() + "/" + entry.pod_name;
  const std::string devices = "GPUs " + JoinInts(alloc::MaskToIndexes(assignment.gpus));
  metrics_.CountBadObject("pod", "allocation-collision");
  if (!committed || assignment.reported || assignment.estimated) {
    // Against guessed or reported devices: not two records of the API.
    log::Error("pod " + pod_key + " on " + assignment.node + ": its devices (" + devices +
               ") collide with " + (others.empty() ? std::string("other pods") : others) +
               "; counting its CPU and memory only");
    return;
  }
  if (!collided_.insert(uid).second) return;  // logged once
  metrics_.CountAllocationCollision();
  log::Error("allocation collision on " + assignment.node + ": the committed record of pod " +
             pod_key + " (" + uid + ") names " + devices + ", which " + others +
             " already hold; a device is given twice in the API server. Counting " + pod_key +
             "'s CPU and memory only");
  Collision collision{assignment.node, pod_key, uid, others, devices};
  if (collisions_.size() == kMaxCollisionsKept) collisions_.erase(collisions_.begin());
  collisions_.push_back(collision);
  if (events_ != nullptr) {
    events_->Record({entry.pod_namespace.str(), entry.pod_name, uid, "Warning",
                     "AllocationCollision", "Observe",
                     "linkfit.io/allocation names " + devices + " of " + assignment.node +
                         ", which " + others + " already hold"});
  }
}

bool PodStore::EvictWeakerLocked(const state::Assignment& assignment,
                                 const std::string& node_name) {
  // Known devices beat guessed ones, and reported devices beat recorded ones: move the weaker
  // pods of the node out of the way, then count them again around these devices.
  for (const bool also_recorded : {false, true}) {
    if (also_recorded && !assignment.reported) break;
    const std::vector<state::Assignment> evicted =
        EvictLocked(node_name, assignment.pod_uid, also_recorded);
    if (evicted.empty()) continue;
    const bool added = cache_.ReplaceBound(assignment).has_value();
    for (const state::Assignment& other : evicted) {
      const auto it = pods_.find(state::PodUid(other.pod_uid));
      if (it == pods_.end()) continue;
      if (other.estimated) {
        ApplyBoundLocked(other.pod_uid, it->second, node_name, nullptr);
      } else if (cache_.ReplaceBound(other)) {
        it->second.in_cache = true;
        SetEntryFlagsLocked(it->second, other);
      } else {
        // Its record collides with what a node really handed over: re-applied, it ends up
        // counted by its CPU and memory only until its node reports it.
        it->second.SetHiddenRecord(std::make_unique<const state::Assignment>(other));
        ApplyBoundLocked(other.pod_uid, it->second, node_name, nullptr);
      }
    }
    if (added) return true;
  }
  return false;
}

std::vector<state::Assignment> PodStore::EvictLocked(const std::string& node_name,
                                                     const std::string& except,
                                                     bool also_recorded) {
  std::vector<state::Assignment> evicted;
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  const state::NodeState* node = snapshot->Find(node_name);
  if (node == nullptr) return evicted;
  for (const auto& [uid, held] : node->pods()) {
    if (uid == except || held.reported || !held.holds_devices()) continue;
    if (!held.estimated && !also_recorded) continue;
    if (cache_.Phase(uid) != state::PodPhase::kAdded) continue;  // binds in flight stay
    cache_.Remove(uid);
    const auto it = pods_.find(state::PodUid(uid));
    if (it != pods_.end()) {
      it->second.in_cache = false;
      ClearEntryFlagsLocked(it->second);
    }
    evicted.push_back(held);
  }
  return evicted;
}

std::vector<PodStore::Collision> PodStore::collisions() const {
  MutexLock lock(mutex_);
  return collisions_;
}

void PodStore::SetReportedDevices(const std::string& node_name,
                                  std::optional<kube::DevicesInUse> report) {
  MutexLock lock(mutex_);
  std::set<std::string> touched;
  if (const auto old = reports_.find(node_name); old != reports_.end()) {
    for (const auto& [uid, pod] : old->second) touched.insert(uid);
  }
  if (report) {
    auto& pods = reports_[node_name];
    pods.clear();
    for (kube::DevicesInUse::Pod& pod : report->pods) {
      touched.insert(pod.uid);
      const std::string uid = pod.uid;
      pods.emplace(uid, std::move(pod));
    }
  } else {
    reports_.erase(node_name);
  }
  // A report is one consistent picture of the node: take every pod it concerns out of the cache
  // first (so that two reported pods that swapped devices do not collide with each other's old
  // devices), keeping their records, then count them again. Pods whose bind is in flight, and
  // pods not counted yet (applied when their node appears), are left to their own events.
  std::vector<std::string> reapply;
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  const state::NodeState* node = snapshot->Find(node_name);
  for (const std::string& uid : touched) {
    const auto it = pods_.find(state::PodUid(uid));
    if (it == pods_.end() || !(it->second.node == node_name)) continue;
    if (cache_.Phase(uid) != state::PodPhase::kAdded) continue;
    Entry& entry = it->second;
    if (entry.hidden_record() == nullptr) {
      if (auto recorded = RecordedLocked(uid, entry, node_name, node, nullptr)) {
        entry.SetHiddenRecord(std::make_unique<const state::Assignment>(std::move(*recorded)));
      }
    }
    cache_.Remove(uid);
    entry.in_cache = false;
    ClearEntryFlagsLocked(entry);
    reapply.push_back(uid);
  }
  for (const std::string& uid : reapply) {
    const auto it = pods_.find(state::PodUid(uid));
    if (it != pods_.end()) ApplyBoundLocked(uid, it->second, node_name, nullptr);
  }
  metrics_.SetEstimatedPods(estimated_.load());
  metrics_.SetReportedPods(reported_.load());
}

void PodStore::ReportMismatchLocked(const std::string& uid, const Entry& entry,
                                    const state::NodeState& node, const state::Assignment& reported,
                                    const state::Assignment& recorded) {
  const std::string& node_name = node.name();
  const std::string pod_key = entry.pod_namespace.str() + "/" + entry.pod_name;
  const std::string handed = kube::EncodeAllocationRecord(model::RecordOf(reported, node.info()));
  const std::string chosen = kube::EncodeAllocationRecord(model::RecordOf(recorded, node.info()));
  const std::string nics = internal::NicDifference(reported, recorded, node.info());
  const std::string why = nics.empty() ? std::string() : " (" + nics + ")";
  log::Warning("pod " + pod_key + " on " + node_name + ": the node reports it holding " + handed +
               ", not its " + kube::kAnnotationAllocation + " " + chosen + why +
               "; the report wins");
  metrics_.CountHandoffMismatch();
  ++mismatches_;
  if (events_ != nullptr) {
    events_->Record({entry.pod_namespace.str(), entry.pod_name, uid, "Warning",
                     "DeviceHandoffMismatch", "Observe",
                     "node " + node_name + " handed the pod other devices than linkfit chose" +
                         why + ": " + handed + " instead of " + chosen});
  }
}

}  // namespace linkfit::cluster
