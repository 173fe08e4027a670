#pragma once

// NodeStore: cluster mode's nodes, fed by the nodes reflector. A node is managed when it carries
// the annotation linkfit.io/topology (a topology document, fixture schema or linkfit's compact
// form, or nvidia-smi text); the GPUs in MIG mode come from the annotation linkfit.io/mig-mode
// beside it ("all", "none" or "0,1,3"; absent = none). Its allocatable CPU and memory come from
// status.allocatable; the labels under nvidia.com/ and linkfit.io/ are kept (GPU product).
//
//   no annotation         unknown to linkfit (filter: unresolvable, "node is unknown")
//   annotation parses     modelled; a changed annotation, MIG mode or allocatable rebuilds the
//                         model (topologies shared by content and fingerprint) and re-applies
//                         the node's pods; status-only updates (heartbeats) cost a hash
//   annotation is bad     not schedulable for linkfit: the parse error is the filter reason
//                         (Snapshot::Problem), an error log line and a metric; never a crash
//   deleted / not relisted  forgotten, with its pods
//
// Thread-safety: all methods are safe to call concurrently (the reflector calls the sink from
// its own thread).

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "linkfit/cluster/pod_store.h"
#include "linkfit/common/metrics.h"
#include "linkfit/common/mutex.h"
#include "linkfit/kube/reflector.h"
#include "linkfit/kube/types.h"
#include "linkfit/model/node_model.h"
#include "linkfit/state/cluster_cache.h"

namespace linkfit::cluster {

inline constexpr const char* kAnnotationMigMode = "linkfit.io/mig-mode";

class NodeStore final : public kube::ReflectorSink {
 public:
  // Every reference must outlive the store.
  NodeStore(state::ClusterCache& cache, model::NodeModelFactory& factory, PodStore& pods,
            MetricsSink& metrics);

  void BeginList() override;
  void ListItem(std::string_view object_json) override;
  void EndList(std::string_view resource_version) override;
  void Event(kube::WatchEventType type, std::string_view object_json) override;

  void Upsert(const kube::NodeView& node);
  void Delete(const std::string& name);

  std::size_t known() const;     // nodes the API shows
  std::size_t modelled() const;  // of which linkfit models
  std::uint64_t lists_applied() const;

 private:
  enum class Change { kNone, kModelled, kRemoved };
  // Applies the node to its entry and the cache under the store's lock.
  Change UpsertEntry(const kube::NodeView& node) LINKFIT_EXCLUDES(mutex_);

  struct Entry {
    std::uint64_t facts_hash = 0;  // 0 = not modelled
    std::uint64_t list_generation = 0;
    std::uint64_t devices_hash = 0;  // of linkfit.io/devices-in-use; 0 = none
    int handoff_mode = kNoMode;      // while modelled: a topology::kHandoffModes index, or kUnsaid
  };
  static constexpr int kNoMode = -1;
  static constexpr int kUnsaid = 4;  // modelled, its agent states no hand-off mode
  // Counts the entry under `mode` (kNoMode when it stops being modelled) and reports the totals.
  void SetHandoffModeLocked(Entry& entry, int mode) LINKFIT_REQUIRES(mutex_);
  // The node's `what` cannot be used (`problem`): it is not modelled any more.
  Change RefuseLocked(const std::string& name, Entry& entry, const std::string& what,
                      const std::string& problem) LINKFIT_REQUIRES(mutex_);
  // Hands a changed linkfit.io/devices-in-use to the pod store.
  void UpdateReport(const kube::NodeView& node);

  state::ClusterCache& cache_;
  model::NodeModelFactory& factory_;
  PodStore& pods_;
  MetricsSink& metrics_;
  mutable Mutex mutex_;
  std::unordered_map<std::string, Entry> nodes_ LINKFIT_GUARDED_BY(mutex_);
  std::uint64_t generation_ LINKFIT_GUARDED_BY(mutex_) = 0;
  std::uint64_t lists_ LINKFIT_GUARDED_BY(mutex_) = 0;
  std::array<std::uint64_t, kUnsaid + 1> nodes_by_mode_ LINKFIT_GUARDED_BY(mutex_){};
};

}  // namespace linkfit::cluster
