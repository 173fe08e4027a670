#pragma once

// Lookups on a node's discovered facts that the node side's modules share (hand-off decision,
// device plugin): a GPU by index, a NIC by name, a MIG instance by its placement.
//
// Thread-safety: pure functions on values.

#include <string>

#include "linkfit/topology/spec.h"

namespace linkfit::handoff {

inline const topology::GpuSpec* GpuByIndex(const topology::TopologySpec& node, int index) {
  for (const topology::GpuSpec& gpu : node.gpus) {
    if (gpu.index == index) return &gpu;
  }
  return nullptr;
}

inline const topology::NicSpec* NicByName(const topology::TopologySpec& node,
                                          const std::string& name) {
  for (const topology::NicSpec& nic : node.nics) {
    if (nic.name == name && !name.empty()) return &nic;
  }
  return nullptr;
}

// The instance of `profile` starting at memory slice `start` on `gpu`, or nullptr.
inline const topology::MigInstanceSpec* MigInstanceAt(const topology::GpuSpec& gpu,
                                                      const std::string& profile, int start) {
  for (const topology::MigInstanceSpec& instance : gpu.mig_instances) {
    if (instance.start == start && instance.profile == profile) return &instance;
  }
  return nullptr;
}

}  // namespace linkfit::handoff
