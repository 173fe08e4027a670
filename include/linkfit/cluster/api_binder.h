#pragma once

// ApiBinder: cluster mode's Binder. One API write per bind: POST pods/{name}/binding with the
// pod UID as precondition and the allocation record (kube/annotations.h, with the per-container
// plan) in the Binding's metadata.annotations under linkfit.io/allocation; the API server merges
// those annotations into the pod in the same update that sets spec.nodeName
// (../shared/spec/kube-api.md §4).
//
// The API's committed record is the truth; what linkfit assumed is only a promise. A bind's life
// from the write on (Extender::Bind assumed the devices before; the pod store confirms):
//
//   Assumed --no binder lease (BinderLease::Permit)-----------------------------> Held (forgotten)
//      |    --a committed record took the devices (no longer Assumed)-----------> Displaced
//      | send, ?timeout=bind_timeout: lands by then or never
//      v
//     Sent --201------------------------------------------------------------------> Accepted
//      |   --409: read the pod: bound here with this record ------------------------> Accepted
//      |                        bound otherwise: the API's record applied ------------> Replaced
//      |                        not bound (other UID, being deleted) ------------------> Refused
//      |   --other 4xx (400, 403, 404, 429) ---------------------------------------------> Refused
//      |   --5xx, 504, no reply after sending -----------------------------------------> Unknown
//      v
//   Unknown --after bind_timeout + margin (no Binding can land any more), read the pod:
//             bound here with this record: Accepted; bound otherwise: Replaced; not bound or
//             gone: Refused (settled). A read that fails is repeated; the Binding is never
//             re-sent. The pod watch may settle it first (bound: confirmed; deleted: removed).
//
//   Accepted: the cache keeps the pod Assumed, marked bound, until the watch confirms it.
//   Replaced: the pod is applied from the API's object (its record wins over the plan).
//   Refused, Held, Displaced: the devices are forgotten and bind answers an error.
//
// Thread-safety: Bind may be called concurrently; the settler runs on its own thread.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "linkfit/cluster/binder_lease.h"
#include "linkfit/cluster/pod_store.h"
#include "linkfit/common/metrics.h"
#include "linkfit/extender/binder.h"
#include "linkfit/kube/api_client.h"
#include "linkfit/state/cluster_cache.h"

namespace linkfit::cluster {

struct SettleOptions {
  // The Binding's deadline at the API server (its `timeout` query parameter).
  std::chrono::milliseconds bind_timeout{5000};
  // Beyond the deadline: a write the API server had already handed to etcd may still commit.
  std::chrono::milliseconds margin{2000};
  std::chrono::milliseconds first_retry{500};  // a failed read of the pod is repeated
  std::chrono::milliseconds max_retry{10000};
  // Mark every planned container as requiring linkfit's NRI plugin (config
  // kubernetes.require_nri_plugin; design §4.1).
  bool require_nri_plugin = false;

  // Until when a Binding sent now may land.
  std::chrono::milliseconds horizon() const { return bind_timeout + margin; }
};

// NRI's default validator: a container listed here cannot start unless these plugins saw it.
inline constexpr const char* kRequiredPluginsPrefix =
    "required-plugins.noderesource.dev/container.";

class ApiBinder final : public extender::Binder {
 public:
  // Every reference must outlive the binder.
  ApiBinder(kube::ApiClient& client, state::ClusterCache& cache, PodStore& pods, BinderLease& lease,
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
  // Bindings whose outcome is not settled yet (waiting, or being read).
  std::size_t unsettled() const;

 private:
  enum class Verdict { kAccepted, kReplaced, kRefused, kUnknown };
  struct Answer {
    Answer(Verdict v, std::string d, std::string node = "")
        : verdict(v), detail(std::move(d)), bound_node(std::move(node)) {}
    Verdict verdict;
    std::string detail;
    std::string bound_node;  // kReplaced: where the API has the pod
  };
  struct Pending {
    extender::BindTarget target;
    std::string allocation;
    std::chrono::steady_clock::time_point due;
    std::chrono::milliseconds backoff{0};
  };
  Answer Post(const extender::BindTarget& target, const std::string& body,
              const std::string& allocation);
  // Reads the pod and judges the Binding by what the API holds; `settled` when no Binding of
  // it can land any more (an unbound pod then was refused). A bound pod is applied to the store.
  Answer ReadPod(const extender::BindTarget& target, const std::string& allocation, bool settled);
  void SettleLoop();

  kube::ApiClient& client_;
  state::ClusterCache& cache_;
  PodStore& pods_;
  BinderLease& lease_;
  const std::string shared_gpu_resource_;
  MetricsSink& metrics_;
  const SettleOptions settle_;
  const std::string timeout_query_;  // "?timeout=5000ms"

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> pending_;  // GUARDED_BY(mutex_)
  std::size_t settling_ = 0;     // GUARDED_BY(mutex_): taken from pending_, being read

  bool stopping_ = false;  // GUARDED_BY(mutex_)
  std::thread settler_;
};

}  // namespace linkfit::cluster
