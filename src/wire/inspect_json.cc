#include "linkfit/wire/inspect_json.h"

#include <string>

#include "linkfit/alloc/mig.h"

namespace linkfit::wire {
namespace {

nlohmann::json GpuJson(const state::NodeState& node, int g) {
  // The node's own document (its UUIDs, health, MIG instances), not the shared model's.
  const topology::GpuSpec& spec = node.info().own_topology().gpu(g);
  nlohmann::json pods = nlohmann::json::array();
  nlohmann::json names = nlohmann::json::array();
  nlohmann::json instances = nlohmann::json::array();
  nlohmann::json shares = nlohmann::json::array();
  for (const auto& [uid, a] : node.pods()) {
    if (((a.gpus >> g) & 1) == 0) continue;
    pods.push_back(uid);
    names.push_back(a.PodKey());
    // A slot's profile is an index into its GPU's own planner's set (NodeState accepted it).
    const alloc::MigPlanner* planner = node.info().MigPlannerOf(g);
    for (const auto& slot : a.mig) {
      if (slot.gpu != g || planner == nullptr) continue;
      const alloc::MigProfile& profile =
          planner->set().profiles[static_cast<std::size_t>(slot.instance.profile)];
      instances.push_back({{"profile", profile.name},
                           {"start", slot.instance.start},
                           {"slices", {slot.instance.start, slot.instance.start + profile.size}},
                           {"pod", uid}});
    }
    for (const auto& slot : a.shares) {
      if (slot.gpu == g) shares.push_back({{"milli", slot.milli}, {"pod", uid}});
    }
  }
  const bool mig_mode = ((node.info().mig_enabled >> g) & 1) != 0;
  std::string mode = "idle";
  if (mig_mode) {
    mode = "mig";
  } else if ((node.whole_used() >> g) & 1) {
    mode = "whole";
  } else if (node.shared_milli(g) > 0) {
    mode = "shared";
  }
  nlohmann::json gpu = {{"index", g},   {"model", spec.model}, {"numa", spec.numa_node},
                        {"mode", mode}, {"pods", pods},        {"pod_names", names}};
  if (!spec.uuid.empty()) gpu["uuid"] = spec.uuid;
  if (((node.info().unhealthy >> g) & 1) != 0) {
    gpu["healthy"] = false;
    gpu["health_problem"] = spec.health_problem;
  }
  if (!spec.mig_instances.empty()) {
    nlohmann::json existing = nlohmann::json::array();
    for (const topology::MigInstanceSpec& instance : spec.mig_instances) {
      existing.push_back({{"profile", instance.profile},
                          {"start", instance.start},
                          {"size", instance.size},
                          {"uuid", instance.uuid}});
    }
    gpu["mig_instances_reported"] = std::move(existing);
  }
  if (mode == "shared") {
    gpu["shared_milli"] = node.shared_milli(g);
    gpu["shares"] = shares;
  }
  if (mig_mode) {
    gpu["mig_instances"] = instances;
    gpu["mig_slices_used"] = node.mig_state(g).slice_mask();
  }
  return gpu;
}

// One NIC of the node: its own document's facts and what pods hold of it.
nlohmann::json NicJson(const state::NodeState& node, int n) {
  const topology::NicSpec& spec = node.info().own_topology().nics()[static_cast<std::size_t>(n)];
  nlohmann::json pods = nlohmann::json::array();
  nlohmann::json shares = nlohmann::json::array();
  for (const auto& [uid, a] : node.pods()) {
    for (const auto& slot : a.nics) {
      if (slot.nic != n) continue;
      pods.push_back(uid);
      nlohmann::json share = {{"pod", uid}, {"milli", slot.milli}};
      if (slot.gpu >= 0) share["gpu"] = slot.gpu;
      shares.push_back(std::move(share));
    }
  }
  const auto i = static_cast<std::size_t>(n);
  nlohmann::json nic = {{"index", n},
                        {"name", spec.name},
                        {"rail", spec.rail},
                        {"used_milli", node.nic_used_milli(n)},
                        {"usable", node.nic_usable().test(i)},
                        {"pods", pods},
                        {"holders", shares}};
  if (!spec.pci_bus_id.empty()) nic["pci_bus_id"] = spec.pci_bus_id;
  if (!spec.state.empty()) nic["state"] = spec.state;
  if (node.info().nic_down.test(i)) nic["down"] = true;
  if (!spec.sriov_physfn.empty()) nic["sriov_physfn"] = spec.sriov_physfn;
  return nic;
}

}  // namespace

nlohmann::json InspectNodeJson(const state::NodeState& node) {
  nlohmann::json gpus = nlohmann::json::array();
  for (int g = 0; g < node.info().gpu_count(); ++g) gpus.push_back(GpuJson(node, g));
  nlohmann::json json = {{"name", node.name()},
                         {"model", node.info().own_topology().summary_model()},
                         {"topology", node.info().topology().spec().id},
                         {"fingerprint", node.info().topology().fingerprint()},
                         {"labels", node.info().labels},
                         {"gpus", gpus},
                         {"free_whole_gpus", alloc::MaskToIndexes(node.whole_free())},
                         {"used_gpu_equivalents", node.UsedGpuEquivalents()}};
  // CPU and memory only where the cluster file gave the node's allocatable (else not tracked).
  if (node.info().cpu_milli > 0) {
    json["cpu_milli"] = {{"allocatable", node.info().cpu_milli},
                         {"requested", node.cpu_used_milli()}};
  }
  if (node.info().memory_bytes > 0) {
    json["memory_bytes"] = {{"allocatable", node.info().memory_bytes},
                            {"requested", node.memory_used_bytes()}};
  }
  // RDMA NICs and their use, where the node has some.
  if (node.nic_count() > 0) {
    nlohmann::json nics = nlohmann::json::array();
    for (int n = 0; n < node.nic_count(); ++n) nics.push_back(NicJson(node, n));
    json["nics"] = std::move(nics);
  }
  nlohmann::json gpu_less = nlohmann::json::array();
  nlohmann::json estimated = nlohmann::json::array();
  nlohmann::json reported = nlohmann::json::array();
  nlohmann::json mismatched = nlohmann::json::array();
  for (const auto& [uid, a] : node.pods()) {
    if (a.gpus == 0) gpu_less.push_back(uid);
    if (a.estimated) estimated.push_back(uid);
    if (a.reported) reported.push_back(uid);
    if (a.handoff_mismatch) mismatched.push_back(uid);
  }
  if (!gpu_less.empty()) json["pods_without_gpus"] = gpu_less;
  // Cluster mode counts pods without GPUs by their requests only (no per-pod record).
  if (node.load_pods() > 0) json["pods_counted_by_requests"] = node.load_pods();
  // Cluster mode: GPU pods another scheduler placed without an allocation record; linkfit
  // guessed their devices, so this node's free devices are an estimate.
  if (!estimated.empty()) json["estimated_pods"] = estimated;
  // Pods counted on the devices the node's agent reports they hold (linkfit.io/devices-in-use),
  // and those among them whose report differs from their allocation record.
  if (!reported.empty()) json["reported_pods"] = reported;
  if (!mismatched.empty()) json["handoff_mismatch_pods"] = mismatched;
  if (node.info().unhealthy != 0) {
    json["unhealthy_gpus"] = alloc::MaskToIndexes(node.info().unhealthy);
  }
  // How the node hands devices to containers, as its agent reports it (topology/spec.h).
  if (const std::string& mode = node.info().own_topology().spec().handoff_mode; !mode.empty()) {
    json["handoff_mode"] = mode;
  }
  if (const std::string& mode = node.info().own_topology().spec().nic_handoff_mode; !mode.empty()) {
    json["nic_handoff_mode"] = mode;
  }
  return json;
}

}  // namespace linkfit::wire
