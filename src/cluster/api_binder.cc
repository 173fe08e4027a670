#include "linkfit/cluster/api_binder.h"

#include <algorithm>

#include "linkfit/common/log.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/kube/codec.h"
#include "linkfit/source/allocation.h"

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
                     SettleOptions settle)
    : client_(client),
      cache_(cache),
      pods_(pods),
      lease_(lease),
      shared_gpu_resource_(std::move(shared_gpu_resource)),
      metrics_(metrics),
      settle_(settle),
      timeout_query_("?timeout=" + std::to_string(settle.bind_timeout.count()) + "ms"),
      settler_([this] { SettleLoop(); }) {}

ApiBinder::~ApiBinder() { Stop(); }

void ApiBinder::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (settler_.joinable()) settler_.join();
}

std::size_t ApiBinder::unsettled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_.size() + settling_;
}

std::string ApiBinder::BindingBody(const extender::BindTarget& target,
                                   const std::string& allocation, bool require_nri_plugin) {
  std::string body = R"({"apiVersion":"v1","kind":"Binding","metadata":{"name":)";
  kube::AppendJsonString(body, target.pod_name);
  body += R"(,"namespace":)";
  kube::AppendJsonString(body, target.pod_namespace);
  body += R"(,"uid":)";
  kube::AppendJsonString(body, target.pod_uid);
  if (!allocation.empty()) {
    body += R"(,"annotations":{)";
    kube::AppendJsonString(body, kube::kAnnotationAllocation);
    body += ':';
    kube::AppendJsonString(body, allocation);
    if (require_nri_plugin) {
      if (auto record = kube::DecodeAllocationRecord(allocation)) {
        for (const auto& container : record->containers) {
          if (container.devices.empty()) continue;
          body += ',';
          kube::AppendJsonString(body, kRequiredPluginsPrefix + container.name);
          body += R"(:"[\"linkfit\"]")";
        }
      }
    }
    body += '}';
  }
  body += R"(},"target":{"apiVersion":"v1","kind":"Node","name":)";
  kube::AppendJsonString(body, target.node);
  body += "}}";
  return body;
}

ApiBinder::Answer ApiBinder::ReadPod(const extender::BindTarget& target,
                                     const std::string& allocation, bool settled) {
  auto reply = client_.Get(PodPath(target), "get");
  if (!reply) return {Verdict::kUnknown, "reading the pod failed: " + reply.error().message};
  if (reply->status == 404) return {Verdict::kRefused, "the pod is gone"};
  if (reply->status != 200) {
    return {Verdict::kUnknown, "reading the pod answered " + std::to_string(reply->status) + ": " +
                                   kube::StatusMessage(reply->body)};
  }
  auto pod = kube::DecodePod(reply->body);
  if (!pod) return {Verdict::kUnknown, "the pod read back does not decode: " + pod.error().message};
  if (pod->uid != target.pod_uid) return {Verdict::kRefused, "the pod was replaced by another"};
  if (pod->node_name.empty()) {
    if (settled) return {Verdict::kRefused, "the pod is not bound"};
    return {Verdict::kRefused, "the pod is not bound (being deleted?)"};
  }
  const auto it = pod->annotations.find(kube::kAnnotationAllocation);
  const bool same_record = allocation.empty()
                               ? it == pod->annotations.end()
                               : it != pod->annotations.end() && it->second == allocation;
  if (pod->node_name == target.node && same_record) return {Verdict::kAccepted, ""};
  // Bound by another write (an earlier attempt with another plan, another scheduler): the pod
  // holds what the API says. Apply it now, so that no other pod is given those devices before
  // the watch shows them.
  pods_.ApplyFetched(*pod);
  return {Verdict::kReplaced,
          "the pod is bound to " + pod->node_name +
              (pod->node_name == target.node ? " with another allocation" : "") +
              " by an earlier write; the API's record counts",
          pod->node_name};
}

ApiBinder::Answer ApiBinder::Post(const extender::BindTarget& target, const std::string& body,
                                  const std::string& allocation) {
  auto reply = client_.Post(PodPath(target) + "/binding" + timeout_query_, body, "bind",
                            /*retry_throttled=*/false);
  if (!reply) {
    if (reply.error().maybe_sent) {
      return {Verdict::kUnknown, "no reply after the request was sent: " + reply.error().message};
    }
    return {Verdict::kRefused, "the API server was not reached: " + reply.error().message};
  }
  const int status = reply->status;
  if (status == 200 || status == 201) return {Verdict::kAccepted, ""};
  const std::string message = kube::StatusMessage(reply->body);
  if (status == 409) {
    // "Already assigned", a UID that does not match, a pod being deleted: all Conflict. The pod
    // itself says which.
    Answer answer = ReadPod(target, allocation, /*settled=*/false);
    if (answer.verdict == Verdict::kRefused) {
      answer.detail = "binding refused (409): " + message + "; " + answer.detail;
    }
    return answer;
  }
  if (status >= 400 && status < 500) {
    return {Verdict::kRefused, "binding refused (" + std::to_string(status) + "): " + message};
  }
  // 5xx, 504 at the deadline: the API server may have committed the update before failing.
  return {Verdict::kUnknown, "API server error " + std::to_string(status) + ": " + message};
}

Result<extender::BindOutcome> ApiBinder::Bind(const extender::BindTarget& target,
                                              const state::Assignment& assignment) {
  std::string allocation;
  if (!assignment.pod_uid.empty() && assignment.gpus != 0) {
    const state::SnapshotPtr snapshot = cache_.Snapshot();
    const state::NodeState* node = snapshot->Find(assignment.node);
    if (node == nullptr) return MakeError("node " + assignment.node + " vanished during the bind");
    kube::AllocationRecord record = source::RecordOf(assignment, node->info());
    if (const auto pod = pods_.PendingPod(target.pod_uid)) {
      record.containers = source::PlanContainers(*pod, record.devices, shared_gpu_resource_);
    }
    allocation = kube::EncodeAllocationRecord(record);
  }
  const std::string body = BindingBody(target, allocation, settle_.require_nri_plugin);
  if (auto permit = lease_.Permit(settle_.horizon()); !permit) {
    metrics_.CountBindOutcome("held");
    return MakeError(permit.error().message);
  }
  if (!assignment.pod_uid.empty() && cache_.Phase(target.pod_uid) != state::PodPhase::kAssumed) {
    metrics_.CountBindOutcome("displaced");
    return MakeError("the devices planned for pod " + PodKey(target) +
                     " were taken by a pod whose committed record names them; not sent");
  }
  const auto sent = std::chrono::steady_clock::now();
  Answer answer = Post(target, body, allocation);
  switch (answer.verdict) {
    case Verdict::kAccepted:
      metrics_.CountBindOutcome("bound");
      return extender::BindOutcome{extender::BindOutcome::Kind::kAccepted, ""};
    case Verdict::kReplaced:
      metrics_.CountBindOutcome("replaced");
      log::Warning("bind of " + PodKey(target) + " to " + target.node + ": " + answer.detail);
      // Bound where kube-scheduler asked is a success, whatever devices the record names.
      return extender::BindOutcome{extender::BindOutcome::Kind::kSettled,
                                   answer.bound_node == target.node ? "" : answer.detail};
    case Verdict::kRefused:
      metrics_.CountBindOutcome("rejected");
      return MakeError(answer.detail);
    case Verdict::kUnknown:
      break;
  }
  metrics_.CountBindOutcome("unknown");
  if (!assignment.pod_uid.empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back({target, allocation, sent + settle_.horizon(), settle_.first_retry});
    metrics_.SetBindsInDoubt(pending_.size());
  }
  wake_.notify_all();
  return extender::BindOutcome{extender::BindOutcome::Kind::kUnknown, answer.detail};
}

void ApiBinder::SettleLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (pending_.empty()) {
      wake_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      continue;
    }
    const auto next =
        std::min_element(pending_.begin(), pending_.end(),
                         [](const Pending& a, const Pending& b) { return a.due < b.due; });
    if (next->due > std::chrono::steady_clock::now()) {
      wake_.wait_until(lock, next->due);
      continue;
    }
    Pending item = std::move(*next);
    pending_.erase(next);
    ++settling_;
    lock.unlock();
    const std::string& uid = item.target.pod_uid;
    const std::string what = "bind of " + PodKey(item.target) + " to " + item.target.node;
    bool done = true;
    if (cache_.Phase(uid) != state::PodPhase::kAssumed || cache_.BindDone(uid)) {
      metrics_.CountBindOutcome("settled");  // the watch settled it meanwhile
    } else {
      const Answer answer = ReadPod(item.target, item.allocation, /*settled=*/true);
      switch (answer.verdict) {
        case Verdict::kAccepted:
          cache_.MarkBound(uid);
          metrics_.CountBindOutcome("settled");
          log::Info(what + " settled: bound");
          break;
        case Verdict::kReplaced:
          metrics_.CountBindOutcome("settled");
          log::Warning(what + " settled: " + answer.detail);
          break;
        case Verdict::kRefused:
          cache_.Forget(uid);
          metrics_.CountBindOutcome("settled");
          log::Info(what + " settled: not bound, devices released (" + answer.detail + ")");
          break;
        case Verdict::kUnknown:
          done = false;
          break;
      }
    }
    lock.lock();
    --settling_;
    if (!done) {
      item.due = std::chrono::steady_clock::now() + item.backoff;
      item.backoff = std::min(settle_.max_retry, item.backoff * 2);
      pending_.push_back(std::move(item));
    }
    metrics_.SetBindsInDoubt(pending_.size() + settling_);
  }
}

}  // namespace linkfit::cluster
