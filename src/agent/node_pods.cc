#include "linkfit/agent/node_pods.h"

#include "linkfit/common/log.h"
#include "linkfit/kube/codec.h"

namespace linkfit::agent {

std::optional<std::string> NodePods::UidOf(const std::string& pod_key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = uids_.find(pod_key);
  if (it == uids_.end()) return std::nullopt;
  return it->second;
}

std::size_t NodePods::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return uids_.size();
}

void NodePods::BeginList() {
  std::lock_guard<std::mutex> lock(mutex_);
  listing_.clear();
}

void NodePods::ListItem(std::string_view object_json) {
  auto pod = kube::DecodePod(object_json);
  if (!pod) {
    log::Error("pods: a listed pod does not decode, skipped: " + pod.error().message);
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  listing_[pod->pod_namespace + "/" + pod->name] = pod->uid;
}

void NodePods::EndList(std::string_view /*resource_version*/) {
  std::lock_guard<std::mutex> lock(mutex_);
  uids_.swap(listing_);
  listing_.clear();
}

void NodePods::Event(kube::WatchEventType type, std::string_view object_json) {
  auto pod = kube::DecodePod(object_json);
  if (!pod) {
    log::Error("pods: a watch event's pod does not decode, skipped: " + pod.error().message);
    return;
  }
  const std::string key = pod->pod_namespace + "/" + pod->name;
  std::lock_guard<std::mutex> lock(mutex_);
  if (type == kube::WatchEventType::kDeleted) {
    const auto it = uids_.find(key);
    if (it != uids_.end() && it->second == pod->uid) uids_.erase(it);
  } else {
    uids_[key] = pod->uid;
  }
}

}  // namespace linkfit::agent
