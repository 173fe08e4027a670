#include "linkfit/cluster/api_binder.h"

#include <algorithm>

#include "linkfit/common/log.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/kube/codec.h"
#include "linkfit/source/allocation.h"

namespace linkfit::cluster {

ApiBinder::ApiBinder(kube::ApiClient& client, state::ClusterCache& cache, const PodStore& pods,
                     std::string shared_gpu_resource, MetricsSink& metrics, SettleOptions settle)
    : client_(client),
      cache_(cache),
      pods_(pods),
      shared_gpu_resource_(std::move(shared_gpu_resource)),
      metrics_(metrics),
      settle_(settle),
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
  return pending_.size();
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

ApiBinder::Answer ApiBinder::Post(const extender::BindTarget& target, const std::string& body) {
  const std::string path =
      "/api/v1/namespaces/" + target.pod_namespace + "/pods/" + target.pod_name + "/binding";
  auto reply = client_.Post(path, body, "bind");
  if (!reply) {
    if (reply.error().maybe_sent) {
      return {Verdict::kUnknown, "no reply after the request was sent: " + reply.error().message};
    }
    return {Verdict::kRejected, "the API server was not reached: " + reply.error().message};
  }
  const int status = reply->status;
  if (status == 200 || status == 201) return {Verdict::kAccepted, ""};
  const std::string message = kube::StatusMessage(reply->body);
  if (status == 409) {
    const std::string same_node = "is already assigned to node \"" + target.node + "\"";
    if (message.find(same_node) != std::string::npos) return {Verdict::kAccepted, message};
    return {Verdict::kRejected, "binding refused (409): " + message};
  }
  if (status >= 400 && status < 500) {
    return {Verdict::kRejected, "binding refused (" + std::to_string(status) + "): " + message};
  }
  // 5xx: the API server may have committed the update before failing (a storage timeout).
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
  std::string body = BindingBody(target, allocation, settle_.require_nri_plugin);
  Answer answer = Post(target, body);
  switch (answer.verdict) {
    case Verdict::kAccepted:
      metrics_.CountBindOutcome("bound");
      return extender::BindOutcome{extender::BindOutcome::Kind::kAccepted, ""};
    case Verdict::kRejected:
      metrics_.CountBindOutcome("rejected");
      return MakeError(answer.detail);
    case Verdict::kUnknown:
      break;
  }
  metrics_.CountBindOutcome("unknown");
  if (!assignment.pod_uid.empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back({target, std::move(body),
                        std::chrono::steady_clock::now() + settle_.first_retry,
                        settle_.first_retry});
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
    lock.unlock();
    const std::string& uid = item.target.pod_uid;
    bool done = true;
    if (cache_.Phase(uid) != state::PodPhase::kAssumed || cache_.BindDone(uid)) {
      // The watch settled it meanwhile (bound and confirmed, or deleted).
      metrics_.CountBindOutcome("settled");
    } else {
      const Answer answer = Post(item.target, item.body);
      if (answer.verdict == Verdict::kAccepted) {
        cache_.MarkBound(uid);
        metrics_.CountBindOutcome("settled");
        log::Info("bind of " + item.target.pod_namespace + "/" + item.target.pod_name + " to " +
                  item.target.node + " settled: bound");
      } else if (answer.verdict == Verdict::kRejected) {
        cache_.Forget(uid);
        metrics_.CountBindOutcome("settled");
        log::Info("bind of " + item.target.pod_namespace + "/" + item.target.pod_name + " to " +
                  item.target.node + " settled: not bound, devices released (" + answer.detail +
                  ")");
      } else {
        done = false;
      }
    }
    lock.lock();
    if (!done) {
      item.backoff = std::min(settle_.max_retry, item.backoff * 2);
      item.due = std::chrono::steady_clock::now() + item.backoff;
      pending_.push_back(std::move(item));
    }
  }
}

}  // namespace linkfit::cluster
