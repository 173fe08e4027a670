#include "linkfit/cluster/pod_store.h"

#include <algorithm>

#include <functional>
#include <set>

#include "cluster/device_compare.h"
#include "linkfit/alloc/placement_table.h"
#include "linkfit/common/log.h"
#include "linkfit/common/strings.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/kube/object_json.h"
#include "linkfit/model/allocation.h"

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

const std::string kEmptyName;

}  // namespace

using internal::FillReportedNics;
using internal::PartOf;
using internal::SameDevices;

PodStore::Name::Name() : text_(&kEmptyName) {}

PodStore::Object PodStore::ObjectOf(const kube::PodView& pod) {
  return Object{AllocationText(pod), &pod.containers};
}

PodStore::Object PodStore::ObjectOf(const Kept& kept) {
  return Object{kept.allocation ? &*kept.allocation : nullptr, &kept.containers};
}

std::shared_ptr<const PodStore::Kept> PodStore::Keep(const Object& pod) {
  auto kept = std::make_shared<Kept>();
  kept->containers = *pod.containers;
  kept->containers.shrink_to_fit();
  if (pod.allocation != nullptr) kept->allocation = *pod.allocation;
  return kept;
}

const std::shared_ptr<const PodStore::Kept>& PodStore::Entry::kept() const {
  static const std::shared_ptr<const Kept> kNone;
  return rare_ ? rare_->kept : kNone;
}

void PodStore::Entry::SetKept(std::shared_ptr<const Kept> kept) {
  if (!rare_ && !kept) return;
  if (!rare_) rare_ = std::make_unique<Rare>();
  rare_->kept = std::move(kept);
  DropRareIfEmpty();
}

const state::Assignment* PodStore::Entry::hidden_record() const {
  return rare_ ? rare_->hidden_record.get() : nullptr;
}

void PodStore::Entry::SetHiddenRecord(std::unique_ptr<const state::Assignment> record) {
  if (!rare_ && !record) return;
  if (!rare_) rare_ = std::make_unique<Rare>();
  rare_->hidden_record = std::move(record);
  DropRareIfEmpty();
}

void PodStore::Entry::DropRareIfEmpty() {
  if (rare_ && !rare_->kept && !rare_->hidden_record) rare_.reset();
}

void PodStore::Request::Set(const extender::GpuRequest& request, RequestPool& pool) {
  cpu_milli_ = request.cpu_milli;
  memory_bytes_ = request.memory_bytes;
  if (!request.WantsDevices()) {
    gpu_.Reset();
  } else {
    gpu_ = pool.Acquire(request);
  }
}

extender::GpuRequest PodStore::Request::Get() const {
  extender::GpuRequest request = gpu_ ? *gpu_ : extender::GpuRequest{};
  request.cpu_milli = cpu_milli_;
  request.memory_bytes = memory_bytes_;
  return request;
}

PodStore::Name PodStore::InternLocked(const std::string& text) {
  return Name(&*names_.insert(text).first);
}

PodStore::PodStore(state::ClusterCache& cache, extender::RequestDefaults defaults,
                   extender::FitOptions fit, MetricsSink& metrics)
    : cache_(cache), defaults_(std::move(defaults)), fit_(fit), metrics_(metrics) {
  static_assert(sizeof(Entry) <= 96, "an entry and its key should fit a 128-byte heap block");
}

void PodStore::BeginList() {
  MutexLock lock(mutex_);
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
  MutexLock lock(mutex_);
  UpsertLocked(*pod);
}

void PodStore::EndList(std::string_view resource_version) {
  MutexLock lock(mutex_);
  std::vector<std::string> gone;
  for (const auto& [key, entry] : pods_) {
    if (entry.list_generation == generation_) continue;
    // A pod created after the list was taken may be in its bind right now: the watch from the
    // list's resourceVersion will show it. Only a bind that was accepted proves the pod existed
    // before the list, so its absence means it was deleted.
    std::string uid = key.str();
    if (cache_.Phase(uid) == state::PodPhase::kAssumed && !cache_.BindDone(uid)) continue;
    gone.push_back(std::move(uid));
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
  MutexLock lock(mutex_);
  if (type == kube::WatchEventType::kDeleted) {
    DeleteLocked(pod->uid);
  } else {
    UpsertLocked(*pod);
  }
  metrics_.SetPodStoreSize(pods_.size());
  metrics_.SetEstimatedPods(estimated_.load());
}

void PodStore::Upsert(const kube::PodView& pod) {
  MutexLock lock(mutex_);
  UpsertLocked(pod);
}

void PodStore::ApplyFetched(const kube::PodView& pod) {
  MutexLock lock(mutex_);
  if (pods_.find(state::PodUid(pod.uid)) == pods_.end()) return;
  UpsertLocked(pod);
}

void PodStore::Delete(const std::string& uid) {
  MutexLock lock(mutex_);
  DeleteLocked(uid);
}

void PodStore::SetDemandLocked(Entry& entry, bool counted) {
  if (entry.demand_counted == counted) return;
  if (counted) {
    demand_.Add(entry.request.Get());
  } else {
    demand_.Remove(entry.request.Get());
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
  auto [it, inserted] = pods_.try_emplace(state::PodUid(pod.uid));
  Entry& entry = it->second;
  entry.list_generation = generation_;
  // Demand (fragmentation shapes, MIG weights) counts pods asking for GPUs.
  const bool gpu_pod = request && request->kind != extender::GpuRequest::Kind::kNone;
  // Containers are kept for bind's per-container plan of every pod asking for devices.
  const bool device_pod = request && request->WantsDevices();
  // The request is fixed at creation (resources are immutable), so demand is adjusted only when
  // the pod is new or its parse changes (annotations can change).
  if (!inserted && entry.request_ok && request && entry.request.Describe() != request->Describe()) {
    SetDemandLocked(entry, false);
  }
  entry.pod_namespace = InternLocked(pod.pod_namespace);
  entry.pod_name = pod.name;
  if (entry.load_counted && (!request || request->cpu_milli != entry.request.cpu_milli() ||
                             request->memory_bytes != entry.request.memory_bytes())) {
    DropLoadLocked(entry);  // counted again below with the new requests (a resize)
    entry.in_cache = false;
  }
  entry.request_ok = request.has_value();
  entry.request.Set(request ? *request : extender::GpuRequest{}, requests_);
  SetDemandLocked(entry, gpu_pod);
  const Object object = ObjectOf(pod);
  if (pod.node_name.empty()) {
    entry.node = Name();
    entry.SetKept(device_pod ? Keep(object) : nullptr);
    return;
  }
  ApplyBoundLocked(pod.uid, entry, pod.node_name, &object);
}

std::optional<state::Assignment> PodStore::RecordedLocked(const std::string& uid, Entry& entry,
                                                          const std::string& node_name,
                                                          const state::NodeState* node,
                                                          const Object* pod) {
  const std::string* text = pod != nullptr ? pod->allocation : nullptr;
  if (text == nullptr || node == nullptr) {
    if (pod != nullptr || node == nullptr) return std::nullopt;
    // Re-applied without the pod's object: its record is what the cache holds for it (or what a
    // report hid).
    if (entry.hidden_record() != nullptr) return *entry.hidden_record();
    std::optional<state::Assignment> held = cache_.Find(uid);
    // Counted from its record, or from a report that agreed with it.
    if (held && entry.has_record && held->node == node_name && !held->estimated &&
        !held->handoff_mismatch && held->holds_devices()) {
      held->reported = false;
      return held;
    }
    return std::nullopt;
  }
  auto record = kube::DecodeAllocationRecord(*text);
  Result<state::Assignment> assignment =
      record ? model::AssignmentOf(*record, node->info())
             : Result<state::Assignment>(tl::unexpected(record.error()));
  if (assignment && (assignment->pod_uid != uid || assignment->node != node_name)) {
    assignment =
        MakeError("the record names pod " + assignment->pod_uid + " on node " + assignment->node);
  }
  if (!assignment) {
    log::Error("pod " + entry.pod_namespace.str() + "/" + entry.pod_name + ": annotation " +
               kube::kAnnotationAllocation +
               " is unusable, its devices are estimated: " + assignment.error().message);
    metrics_.CountBadObject("pod", "allocation");
    return std::nullopt;
  }
  return std::move(*assignment);
}

std::optional<state::Assignment> PodStore::ReportedLocked(
    const std::string& uid, const Entry& entry, const std::string& node_name,
    const state::NodeState* node, const std::optional<state::Assignment>& recorded) {
  if (node == nullptr) return std::nullopt;
  const auto report = reports_.find(node_name);
  if (report == reports_.end()) return std::nullopt;
  const auto pod = report->second.find(uid);
  if (pod == report->second.end()) return std::nullopt;
  const int share_milli =
      entry.request.kind() == extender::GpuRequest::Kind::kShared ? entry.request.share_milli() : 1;
  auto assignment = model::AssignmentOfReport(pod->second, node_name, node->info(), share_milli,
                                              entry.request.nic_milli());
  if (!assignment) {
    log::Error("node " + node_name + ": annotation " + kube::kAnnotationDevicesInUse +
               " is unusable for pod " + entry.pod_namespace.str() + "/" + entry.pod_name + ": " +
               assignment.error().message);
    metrics_.CountBadObject("node", "devices-in-use");
    return std::nullopt;
  }
  assignment->reported = true;
  if (recorded) FillReportedNics(*assignment, *recorded);
  return std::move(*assignment);
}

void PodStore::SetEntryFlagsLocked(Entry& entry, const state::Assignment& counted) {
  if (counted.estimated != entry.estimated) {
    counted.estimated ? ++estimated_ : --estimated_;
    entry.estimated = counted.estimated;
  }
  if (counted.reported != entry.reported) {
    counted.reported ? ++reported_ : --reported_;
    entry.reported = counted.reported;
  }
}

void PodStore::CountLoadLocked(const std::string& uid, Entry& entry) {
  if (cache_.Phase(uid) != state::PodPhase::kInitial) cache_.Remove(uid);  // held devices before
  ClearEntryFlagsLocked(entry);
  if (entry.request.cpu_milli() == 0 && entry.request.memory_bytes() == 0) {
    entry.in_cache = false;  // nothing to count (a best-effort pod without GPUs)
    return;
  }
  if (!entry.load_counted) {
    entry.load_counted =
        cache_.AddLoad(entry.node.str(), entry.request.cpu_milli(), entry.request.memory_bytes());
  }
  entry.in_cache = entry.load_counted;
}

void PodStore::DropLoadLocked(Entry& entry) {
  if (!entry.load_counted) return;
  cache_.RemoveLoad(entry.node.str(), entry.request.cpu_milli(), entry.request.memory_bytes());
  entry.load_counted = false;
}

void PodStore::ClearEntryFlagsLocked(Entry& entry) {
  state::Assignment none;
  SetEntryFlagsLocked(entry, none);
}

bool PodStore::SettleCountedLocked(const std::string& uid, Entry& entry,
                                   const std::string& node_name, state::PodPhase phase,
                                   const std::optional<state::Assignment>& known) {
  const std::string pod_key = entry.pod_namespace.str() + "/" + entry.pod_name;
  const std::optional<state::Assignment> held = cache_.Find(uid);
  if (phase == state::PodPhase::kAssumed && held) {
    // The watch ends linkfit's bind: confirmed with its record, or the API's record wins.
    const bool same = held->node == node_name && (!known || SameDevices(*known, *held));
    AdvanceBind(uid, same ? state::BindEvent::kWatchBoundSameRecord
                          : state::BindEvent::kWatchBoundOtherRecord);
  }
  if (held && held->node == node_name) {
    const bool differs = known && (!SameDevices(*known, *held) || held->estimated ||
                                   held->reported != known->reported ||
                                   held->handoff_mismatch != known->handoff_mismatch);
    if (differs) {
      // The API server's record or the node's report wins: another writer's record (a second
      // replica, a retried bind), the record of a pod whose devices were estimated, or what the
      // node really handed over.
      if (!ReplaceEvictingLocked(*known, node_name)) {
        // The record (or report) is the truth even when it collides: what linkfit held for
        // the pod is not. Counted by its CPU and memory only, the collision reported.
        cache_.Remove(uid);
        ClearEntryFlagsLocked(entry);
        ReportCollisionLocked(uid, entry, *known);
        CountLoadLocked(uid, entry);
        entry.SetKept(nullptr);
        return true;
      } else {
        if (!held->estimated && !known->reported && !SameDevices(*known, *held)) {
          log::Warning("pod " + pod_key +
                       ": the API server's allocation record differs from linkfit's; the "
                       "record wins");
        }
        SetEntryFlagsLocked(entry, *known);
      }
    }
    entry.in_cache = true;
    entry.SetKept(nullptr);
    return true;
  }
  // Bound to another node than linkfit assumed (or the node changed): start again.
  cache_.Remove(uid);
  ClearEntryFlagsLocked(entry);
  return false;
}

void PodStore::CountOnNodeLocked(const std::string& uid, Entry& entry, const state::NodeState& node,
                                 std::optional<state::Assignment> known) {
  const std::string& node_name = node.name();
  const std::string pod_key = entry.pod_namespace.str() + "/" + entry.pod_name;
  state::Assignment assignment;
  if (known) {
    assignment = std::move(*known);
  } else if (entry.request_ok && entry.request.kind() != extender::GpuRequest::Kind::kNone) {
    // Placed by someone else without a record: guess as the device plugin would.
    extender::GpuRequest loose = entry.request.Get();
    loose.policy = alloc::ClosenessPolicy::kPreferred;
    loose.gpu_models.clear();
    extender::NodeFit fit = extender::FitOnNode(loose, node, fit_);
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
  if (!assignment.holds_devices()) {
    CountLoadLocked(uid, entry);  // a pod without devices: its requests only
    return;
  }
  assignment.pod_uid = uid;
  assignment.pod_namespace = entry.pod_namespace.str();
  assignment.pod_name = entry.pod_name;
  assignment.node = node_name;
  assignment.cpu_milli = entry.request.cpu_milli();
  assignment.memory_bytes = entry.request.memory_bytes();
  bool added = assignment.estimated ? cache_.ReplaceBound(assignment).has_value()
                                    : ReplaceEvictingLocked(assignment, node_name);
  if (!added) {
    ReportCollisionLocked(uid, entry, assignment);
    // The same pod without devices.
    CountLoadLocked(uid, entry);
    return;
  }
  entry.in_cache = true;
  SetEntryFlagsLocked(entry, assignment);
}

void PodStore::ApplyBoundLocked(const std::string& uid, Entry& entry, const std::string& node_name,
                                const Object* pod) {
  const std::string* text = pod != nullptr ? pod->allocation : nullptr;
  const std::uint64_t record_hash = HashOf(text);
  const bool node_changed = !(entry.node == node_name);
  if (node_changed && entry.load_counted) DropLoadLocked(entry);
  if (pod != nullptr && entry.load_counted && record_hash == entry.record_hash &&
      (text == nullptr || record_hash == 0)) {
    return;  // nothing new (a status update of a pod counted by its requests)
  }
  entry.node = InternLocked(node_name);
  const state::PodPhase phase = cache_.Phase(uid);
  if (pod != nullptr && !node_changed && entry.in_cache && record_hash == entry.record_hash &&
      phase == state::PodPhase::kAdded) {
    entry.SetKept(nullptr);
    return;  // nothing new (a status update of a counted pod)
  }
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  const state::NodeState* node = snapshot->Find(node_name);
  // The API server's record of the devices, on this node's model; then what the node reports
  // the pod really holds, which wins (two pods must never be counted on one device).
  if (pod != nullptr) entry.has_record = text != nullptr;
  std::optional<state::Assignment> recorded = RecordedLocked(uid, entry, node_name, node, pod);
  // Without the pod's object (a re-application) the record is unknown here: a hash of 0 makes
  // the pod's next event apply its record.
  entry.record_hash = pod != nullptr ? record_hash : 0;
  std::optional<state::Assignment> reported = ReportedLocked(uid, entry, node_name, node, recorded);
  // Part of the record reported: its other containers are still being created. The record
  // counts (the report would free devices they are about to get); no mismatch.
  if (reported && recorded && !SameDevices(*reported, *recorded) && PartOf(*reported, *recorded)) {
    reported.reset();
  }
  const bool mismatch = reported && recorded && !SameDevices(*reported, *recorded);
  if (mismatch && !entry.mismatch) ReportMismatchLocked(uid, entry, *node, *reported, *recorded);
  entry.mismatch = mismatch;
  entry.SetHiddenRecord(mismatch ? std::make_unique<const state::Assignment>(*recorded) : nullptr);
  std::optional<state::Assignment> known = reported ? std::move(reported) : std::move(recorded);
  if (known) {
    known->handoff_mismatch = mismatch;
    known->pod_namespace = entry.pod_namespace.str();
    known->pod_name = entry.pod_name;
    known->cpu_milli = entry.request.cpu_milli();
    known->memory_bytes = entry.request.memory_bytes();
  }
  if ((phase == state::PodPhase::kAssumed || phase == state::PodPhase::kAdded) &&
      SettleCountedLocked(uid, entry, node_name, phase, known)) {
    return;
  }
  entry.in_cache = false;
  if (entry.load_counted) DropLoadLocked(entry);
  if (node == nullptr) {
    // The node is not modelled (yet): keep the pod until NodeAppeared (its object only when its
    // devices matter: most pods on nodes without GPUs ask for none).
    const bool keep =
        pod != nullptr && (text != nullptr || (entry.request_ok && entry.request.wants_devices()));
    entry.SetKept(keep ? Keep(*pod) : nullptr);
    return;
  }
  entry.SetKept(nullptr);
  CountOnNodeLocked(uid, entry, *node, std::move(known));
}

void PodStore::DeleteLocked(const std::string& uid) {
  const auto it = pods_.find(state::PodUid(uid));
  // A bind in flight ends here (counted as the lifecycle says); anything else is removed.
  if (const auto step = AdvanceBind(uid, state::BindEvent::kWatchDeleted); !step || step->late) {
    cache_.Remove(uid);
  }
  if (it == pods_.end()) return;
  SetDemandLocked(it->second, false);
  ClearEntryFlagsLocked(it->second);
  DropLoadLocked(it->second);
  pods_.erase(it);
}

void PodStore::NodeAppeared(const std::string& node) {
  MutexLock lock(mutex_);
  for (auto& [key, entry] : pods_) {
    // Pods waiting for the node, and pods the cache dropped when the node's model changed.
    if (!(entry.node == node) || entry.load_counted) continue;
    const std::string uid = key.str();
    if (cache_.Phase(uid) != state::PodPhase::kInitial) continue;
    entry.in_cache = false;
    const std::shared_ptr<const Kept> kept = entry.kept();
    const std::optional<Object> object =
        kept ? std::optional<Object>(ObjectOf(*kept)) : std::nullopt;
    ApplyBoundLocked(uid, entry, node, object ? &*object : nullptr);
  }
}

void PodStore::NodeRemoved(const std::string& node) {
  MutexLock lock(mutex_);
  for (auto& [uid, entry] : pods_) {
    if (!(entry.node == node) || !entry.in_cache) continue;
    // The cache forgot them with the node. Should the node come back, they are applied again;
    // their record is re-read from their next event (record_hash 0 forces it).
    entry.in_cache = false;
    entry.load_counted = false;  // the node's loads went with it
    entry.record_hash = 0;
    entry.SetHiddenRecord(nullptr);
    ClearEntryFlagsLocked(entry);
  }
}

std::optional<extender::KnownPod> PodStore::FindPod(const std::string& uid) const {
  MutexLock lock(mutex_);
  const auto it = pods_.find(state::PodUid(uid));
  if (it == pods_.end() || !it->second.request_ok) return std::nullopt;
  return extender::KnownPod{it->second.request.Get(), it->second.pod_namespace.str(),
                            it->second.pod_name};
}

Result<state::BindStep> PodStore::AdvanceBind(const std::string& uid, state::BindEvent event) {
  auto step = cache_.Advance(uid, event);
  if (!step) log::Error("pod " + uid + ": " + step.error().message);
  return step;
}

std::optional<extender::KnownPod> PodStore::FindForBind(const std::string& uid) const {
  MutexLock lock(mutex_);
  const auto it = pods_.find(state::PodUid(uid));
  if (it == pods_.end() || !it->second.request_ok) return std::nullopt;
  extender::KnownPod known{it->second.request.Get(), it->second.pod_namespace.str(),
                           it->second.pod_name};
  if (const std::shared_ptr<const Kept>& kept = it->second.kept()) {
    known.containers = {kept, &kept->containers};  // shares the Kept's ownership
  }
  return known;
}

std::optional<extender::KnownPod> PodStore::ResolveForBind(const std::string& pod_namespace,
                                                           const std::string& pod_name,
                                                           const std::string& uid) {
  if (auto known = FindForBind(uid)) return known;
  if (!fetcher_) return std::nullopt;
  const std::optional<std::string> json = fetcher_(pod_namespace, pod_name);
  if (!json) return std::nullopt;
  auto pod = kube::DecodePod(*json);
  if (!pod || pod->uid != uid) return std::nullopt;  // gone, or replaced by another pod
  Upsert(*pod);
  return FindForBind(uid);
}

std::unordered_map<std::string, std::string> PodStore::UidsByName() const {
  MutexLock lock(mutex_);
  std::unordered_map<std::string, std::string> uids;
  uids.reserve(pods_.size());
  for (const auto& [uid, entry] : pods_) {
    uids[entry.pod_namespace.str() + "/" + entry.pod_name] = uid.str();
  }
  return uids;
}

std::size_t PodStore::size() const {
  MutexLock lock(mutex_);
  return pods_.size();
}

std::size_t PodStore::distinct_requests() const {
  MutexLock lock(mutex_);
  return requests_.size();
}

}  // namespace linkfit::cluster
