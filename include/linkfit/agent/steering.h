#pragma once

// What the device plugin's GetPreferredAllocation decides on (handoff/preferred_allocation.h), from
// the agent's two views of the node: the plans of the pods the API server binds here, and the
// kubelet's PodResources List.
//
// Thread-safety: pure functions.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "linkfit/agent/pod_resources.h"
#include "linkfit/handoff/preferred_allocation.h"

namespace linkfit::agent {

// A pod on this node with its linkfit.io/allocation text, as the API server shows it.
struct PodPlanText {
  std::string pod_key;  // "namespace/name"
  std::string uid;
  std::string plan;
  // Per container, the extended resources it requests (handoff::PlannedPod::requested).
  std::map<std::string, std::set<std::string>> requested = {};
};

// The plans that belong where they are: a record that decodes, names the pod's current UID and
// this node. Any other is skipped (the NRI side refuses it anyway), with one warning line each.
std::vector<handoff::PlannedPod> ValidPlans(const std::vector<PodPlanText>& pods,
                                            const std::string& node_name,
                                            std::vector<std::string>* warnings);

// Which device IDs of which resources each container holds, per pod, as the kubelet's List shows
// them.
handoff::KubeletHoldings HoldingsOf(const std::vector<PodDeviceUse>& pods);

}  // namespace linkfit::agent
