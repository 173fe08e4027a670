#pragma once

// ApiBinder: cluster mode's Binder. One API write per bind: POST pods/{name}/binding with the
// pod UID as precondition and the allocation record (kube/annotations.h, with the per-container
// plan) in the Binding's metadata.annotations under linkfit.io/allocation; the API server merges
// those annotations into the pod in the same update that sets spec.nodeName
// (../shared/spec/kube-api.md §4).
//
//   answer                                          outcome    the cache
//   201                                             accepted   stays Assumed (bound); the watch
//                                                              confirms
//   409 "already assigned to node N", N = target    accepted   (a retried bind that had landed)
//   409 otherwise (UID mismatch, being deleted),    rejected   forgotten; bind answers the error
//   other 4xx (404, 400, 403, a 429 after retry),
//   or the request was never sent
//   5xx, a timeout or a cut connection after the    unknown    stays Assumed; settled below
//   request was sent
//
// Settling an unknown outcome: a GET cannot prove that a write still in flight at the API server
// will not land, so the settler re-sends the same Binding (after 1 s, doubling to 30 s) until an
// answer is definite: 201 or "already assigned" to this node (accepted: the pod is bound, with
// this record, exactly once), any other 409/4xx (rejected: forgotten). The pod watch may settle it
// first (bound -> confirmed, deleted -> removed); the settler then drops it. Assumptions never
// expire on a timer.
//
// Thread-safety: Bind may be called concurrently; the settler runs on its own thread.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "linkfit/cluster/pod_store.h"
#include "linkfit/common/metrics.h"
#include "linkfit/extender/binder.h"
#include "linkfit/kube/api_client.h"
#include "linkfit/state/cluster_cache.h"

namespace linkfit::cluster {

struct SettleOptions {
  std::chrono::milliseconds first_retry{1000};
  std::chrono::milliseconds max_retry{30000};
  // Mark every planned container as requiring linkfit's NRI plugin (config
  // kubernetes.require_nri_plugin; design §4.1).
  bool require_nri_plugin = false;
};

// NRI's default validator: a container listed here cannot start unless these plugins saw it.
inline constexpr const char* kRequiredPluginsPrefix =
    "required-plugins.noderesource.dev/container.";

class ApiBinder final : public extender::Binder {
 public:
  // Every reference must outlive the binder.
  ApiBinder(kube::ApiClient& client, state::ClusterCache& cache, const PodStore& pods,
            std::string shared_gpu_resource, MetricsSink& metrics, SettleOptions settle = {});
  ~ApiBinder() override;
  ApiBinder(const ApiBinder&) = delete;
  ApiBinder& operator=(const ApiBinder&) = delete;

  // The Binding's JSON: the pod, the node, and in metadata.annotations the allocation record
  // (empty: no annotation; with require_nri_plugin, also the required-plugins marker of each
  // container the record plans).
  static std::string BindingBody(const extender::BindTarget& target, const std::string& allocation,
                                 bool require_nri_plugin = false);

  Result<extender::BindOutcome> Bind(const extender::BindTarget& target,
                                     const state::Assignment& assignment) override;
  // Departures are learnt from the pod watch; nothing to write.
  void Released(const std::string& pod_uid) override { (void)pod_uid; }

  // Stops the settler (unsettled pods stay Assumed).
  void Stop();
  std::size_t unsettled() const;

 private:
  enum class Verdict { kAccepted, kRejected, kUnknown };
  struct Answer {
    Verdict verdict = Verdict::kUnknown;
    std::string detail;
  };
  struct Pending {
    extender::BindTarget target;
    std::string body;
    std::chrono::steady_clock::time_point due;
    std::chrono::milliseconds backoff{0};
  };
  Answer Post(const extender::BindTarget& target, const std::string& body);
  void SettleLoop();

  kube::ApiClient& client_;
  state::ClusterCache& cache_;
  const PodStore& pods_;
  const std::string shared_gpu_resource_;
  MetricsSink& metrics_;
  const SettleOptions settle_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> pending_;  // GUARDED_BY(mutex_)
  bool stopping_ = false;        // GUARDED_BY(mutex_)
  std::thread settler_;
};

}  // namespace linkfit::cluster
