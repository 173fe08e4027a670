#include "linkfit/extender/pod_source.h"

#include <bit>

namespace linkfit::extender {

KnownPod KnownPodOf(const state::Assignment& assignment, const state::NodeState& node) {
  KnownPod known{{}, assignment.pod_namespace, assignment.pod_name};
  GpuRequest& request = known.request;
  request.cpu_milli = assignment.cpu_milli;
  request.memory_bytes = assignment.memory_bytes;
  const alloc::MigPlanner* planner = assignment.mig.empty() || assignment.mig.front().gpu < 0 ||
                                             assignment.mig.front().gpu >= topology::kMaxGpus
                                         ? nullptr
                                         : node.info().MigPlannerOf(assignment.mig.front().gpu);
  if (planner != nullptr) {
    // The profile index is one of the set of its GPU's own model.
    const auto& profiles = planner->set().profiles;
    const auto profile = static_cast<std::size_t>(assignment.mig.front().instance.profile);
    request.kind = GpuRequest::Kind::kMig;
    request.count = static_cast<int>(assignment.mig.size());
    if (profile < profiles.size()) request.mig_profile = profiles[profile].name;
  } else if (!assignment.shares.empty()) {
    request.kind = GpuRequest::Kind::kShared;
    request.count = static_cast<int>(assignment.shares.size());
    request.share_milli = assignment.shares.front().milli;
  } else if (assignment.gpus != 0) {
    request.kind = GpuRequest::Kind::kWhole;
    request.count = std::popcount(static_cast<unsigned>(assignment.gpus));
  }
  return known;
}

void PodMemo::Seen(const kube::PodView& pod) {
  const auto request = ParseGpuRequest(pod, defaults_);
  if (request) Seen(pod, *request);
}

void PodMemo::Seen(const kube::PodView& pod, const GpuRequest& request) {
  if (pod.uid.empty()) return;
  MutexLock lock(mutex_);
  if (const auto it = pods_.find(pod.uid); it != pods_.end()) {
    KnownPod& known = it->second.pod;
    if (known.request == request && known.pod_namespace == pod.pod_namespace &&
        known.pod_name == pod.name) {
      return;  // a retry, or prioritize after filter: nothing new
    }
    demand_.Remove(known.request);
    demand_.Add(request);
    known = KnownPod{request, pod.pod_namespace, pod.name};
    return;
  }
  LearnLocked(pod.uid, KnownPod{request, pod.pod_namespace, pod.name});
}

void PodMemo::Running(const std::string& uid, KnownPod pod) {
  if (uid.empty()) return;
  MutexLock lock(mutex_);
  if (const auto it = pods_.find(uid); it != pods_.end()) {
    demand_.Remove(it->second.pod.request);
    pods_.erase(it);
  }
  LearnLocked(uid, std::move(pod));
}

void PodMemo::LearnHeld(const state::ClusterCache& cache) {
  const state::SnapshotPtr snapshot = cache.Snapshot();
  for (const state::Assignment& held : cache.BoundAssignments()) {
    if (const state::NodeState* node = snapshot->Find(held.node); node != nullptr) {
      Running(held.pod_uid, KnownPodOf(held, *node));
    }
  }
}

void PodMemo::LearnLocked(const std::string& uid, KnownPod pod) {
  demand_.Add(pod.request);
  const std::uint64_t sequence = ++sequence_;
  pods_.emplace(uid, Entry{std::move(pod), sequence});
  order_.emplace_back(uid, sequence);
  // The oldest known pods go first; places of pods that left or were learnt again are stale.
  while (pods_.size() > capacity_ && !order_.empty()) {
    const auto it = pods_.find(order_.front().first);
    if (it != pods_.end() && it->second.sequence == order_.front().second) {
      demand_.Remove(it->second.pod.request);
      pods_.erase(it);
    }
    order_.pop_front();
  }
  // Pods that leave leave stale places behind: drop them once they outnumber the live ones.
  if (order_.size() > 2 * pods_.size() + 64) {
    std::deque<std::pair<std::string, std::uint64_t>> live;
    for (auto& place : order_) {
      const auto it = pods_.find(place.first);
      if (it != pods_.end() && it->second.sequence == place.second)
        live.push_back(std::move(place));
    }
    order_ = std::move(live);
  }
}

void PodMemo::PodLeft(const std::string& uid) {
  MutexLock lock(mutex_);
  const auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  demand_.Remove(it->second.pod.request);
  pods_.erase(it);  // its place in order_ is stale now
}

std::optional<KnownPod> PodMemo::FindPod(const std::string& uid) const {
  MutexLock lock(mutex_);
  const auto it = pods_.find(uid);
  if (it == pods_.end()) return std::nullopt;
  return it->second.pod;
}

std::size_t PodMemo::size() const {
  MutexLock lock(mutex_);
  return pods_.size();
}

}  // namespace linkfit::extender
