#pragma once

// PodStore: cluster mode's view of every pod, fed by the pods reflector, and the PodSource the
// extender binds and scores through. It mirrors kube-scheduler's cache rules
// (../shared/spec/kube-api.md §6): every assigned, non-terminal pod counts on its node, whoever
// scheduled it.
//
//   pod event                      what the ClusterCache gets
//   -----------------------------  --------------------------------------------------------------
//   pending                        nothing (bind will assume it); its request counts in demand
//   bound, Assumed by our bind     the bind ends (state/bind_lifecycle.h): with its record,
//                                  kWatchBoundSameRecord (confirmed); with another record or on
//                                  another node, kWatchBoundOtherRecord, and the record counts
//   deleted, Assumed by our bind   kWatchDeleted: the bind ends, the devices are released
//   a record colliding with        the record counts: binds not yet accepted whose devices cannot
//   assumptions                    sit beside it end with kRecordTookDevices (not sent, or
//                                  settled by the ApiBinder)
//   a record colliding with        an allocation collision (must never happen): counted, logged
//   another record                 once with both pods, an Event on the later pod, /inspect
//   bound, linkfit.io/allocation   exactly those devices (AddBound / ReplaceBound)
//   bound GPU pod, no record       devices estimated as NVIDIA's device plugin would pick them
//                                  (the best-connected free set), marked estimated; a record
//                                  that collides with estimates moves them (known beats guessed)
//   bound, no GPUs                 its CPU and memory only, as a load on its node (no
//                                  per-pod record in the cache)
//   reported by the node's agent   the devices linkfit.io/devices-in-use says the pod really
//                                  holds replace the estimate or the record (SetReportedDevices);
//                                  a placed pod holding other devices than its record counts a
//                                  hand-off mismatch
//   Succeeded / Failed / deleted   Remove (frees devices, CPU and memory)
//   missing from a relist          deleted (a cut watch missed it), unless its bind is in flight
//
// Pods on nodes linkfit does not model wait in the store and are applied when the node appears
// (NodeAppeared). Demand (fragmentation shapes, MIG profile weights) counts the pending and
// running pods that ask for GPUs, with a power-of-two prior, so scores do not depend on the
// history of filter calls and are the same after a restart.
//
// Memory: one 128-byte heap block per pod (a 96-byte entry keyed by its 16-byte PodUid) and a
// bucket; pods asking for GPUs or NICs share their request with the pods asking alike
// (RequestPool), and the containers are kept only for such pods while pending, which bind needs
// for the per-container plan (bench/RESULTS.md, "heap per pod").
//
// Thread-safety: all methods are safe to call concurrently; the reflector calls the sink methods
// from its own thread, bind calls FindPod/ResolveForBind from server threads.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "linkfit/cluster/event_recorder.h"
#include "linkfit/cluster/request_pool.h"
#include "linkfit/common/metrics.h"
#include "linkfit/common/mutex.h"
#include "linkfit/extender/node_fit.h"
#include "linkfit/extender/pod_source.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/kube/reflector.h"
#include "linkfit/state/cluster_cache.h"
#include "linkfit/state/pod_uid.h"

namespace linkfit::cluster {

class PodStore final : public extender::PodSource, public kube::ReflectorSink {
 public:
  // `cache` and `metrics` must outlive the store.
  PodStore(state::ClusterCache& cache, extender::RequestDefaults defaults, extender::FitOptions fit,
           MetricsSink& metrics);

  // ReflectorSink.
  void BeginList() override;
  void ListItem(std::string_view object_json) override;
  void EndList(std::string_view resource_version) override;
  void Event(kube::WatchEventType type, std::string_view object_json) override;

  // Applies an already decoded pod (the reflector's path after decoding; tests).
  void Upsert(const kube::PodView& pod);
  // Applies a pod the binder read from the API server, if the store still knows it (a pod whose
  // deletion the watch delivered meanwhile is not brought back by an older read).
  void ApplyFetched(const kube::PodView& pod);
  void Delete(const std::string& uid);

  // A node linkfit now models (new, or its model replaced): applies the pods bound to it that
  // the cache does not hold (waiting for the node, or dropped by the model change).
  void NodeAppeared(const std::string& node);
  // The node is gone from the cache, and its pods with it.
  void NodeRemoved(const std::string& node);
  // The node agent's report of the devices the node's pods really hold (decoded
  // linkfit.io/devices-in-use), or nullopt when the node has none (any more). Reported devices
  // win over records and estimates; pods the report leaves out keep what they had.
  void SetReportedDevices(const std::string& node, std::optional<kube::DevicesInUse> report);

  // Reads one pod from the API server (the JSON of GET namespaces/NS/pods/NAME, or nullopt);
  // set by ClusterSource, used by ResolveForBind.
  using PodFetcher =
      std::function<std::optional<std::string>(const std::string&, const std::string&)>;
  void SetFetcher(PodFetcher fetcher) { fetcher_ = std::move(fetcher); }
  // Where Events about pods go (a hand-off mismatch); may be null. Set before serving.
  void SetEventRecorder(EventRecorder* events) { events_ = events; }

  // PodSource.
  std::optional<extender::KnownPod> FindPod(const std::string& uid) const override;
  // With the pod's containers when the store keeps them (a pending GPU pod). A pod the watch has
  // not shown yet is read from the API server and applied first.
  std::optional<extender::KnownPod> ResolveForBind(const std::string& pod_namespace,
                                                   const std::string& pod_name,
                                                   const std::string& uid) override;
  const extender::Demand& demand() const override { return demand_; }
  const char* where_pods_are_seen() const override { return "in the API server's pod list"; }

  std::size_t size() const;
  // The distinct device requests kept (RequestPool): pods asking alike share one.
  std::size_t distinct_requests() const;
  // "namespace/name" -> UID of every pod (tools and benchmarks; a full scan).
  std::unordered_map<std::string, std::string> UidsByName() const;
  // Nodes with at least one estimated pod, and the count of estimated pods.
  std::size_t estimated_pods() const { return estimated_.load(); }
  // Pods counted on reported devices, and the hand-off mismatches seen (placed pods whose node
  // reported other devices than their record).
  std::size_t reported_pods() const { return reported_.load(); }
  std::uint64_t handoff_mismatches() const { return mismatches_.load(); }
  std::uint64_t lists_applied() const { return lists_.load(); }

  // Two pods whose committed records name one device (a GPU given twice in the API server):
  // each is counted (linkfit_allocation_collisions_total), logged once with both pods, gets an
  // Event on the later pod, and the last kMaxCollisionsKept are kept for /inspect.
  struct Collision {
    std::string node;
    std::string pod;  // namespace/name of the later pod, counted by its CPU and memory only
    std::string uid;
    std::string holders;  // the pods already holding the devices
    std::string devices;
  };
  static constexpr std::size_t kMaxCollisionsKept = 64;
  std::vector<Collision> collisions() const;

 private:
  // A namespace or node name kept once in the store's pool (they repeat across thousands of
  // pods): a pointer instead of a string per pod.
  class Name {
   public:
    Name();
    explicit Name(const std::string* text) : text_(text) {}
    const std::string& str() const { return *text_; }
    bool empty() const { return text_->empty(); }
    friend bool operator==(const Name& a, const std::string& b) { return *a.text_ == b; }

   private:
    const std::string* text_;
  };

  // The pod's request: CPU and memory inline, the device part only for pods that ask for GPUs or
  // NICs (most pods of a cluster do not), shared through the store's RequestPool with the pods
  // that ask alike.
  class Request {
   public:
    void Set(const extender::GpuRequest& request, RequestPool& pool);
    extender::GpuRequest Get() const;  // a copy, with CPU and memory
    extender::GpuRequest::Kind kind() const {
      return gpu_ ? gpu_->kind : extender::GpuRequest::Kind::kNone;
    }
    // GPUs or NICs (GpuRequest::WantsDevices): the pods whose request is kept.
    bool wants_devices() const { return static_cast<bool>(gpu_); }
    std::int64_t cpu_milli() const { return cpu_milli_; }
    std::int64_t memory_bytes() const { return memory_bytes_; }
    int share_milli() const { return gpu_ ? gpu_->share_milli : 0; }
    // Thousandths of each NIC the pod asks (1000 whole; also when it asks none).
    int nic_milli() const { return gpu_ ? gpu_->nics.milli : alloc::NicRequest::kWhole; }
    std::string Describe() const { return Get().Describe(); }

   private:
    std::int64_t cpu_milli_ = 0;
    std::int64_t memory_bytes_ = 0;
    RequestPool::Handle gpu_;
  };

  // What the store keeps of a pod it cannot count yet: its containers (bind's per-container
  // plan) and its allocation record (a pod waiting for its node), not its whole PodView (about
  // 450 bytes before the maps and strings it points to; thousands of pods wait at a time).
  struct Kept {
    std::vector<kube::ContainerView> containers;
    std::optional<std::string> allocation;  // linkfit.io/allocation
  };
  // What ApplyBoundLocked reads of a pod's object: a decoded PodView or a Kept one.
  struct Object {
    const std::string* allocation = nullptr;  // null: the pod has no linkfit.io/allocation
    const std::vector<kube::ContainerView>* containers = nullptr;
  };
  static Object ObjectOf(const kube::PodView& pod);
  static Object ObjectOf(const Kept& kept);
  static std::shared_ptr<const Kept> Keep(const Object& pod);

  // A pod's entry: 96 bytes, so that with its key it fills a 128-byte heap block (the store
  // keeps one per pod of the cluster). The flags are bits, and what few pods need sits behind
  // one pointer.
  struct Entry {
    Name pod_namespace;
    std::string pod_name;
    Name node;  // spec.nodeName
    Request request;
    std::uint32_t list_generation = 0;
    bool request_ok : 1 = false;
    bool demand_counted : 1 = false;
    bool estimated : 1 = false;
    bool reported : 1 = false;    // counted on its node's report
    bool mismatch : 1 = false;    // the report differs from its record
    bool has_record : 1 = false;  // its last object carried linkfit.io/allocation
    // Counted on its node by its CPU and memory only (ClusterCache::AddLoad): no record kept.
    bool load_counted : 1 = false;
    bool in_cache : 1 = false;      // counted in the ClusterCache
    std::uint64_t record_hash = 0;  // of linkfit.io/allocation; 0 = none

    // Kept for pending GPU pods (bind's plan) and bound pods waiting for their node to appear;
    // null otherwise.
    const std::shared_ptr<const Kept>& kept() const;
    void SetKept(std::shared_ptr<const Kept> kept);
    // The record's devices while the node's report overrides them (a mismatch), or a record
    // evicted by a report; null otherwise.
    const state::Assignment* hidden_record() const;
    void SetHiddenRecord(std::unique_ptr<const state::Assignment> record);

   private:
    struct Rare {
      std::shared_ptr<const Kept> kept;
      std::unique_ptr<const state::Assignment> hidden_record;
    };
    void DropRareIfEmpty();
    std::unique_ptr<Rare> rare_;  // null when both are
  };

  // Moves the pod's bind on (ClusterCache::Advance); an error (a pair the bind lifecycle does
  // not draw) is logged and returned.
  Result<state::BindStep> AdvanceBind(const std::string& uid, state::BindEvent event);
  // FindPod with the containers kept for bind.
  std::optional<extender::KnownPod> FindForBind(const std::string& uid) const;
  // The pooled copy of `text`.
  Name InternLocked(const std::string& text) LINKFIT_REQUIRES(mutex_);

  // Decodes a pod object; a bad one is logged and counted, and skipped.
  std::optional<kube::PodView> Decode(std::string_view object_json, const char* where);
  void UpsertLocked(const kube::PodView& pod) LINKFIT_REQUIRES(mutex_);
  void DeleteLocked(const std::string& uid) LINKFIT_REQUIRES(mutex_);
  // `pod` may be null (a pod waiting for its node without a kept object: its entry says enough).
  void ApplyBoundLocked(const std::string& uid, Entry& entry, const std::string& node_name,
                        const Object* pod) LINKFIT_REQUIRES(mutex_);
  // ApplyBoundLocked's parts: the warning, metric and event of a report that differs from the
  // record; the pod already in the cache (assumed by a bind or added) settled against what is
  // known of it, true when that ends the application; the pod counted on `node` by what is
  // known, else by an estimate, else by its CPU and memory.
  void ReportMismatchLocked(const std::string& uid, const Entry& entry,
                            const state::NodeState& node, const state::Assignment& reported,
                            const state::Assignment& recorded) LINKFIT_REQUIRES(mutex_);
  bool SettleCountedLocked(const std::string& uid, Entry& entry, const std::string& node_name,
                           state::PodPhase phase, const std::optional<state::Assignment>& known)
      LINKFIT_REQUIRES(mutex_);
  void CountOnNodeLocked(const std::string& uid, Entry& entry, const state::NodeState& node,
                         std::optional<state::Assignment> known) LINKFIT_REQUIRES(mutex_);
  void SetDemandLocked(Entry& entry, bool counted) LINKFIT_REQUIRES(mutex_);
  // The devices the pod's record names (decoded from `pod`, or when re-applied without it, what
  // the cache holds from its record), and what its node reports it holding.
  std::optional<state::Assignment> RecordedLocked(const std::string& uid, Entry& entry,
                                                  const std::string& node_name,
                                                  const state::NodeState* node, const Object* pod)
      LINKFIT_REQUIRES(mutex_);
  // What the node reports the pod holds; what a report cannot say of NICs (thousandths, the GPU
  // each serves) is taken from `recorded` where it holds the same NIC.
  std::optional<state::Assignment> ReportedLocked(const std::string& uid, const Entry& entry,
                                                  const std::string& node_name,
                                                  const state::NodeState* node,
                                                  const std::optional<state::Assignment>& recorded)
      LINKFIT_REQUIRES(mutex_);
  // Counts `assignment` on its node, moving weaker pods (estimated; for a reported assignment
  // also recorded) out of the way and counting them again around it. False when it still
  // collides.
  bool ReplaceEvictingLocked(const state::Assignment& assignment, const std::string& node_name)
      LINKFIT_REQUIRES(mutex_);
  // The evictions of ReplaceEvictingLocked: estimated pods, and recorded ones for a reported
  // assignment. False when `assignment` still collides.
  bool EvictWeakerLocked(const state::Assignment& assignment, const std::string& node_name)
      LINKFIT_REQUIRES(mutex_);
  // Ends the binds not accepted yet whose devices cannot sit beside `assignment` (the same whole
  // GPU, an overlapping MIG slice, a share beyond the GPU's capacity: kRecordTookDevices); true
  // when there were any.
  bool DisplaceAssumedLocked(const state::Assignment& assignment, const std::string& node_name)
      LINKFIT_REQUIRES(mutex_);
  // `assignment` (the pod's record or report) could not be counted: logs it, and when it
  // collides with another pod's committed record, reports an allocation collision.
  void ReportCollisionLocked(const std::string& uid, const Entry& entry,
                             const state::Assignment& assignment) LINKFIT_REQUIRES(mutex_);
  // Takes the node's estimated pods (and, with `also_recorded`, those counted from records) but
  // `except` out of the cache; returns what they held.
  std::vector<state::Assignment> EvictLocked(const std::string& node_name,
                                             const std::string& except, bool also_recorded)
      LINKFIT_REQUIRES(mutex_);
  // Keeps the estimated/reported counts in step with what the entry is counted with.
  void SetEntryFlagsLocked(Entry& entry, const state::Assignment& counted) LINKFIT_REQUIRES(mutex_);
  // Counts / stops counting a pod without devices by its requests only.
  void CountLoadLocked(const std::string& uid, Entry& entry) LINKFIT_REQUIRES(mutex_);
  void DropLoadLocked(Entry& entry) LINKFIT_REQUIRES(mutex_);
  void ClearEntryFlagsLocked(Entry& entry) LINKFIT_REQUIRES(mutex_);

  state::ClusterCache& cache_;
  const extender::RequestDefaults defaults_;
  const extender::FitOptions fit_;
  MetricsSink& metrics_;
  extender::Demand demand_;
  PodFetcher fetcher_;  // set before serving
  EventRecorder* events_ = nullptr;

  mutable Mutex mutex_;
  // The entries' device requests; declared before pods_, so that it outlives their handles.
  RequestPool requests_ LINKFIT_GUARDED_BY(mutex_);
  std::unordered_map<state::PodUid, Entry, state::PodUid::Hasher> pods_ LINKFIT_GUARDED_BY(mutex_);
  std::uint32_t generation_ LINKFIT_GUARDED_BY(mutex_) = 0;           // : the list in progress
  std::unordered_set<std::string> names_ LINKFIT_GUARDED_BY(mutex_);  // : namespaces, nodes
  // Node -> pod UID -> the devices the node's agent reports.
  std::unordered_map<std::string, std::unordered_map<std::string, kube::DevicesInUse::Pod>> reports_
      LINKFIT_GUARDED_BY(mutex_);
  std::unordered_set<std::string> collided_ LINKFIT_GUARDED_BY(mutex_);  // : UIDs reported
  std::vector<Collision> collisions_ LINKFIT_GUARDED_BY(mutex_);  // : the latest, oldest first
  std::atomic<std::size_t> estimated_{0};
  std::atomic<std::size_t> reported_{0};
  std::atomic<std::uint64_t> mismatches_{0};
  std::atomic<std::uint64_t> lists_{0};
};

}  // namespace linkfit::cluster
