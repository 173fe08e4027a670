#include "linkfit/node/preferred_allocation.h"

#include <algorithm>
#include <optional>

namespace linkfit::node {
namespace {

struct Candidate {
  const PlannedPod* pod;
  const kube::AllocationRecord::Container* container;
  PlannedResource planned;
};

std::string Name(const Candidate& candidate) {
  return candidate.pod->pod_key + " container " + candidate.container->name;
}

// The first container of `pod` (init containers first) planned for `resource` that the kubelet
// shows holding none of it.
std::optional<Candidate> NextContainer(const PlannedPod& pod,
                                       const std::map<std::string, std::set<std::string>>& held,
                                       const PreferenceRequest& request,
                                       const topology::TopologySpec& node,
                                       const PluginOptions& options) {
  for (const bool init : {true, false}) {
    for (const kube::AllocationRecord::Container& container : pod.record.containers) {
      if (container.init != init) continue;
      PlannedResource planned = PlannedFor(container.devices, request.resource, node, options);
      if (planned.wanted == 0) continue;
      const auto holding = held.find(container.name);
      if (holding != held.end() && holding->second.count(request.resource) != 0) continue;
      return Candidate{&pod, &container, std::move(planned)};
    }
  }
  return std::nullopt;
}

// The plan as device IDs inside the request, or an explanation of why it is not.
Result<std::vector<std::string>> Fit(const PlannedResource& planned,
                                     const PreferenceRequest& request) {
  std::set<std::string> offered(request.available.begin(), request.available.end());
  offered.insert(request.must_include.begin(), request.must_include.end());
  std::vector<std::string> ids;
  for (const std::string& id : planned.ids) {
    if (offered.count(id) == 0) return MakeError(id + " is not available");
    ids.push_back(id);
  }
  for (const auto& [uuid, milli] : planned.shares) {
    const std::string prefix = uuid + "::";
    int taken = 0;
    const auto take_from = [&](const std::vector<std::string>& source) {
      for (const std::string& id : source) {
        if (taken == milli) return;
        if (id.rfind(prefix, 0) != 0 || std::count(ids.begin(), ids.end(), id) != 0) continue;
        ids.push_back(id);
        ++taken;
      }
    };
    take_from(request.must_include);
    std::vector<std::string> available = request.available;
    std::sort(available.begin(), available.end(), [](const std::string& a, const std::string& b) {
      return a.size() != b.size() ? a.size() < b.size() : a < b;  // ::2 before ::10
    });
    take_from(available);
    if (taken < milli) {
      return MakeError(std::to_string(milli - taken) + " replicas of " + uuid + " short");
    }
  }
  for (const std::string& id : request.must_include) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) {
      return MakeError("must include " + id + ", which the plan does not");
    }
  }
  return ids;
}

}  // namespace

Preference PreferredAllocation(const PreferenceRequest& request,
                               const std::vector<PlannedPod>& plans, const KubeletHoldings& kubelet,
                               const topology::TopologySpec& node, const PluginOptions& options) {
  std::vector<Candidate> candidates;
  for (const PlannedPod& pod : plans) {
    const auto known = kubelet.find(pod.pod_key);
    if (known == kubelet.end()) continue;  // not (yet) admitted by this kubelet
    auto next = NextContainer(pod, known->second, request, node, options);
    if (next && next->planned.wanted == request.size) candidates.push_back(std::move(*next));
  }
  Preference preference;
  if (candidates.empty()) {
    preference.explanation = "no pod under admission has a plan of " +
                             std::to_string(request.size) + " " + request.resource;
    return preference;
  }
  if (candidates.size() > 1) {
    preference.explanation = std::to_string(candidates.size()) + " candidates (" +
                             Name(candidates[0]) + ", " + Name(candidates[1]) +
                             (candidates.size() > 2 ? ", ..." : "") + "): ambiguous";
    return preference;
  }
  if (!candidates[0].planned.complete()) {
    preference.explanation = "the plan of " + Name(candidates[0]) + " names a device unknown here";
    return preference;
  }
  auto ids = Fit(candidates[0].planned, request);
  if (!ids) {
    preference.explanation =
        "the plan of " + Name(candidates[0]) + " does not fit the request: " + ids.error().message;
    return preference;
  }
  preference.ids = std::move(*ids);
  preference.explanation = "the plan of " + Name(candidates[0]);
  return preference;
}

}  // namespace linkfit::node
