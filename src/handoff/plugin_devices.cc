#include "linkfit/handoff/plugin_devices.h"

#include <algorithm>

#include "handoff/node_lookup.h"
#include "linkfit/common/strings.h"

namespace linkfit::handoff {
namespace {

bool InMigMode(const topology::GpuSpec& gpu) { return gpu.mig_mode == topology::MigMode::kEnabled; }

std::string UuidOf(const kube::AllocationRecord::Devices& planned, std::size_t i,
                   const topology::TopologySpec& node) {
  if (i < planned.uuids.size() && !planned.uuids[i].empty()) return planned.uuids[i];
  const topology::GpuSpec* gpu = GpuByIndex(node, planned.gpus[i]);
  return gpu == nullptr ? std::string() : gpu->uuid;
}

std::string MigUuidOf(const kube::AllocationRecord::Mig& mig, const topology::TopologySpec& node) {
  if (!mig.uuid.empty()) return mig.uuid;
  const topology::GpuSpec* gpu = GpuByIndex(node, mig.gpu);
  const topology::MigInstanceSpec* instance =
      gpu == nullptr ? nullptr : MigInstanceAt(*gpu, mig.profile, mig.start);
  return instance == nullptr ? std::string() : instance->uuid;
}

// The NIC resources' devices: each NIC whole and as replicas.
void AddNics(const topology::TopologySpec& node, const PluginOptions& options,
             std::map<std::string, std::vector<PluginDevice>>& resources) {
  if (node.nics.empty()) return;
  if (!options.nic_resource.empty()) resources[options.nic_resource];
  if (!options.nic_share_resource.empty()) resources[options.nic_share_resource];
  for (const topology::NicSpec& nic : node.nics) {
    if (!ServedNic(nic)) continue;
    const bool healthy = NicPortUp(nic);
    const int numa = nic.numa_node >= 0 ? nic.numa_node : -1;
    if (!options.nic_resource.empty()) {
      resources[options.nic_resource].push_back({nic.name, healthy, numa});
    }
    if (options.nic_share_resource.empty()) continue;
    auto& replicas = resources[options.nic_share_resource];
    for (int k = 0; k < kShareReplicasPerNic; ++k) {
      replicas.push_back({nic.name + "::" + std::to_string(k), healthy, numa});
    }
  }
}

}  // namespace

bool ServedNic(const topology::NicSpec& nic) {
  return !nic.name.empty() && nic.sriov_physfn.empty();
}

bool NicPortUp(const topology::NicSpec& nic) { return nic.state.empty() || nic.state == "ACTIVE"; }

std::vector<PluginResource> PluginInventory(const topology::TopologySpec& node,
                                            const PluginOptions& options) {
  std::map<std::string, std::vector<PluginDevice>> resources;
  resources[kube::kGpuResource];
  if (!options.share_resource.empty()) resources[options.share_resource];
  for (const topology::GpuSpec& gpu : node.gpus) {
    if (gpu.uuid.empty()) continue;
    const int numa = gpu.numa_node >= 0 ? gpu.numa_node : -1;
    if (InMigMode(gpu)) {
      for (const topology::MigInstanceSpec& instance : gpu.mig_instances) {
        if (instance.uuid.empty()) continue;
        resources[kube::kMigResourcePrefix + instance.profile].push_back(
            {instance.uuid, gpu.healthy, numa});
      }
      continue;
    }
    resources[kube::kGpuResource].push_back({gpu.uuid, gpu.healthy, numa});
    if (options.share_resource.empty()) continue;
    auto& replicas = resources[options.share_resource];
    for (int k = 0; k < kShareReplicasPerGpu; ++k) {
      replicas.push_back({gpu.uuid + "::" + std::to_string(k), gpu.healthy, numa});
    }
  }
  AddNics(node, options, resources);
  std::vector<PluginResource> out;
  for (auto& [name, devices] : resources) out.push_back({name, std::move(devices)});
  return out;
}

bool PlannedResource::complete() const {
  int named = static_cast<int>(ids.size());
  for (const auto& [uuid, milli] : shares) named += milli;
  return named == wanted;
}

PlannedResource PlannedFor(const kube::AllocationRecord::Devices& planned,
                           const std::string& resource, const topology::TopologySpec& node,
                           const PluginOptions& options) {
  PlannedResource out;
  if (resource == kube::kGpuResource) {
    out.wanted = static_cast<int>(planned.gpus.size());
    for (std::size_t i = 0; i < planned.gpus.size(); ++i) {
      if (std::string uuid = UuidOf(planned, i, node); !uuid.empty()) {
        out.ids.push_back(std::move(uuid));
      }
    }
  } else if (resource.rfind(kube::kMigResourcePrefix, 0) == 0) {
    const std::string profile = resource.substr(std::string(kube::kMigResourcePrefix).size());
    for (const kube::AllocationRecord::Mig& mig : planned.mig) {
      if (mig.profile != profile) continue;
      ++out.wanted;
      if (std::string uuid = MigUuidOf(mig, node); !uuid.empty()) out.ids.push_back(uuid);
    }
  } else if (!options.share_resource.empty() && resource == options.share_resource) {
    for (const kube::AllocationRecord::Share& share : planned.shares) {
      out.wanted += share.milli;
      const topology::GpuSpec* gpu = GpuByIndex(node, share.gpu);
      if (gpu != nullptr && !gpu->uuid.empty()) out.shares.emplace_back(gpu->uuid, share.milli);
    }
  } else if (!options.nic_resource.empty() && resource == options.nic_resource) {
    for (const kube::AllocationRecord::Nic& nic : planned.nics) {
      if (nic.milli < kShareReplicasPerNic) continue;
      ++out.wanted;
      if (NicByName(node, nic.name) != nullptr) out.ids.push_back(nic.name);
    }
  } else if (!options.nic_share_resource.empty() && resource == options.nic_share_resource) {
    for (const kube::AllocationRecord::Nic& nic : planned.nics) {
      if (nic.milli >= kShareReplicasPerNic) continue;
      out.wanted += nic.milli;
      if (NicByName(node, nic.name) != nullptr) out.shares.emplace_back(nic.name, nic.milli);
    }
  }
  return out;
}

std::map<std::string, std::string> KubeletIdsAnnotation(const std::string& resource,
                                                        const std::vector<std::string>& ids) {
  return {{kAnnotationKubeletIdsPrefix + resource, JoinStrings(ids)}};
}

}  // namespace linkfit::handoff
