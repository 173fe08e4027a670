#pragma once

// Test helpers for the state and extender tests: NodeInfo values built from the fixture
// topologies (one shared registry of placement tables and the repository's MIG catalog), and a
// consistency check of a NodeState against its own pod list.

#include <algorithm>
#include <array>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "linkfit/alloc/mig.h"
#include "linkfit/alloc/placement_table_cache.h"
#include "linkfit/state/node_state.h"
#include "testing/fixtures.h"

namespace linkfit::testing {

// The repository's MIG profile sets (config/mig), loaded once.
inline const alloc::MigCatalog& Catalog() {
  static const alloc::MigCatalog catalog = [] {
    auto loaded = alloc::MigCatalog::LoadDirectory(SourcePath("config/mig"));
    EXPECT_TRUE(loaded.has_value()) << (loaded ? "" : loaded.error().message);
    return loaded ? std::move(*loaded) : alloc::MigCatalog();
  }();
  return catalog;
}

inline alloc::PlacementTableCache& Registry() {
  static alloc::PlacementTableCache registry;
  return registry;
}

// A node named `name` with the fixture topology `fixture_id`; `mig_enabled` names the GPUs in
// MIG mode (the fixture's GPUs must then be MIG-capable).
inline state::NodeInfoPtr MakeNodeInfo(const std::string& name, const std::string& fixture_id,
                                       topology::GpuMask mig_enabled = 0) {
  static std::map<std::string, topology::TopologyPtr> topologies;
  static std::mutex mutex;
  topology::TopologyPtr topo;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto& slot = topologies[fixture_id];
    if (!slot) slot = LoadFixture(fixture_id);
    topo = slot;
  }
  auto info = std::make_shared<state::NodeInfo>();
  info->name = name;
  info->table = Registry().Get(topo);
  for (int g = 0; g < topo->gpu_count(); ++g) {
    info->SetMigPlanner(g, Catalog().FindPlanner(topo->gpu(g).mig_profile_set));
  }
  info->mig_enabled = mig_enabled;
  return info;
}

inline topology::GpuMask Mask(std::initializer_list<int> gpus) {
  unsigned mask = 0;
  for (int g : gpus) mask |= 1u << g;
  return static_cast<topology::GpuMask>(mask);
}

// Checks the invariants every NodeState must keep: no GPU held whole by two pods or both whole
// and shared, shares within 1000 per GPU and equal to the sum of the pods' shares, MIG state
// equal to the pods' instances, and per-GPU pod counts equal to the pod lists; no NIC held
// whole by a pod and used by another, NIC thousandths within 1000 and equal to the pods' sum,
// per-NIC pod counts equal to the pod lists. Returns "" when consistent, else the first
// violation.
inline std::string CheckNicsConsistent(const state::NodeState& node) {
  std::vector<int> milli(static_cast<std::size_t>(node.nic_count()), 0);
  std::vector<int> pods(milli.size(), 0);
  std::vector<int> whole(milli.size(), 0);
  for (const auto& [uid, a] : node.pods()) {
    for (const auto& slot : a.nics) {
      if (slot.nic < 0 || slot.nic >= node.nic_count()) return uid + " holds a NIC beyond the node";
      const auto i = static_cast<std::size_t>(slot.nic);
      milli[i] += slot.milli;
      ++pods[i];
      if (slot.milli == 1000) ++whole[i];
    }
  }
  for (std::size_t i = 0; i < milli.size(); ++i) {
    const int n = static_cast<int>(i);
    const std::string nic = "NIC " + std::to_string(i) + ": ";
    if (milli[i] > 1000) return nic + "thousandths exceed 1000";
    if (whole[i] > 0 && pods[i] > 1) return nic + "held whole and used by another pod";
    if (milli[i] != node.nic_used_milli(n)) return nic + "nic_used_milli disagrees with pods";
    if (pods[i] != node.pods_on_nic(n)) return nic + "pods_on_nic disagrees with pods";
  }
  return "";
}

inline std::string CheckConsistent(const state::NodeState& node) {
  if (std::string nics = CheckNicsConsistent(node); !nics.empty()) return nics;
  const int n = node.info().gpu_count();
  std::array<int, topology::kMaxGpus> whole_holders{};
  std::array<int, topology::kMaxGpus> milli{};
  std::array<int, topology::kMaxGpus> pods{};
  std::array<alloc::MigGpuState, topology::kMaxGpus> mig{};
  const auto at = [](int g) { return static_cast<std::size_t>(g); };
  for (const auto& [uid, a] : node.pods()) {
    if (a.pod_uid != uid) return "pod list key " + uid + " holds " + a.pod_uid;
    for (int g = 0; g < n; ++g) {
      if (((a.gpus >> g) & 1) == 0) continue;
      ++pods[at(g)];
      if (a.kind == state::Assignment::Kind::kWhole) ++whole_holders[at(g)];
    }
    for (const auto& slot : a.shares) milli[at(slot.gpu)] += slot.milli;
    for (const auto& slot : a.mig) {
      const alloc::MigPlanner* planner = node.info().MigPlannerOf(slot.gpu);
      if (planner == nullptr)
        return "MIG instance on GPU " + std::to_string(slot.gpu) + " without a planner";
      if (!mig[at(slot.gpu)].Place(planner->set(), slot.instance.profile, slot.instance.start)) {
        return "MIG instances of GPU " + std::to_string(slot.gpu) + " overlap";
      }
    }
  }
  for (int g = 0; g < n; ++g) {
    const std::string gpu = "GPU " + std::to_string(g) + ": ";
    if (whole_holders[at(g)] > 1) return gpu + "held whole by two pods";
    if (whole_holders[at(g)] == 1 && pods[at(g)] != 1) return gpu + "held whole and shared";
    if (whole_holders[at(g)] != (((node.whole_used() >> g) & 1) != 0 ? 1 : 0)) {
      return gpu + "whole_used disagrees with the pod list";
    }
    if (milli[at(g)] > 1000) return gpu + "shares exceed 1000";
    if (milli[at(g)] != node.shared_milli(g)) return gpu + "shared_milli disagrees with pods";
    if (pods[at(g)] != node.pods_on_gpu(g)) {
      return gpu + "pods_on_gpu " + std::to_string(node.pods_on_gpu(g)) + " but " +
             std::to_string(pods[at(g)]) + " pods listed";
    }
    if (!(mig[at(g)] == node.mig_state(g))) return gpu + "MIG state disagrees with the pods";
  }
  return "";
}

}  // namespace linkfit::testing
