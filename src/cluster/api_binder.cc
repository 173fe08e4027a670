#include "linkfit/cluster/api_binder.h"

#include <algorithm>

#include "linkfit/common/json_string.h"
#include "linkfit/common/log.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/kube/object_json.h"
#include "linkfit/model/allocation.h"

namespace linkfit::cluster {
namespace {

std::string PodKey(const extender::BindTarget& target) {
  return target.pod_namespace + "/" + target.pod_name;
}

std::string PodPath(const extender::BindTarget& target) {
  return "/api/v1/namespaces/" + target.pod_namespace + "/pods/" + target.pod_name;
}

}  // namespace

ApiBinder::ApiBinder(kube::ApiClient& client, state::ClusterCache& cache, PodStore& pods,
                     BinderLease& lease, std::string shared_gpu_resource, MetricsSink& metrics,
                     SettleOptions settle, model::NicResources nic_resources)
    : client_(client),
      cache_(cache),
      pods_(pods),
      lease_(lease),
      shared_gpu_resource_(std::move(shared_gpu_resource)),
      nic_resources_(std::move(nic_resources)),
      metrics_(metrics),
      settle_(settle),
      timeout_query_("?timeout=" + std::to_string(settle.bind_timeout.count()) + "ms"),
      settler_([this] { SettleLoop(); }) {}

ApiBinder::~ApiBinder() { Stop(); }

void ApiBinder::Stop() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  wake_.NotifyAll();
  if (settler_.joinable()) settler_.join();
}

std::size_t ApiBinder::unsettled() const {
  MutexLock lock(mutex_);
  return pending_.size() + settling_;
}

std::string ApiBinder::BindingBody(const extender::BindTarget& target,
                                   const kube::AllocationRecord* record, bool require_nri_plugin) {
  std::string body = R"({"apiVersion":"v1","kind":"Binding","metadata":{"name":)";
  json::AppendString(body, target.pod_name);
  body += R"(,"namespace":)";
  json::AppendString(body, target.pod_namespace);
  body += R"(,"uid":)";
  json::AppendString(body, target.pod_uid);
  if (record != nullptr) {
    body += R"(,"annotations":{)";
    json::AppendString(body, kube::kAnnotationAllocation);
    body += ':';
    json::AppendString(body, kube::EncodeAllocationRecord(*record));
    if (require_nri_plugin) {
      for (const auto& container : record->containers) {
        if (container.devices.empty()) continue;
        body += ',';
        json::AppendString(body, kRequiredPluginsPrefix + container.name);
        body += R"(:"[\"linkfit\"]")";
      }
    }
    body += '}';
  }
  body += R"(},"target":{"apiVersion":"v1","kind":"Node","name":)";
  json::AppendString(body, target.node);
  body += "}}";
  return body;
}

ApiBinder::PodRead ApiBinder::ReadPod(const extender::BindTarget& target,
                                      const std::string& allocation) {
  auto reply = client_.Get(PodPath(target), "get");
  if (!reply) return {PodRead::kFailed, "reading the pod failed: " + reply.error().message};
  if (reply->status == 404) return {PodRead::kNotBound, "the pod is gone"};
  if (reply->status != 200) {
    return {PodRead::kFailed, "reading the pod answered " + std::to_string(reply->status) + ": " +
                                  kube::StatusMessage(reply->body)};
  }
  auto pod = kube::DecodePod(reply->body);
  if (!pod) return {PodRead::kFailed, "the pod read back does not decode: " + pod.error().message};
  if (pod->uid != target.pod_uid) return {PodRead::kNotBound, "the pod was replaced by another"};
  if (pod->node_name.empty()) return {PodRead::kNotBound, "the pod is not bound"};
  const auto it = pod->annotations.find(kube::kAnnotationAllocation);
  const bool same_record = allocation.empty()
                               ? it == pod->annotations.end()
                               : it != pod->annotations.end() && it->second == allocation;
  if (pod->node_name == target.node && same_record) return {PodRead::kSameRecord, ""};
  // Bound by another write (an earlier attempt with another plan, another scheduler): the pod
  // holds what the API says. Apply it now, so that no other pod is given those devices before
  // the watch shows them (the store ends the bind as Replaced).
  pods_.ApplyFetched(*pod);
  return {PodRead::kOtherRecord,
          "the pod is bound to " + pod->node_name +
              (pod->node_name == target.node ? " with another allocation" : "") +
              " by an earlier write; the API's record counts",
          pod->node_name};
}

extender::BindReply ApiBinder::Post(const extender::BindTarget& target, const std::string& body,
                                    const std::string& allocation) {
  using state::BindEvent;
  auto reply = client_.Post(PodPath(target) + "/binding" + timeout_query_, body, "bind",
                            /*retry_throttled=*/false);
  if (!reply) {
    if (reply.error().maybe_sent) {
      return {BindEvent::kNoAnswer,
              "no reply after the request was sent: " + reply.error().message};
    }
    return {BindEvent::kRefused, "the API server was not reached: " + reply.error().message};
  }
  const int status = reply->status;
  if (status == 200 || status == 201) return {BindEvent::kCreated, ""};
  const std::string message = kube::StatusMessage(reply->body);
  if (status == 409) {
    // "Already assigned", a UID that does not match, a pod being deleted: all Conflict. The pod
    // itself says which, not the message.
    PodRead read = ReadPod(target, allocation);
    switch (read.verdict) {
      case PodRead::kSameRecord:
        return {BindEvent::kConflictSameRecord, ""};
      case PodRead::kOtherRecord:
        return {BindEvent::kConflictOtherRecord, std::move(read.detail), std::move(read.node)};
      case PodRead::kNotBound:
        return {BindEvent::kRefused, "binding refused (409): " + message + "; " + read.detail};
      case PodRead::kFailed:
        return {BindEvent::kNoAnswer, "binding answered 409 (" + message + ") and " + read.detail};
    }
  }
  if (status >= 400 && status < 500) {
    return {BindEvent::kRefused, "binding refused (" + std::to_string(status) + "): " + message};
  }
  // 5xx, 504 at the deadline: the API server may have committed the update before failing.
  return {BindEvent::kNoAnswer, "API server error " + std::to_string(status) + ": " + message};
}

extender::BindReply ApiBinder::Bind(const extender::BindRequest& request) {
  const extender::BindTarget& target = request.target;
  const state::Assignment& assignment = request.assignment;
  std::optional<kube::AllocationRecord> record;
  if (!assignment.pod_uid.empty() && assignment.holds_devices() && request.node != nullptr) {
    record = model::RecordOf(assignment, *request.node);
    if (request.containers != nullptr) {
      record->containers = model::PlanContainers(*request.containers, record->devices,
                                                 shared_gpu_resource_, nic_resources_);
    }
  }
  const std::string allocation = record ? kube::EncodeAllocationRecord(*record) : "";
  const std::string body =
      BindingBody(target, record ? &*record : nullptr, settle_.require_nri_plugin);
  if (auto permit = lease_.Permit(settle_.horizon()); !permit) {
    return {state::BindEvent::kLeaseRefused, permit.error().message};
  }
  if (!assignment.pod_uid.empty() && cache_.Stage(target.pod_uid) != state::BindStage::kWriting) {
    return {state::BindEvent::kRecordTookDevices,
            "the devices planned for pod " + PodKey(target) +
                " were taken by a pod whose committed record names them; not sent"};
  }
  const auto sent = std::chrono::steady_clock::now();
  extender::BindReply reply = Post(target, body, allocation);
  if (reply.event == state::BindEvent::kNoAnswer && !assignment.pod_uid.empty()) {
    {
      MutexLock lock(mutex_);
      pending_.push_back({target, allocation, sent + settle_.horizon(), settle_.first_retry});
      metrics_.SetBindsInDoubt(pending_.size() + settling_);
    }
    wake_.NotifyAll();
  }
  return reply;
}

void ApiBinder::SettleLoop() {
  MutexLock lock(mutex_);
  while (!stopping_) {
    if (pending_.empty()) {
      wake_.Wait(mutex_);
      continue;
    }
    const auto next =
        std::min_element(pending_.begin(), pending_.end(),
                         [](const Pending& a, const Pending& b) { return a.due < b.due; });
    if (next->due > std::chrono::steady_clock::now()) {
      wake_.WaitUntil(mutex_, next->due);
      continue;
    }
    Pending item = std::move(*next);
    pending_.erase(next);
    ++settling_;
    lock.Unlock();
    const bool done = Settle(item);
    lock.Lock();
    --settling_;
    if (!done) {
      item.due = std::chrono::steady_clock::now() + item.backoff;
      item.backoff = std::min(settle_.max_retry, item.backoff * 2);
      pending_.push_back(std::move(item));
    }
    metrics_.SetBindsInDoubt(pending_.size() + settling_);
  }
}

bool ApiBinder::Settle(const Pending& item) {
  using state::BindEvent;
  const std::string& uid = item.target.pod_uid;
  // Until the settler reads the pod, Extender::Bind may not have advanced it to kUnknown yet
  // (the horizon is seconds; this is a guard, not a wait).
  const state::BindStage stage = cache_.Stage(uid);
  if (stage == state::BindStage::kWriting) return false;
  if (stage != state::BindStage::kUnknown) return true;  // the watch ended it meanwhile
  const std::string what = "bind of " + PodKey(item.target) + " to " + item.target.node;
  const PodRead read = ReadPod(item.target, item.allocation);
  BindEvent event = BindEvent::kReadFailed;
  switch (read.verdict) {
    case PodRead::kSameRecord:
      event = BindEvent::kReadSameRecord;
      log::Info(what + " settled: bound");
      break;
    case PodRead::kOtherRecord:
      event = BindEvent::kReadOtherRecord;
      log::Warning(what + " settled: " + read.detail);
      break;
    case PodRead::kNotBound:
      event = BindEvent::kReadNotBound;
      log::Info(what + " settled: not bound, devices released (" + read.detail + ")");
      break;
    case PodRead::kFailed:
      break;
  }
  const auto step = cache_.Advance(uid, event);
  if (!step) log::Error(what + ": " + step.error().message);
  return !step || step->stage != state::BindStage::kUnknown;
}

}  // namespace linkfit::cluster
