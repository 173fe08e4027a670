#pragma once

// GetPreferredAllocation's answer (../shared/design/node-handoff.md §4.2): best-effort steering of
// the kubelet's own bookkeeping toward linkfit's plan. The kubelet's request names no pod, so the
// pod is found the only safe way there is, and only when it is unambiguous:
//
//   1. the pods the kubelet knows (its PodResources List, which already shows a pod under
//      admission) that have a valid plan (handoff.h: the API's pod UID, this node);
//   2. in each, the first planned container for this resource that requests it (where the pod's
//      requests are known) and holds none of it yet, in the kubelet's order (init containers,
//      then app containers): admission is serial, so in steady state there is exactly one such
//      (pod, container) on the node;
//   3. exactly one candidate whose planned count equals the request's size, and whose plan lies
//      inside available ∪ must-include and contains every must-include ID: answer the plan;
//   4. anything else: no preference (the kubelet picks; the NRI plugin still hands over the plan
//      and counts the mismatch).
//
// Share replicas are chosen per GPU: the must-include ones first, then the lowest available.
// The answer never decides what a container gets; a wrong guess is caught by the NRI side.
//
// Thread-safety: a pure function.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "linkfit/handoff/plugin_devices.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/topology/spec.h"

namespace linkfit::handoff {

// A pod bound to this node with a plan that belongs to it (its linkfit.io/allocation names its
// current UID and this node): the kubelet names pods "namespace/name" only, and a recreated
// StatefulSet pod reuses the name, so the agent keys plans by the API's UID first.
struct PlannedPod {
  std::string pod_key;  // "namespace/name"
  kube::AllocationRecord record;
  // Per container, the extended resources it requests (the pod's spec); empty when unknown. A
  // container that does not request a resource is never its candidate: a pod may ask NICs by
  // annotation alone, and the kubelet then never allocates a NIC resource for its containers.
  std::map<std::string, std::set<std::string>> requested = {};
};

// What the kubelet's PodResources List shows: per pod ("namespace/name"), per container, the
// device IDs it holds of each resource (a container listed without devices has an empty map).
using ContainerHoldings = std::map<std::string, std::vector<std::string>>;  // resource -> IDs
using KubeletHoldings = std::map<std::string, std::map<std::string, ContainerHoldings>>;

struct PreferenceRequest {
  std::string resource;
  std::vector<std::string> available;     // AvailableDeviceIDs
  std::vector<std::string> must_include;  // MustIncludeDeviceIDs
  int size = 0;                           // AllocationSize: the container's total
};

struct Preference {
  std::vector<std::string> ids;  // empty: no preference
  std::string explanation;       // which (pod, container), or why none (for the log)
};

Preference PreferredAllocation(const PreferenceRequest& request,
                               const std::vector<PlannedPod>& plans, const KubeletHoldings& kubelet,
                               const topology::TopologySpec& node, const PluginOptions& options);

// PreStartContainer's check in the verify-only mode (design §4.5: a runtime without NRI, where the
// device plugin itself injects what the kubelet chose). The container being started is found by
// the IDs the kubelet holds for it (its PodResources List), which names the pod and container
// without guessing. If that container has a plan for this resource, the IDs must be exactly the
// plan's devices (shares: replicas of the planned GPUs only, as many as planned); otherwise the
// start is refused with an error that says what differs (the pod must be deleted and recreated:
// its devices are fixed at admission). IDs no listed container holds are refused too (fail
// closed). A container without a plan (the pod bypassed linkfit) passes; the result says why.
// So does a container of a pod in `exempt_namespaces` (the agent's --exempt-namespace, whose pods
// the NRI plugin leaves alone too), whatever its plan: it starts on the kubelet's choice, which the
// node then reports (a pod on other devices than planned counts as a hand-off mismatch). The
// namespace is known only from the pod that holds the IDs, so IDs nobody holds are refused even
// there.
Result<std::string> VerifyPreStart(const std::string& resource, const std::vector<std::string>& ids,
                                   const std::vector<PlannedPod>& plans,
                                   const KubeletHoldings& kubelet,
                                   const topology::TopologySpec& node, const PluginOptions& options,
                                   const std::set<std::string>& exempt_namespaces = {});

}  // namespace linkfit::handoff
