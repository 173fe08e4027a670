#include "linkfit/agent/device_use.h"

#include <algorithm>
#include <map>
#include <set>

#include "linkfit/common/strings.h"

namespace linkfit::agent {
namespace {

struct MigRef {
  int gpu = 0;
  const topology::MigInstanceSpec* instance = nullptr;
};

struct DeviceIndex {
  std::map<std::string, int> gpu_by_uuid;
  std::map<std::string, MigRef> mig_by_uuid;

  explicit DeviceIndex(const topology::TopologySpec& spec) {
    for (const topology::GpuSpec& gpu : spec.gpus) {
      if (!gpu.uuid.empty()) gpu_by_uuid[gpu.uuid] = gpu.index;
      for (const topology::MigInstanceSpec& instance : gpu.mig_instances) {
        if (!instance.uuid.empty()) mig_by_uuid[instance.uuid] = {gpu.index, &instance};
      }
    }
  }
};

// One container's devices, collected before sorting.
struct Collected {
  std::set<int> gpus;
  std::map<std::pair<int, int>, kube::AllocationRecord::Mig> mig;  // by (gpu, start)
  std::map<int, int> replicas;                                      // gpu -> replicas
  bool empty() const { return gpus.empty() && mig.empty() && replicas.empty(); }
};

// Returns false when `id` names no device of this node.
bool Collect(const DeviceIndex& index, const std::string& id, Collected& out) {
  const std::size_t replica = id.find("::");
  const std::string base = replica == std::string::npos ? id : id.substr(0, replica);
  if (const auto gpu = index.gpu_by_uuid.find(base); gpu != index.gpu_by_uuid.end()) {
    if (replica == std::string::npos) {
      out.gpus.insert(gpu->second);
    } else {
      ++out.replicas[gpu->second];
    }
    return true;
  }
  if (const auto mig = index.mig_by_uuid.find(base); mig != index.mig_by_uuid.end()) {
    const topology::MigInstanceSpec& instance = *mig->second.instance;
    out.mig[{mig->second.gpu, instance.start}] = {mig->second.gpu, instance.profile,
                                                  instance.start, instance.uuid};
    return true;
  }
  return false;
}

}  // namespace

DeviceUseReport MapDeviceUse(const std::vector<PodDeviceUse>& pods,
                             const topology::TopologySpec& spec, const UidLookup& uid_of) {
  const DeviceIndex index(spec);
  DeviceUseReport report;
  for (const PodDeviceUse& pod : pods) {
    const std::string key = pod.pod_namespace + "/" + pod.name;
    kube::DevicesInUse::Pod entry;
    entry.pod = key;
    for (const ContainerDeviceUse& container : pod.containers) {
      Collected collected;
      for (const ContainerDeviceUse::Devices& devices : container.devices) {
        const bool nvidia = StartsWith(devices.resource_name, "nvidia.com/");
        for (const std::string& id : devices.device_ids) {
          if (Collect(index, id, collected) || !nvidia) continue;
          report.warnings.push_back("pod " + key + ", container " + container.name + ": " +
                                    devices.resource_name + " device " + id +
                                    " matches no GPU or MIG instance of this node");
        }
      }
      if (collected.empty()) continue;
      kube::DevicesInUse::Container& out = entry.containers.emplace_back();
      out.name = container.name;
      out.gpus.assign(collected.gpus.begin(), collected.gpus.end());
      for (auto& [where, mig] : collected.mig) out.mig.push_back(mig);
      for (const auto& [gpu, count] : collected.replicas) out.shares.push_back({gpu, count});
    }
    if (entry.containers.empty()) continue;
    const std::optional<std::string> uid = uid_of(key);
    if (!uid) {
      report.warnings.push_back("pod " + key +
                                " holds devices but the API server shows no such pod on this "
                                "node (yet); left out");
      continue;
    }
    entry.uid = *uid;
    std::sort(entry.containers.begin(), entry.containers.end(),
              [](const auto& a, const auto& b) { return a.name < b.name; });
    report.devices.pods.push_back(std::move(entry));
  }
  std::sort(report.devices.pods.begin(), report.devices.pods.end(),
            [](const auto& a, const auto& b) { return a.uid < b.uid; });
  return report;
}

}  // namespace linkfit::agent
