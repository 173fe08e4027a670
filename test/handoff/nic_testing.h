#pragma once

// Shared pieces of the tests of RDMA NICs on the node (nri_nics_test.cc, nri_nic_cdi_test.cc): a
// DGX H100 with four NICs, a pod's plan of GPUs and NICs, and the NRI plugin called as the
// runtime calls it.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "handoff/node_testing.h"
#include "linkfit/handoff/nri_plugin.h"
#include "linkfit/kube/annotations.h"

namespace linkfit::handoff::nic_testing {

// A DGX H100 ("GPU-i") with RDMA NICs mlx5_0..3 (uverbs0..3, bus 0000:1i:00.0, ports up).
inline topology::TopologySpec Node() {
  topology::TopologySpec spec = linkfit::testing::H100Node();
  spec.nics.clear();
  for (int i = 0; i < 4; ++i) {
    topology::NicSpec nic;
    nic.name = "mlx5_" + std::to_string(i);
    nic.pci_bus_id = "0000:1" + std::to_string(i) + ":00.0";
    nic.state = "ACTIVE";
    nic.uverbs = "uverbs" + std::to_string(i);
    spec.nics.push_back(nic);
  }
  return spec;
}

inline kube::AllocationRecord::Nic Nic(const std::string& name, int milli = 1000) {
  return {name, "", "", -1, milli, -1};
}

// The plan of pod `uid` on n1: container "main" with `gpus` and `nics`.
inline std::string Plan(const std::string& uid, std::vector<int> gpus,
                        std::vector<kube::AllocationRecord::Nic> nics) {
  kube::AllocationRecord record;
  record.pod = "ml/" + uid;
  record.uid = uid;
  record.node = "n1";
  record.devices.gpus = std::move(gpus);
  record.devices.nics = std::move(nics);
  record.containers = {{"main", false, record.devices}};
  return kube::EncodeAllocationRecord(record);
}

// The NRI plugin, as the runtime calls it.
inline TtrpcResponse Call(NriPlugin& plugin, const std::string& method,
                          const std::string& payload) {
  return plugin.Handle({kPluginService, method, payload, 2'000'000'000, {}});
}

inline ContainerEvent Event(const std::string& uid, const std::string& ns,
                            std::optional<std::string> plan,
                            std::map<std::string, std::string> annotations = {}) {
  ContainerEvent event;
  event.pod = {"sandbox-" + uid, "p-" + uid, uid, ns, {}, {}};
  if (plan) event.pod.annotations[kube::kAnnotationAllocation] = *plan;
  event.container = {"ctr-" + uid, "sandbox-" + uid, "main", std::move(annotations), {}};
  return event;
}

inline std::string Env(const ContainerAdjustment& adjust, const std::string& key) {
  for (const auto& [name, value] : adjust.env) {
    if (name == key) return value;
  }
  return "(unset)";
}

}  // namespace linkfit::handoff::nic_testing
