#include "linkfit/agent/steering.h"

namespace linkfit::agent {

std::vector<handoff::PlannedPod> ValidPlans(const std::vector<PodPlanText>& pods,
                                            const std::string& node_name,
                                            std::vector<std::string>* warnings) {
  std::vector<handoff::PlannedPod> plans;
  for (const PodPlanText& pod : pods) {
    auto record = kube::DecodeAllocationRecord(pod.plan);
    std::string problem;
    if (!record) {
      problem = record.error().message;
    } else if (record->uid != pod.uid) {
      problem = "the plan is for UID " + record->uid + ", the pod is " + pod.uid;
    } else if (record->node != node_name) {
      problem = "the plan is for node " + record->node;
    }
    if (!problem.empty()) {
      if (warnings != nullptr) warnings->push_back("pod " + pod.pod_key + ": " + problem);
      continue;
    }
    plans.push_back({pod.pod_key, std::move(*record), pod.requested});
  }
  return plans;
}

handoff::KubeletHoldings HoldingsOf(const std::vector<PodDeviceUse>& pods) {
  handoff::KubeletHoldings holdings;
  for (const PodDeviceUse& pod : pods) {
    auto& containers = holdings[pod.pod_namespace + "/" + pod.name];
    for (const ContainerDeviceUse& container : pod.containers) {
      auto& held = containers[container.name];
      for (const ContainerDeviceUse::Devices& devices : container.devices) {
        if (devices.device_ids.empty()) continue;
        auto& ids = held[devices.resource_name];
        ids.insert(ids.end(), devices.device_ids.begin(), devices.device_ids.end());
      }
    }
  }
  return holdings;
}

}  // namespace linkfit::agent
