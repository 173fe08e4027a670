#include "linkfit/cluster/pod_store.h"

#include <functional>

#include "linkfit/common/log.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/kube/codec.h"
#include "linkfit/source/allocation.h"

namespace linkfit::cluster {
namespace {

bool IsTerminal(const kube::PodView& pod) {
  return pod.phase == "Succeeded" || pod.phase == "Failed";
}

const std::string* AllocationText(const kube::PodView& pod) {
  const auto it = pod.annotations.find(kube::kAnnotationAllocation);
  return it == pod.annotations.end() ? nullptr : &it->second;
}

std::uint64_t HashOf(const std::string* text) {
  if (text == nullptr) return 0;
  const std::uint64_t hash = std::hash<std::string>{}(*text);
  return hash == 0 ? 1 : hash;
}

// Whether two assignments hold the same devices.
bool SameDevices(const state::Assignment& a, const state::Assignment& b) {
  return a.node == b.node && a.kind == b.kind && a.gpus == b.gpus && a.mig == b.mig &&
         a.shares == b.shares;
}

}  // namespace

PodStore::PodStore(state::ClusterCache& cache, extender::RequestDefaults defaults,
                   extender::FitOptions fit, MetricsSink& metrics)
    : cache_(cache), defaults_(std::move(defaults)), fit_(fit), metrics_(metrics) {}

void PodStore::BeginList() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++generation_;
}

std::optional<kube::PodView> PodStore::Decode(std::string_view object_json, const char* where) {
  auto pod = kube::DecodePod(object_json);
  if (pod) return std::move(*pod);
  log::Error(std::string("pods: ") + where + " does not decode, skipped: " + pod.error().message);
  metrics_.CountBadObject("pod", "json");
  return std::nullopt;
}

void PodStore::ListItem(std::string_view object_json) {
  const std::optional<kube::PodView> pod = Decode(object_json, "a listed pod");
  if (!pod) return;
  std::lock_guard<std::mutex> lock(mutex_);
  UpsertLocked(*pod);
}

void PodStore::EndList(std::string_view resource_version) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> gone;
  for (const auto& [uid, entry] : pods_) {
    if (entry.list_generation == generation_) continue;
    // A pod created after the list was taken may be in its bind right now: the watch from the
    // list's resourceVersion will show it. Only a bind that was accepted proves the pod existed
    // before the list, so its absence means it was deleted.
    if (cache_.Phase(uid) == state::PodPhase::kAssumed && !cache_.BindDone(uid)) continue;
    gone.push_back(uid);
  }
  for (const std::string& uid : gone) DeleteLocked(uid);
  if (!gone.empty()) {
    log::Info("pods: relist at resourceVersion " + std::string(resource_version) + " removed " +
              std::to_string(gone.size()) + " pods whose deletion the watch missed");
  }
  ++lists_;
  metrics_.SetPodStoreSize(pods_.size());
  metrics_.SetEstimatedPods(estimated_.load());
}

void PodStore::Event(kube::WatchEventType type, std::string_view object_json) {
  const std::optional<kube::PodView> pod = Decode(object_json, "a watch event's pod");
  if (!pod) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (type == kube::WatchEventType::kDeleted) {
    DeleteLocked(pod->uid);
  } else {
    UpsertLocked(*pod);
  }
  metrics_.SetPodStoreSize(pods_.size());
  metrics_.SetEstimatedPods(estimated_.load());
}

void PodStore::Upsert(const kube::PodView& pod) {
  std::lock_guard<std::mutex> lock(mutex_);
  UpsertLocked(pod);
}

void PodStore::Delete(const std::string& uid) {
  std::lock_guard<std::mutex> lock(mutex_);
  DeleteLocked(uid);
}

void PodStore::SetDemandLocked(Entry& entry, bool counted) {
  if (entry.demand_counted == counted) return;
  if (counted) {
    demand_.Add(entry.request);
  } else {
    demand_.Remove(entry.request);
  }
  entry.demand_counted = counted;
}

void PodStore::UpsertLocked(const kube::PodView& pod) {
  if (pod.uid.empty()) {
    metrics_.CountBadObject("pod", "uid");
    return;
  }
  if (IsTerminal(pod)) {
    // Succeeded and Failed pods hold nothing any more, deleted or not.
    DeleteLocked(pod.uid);
    return;
  }
  auto request = extender::ParseGpuRequest(pod, defaults_);
  auto [it, inserted] = pods_.try_emplace(pod.uid);
  Entry& entry = it->second;
  entry.list_generation = generation_;
  const bool gpu_pod = request && request->kind != extender::GpuRequest::Kind::kNone;
  // The request is fixed at creation (resources are immutable), so demand is adjusted only when
  // the pod is new or its parse changes (annotations can change).
  if (!inserted && entry.request_ok && request && entry.request.Describe() != request->Describe()) {
    SetDemandLocked(entry, false);
  }
  entry.pod_namespace = pod.pod_namespace;
  entry.pod_name = pod.name;
  entry.request_ok = request.has_value();
  entry.request = request ? *request : extender::GpuRequest{};
  SetDemandLocked(entry, gpu_pod);
  if (pod.node_name.empty()) {
    entry.node.clear();
    entry.view = gpu_pod ? std::make_shared<const kube::PodView>(pod) : nullptr;
    return;
  }
  ApplyBoundLocked(pod.uid, entry, pod.node_name, &pod);
}

void PodStore::ApplyBoundLocked(const std::string& uid, Entry& entry, const std::string& node_name,
                                const kube::PodView* pod) {
  const std::string* text = pod != nullptr ? AllocationText(*pod) : nullptr;
  const std::uint64_t record_hash = HashOf(text);
  const bool node_changed = entry.node != node_name;
  entry.node = node_name;
  const std::string pod_key = entry.pod_namespace + "/" + entry.pod_name;
  const state::PodPhase phase = cache_.Phase(uid);
  if (phase != state::PodPhase::kInitial && !node_changed && entry.in_cache &&
      record_hash == entry.record_hash && phase == state::PodPhase::kAdded) {
    entry.view = nullptr;
    return;  // nothing new (a status update of a counted pod)
  }
  // Without the pod's object (a pod waiting for its node) the record is unknown here: a hash of
  // 0 makes the pod's next event apply its record.
  entry.record_hash = pod != nullptr ? record_hash : 0;
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  const state::NodeState* node = snapshot->Find(node_name);
  // The API server's record of the devices, on this node's model.
  std::optional<state::Assignment> recorded;
  if (text != nullptr && node != nullptr) {
    auto record = kube::DecodeAllocationRecord(*text);
    Result<state::Assignment> assignment =
        record ? source::AssignmentOf(*record, node->info())
               : Result<state::Assignment>(tl::unexpected(record.error()));
    if (assignment && (assignment->pod_uid != uid || assignment->node != node_name)) {
      assignment =
          MakeError("the record names pod " + assignment->pod_uid + " on node " + assignment->node);
    }
    if (assignment) {
      assignment->pod_namespace = entry.pod_namespace;
      assignment->pod_name = entry.pod_name;
      assignment->cpu_milli = entry.request.cpu_milli;
      assignment->memory_bytes = entry.request.memory_bytes;
      recorded = std::move(*assignment);
    } else {
      log::Error("pod " + pod_key + ": annotation " + kube::kAnnotationAllocation +
                 " is unusable, its devices are estimated: " + assignment.error().message);
      metrics_.CountBadObject("pod", "allocation");
    }
  }
  if (phase == state::PodPhase::kAssumed || phase == state::PodPhase::kAdded) {
    const std::optional<state::Assignment> held = cache_.Find(uid);
    if (held && held->node == node_name) {
      if (recorded && (!SameDevices(*recorded, *held) || held->estimated)) {
        // The API server's record wins: another writer's (a second replica, a retried bind), or
        // the record of a pod whose devices were estimated.
        auto replaced = cache_.ReplaceBound(*recorded);
        if (!replaced && held->estimated) {
          const std::vector<std::string> evicted = EvictEstimatedLocked(node_name, uid);
          replaced = cache_.ReplaceBound(*recorded);
          for (const std::string& other : evicted) {
            const auto it = pods_.find(other);
            if (it != pods_.end()) ApplyBoundLocked(other, it->second, node_name, nullptr);
          }
        }
        if (!replaced) {
          log::Error("pod " + pod_key + ": its recorded devices " +
                     "collide with other pods; keeping linkfit's: " + replaced.error().message);
          metrics_.CountBadObject("pod", "allocation-collision");
          cache_.Confirm(uid);
        } else {
          if (!held->estimated) {
            log::Warning("pod " + pod_key +
                         ": the API server's allocation record differs from linkfit's; the "
                         "record wins");
          }
          if (entry.estimated) --estimated_;
          entry.estimated = false;
        }
      } else {
        cache_.Confirm(uid);
      }
      entry.in_cache = true;
      entry.view = nullptr;
      return;
    }
    // Bound to another node than linkfit assumed (or the node changed): start again.
    cache_.Remove(uid);
    if (entry.estimated) --estimated_;
    entry.estimated = false;
  }
  entry.in_cache = false;
  if (node == nullptr) {
    // The node is not modelled (yet): keep the pod until NodeAppeared (its view only when its
    // devices matter: most pods on nodes without GPUs ask for none).
    const bool keep_view =
        pod != nullptr &&
        (text != nullptr ||
         (entry.request_ok && entry.request.kind != extender::GpuRequest::Kind::kNone));
    entry.view = keep_view ? std::make_shared<const kube::PodView>(*pod) : nullptr;
    return;
  }
  entry.view = nullptr;
  state::Assignment assignment;
  if (recorded) {
    assignment = std::move(*recorded);
  } else if (entry.request_ok && entry.request.kind != extender::GpuRequest::Kind::kNone) {
    // Placed by someone else without a record: guess as the device plugin would.
    extender::GpuRequest loose = entry.request;
    loose.policy = alloc::ClosenessPolicy::kPreferred;
    loose.gpu_models.clear();
    extender::NodeFit fit = extender::FitOnNode(loose, *node, fit_);
    if (fit.fits) {
      assignment = std::move(fit.assignment);
      assignment.estimated = true;
    } else {
      log::Error("pod " + pod_key + " runs on " + node_name + " asking for " +
                 entry.request.Describe() + ", but linkfit sees no such free " + "devices there (" +
                 fit.reason + "); counting its CPU and memory only");
      metrics_.CountBadObject("pod", "overcommitted");
    }
  }
  if (assignment.gpus == 0 && entry.request.cpu_milli == 0 && entry.request.memory_bytes == 0) {
    return;  // nothing to count (a best-effort pod without GPUs)
  }
  assignment.pod_uid = uid;
  assignment.pod_namespace = entry.pod_namespace;
  assignment.pod_name = entry.pod_name;
  assignment.node = node_name;
  assignment.cpu_milli = entry.request.cpu_milli;
  assignment.memory_bytes = entry.request.memory_bytes;
  auto added = cache_.ReplaceBound(assignment);
  std::vector<std::string> evicted;
  if (!added && !assignment.estimated) {
    // Known devices beat guessed ones: move the node's estimated pods out of the way, then
    // estimate them again around the record.
    evicted = EvictEstimatedLocked(node_name, uid);
    if (!evicted.empty()) added = cache_.ReplaceBound(assignment);
  }
  if (!added) {
    log::Error("pod " + pod_key + " on " + node_name +
               ": its devices collide with other pods, counting its CPU and memory only: " +
               added.error().message);
    metrics_.CountBadObject("pod", "allocation-collision");
    // The same pod without devices.
    assignment.kind = state::Assignment::Kind::kWhole;
    assignment.gpus = 0;
    assignment.mig.clear();
    assignment.shares.clear();
    assignment.estimated = false;
    if (!cache_.ReplaceBound(assignment)) return;
  }
  entry.in_cache = true;
  if (assignment.estimated != entry.estimated) {
    if (assignment.estimated) {
      ++estimated_;
    } else {
      --estimated_;
    }
    entry.estimated = assignment.estimated;
  }
  for (const std::string& other : evicted) {
    const auto it = pods_.find(other);
    if (it != pods_.end()) ApplyBoundLocked(other, it->second, node_name, nullptr);
  }
}

std::vector<std::string> PodStore::EvictEstimatedLocked(const std::string& node_name,
                                                        const std::string& except) {
  std::vector<std::string> evicted;
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  const state::NodeState* node = snapshot->Find(node_name);
  if (node == nullptr) return evicted;
  for (const auto& [uid, held] : node->pods()) {
    if (!held.estimated || uid == except) continue;
    cache_.Remove(uid);
    const auto it = pods_.find(uid);
    if (it != pods_.end()) {
      it->second.in_cache = false;
      if (it->second.estimated) --estimated_;
      it->second.estimated = false;
    }
    evicted.push_back(uid);
  }
  return evicted;
}

void PodStore::DeleteLocked(const std::string& uid) {
  const auto it = pods_.find(uid);
  cache_.Remove(uid);
  if (it == pods_.end()) return;
  SetDemandLocked(it->second, false);
  if (it->second.estimated) --estimated_;
  pods_.erase(it);
}

void PodStore::NodeAppeared(const std::string& node) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [uid, entry] : pods_) {
    // Pods waiting for the node, and pods the cache dropped when the node's model changed.
    if (entry.node != node || cache_.Phase(uid) != state::PodPhase::kInitial) continue;
    entry.in_cache = false;
    const std::shared_ptr<const kube::PodView> view = entry.view;
    ApplyBoundLocked(uid, entry, node, view.get());
  }
}

void PodStore::NodeRemoved(const std::string& node) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [uid, entry] : pods_) {
    if (entry.node != node || !entry.in_cache) continue;
    // The cache forgot them with the node. Should the node come back, they are applied again;
    // their record is re-read from their next event (record_hash 0 forces it).
    entry.in_cache = false;
    entry.record_hash = 0;
    if (entry.estimated) --estimated_;
    entry.estimated = false;
  }
}

std::optional<extender::KnownPod> PodStore::FindPod(const std::string& uid) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = pods_.find(uid);
  if (it == pods_.end() || !it->second.request_ok) return std::nullopt;
  return extender::KnownPod{it->second.request, it->second.pod_namespace, it->second.pod_name};
}

std::optional<extender::KnownPod> PodStore::ResolveForBind(const std::string& pod_namespace,
                                                           const std::string& pod_name,
                                                           const std::string& uid) {
  if (auto known = FindPod(uid)) return known;
  if (!fetcher_) return std::nullopt;
  const std::optional<std::string> json = fetcher_(pod_namespace, pod_name);
  if (!json) return std::nullopt;
  auto pod = kube::DecodePod(*json);
  if (!pod || pod->uid != uid) return std::nullopt;  // gone, or replaced by another pod
  Upsert(*pod);
  return FindPod(uid);
}

std::shared_ptr<const kube::PodView> PodStore::PendingPod(const std::string& uid) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = pods_.find(uid);
  return it == pods_.end() ? nullptr : it->second.view;
}

std::unordered_map<std::string, std::string> PodStore::UidsByName() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::unordered_map<std::string, std::string> uids;
  uids.reserve(pods_.size());
  for (const auto& [uid, entry] : pods_) uids[entry.pod_namespace + "/" + entry.pod_name] = uid;
  return uids;
}

std::size_t PodStore::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pods_.size();
}

}  // namespace linkfit::cluster
