#include "linkfit/agent/node_pods.h"

#include "linkfit/common/log.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/kube/object_json.h"

namespace linkfit::agent {

std::optional<std::pair<std::string, NodePods::Entry>> NodePods::Read(std::string_view object_json,
                                                                      const char* what) {
  auto pod = kube::DecodePod(object_json);
  if (!pod) {
    log::Error(std::string("pods: ") + what + " does not decode, skipped: " + pod.error().message);
    return std::nullopt;
  }
  Entry entry{pod->uid, {}, {}};
  for (const kube::ContainerView& container : pod->containers) {
    auto& requested = entry.requested[container.name];
    for (const auto& [resource, count] : container.extended) {
      if (count > 0) requested.insert(resource);
    }
  }
  if (const auto plan = pod->annotations.find(kube::kAnnotationAllocation);
      plan != pod->annotations.end()) {
    entry.plan = plan->second;
  }
  return std::make_pair(pod->pod_namespace + "/" + pod->name, std::move(entry));
}

std::optional<std::string> NodePods::UidOf(const std::string& pod_key) const {
  MutexLock lock(mutex_);
  const auto it = pods_.find(pod_key);
  if (it == pods_.end()) return std::nullopt;
  return it->second.uid;
}

std::size_t NodePods::size() const {
  MutexLock lock(mutex_);
  return pods_.size();
}

std::vector<PodPlanText> NodePods::Plans() const {
  MutexLock lock(mutex_);
  std::vector<PodPlanText> plans;
  for (const auto& [key, entry] : pods_) {
    if (!entry.plan.empty()) plans.push_back({key, entry.uid, entry.plan, entry.requested});
  }
  return plans;
}

void NodePods::BeginList() {
  MutexLock lock(mutex_);
  listing_.clear();
}

void NodePods::ListItem(std::string_view object_json) {
  auto read = Read(object_json, "a listed pod");
  if (!read) return;
  MutexLock lock(mutex_);
  listing_[read->first] = std::move(read->second);
}

void NodePods::EndList(std::string_view /*resource_version*/) {
  MutexLock lock(mutex_);
  pods_.swap(listing_);
  listing_.clear();
}

void NodePods::Event(kube::WatchEventType type, std::string_view object_json) {
  auto read = Read(object_json, "a watch event's pod");
  if (!read) return;
  MutexLock lock(mutex_);
  if (type == kube::WatchEventType::kDeleted) {
    const auto it = pods_.find(read->first);
    if (it != pods_.end() && it->second.uid == read->second.uid) pods_.erase(it);
  } else {
    pods_[read->first] = std::move(read->second);
  }
}

}  // namespace linkfit::agent
