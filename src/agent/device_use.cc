// The kubelet's device IDs mapped to linkfit's devices (device_use.h).

#include "linkfit/agent/device_use.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <utility>

#include "linkfit/common/result.h"
#include "linkfit/common/strings.h"

namespace linkfit::agent {
namespace {

constexpr std::string_view kNvidiaResourcePrefix = "nvidia.com/";
constexpr std::string_view kReplicaSeparator = "::";  // "<uuid>::<k>", the device plugin's form
constexpr std::string_view kLegacyMigPrefix = "MIG-GPU-";
constexpr int kMaxMigStart = 7;

struct MigRef {
  int gpu = 0;
  const topology::MigInstanceSpec* instance = nullptr;
};

// One container's devices, deduplicated and ordered as the annotation wants them.
struct ContainerDevices {
  std::set<std::string> ids;  // IDs already counted (a repeated ID counts once)
  std::set<int> gpus;
  std::map<std::pair<int, int>, kube::AllocationRecord::Mig> mig;  // by (gpu, start)
  std::map<int, int> replicas;                                     // gpu -> replicas held
  std::set<std::string> nics;                                      // RDMA NIC names
  bool empty() const { return gpus.empty() && mig.empty() && replicas.empty() && nics.empty(); }
};

// The node's GPUs and MIG instances by UUID. Devices the annotation cannot carry (an index
// outside 0..15, a MIG start outside 0..7: discovery validates both, this is a second guard so
// that what the agent publishes always decodes) are not indexed, so IDs naming them are warned
// about like any unknown ID.
class DeviceIndex {
 public:
  explicit DeviceIndex(const topology::TopologySpec& spec) {
    for (const topology::GpuSpec& gpu : spec.gpus) {
      if (gpu.index < 0 || gpu.index >= topology::kMaxGpus) continue;
      if (!gpu.uuid.empty()) gpu_by_uuid_[gpu.uuid] = gpu.index;
      std::vector<MigRef>& instances = mig_by_gpu_[gpu.index];
      for (const topology::MigInstanceSpec& instance : gpu.mig_instances) {
        if (instance.start < 0 || instance.start > kMaxMigStart) continue;
        instances.push_back({gpu.index, &instance});
        if (!instance.uuid.empty()) mig_by_uuid_[instance.uuid] = {gpu.index, &instance};
      }
    }
  }

  // Counts device `id` of `resource` into `out`; an error says why it names no device.
  Result<void> Count(std::string_view resource, const std::string& id,
                     ContainerDevices& out) const {
    const std::size_t separator = id.find(kReplicaSeparator);
    if (separator != std::string::npos) {
      const std::string_view replica = std::string_view(id).substr(separator + 2);
      if (replica.empty() || replica.find_first_not_of("0123456789") != std::string::npos) {
        return MakeError("is not \"<uuid>::<replica number>\"");
      }
    }
    const std::string base = id.substr(0, separator);
    if (const auto gpu = gpu_by_uuid_.find(base); gpu != gpu_by_uuid_.end()) {
      if (separator == std::string::npos) {
        out.gpus.insert(gpu->second);
      } else {
        ++out.replicas[gpu->second];
      }
      return {};
    }
    if (const auto mig = mig_by_uuid_.find(base); mig != mig_by_uuid_.end()) {
      AddMig(mig->second, out);
      return {};
    }
    if (StartsWith(base, kLegacyMigPrefix)) return CountLegacyMig(resource, base, out);
    return MakeError("matches no GPU or MIG instance of this node");
  }

 private:
  static void AddMig(const MigRef& ref, ContainerDevices& out) {
    const topology::MigInstanceSpec& instance = *ref.instance;
    out.mig[{ref.gpu, instance.start}] = {ref.gpu, instance.profile, instance.start, instance.uuid};
  }

  // "MIG-GPU-<uuid>/<gi>/<ci>": the parent GPU by UUID, the instance by the resource's profile.
  Result<void> CountLegacyMig(std::string_view resource, std::string_view id,
                              ContainerDevices& out) const {
    const std::vector<std::string_view> parts = Split(id.substr(4), '/');  // drop "MIG-"
    if (parts.size() != 3 || !ParseInt(parts[1]) || !ParseInt(parts[2])) {
      return MakeError("is not \"MIG-GPU-<uuid>/<gpu instance>/<compute instance>\"");
    }
    const auto gpu = gpu_by_uuid_.find(std::string(parts[0]));
    if (gpu == gpu_by_uuid_.end()) return MakeError("names a GPU this node does not have");
    const std::string_view mig_prefix = kube::kMigResourcePrefix;
    if (!StartsWith(resource, mig_prefix)) {
      return MakeError(
          "names a GPU instance id, which discovery does not report, and the "
          "resource names no MIG profile to find it by");
    }
    const std::string_view profile = resource.substr(mig_prefix.size());
    const MigRef* match = nullptr;
    const auto instances = mig_by_gpu_.find(gpu->second);
    if (instances != mig_by_gpu_.end()) {
      for (const MigRef& ref : instances->second) {
        if (ref.instance->profile != profile) continue;
        if (match != nullptr) {
          return MakeError("is ambiguous: GPU " + std::to_string(gpu->second) + " has several " +
                           std::string(profile) + " instances");
        }
        match = &ref;
      }
    }
    if (match == nullptr) {
      return MakeError("names no " + std::string(profile) + " instance on GPU " +
                       std::to_string(gpu->second));
    }
    AddMig(*match, out);
    return {};
  }

  std::map<std::string, int> gpu_by_uuid_;
  std::map<std::string, MigRef> mig_by_uuid_;
  std::map<int, std::vector<MigRef>> mig_by_gpu_;
};

kube::DevicesInUse::Container ToAnnotation(const std::string& name,
                                           const ContainerDevices& devices) {
  kube::DevicesInUse::Container container;
  container.name = name;
  container.gpus.assign(devices.gpus.begin(), devices.gpus.end());
  for (const auto& [where, mig] : devices.mig) container.mig.push_back(mig);
  for (const auto& [gpu, count] : devices.replicas) container.shares.push_back({gpu, count});
  container.nics.assign(devices.nics.begin(), devices.nics.end());
  return container;
}

// A NIC resource's device ID ("mlx5_0", or a replica "mlx5_0::k") counted as its NIC.
Result<void> CountNic(const std::string& id, const topology::TopologySpec& spec,
                      ContainerDevices& out) {
  const std::string name = id.substr(0, id.find(kReplicaSeparator));
  const bool known = std::any_of(spec.nics.begin(), spec.nics.end(),
                                 [&](const topology::NicSpec& nic) { return nic.name == name; });
  if (!known) return MakeError("matches no RDMA NIC of this node");
  out.nics.insert(name);
  return {};
}

}  // namespace

DeviceUseReport MapDeviceUse(const std::vector<PodDeviceUse>& pods,
                             const topology::TopologySpec& spec, const UidLookup& uid_of,
                             const std::set<std::string>& nic_resources,
                             const std::set<std::string>& gpu_resources) {
  const DeviceIndex index(spec);
  DeviceUseReport report;
  std::map<std::string, kube::DevicesInUse::Pod> by_uid;
  for (const PodDeviceUse& pod : pods) {
    const std::string key = pod.pod_namespace + "/" + pod.name;
    std::map<std::string, ContainerDevices> containers;  // by name: sorted, repeats merged
    for (const ContainerDeviceUse& container : pod.containers) {
      const std::string where = "pod " + key + ", container " + QuoteForMessage(container.name);
      for (const ContainerDeviceUse::Devices& devices : container.devices) {
        const bool nic = nic_resources.count(devices.resource_name) != 0;
        const bool gpu = StartsWith(devices.resource_name, kNvidiaResourcePrefix) ||
                         gpu_resources.count(devices.resource_name) != 0;
        if (!nic && !gpu) continue;
        if (container.name.empty()) {
          report.warnings.push_back("pod " + key + ": a container without a name holds " +
                                    devices.resource_name + " devices; left out");
          break;
        }
        ContainerDevices& held = containers[container.name];
        for (const std::string& id : devices.device_ids) {
          if (!held.ids.insert(id).second) continue;
          auto counted =
              nic ? CountNic(id, spec, held) : index.Count(devices.resource_name, id, held);
          if (!counted) {
            report.warnings.push_back(where + ": " + devices.resource_name + " device " +
                                      QuoteForMessage(id) + " " + counted.error().message +
                                      "; not counted");
          }
        }
      }
    }
    kube::DevicesInUse::Pod entry;
    entry.pod = key;
    for (const auto& [name, devices] : containers) {
      if (!devices.empty()) entry.containers.push_back(ToAnnotation(name, devices));
    }
    if (entry.containers.empty()) continue;
    const std::optional<std::string> uid = uid_of(key);
    if (!uid || uid->empty()) {
      report.warnings.push_back("pod " + key +
                                " holds devices but its UID is not known (not yet seen on this "
                                "node); left out");
      continue;
    }
    entry.uid = *uid;
    if (const auto [existing, added] = by_uid.try_emplace(*uid, std::move(entry)); !added) {
      report.warnings.push_back("pod " + key + " has the UID " + *uid + " of pod " +
                                existing->second.pod + "; left out");
    }
  }
  for (auto& [uid, pod] : by_uid) report.devices.pods.push_back(std::move(pod));
  return report;
}

}  // namespace linkfit::agent
