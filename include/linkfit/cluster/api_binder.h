#pragma once

// ApiBinder: cluster mode's Binder. One API write per bind: POST pods/{name}/binding with the
// pod UID as precondition and the allocation record (kube/annotations.h, with the per-container
// plan) in the Binding's metadata.annotations under linkfit.io/allocation; the API server merges
// those annotations into the pod in the same update that sets spec.nodeName
// (../shared/spec/kube-api.md §4).
//
// What a write leads to is the bind lifecycle's (state/bind_lifecycle.h): Bind answers the event
// (201: kCreated; 409: the pod read back, kConflictSameRecord / kConflictOtherRecord / kRefused;
// other 4xx or not reached: kRefused; 5xx, 504, no reply after sending: kNoAnswer; no binder
// lease: kLeaseRefused; a committed record took the devices before sending: kRecordTookDevices).
// A 409 is judged by the pod, never by the message. A Binding without an answer is kept until
// no Binding can land any more (its deadline, ?timeout=bind_timeout, plus a margin); the settler
// then reads the pod and advances the bind with kReadSameRecord / kReadOtherRecord /
// kReadNotBound, or reads again later (kReadFailed). The Binding is never re-sent. The pod watch
// may end the bind first; the settler then has nothing to do.
//
// Thread-safety: Bind may be called concurrently; the settler runs on its own thread.

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "linkfit/cluster/binder_lease.h"
#include "linkfit/cluster/pod_store.h"
#include "linkfit/common/metrics.h"
#include "linkfit/common/mutex.h"
#include "linkfit/extender/binder.h"
#include "linkfit/kube/api_client.h"
#include "linkfit/model/allocation.h"
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
  // Every reference must outlive the binder. `shared_gpu_resource` and `nic_resources` name the
  // resources by which containers ask for GPU shares and NICs (model::PlanContainers).
  ApiBinder(kube::ApiClient& client, state::ClusterCache& cache, PodStore& pods, BinderLease& lease,
            std::string shared_gpu_resource, MetricsSink& metrics, SettleOptions settle = {},
            model::NicResources nic_resources = {});
  ~ApiBinder() override;
  ApiBinder(const ApiBinder&) = delete;
  ApiBinder& operator=(const ApiBinder&) = delete;

  // The Binding's JSON: the pod, the node, and in metadata.annotations the allocation record
  // (null: no annotation; with require_nri_plugin, also the required-plugins marker of each
  // container the record plans).
  static std::string BindingBody(const extender::BindTarget& target,
                                 const kube::AllocationRecord* record,
                                 bool require_nri_plugin = false);

  extender::BindReply Bind(const extender::BindRequest& request) override;
  // Departures are learnt from the pod watch; nothing to write.
  void Released(const std::string& pod_uid) override { (void)pod_uid; }

  // Stops the settler (unsettled pods stay Assumed).
  void Stop();
  // Bindings whose outcome is not settled yet (waiting, or being read).
  std::size_t unsettled() const;

 private:
  // What reading the pod back says of a Binding.
  struct PodRead {
    enum Verdict { kSameRecord, kOtherRecord, kNotBound, kFailed };
    PodRead(Verdict v, std::string d, std::string n = "")
        : verdict(v), detail(std::move(d)), node(std::move(n)) {}
    Verdict verdict;
    std::string detail;
    std::string node;  // kOtherRecord: where the API has the pod
  };
  struct Pending {
    extender::BindTarget target;
    std::string allocation;
    std::chrono::steady_clock::time_point due;
    std::chrono::milliseconds backoff{0};
  };
  extender::BindReply Post(const extender::BindTarget& target, const std::string& body,
                           const std::string& allocation);
  // Reads the pod and judges the Binding by what the API holds. A pod bound otherwise is applied
  // to the store (which ends the bind as Replaced).
  PodRead ReadPod(const extender::BindTarget& target, const std::string& allocation);
  void SettleLoop();
  // Reads the pod of one Binding without an answer and advances its bind; false when it must be
  // read again later.
  bool Settle(const Pending& item);

  kube::ApiClient& client_;
  state::ClusterCache& cache_;
  PodStore& pods_;
  BinderLease& lease_;
  const std::string shared_gpu_resource_;
  const model::NicResources nic_resources_;
  MetricsSink& metrics_;
  const SettleOptions settle_;
  const std::string timeout_query_;  // "?timeout=5000ms"

  mutable Mutex mutex_;
  CondVar wake_;
  std::deque<Pending> pending_ LINKFIT_GUARDED_BY(mutex_);
  std::size_t settling_ LINKFIT_GUARDED_BY(mutex_) = 0;  // taken from pending_, being read

  bool stopping_ LINKFIT_GUARDED_BY(mutex_) = false;
  std::thread settler_;
};

}  // namespace linkfit::cluster
