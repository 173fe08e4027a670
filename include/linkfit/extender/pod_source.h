#pragma once

// PodSource: what the extender knows about pods beyond the request in hand, from whichever
// source runs (the extender does not know which):
//
//   - bind resolves the pod by UID (ExtenderBindingArgs carries only names and the UID);
//   - prioritize weighs the request shapes and MIG profiles the cluster asks for (Demand).
//
//   standalone mode  PodMemo: pods seen in filter/prioritize requests (there is no API server);
//                    demand counts every filtered pod, as the benchmark harness was measured
//   cluster mode     cluster::PodStore: pods from the API server's watch; demand counts the
//                    pending and running pods the API shows, so scores survive a restart
//
// Thread-safety: implementations must be safe for concurrent use.

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "linkfit/extender/gpu_request.h"
#include "linkfit/extender/mig_fragmentation.h"
#include "linkfit/extender/scoring.h"
#include "linkfit/kube/types.h"

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

// The request shapes and MIG profiles to weigh fragmentation by.
class Demand {
 public:
  explicit Demand(bool power_of_two_prior = false) : shapes_(power_of_two_prior) {}
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
};

// Standalone mode's PodSource: the latest request of each pod seen by filter or prioritize (by
// UID, the oldest forgotten beyond `capacity`), and the demand of every filtered pod.
class PodMemo final : public PodSource {
 public:
  explicit PodMemo(RequestDefaults defaults, std::size_t capacity = 65536)
      : defaults_(std::move(defaults)), capacity_(capacity) {}

  // Records a pod from a request. `filtered`: it came in a filter call (its shape counts once
  // per call, as the harness's figures were measured); prioritize only refreshes the memo. A pod
  // whose hints do not parse is not recorded (filter answers with the reason).
  void Observe(const kube::PodView& pod, bool filtered);

  std::optional<KnownPod> FindPod(const std::string& uid) const override;
  const Demand& demand() const override { return demand_; }
  const char* where_pods_are_seen() const override { return "in a filter call"; }

 private:
  const RequestDefaults defaults_;
  const std::size_t capacity_;
  Demand demand_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, KnownPod> pods_;  // GUARDED_BY(mutex_)
  std::deque<std::string> order_;                   // GUARDED_BY(mutex_)
};

}  // namespace linkfit::extender
