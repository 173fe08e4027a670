#include "linkfit/handoff/handoff.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "handoff/node_lookup.h"
#include "linkfit/common/strings.h"
#include "linkfit/handoff/plugin_devices.h"
#include "linkfit/kube/annotations.h"

namespace linkfit::handoff {
namespace {

std::string Holder(const ContainerKey& key) {
  return "pod " + key.pod_uid + " (container " + key.container + ")";
}

HandoffDecision Refuse(std::string reason) {
  HandoffDecision decision;
  decision.kind = HandoffDecision::Kind::kRefuse;
  decision.reason = std::move(reason);
  return decision;
}

// The physical devices behind device IDs: whole GPUs and MIG instances counted, and the GPUs of
// share replicas ("UUID::k") named once each, whatever the replica count (NVIDIA's time-slicing
// gives one replica per container, linkfit's share resource one per thousandth); RDMA NICs (IDs
// whose base is one of the node's NICs) the same way, apart.
struct PhysicalDevices {
  std::multiset<std::string> whole;  // GPU and MIG UUIDs
  std::set<std::string> shared;      // GPUs of share replicas
  std::multiset<std::string> whole_nics;
  std::set<std::string> shared_nics;
  bool SameGpus(const PhysicalDevices& other) const {
    return whole == other.whole && shared == other.shared;
  }
  bool SameNics(const PhysicalDevices& other) const {
    return whole_nics == other.whole_nics && shared_nics == other.shared_nics;
  }
  bool has_nics() const { return !whole_nics.empty() || !shared_nics.empty(); }
};

PhysicalDevices Physical(const std::vector<std::string>& ids, const topology::TopologySpec& node) {
  PhysicalDevices out;
  for (const std::string& id : ids) {
    const std::size_t replica = id.find("::");
    const std::string base = id.substr(0, replica);
    const bool nic = NicByName(node, base) != nullptr;
    if (replica == std::string::npos) {
      (nic ? out.whole_nics : out.whole).insert(base);
    } else {
      (nic ? out.shared_nics : out.shared).insert(base);
    }
  }
  return out;
}

PhysicalDevices Physical(const HandedDevices& devices) {
  PhysicalDevices out;
  out.whole.insert(devices.gpus.begin(), devices.gpus.end());
  out.whole.insert(devices.mig.begin(), devices.mig.end());
  for (const auto& [uuid, milli] : devices.shares) out.shared.insert(uuid);
  for (const auto& [name, milli] : devices.nics) {
    if (milli >= 1000) {
      out.whole_nics.insert(name);
    } else {
      out.shared_nics.insert(name);
    }
  }
  return out;
}

// "NICs mlx5_2 (the kubelet) instead of mlx5_0 (the plan)": what differs, by name.
std::string NicDifference(const PhysicalDevices& kubelet, const PhysicalDevices& plan) {
  const auto names = [](const PhysicalDevices& devices) {
    std::vector<std::string> out(devices.whole_nics.begin(), devices.whole_nics.end());
    for (const std::string& name : devices.shared_nics) out.push_back(name + " (shared)");
    return out.empty() ? std::string("none") : JoinStrings(out, ", ");
  };
  return "NICs " + names(kubelet) + " (the kubelet's) instead of " + names(plan) + " (the plan's)";
}

// The plan's devices for one container, on this node's facts; an error says why not.
Result<HandedDevices> Resolve(const kube::AllocationRecord::Devices& planned,
                              const topology::TopologySpec& node) {
  HandedDevices devices;
  const auto usable = [&](int index) -> Result<const topology::GpuSpec*> {
    const topology::GpuSpec* gpu = GpuByIndex(node, index);
    if (gpu == nullptr) return MakeError("GPU " + std::to_string(index) + " does not exist here");
    if (!gpu->healthy) {
      return MakeError("GPU " + std::to_string(index) + " is unhealthy: " + gpu->health_problem);
    }
    if (gpu->uuid.empty()) {
      return MakeError("GPU " + std::to_string(index) + " has no known UUID to hand over");
    }
    return gpu;
  };
  for (std::size_t i = 0; i < planned.gpus.size(); ++i) {
    const topology::GpuSpec* gpu = nullptr;
    LINKFIT_ASSIGN_OR_RETURN(gpu, usable(planned.gpus[i]));
    if (i < planned.uuids.size() && planned.uuids[i] != gpu->uuid) {
      return MakeError("stale plan: GPU " + std::to_string(gpu->index) + " is " + gpu->uuid +
                       " now, the plan names " + planned.uuids[i]);
    }
    if (gpu->mig_mode == topology::MigMode::kEnabled) {
      return MakeError("GPU " + std::to_string(gpu->index) + " is in MIG mode");
    }
    devices.gpus.push_back(gpu->uuid);
  }
  for (const kube::AllocationRecord::Mig& mig : planned.mig) {
    const topology::GpuSpec* gpu = nullptr;
    LINKFIT_ASSIGN_OR_RETURN(gpu, usable(mig.gpu));
    const topology::MigInstanceSpec* instance = MigInstanceAt(*gpu, mig.profile, mig.start);
    if (instance == nullptr || instance->uuid.empty()) {
      return MakeError("MIG instance " + mig.profile + " at slice " + std::to_string(mig.start) +
                       " on GPU " + std::to_string(mig.gpu) + " does not exist yet");
    }
    if (!mig.uuid.empty() && mig.uuid != instance->uuid) {
      return MakeError("stale plan: the MIG instance " + mig.profile + " at slice " +
                       std::to_string(mig.start) + " on GPU " + std::to_string(mig.gpu) + " is " +
                       instance->uuid + " now, the plan names " + mig.uuid);
    }
    devices.mig.push_back(instance->uuid);
  }
  for (const kube::AllocationRecord::Share& share : planned.shares) {
    const topology::GpuSpec* gpu = nullptr;
    LINKFIT_ASSIGN_OR_RETURN(gpu, usable(share.gpu));
    if (gpu->mig_mode == topology::MigMode::kEnabled) {
      return MakeError("GPU " + std::to_string(gpu->index) + " is in MIG mode: no shares of it");
    }
    devices.shares.emplace_back(gpu->uuid, share.milli);
  }
  for (const kube::AllocationRecord::Nic& planned_nic : planned.nics) {
    const topology::NicSpec* nic = NicByName(node, planned_nic.name);
    if (nic == nullptr) return MakeError("NIC " + planned_nic.name + " does not exist here");
    if (!planned_nic.pci_bus_id.empty() && !nic->pci_bus_id.empty() &&
        planned_nic.pci_bus_id != nic->pci_bus_id) {
      return MakeError("stale plan: NIC " + nic->name + " is " + nic->pci_bus_id +
                       " now, the plan names " + planned_nic.pci_bus_id);
    }
    if (!NicPortUp(*nic)) return MakeError("NIC " + nic->name + "'s port is " + nic->state);
    devices.nics.emplace_back(nic->name, std::clamp(planned_nic.milli, 1, 1000));
  }
  return devices;
}

// The kubelet's device IDs as devices of this node (for a pod linkfit did not plan).
Result<HandedDevices> FromKubelet(const std::vector<std::string>& ids,
                                  const topology::TopologySpec& node) {
  HandedDevices devices;
  for (const std::string& id : ids) {
    const std::size_t replica = id.find("::");
    const std::string base = id.substr(0, replica);
    if (const topology::NicSpec* nic = NicByName(node, base)) {
      if (!NicPortUp(*nic)) return MakeError("NIC " + base + "'s port is " + nic->state);
      const auto held = std::find_if(devices.nics.begin(), devices.nics.end(),
                                     [&](const auto& entry) { return entry.first == base; });
      if (replica == std::string::npos) {
        devices.nics.emplace_back(base, 1000);
      } else if (held == devices.nics.end()) {
        devices.nics.emplace_back(base, 1);  // one thousandth per replica
      } else {
        held->second = std::min(held->second + 1, 1000);
      }
      continue;
    }
    bool found = false;
    for (const topology::GpuSpec& gpu : node.gpus) {
      if (gpu.uuid == base) {
        if (!gpu.healthy) return MakeError("GPU " + base + " is unhealthy: " + gpu.health_problem);
        if (replica == std::string::npos) {
          devices.gpus.push_back(base);
        } else {
          devices.shares.emplace_back(base, 1);  // a replica's size is not known: one unit
        }
        found = true;
      }
      for (const topology::MigInstanceSpec& instance : gpu.mig_instances) {
        if (instance.uuid == base) {
          devices.mig.push_back(base);
          found = true;
        }
      }
    }
    if (!found) return MakeError("the kubelet's device " + id + " is not on this node");
  }
  return devices;
}

}  // namespace

std::optional<std::string> Ledger::Conflict(const ContainerKey& key,
                                            const HandedDevices& devices) const {
  std::map<std::string, int> shared_milli;
  for (const auto& [uuid, milli] : devices.shares) shared_milli[uuid] += milli;
  std::map<std::string, int> nic_milli;
  for (const auto& [name, milli] : devices.nics) nic_milli[name] += milli;
  for (const auto& [holder, held] : held_) {
    if (holder.pod_uid == key.pod_uid) continue;  // one pod's containers: the plan decided
    for (const std::string& gpu : devices.gpus) {
      const bool whole = std::count(held.gpus.begin(), held.gpus.end(), gpu) > 0;
      const bool shared = std::any_of(held.shares.begin(), held.shares.end(),
                                      [&](const auto& share) { return share.first == gpu; });
      if (whole || shared) return "GPU " + gpu + " is held by " + Holder(holder);
    }
    for (const std::string& mig : devices.mig) {
      if (std::count(held.mig.begin(), held.mig.end(), mig) > 0) {
        return "MIG instance " + mig + " is held by " + Holder(holder);
      }
    }
    for (const auto& [uuid, milli] : held.shares) {
      if (shared_milli.count(uuid) != 0) shared_milli[uuid] += milli;
    }
    for (const auto& held_nic : held.nics) {
      const std::string& name = held_nic.first;  // a variable, not a binding: the lambda uses it
      const int milli = held_nic.second;
      const auto asked = nic_milli.find(name);
      if (asked == nic_milli.end()) continue;
      if (milli >= 1000 ||
          std::any_of(devices.nics.begin(), devices.nics.end(),
                      [&](const auto& nic) { return nic.first == name && nic.second >= 1000; })) {
        return "NIC " + name + " is held by " + Holder(holder);
      }
      asked->second += milli;
    }
    for (const auto& [uuid, ignored] : shared_milli) {
      if (std::count(held.gpus.begin(), held.gpus.end(), uuid) > 0) {
        return "GPU " + uuid + " is held whole by " + Holder(holder);
      }
    }
  }
  for (const auto& [uuid, milli] : shared_milli) {
    if (milli > 1000) {
      return "GPU " + uuid + " would be shared beyond its capacity (" + std::to_string(milli) +
             " of 1000 thousandths)";
    }
  }
  for (const auto& [name, milli] : nic_milli) {
    if (milli > 1000) {
      return "NIC " + name + " would be shared beyond its capacity (" + std::to_string(milli) +
             " of 1000 thousandths)";
    }
  }
  return std::nullopt;
}

void Ledger::Hold(const ContainerKey& key, HandedDevices devices) {
  held_[key] = std::move(devices);
}

void Ledger::Release(const ContainerKey& key) { held_.erase(key); }

void Ledger::ReleasePod(const std::string& pod_uid) {
  for (auto it = held_.begin(); it != held_.end();) {
    it = it->first.pod_uid == pod_uid ? held_.erase(it) : std::next(it);
  }
}

namespace {

// Decide, without the NICs' ports.
HandoffDecision DecideDevices(const HandoffRequest& request, const topology::TopologySpec& node,
                              const Ledger& ledger, MismatchPolicy mismatch,
                              UnplannedPolicy unplanned) {
  const ContainerKey key{request.pod_uid, request.container};
  const bool kubelet_gave = request.kubelet_ids && !request.kubelet_ids->empty();
  if (!request.plan) {
    if (!kubelet_gave) return HandoffDecision{};  // not a GPU container
    if (unplanned == UnplannedPolicy::kRefuse) {
      return Refuse(
          "the pod has no linkfit.io/allocation (it bypassed linkfit) and this node "
          "refuses unplanned GPU containers");
    }
    auto adopted = FromKubelet(*request.kubelet_ids, node);
    if (!adopted) return Refuse("unplanned GPU container: " + adopted.error().message);
    if (auto conflict = ledger.Conflict(key, *adopted)) {
      return Refuse("unplanned GPU container: " + *conflict);
    }
    HandoffDecision decision;
    decision.kind = HandoffDecision::Kind::kInject;
    decision.devices = std::move(*adopted);
    decision.reason = "no linkfit plan: the kubelet's devices adopted (free on this node)";
    return decision;
  }
  auto record = kube::DecodeAllocationRecord(*request.plan);
  if (!record) return Refuse("linkfit.io/allocation is unusable: " + record.error().message);
  if (record->uid != request.pod_uid) {
    return Refuse("the plan is for pod UID " + record->uid + ", not this pod (" + request.pod_uid +
                  ")");
  }
  if (record->node != request.node_name) {
    return Refuse("the plan is for node " + record->node + ", not " + request.node_name);
  }
  const auto entry =
      std::find_if(record->containers.begin(), record->containers.end(),
                   [&](const auto& container) { return container.name == request.container; });
  if (entry == record->containers.end() || entry->devices.empty()) {
    // No GPU for this container. If the kubelet gave it some, its bookkeeping is off.
    HandoffDecision decision;
    decision.mismatch = kubelet_gave;
    if (kubelet_gave && mismatch == MismatchPolicy::kStrict) {
      return Refuse("the kubelet allocated devices to container " + request.container +
                    ", which linkfit's plan gives none");
    }
    return decision;
  }
  auto devices = Resolve(entry->devices, node);
  if (!devices) return Refuse("linkfit's plan cannot be handed over: " + devices.error().message);
  if (auto conflict = ledger.Conflict(key, *devices)) {
    return Refuse("linkfit's plan collides with a live container: " + *conflict);
  }
  HandoffDecision decision;
  decision.kind = HandoffDecision::Kind::kInject;
  decision.devices = std::move(*devices);
  if (request.kubelet_ids) {
    const PhysicalDevices kubelet = Physical(*request.kubelet_ids, node);
    const PhysicalDevices plan = Physical(decision.devices);
    const bool gpus_differ = !kubelet.SameGpus(plan);
    // NICs asked by annotation alone come with no NIC resource, so with no kubelet NIC IDs.
    const bool nics_differ = kubelet.has_nics() && !kubelet.SameNics(plan);
    if (gpus_differ || nics_differ) {
      decision.mismatch = true;
      decision.reason = "the kubelet's own bookkeeping chose other devices";
      if (nics_differ) decision.reason += " (" + NicDifference(kubelet, plan) + ")";
      if (mismatch == MismatchPolicy::kStrict) {
        return Refuse("the kubelet allocated other devices than linkfit's plan (strict mode)" +
                      (nics_differ ? ": " + NicDifference(kubelet, plan) : std::string()));
      }
      decision.reason += "; the plan wins";
    }
  }
  return decision;
}

}  // namespace

HandoffDecision Decide(const HandoffRequest& request, const topology::TopologySpec& node,
                       const Ledger& ledger, MismatchPolicy mismatch, UnplannedPolicy unplanned) {
  HandoffDecision decision = DecideDevices(request, node, ledger, mismatch, unplanned);
  for (const auto& [name, milli] : decision.devices.nics) {
    decision.nic_ports[name] = NicPortOf(node, name);
  }
  return decision;
}

int NicPortOf(const topology::TopologySpec& node, const std::string& nic) {
  const topology::NicSpec* spec = NicByName(node, nic);
  return spec == nullptr ? 1 : spec->port;
}

std::vector<std::pair<std::string, std::string>> NicEnvironment(
    const std::vector<std::pair<std::string, int>>& nics) {
  if (nics.empty()) return {};
  std::vector<std::string> ports;
  for (const auto& [nic, port] : nics) ports.push_back(nic + ":" + std::to_string(port));
  const std::string joined = JoinStrings(ports);
  return {{"NCCL_IB_HCA", "=" + joined}, {"UCX_NET_DEVICES", joined}};
}

bool NicHandoffOptions::CdiBringsRdmaCm(
    const std::vector<std::pair<std::string, int>>& nics) const {
  return std::any_of(nics.begin(), nics.end(), [&](const auto& nic) {
    if (!ByCdi(nic.first)) return false;
    return !cdi_declared || cdi_declared->at(nic.first);
  });
}

Adjustment AdjustmentFor(const HandoffDecision& decision, bool cdi, const NicHandoffOptions& nics) {
  Adjustment adjustment;
  if (decision.kind != HandoffDecision::Kind::kInject) {
    adjustment.env.emplace_back("NVIDIA_VISIBLE_DEVICES", "void");
    return adjustment;
  }
  std::vector<std::string> uuids = decision.devices.gpus;
  uuids.insert(uuids.end(), decision.devices.mig.begin(), decision.devices.mig.end());
  std::string share_limits;
  for (const auto& [uuid, milli] : decision.devices.shares) {
    if (std::find(uuids.begin(), uuids.end(), uuid) == uuids.end()) uuids.push_back(uuid);
    share_limits += (share_limits.empty() ? "" : ",") + uuid + "=" + std::to_string(milli);
  }
  for (const std::string& uuid : uuids) {
    if (cdi) adjustment.cdi_devices.push_back("nvidia.com/gpu=" + uuid);
  }
  adjustment.env.emplace_back("NVIDIA_VISIBLE_DEVICES",
                              uuids.empty() ? "void" : JoinStrings(uuids));
  if (!share_limits.empty()) adjustment.env.emplace_back("LINKFIT_GPU_SHARES", share_limits);
  std::vector<std::pair<std::string, int>> nic_ports;
  for (const auto& [name, milli] : decision.devices.nics) {
    const auto port = decision.nic_ports.find(name);
    nic_ports.emplace_back(name, port == decision.nic_ports.end() ? 1 : port->second);
    if (cdi && nics.ByCdi(name)) adjustment.cdi_devices.push_back(nics.cdi_kind + "=" + name);
  }
  if (nics.env) {
    for (auto& entry : NicEnvironment(nic_ports)) adjustment.env.push_back(std::move(entry));
  }
  return adjustment;
}

namespace {

// "v2.1.3" / "2.1.3-rc.1" / "1.34" -> (2, 1); nullopt when it does not start with two numbers.
std::optional<std::pair<int, int>> MajorMinor(std::string_view version) {
  if (!version.empty() && (version[0] == 'v' || version[0] == 'V')) version.remove_prefix(1);
  int parts[2] = {0, 0};
  for (int& part : parts) {
    std::size_t digits = 0;
    while (digits < version.size() && digits < 6 && version[digits] >= '0' &&
           version[digits] <= '9') {
      part = part * 10 + (version[digits] - '0');
      ++digits;
    }
    if (digits == 0) return std::nullopt;
    version.remove_prefix(digits);
    if (!version.empty() && version[0] == '.') version.remove_prefix(1);
  }
  return std::make_pair(parts[0], parts[1]);
}

}  // namespace

bool RuntimeInjectsCdi(std::string_view runtime_name, std::string_view runtime_version) {
  const auto version = MajorMinor(runtime_version);
  if (!version) return false;
  if (runtime_name == "containerd") return *version >= std::make_pair(2, 1);
  if (runtime_name == "cri-o" || runtime_name == "crio" || runtime_name == "CRI-O") {
    return *version >= std::make_pair(1, 34);
  }
  return false;
}

}  // namespace linkfit::handoff
