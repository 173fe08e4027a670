#include "linkfit/handoff/preferred_allocation.h"

#include <algorithm>
#include <optional>

#include "linkfit/common/strings.h"

namespace linkfit::handoff {
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
                                       const std::map<std::string, ContainerHoldings>& held,
                                       const PreferenceRequest& request,
                                       const topology::TopologySpec& node,
                                       const PluginOptions& options) {
  for (const bool init : {true, false}) {
    for (const kube::AllocationRecord::Container& container : pod.record.containers) {
      if (container.init != init) continue;
      if (!pod.requested.empty()) {
        const auto asks = pod.requested.find(container.name);
        if (asks == pod.requested.end() || asks->second.count(request.resource) == 0) continue;
      }
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
  for (const auto& share : planned.shares) {
    // Named copies, not structured bindings: clang 14 cannot capture those in a lambda.
    const std::string& uuid = share.first;
    const int milli = share.second;
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

namespace {

// IDs for a message: the first few, then how many in all (a share is hundreds of replicas).
std::string Joined(const std::vector<std::string>& ids) {
  constexpr std::size_t kShown = 6;
  if (ids.size() <= kShown) return JoinStrings(ids);
  return JoinStrings({ids.begin(), ids.begin() + kShown}) + ",... (" + std::to_string(ids.size()) +
         " IDs)";
}

// Whether the kubelet's IDs are the planned devices: whole GPUs and MIG instances as a set, share
// replicas counted per GPU against the planned thousandths.
bool SameDevices(const std::vector<std::string>& ids, const PlannedResource& planned) {
  std::multiset<std::string> whole;
  std::map<std::string, int> replicas;
  for (const std::string& id : ids) {
    const std::size_t at = id.find("::");
    if (at == std::string::npos) {
      whole.insert(id);
    } else {
      ++replicas[id.substr(0, at)];
    }
  }
  std::map<std::string, int> shares;
  for (const auto& [uuid, milli] : planned.shares) shares[uuid] += milli;
  return whole == std::multiset<std::string>(planned.ids.begin(), planned.ids.end()) &&
         replicas == shares;
}

}  // namespace

Result<std::string> VerifyPreStart(const std::string& resource, const std::vector<std::string>& ids,
                                   const std::vector<PlannedPod>& plans,
                                   const KubeletHoldings& kubelet,
                                   const topology::TopologySpec& node, const PluginOptions& options,
                                   const std::set<std::string>& exempt_namespaces) {
  std::vector<std::string> wanted = ids;
  std::sort(wanted.begin(), wanted.end());
  for (const auto& [pod, containers] : kubelet) {
    const std::string& pod_key = pod;  // captured below (clang 14 cannot capture a binding)
    for (const auto& [container, held] : containers) {
      const std::string& container_name = container;
      const auto holding = held.find(resource);
      if (holding == held.end()) continue;
      std::vector<std::string> have = holding->second;
      std::sort(have.begin(), have.end());
      if (have != wanted) continue;
      const std::string who = pod_key + " container " + container_name;
      const std::string pod_namespace = pod_key.substr(0, pod_key.find('/'));
      if (exempt_namespaces.count(pod_namespace) != 0) {
        return who + " is in exempt namespace " + pod_namespace + ": the kubelet's choice stands";
      }
      const auto plan = std::find_if(plans.begin(), plans.end(),
                                     [&](const PlannedPod& p) { return p.pod_key == pod_key; });
      if (plan == plans.end())
        return "no linkfit plan for " + who + ": the kubelet's choice stands";
      const auto entry =
          std::find_if(plan->record.containers.begin(), plan->record.containers.end(),
                       [&](const auto& c) { return c.name == container_name; });
      if (entry == plan->record.containers.end()) {
        return MakeError(who + " holds " + resource + " " + Joined(ids) +
                         ", which linkfit's plan gives it none of");
      }
      const PlannedResource planned = PlannedFor(entry->devices, resource, node, options);
      if (!planned.complete()) {
        return MakeError("linkfit's plan for " + who + " names a device unknown on this node");
      }
      if (!SameDevices(ids, planned)) {
        std::vector<std::string> want = planned.ids;
        for (const auto& [uuid, milli] : planned.shares) {
          want.push_back(std::to_string(milli) + " replicas of " + uuid);
        }
        return MakeError("the kubelet gave " + who + " " + resource + " " + Joined(ids) +
                         " but linkfit's plan is " + Joined(want) +
                         " (verify-only mode: delete the pod so it is admitted again)");
      }
      return "the plan of " + who;
    }
  }
  return MakeError("no container the kubelet lists holds " + resource + " " + Joined(ids) +
                   ": cannot tell whose devices these are");
}

}  // namespace linkfit::handoff
