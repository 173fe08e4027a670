#include "linkfit/extender/pod_source.h"

namespace linkfit::extender {

void PodMemo::Observe(const kube::PodView& pod, bool filtered) {
  const auto request = ParseGpuRequest(pod, defaults_);
  if (!request) return;
  if (filtered) demand_.Add(*request);
  if (pod.uid.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto [it, inserted] =
      pods_.insert_or_assign(pod.uid, KnownPod{*request, pod.pod_namespace, pod.name});
  if (!inserted) return;
  order_.push_back(pod.uid);
  while (order_.size() > capacity_) {
    pods_.erase(order_.front());
    order_.pop_front();
  }
}

std::optional<KnownPod> PodMemo::FindPod(const std::string& uid) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = pods_.find(uid);
  if (it == pods_.end()) return std::nullopt;
  return it->second;
}

}  // namespace linkfit::extender
