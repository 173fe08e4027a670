#pragma once

// GetPreferredAllocation's answer (../shared/design/node-handoff.md §4.2): best-effort steering of
// the kubelet's own bookkeeping toward linkfit's plan. The kubelet's request names no pod, so the
// pod is found the only safe way there is, and only when it is unambiguous:
//
//   1. the pods the kubelet knows (its PodResources List, which already shows a pod under
//      admission) that have a valid plan (planned.h: UID of the API's pod, this node);
//   2. in each, the first planned container for this resource that holds none of it yet, in the
//      kubelet's order (init containers, then app containers): admission is serial, so in steady
//      state there is exactly one such (pod, container) on the node;
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

#include "linkfit/kube/annotations.h"
#include "linkfit/node/plugin_devices.h"
#include "linkfit/topology/spec.h"

namespace linkfit::node {

// A pod bound to this node with a plan that belongs to it (its linkfit.io/allocation names its
// current UID and this node): the kubelet names pods "namespace/name" only, and a recreated
// StatefulSet pod reuses the name, so the agent keys plans by the API's UID first.
struct PlannedPod {
  std::string pod_key;  // "namespace/name"
  kube::AllocationRecord record;
};

// What the kubelet's PodResources List shows: per pod ("namespace/name"), per container, the
// resources it holds devices of.
using KubeletHoldings = std::map<std::string, std::map<std::string, std::set<std::string>>>;

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

}  // namespace linkfit::node
