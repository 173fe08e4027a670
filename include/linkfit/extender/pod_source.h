#pragma once

// PodSource: what the extender knows about pods beyond the request in hand, from whichever
// source runs (the extender does not know which):
//
//   - bind resolves the pod by UID (ExtenderBindingArgs carries only names and the UID);
//   - prioritize weighs the request shapes and MIG profiles the cluster asks for (Demand).
//
//   standalone mode  PodMemo: the pods linkfit knows without an API server: pending once a
//                    filter request shows them, running once bound (or listed in
//                    the cluster or state file), gone once released (POST /standalone/release)
//   cluster mode     cluster::PodStore: pods from the API server's watch, so scores survive a
//                    restart
//
// One demand model in both modes: each known pod counts once, by its UID, from the moment it is
// known until it leaves, however often kube-scheduler asks about it (a pod retried ten times
// weighs one pod), with the same power-of-two prior. Filter and prioritize change no demand: the
// extender only reads it; the sources record pods where they become known. (Cluster mode counts
// only pods that ask for GPUs; standalone mode counts every pod it is shown, CPU-only pods
// included, as the benchmark harness measures FGD's workloads.)
//
// Thread-safety: implementations must be safe for concurrent use.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "linkfit/common/mutex.h"
#include "linkfit/extender/gpu_request.h"
#include "linkfit/extender/mig_fragmentation.h"
#include "linkfit/extender/scoring.h"
#include "linkfit/kube/types.h"
#include "linkfit/state/cluster_cache.h"
#include "linkfit/state/node_state.h"

namespace linkfit::extender {

// What bind needs of a pod.
struct KnownPod {
  GpuRequest request;
  std::string pod_namespace;
  std::string pod_name;
  // Its containers, where the source keeps them for bind's per-container plan (cluster mode's
  // pending GPU pods, from ResolveForBind); null otherwise.
  std::shared_ptr<const std::vector<kube::ContainerView>> containers = nullptr;
};

// What a pod holding `assignment` on `node` asked for, as far as demand weighs it: its whole GPUs,
// shares or MIG instances (their profile named by the node's MIG table), CPU and memory.
KnownPod KnownPodOf(const state::Assignment& assignment, const state::NodeState& node);

// The request shapes and MIG profiles to weigh fragmentation by: each pod a source knows counts
// once (Add when it becomes known, Remove when it leaves), with whole 1, 2, 4 and 8 GPUs counted
// as one pod each (ShapeStats' power-of-two prior), in both modes.
class Demand {
 public:
  Demand() : shapes_(/*power_of_two_prior=*/true) {}
  void Add(const GpuRequest& request) {
    shapes_.Record(request);
    mig_profiles_.Record(request);
  }
  void Remove(const GpuRequest& request) {
    shapes_.Remove(request);
    mig_profiles_.Remove(request);
  }
  ShapeList Shapes() const { return shapes_.Typical(); }
  MigProfileWeightsPtr MigWeights() const { return mig_profiles_.Weights(); }

 private:
  ShapeStats shapes_;
  MigProfileStats mig_profiles_;
};

class PodSource {
 public:
  virtual ~PodSource() = default;
  // The pod with this UID, or nullopt when the source does not know it.
  virtual std::optional<KnownPod> FindPod(const std::string& uid) const = 0;
  virtual const Demand& demand() const = 0;
  // Where the source learns pods, for bind's error about an unknown pod ("in a filter call").
  virtual const char* where_pods_are_seen() const = 0;
  // The pod bind is about. Cluster mode asks the API server when its watch has not shown the pod
  // yet (kube-scheduler's informer may be ahead of linkfit's); the default is FindPod.
  virtual std::optional<KnownPod> ResolveForBind(const std::string& pod_namespace,
                                                 const std::string& pod_name,
                                                 const std::string& uid) {
    (void)pod_namespace, (void)pod_name;
    return FindPod(uid);
  }
  // A pod left (standalone: released through the extender, Extender::Release): its weight leaves
  // demand. Cluster mode learns departures from the pod watch and ignores this.
  virtual void PodLeft(const std::string& uid) { (void)uid; }
};

// Standalone mode's PodSource: the pods linkfit knows by UID (the oldest forgotten beyond
// `capacity`, its weight with it) and their demand, each pod counted once while known.
class PodMemo final : public PodSource {
 public:
  explicit PodMemo(RequestDefaults defaults, std::size_t capacity = 65536)
      : defaults_(std::move(defaults)), capacity_(capacity) {}

  // A pod a filter request shows (pending, as standalone mode learns of pods; kube-scheduler
  // filters every pod before it prioritizes it, and prioritize changes nothing):
  // known from its first sighting, counted in demand once however often kube-scheduler asks about
  // it; a later sighting with another request (changed hints) replaces its weight. Not learnt: a
  // pod without a UID (it could not be told from a retry) or whose hints do not parse (filter
  // answers with the reason).
  void Seen(const kube::PodView& pod);
  // The same with the pod's request already parsed (with this memo's defaults, as the extender
  // parses it: Extender::ParseRequest).
  void Seen(const kube::PodView& pod, const GpuRequest& request);
  // A pod that already holds devices (the cluster or state file's allocations at start-up),
  // counted like a seen one.
  void Running(const std::string& uid, KnownPod pod);
  // Running() for every allocation `cache` holds (KnownPodOf). REQUIRES: before serving.
  void LearnHeld(const state::ClusterCache& cache);
  // A pod left: forgotten, its weight out of demand.
  void PodLeft(const std::string& uid) override;

  std::optional<KnownPod> FindPod(const std::string& uid) const override;
  const Demand& demand() const override { return demand_; }
  const char* where_pods_are_seen() const override { return "in a filter call"; }
  // Pods known (tests).
  std::size_t size() const;

 private:
  struct Entry {
    KnownPod pod;
    std::uint64_t sequence = 0;  // its place in order_ (an older place there is stale)
  };
  void LearnLocked(const std::string& uid, KnownPod pod) LINKFIT_REQUIRES(mutex_);

  const RequestDefaults defaults_;
  const std::size_t capacity_;
  Demand demand_;
  mutable Mutex mutex_;
  std::unordered_map<std::string, Entry> pods_ LINKFIT_GUARDED_BY(mutex_);
  std::deque<std::pair<std::string, std::uint64_t>> order_ LINKFIT_GUARDED_BY(mutex_);
  std::uint64_t sequence_ LINKFIT_GUARDED_BY(mutex_) = 0;
};

}  // namespace linkfit::extender
