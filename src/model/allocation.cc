#include "linkfit/model/allocation.h"

#include <algorithm>
#include <functional>
#include <set>

#include "linkfit/alloc/placement_table.h"

namespace linkfit::model {
namespace {

using Record = kube::AllocationRecord;

// The NICs of `assignment` as the record names them (the node's own NICs: names and bus IDs are
// the node's, not the shared model's). Slots beyond the node's NICs, which NodeState never
// accepts, are left out.
std::vector<Record::Nic> NicsOf(const state::Assignment& assignment, const state::NodeInfo& node) {
  std::vector<Record::Nic> nics;
  const std::vector<topology::NicSpec>& specs = node.own_topology().nics();
  for (const state::Assignment::NicSlot& slot : assignment.nics) {
    if (slot.nic < 0 || static_cast<std::size_t>(slot.nic) >= specs.size()) continue;
    const topology::NicSpec& spec = specs[static_cast<std::size_t>(slot.nic)];
    nics.push_back({spec.name, spec.pci_bus_id, spec.uverbs, spec.rail, slot.milli, slot.gpu});
  }
  return nics;
}

// The slots of a record's NICs on `node`, found by name.
Result<std::vector<state::Assignment::NicSlot>> NicSlotsOf(const std::vector<Record::Nic>& nics,
                                                           const state::NodeInfo& node) {
  std::vector<state::Assignment::NicSlot> slots;
  const std::vector<topology::NicSpec>& specs = node.own_topology().nics();
  for (const Record::Nic& nic : nics) {
    const auto it = std::find_if(specs.begin(), specs.end(), [&](const topology::NicSpec& spec) {
      return spec.name == nic.name;
    });
    if (it == specs.end()) {
      return MakeError("NIC " + nic.name + " does not exist on node " + node.name + " (" +
                       std::to_string(specs.size()) + " NICs)");
    }
    if (nic.gpu >= node.gpu_count()) {
      return MakeError("NIC " + nic.name + " serves GPU " + std::to_string(nic.gpu) +
                       ", which does not exist on node " + node.name);
    }
    slots.push_back({static_cast<int>(it - specs.begin()), nic.milli, nic.gpu});
  }
  return slots;
}

}  // namespace

Record RecordOf(const state::Assignment& assignment, const state::NodeInfo& node) {
  Record record;
  record.pod = assignment.PodKey();
  record.uid = assignment.pod_uid;
  record.node = assignment.node;
  record.group = assignment.group;
  switch (assignment.kind) {
    case state::Assignment::Kind::kWhole: {
      record.devices.gpus = alloc::MaskToIndexes(assignment.gpus);
      bool all_known = true;
      for (int gpu : record.devices.gpus) {
        all_known = all_known && !node.own_topology().gpu(gpu).uuid.empty();
      }
      if (all_known) {
        for (int gpu : record.devices.gpus) {
          record.devices.uuids.push_back(node.own_topology().gpu(gpu).uuid);
        }
      }
      break;
    }
    case state::Assignment::Kind::kMig:
      for (const auto& slot : assignment.mig) {
        std::string profile = std::to_string(slot.instance.profile);
        const alloc::MigPlanner* planner = node.MigPlannerOf(slot.gpu);  // the GPU's own model's
        if (planner != nullptr) {
          profile = planner->set().profiles[static_cast<std::size_t>(slot.instance.profile)].name;
        }
        // The instance's UUID when the node agent reports one at that place.
        std::string uuid;
        for (const topology::MigInstanceSpec& existing :
             node.own_topology().gpu(slot.gpu).mig_instances) {
          if (existing.start == slot.instance.start && existing.profile == profile) {
            uuid = existing.uuid;
          }
        }
        record.devices.mig.push_back({slot.gpu, profile, slot.instance.start, uuid});
      }
      break;
    case state::Assignment::Kind::kShared:
      for (const auto& slot : assignment.shares) {
        record.devices.shares.push_back({slot.gpu, slot.milli});
      }
      break;
  }
  record.devices.nics = NicsOf(assignment, node);
  return record;
}

Result<state::Assignment> AssignmentOf(const Record& record, const state::NodeInfo& node) {
  state::Assignment a;
  const auto slash = record.pod.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == record.pod.size()) {
    return MakeError("pod " + record.pod + ": expected namespace/name");
  }
  a.pod_namespace = record.pod.substr(0, slash);
  a.pod_name = record.pod.substr(slash + 1);
  a.pod_uid = record.uid;
  a.node = record.node;
  a.group = record.group;
  a.cpu_milli = record.cpu_milli;
  a.memory_bytes = record.memory_bytes;
  const int gpu_count = node.gpu_count();
  const auto check_gpu = [&](int gpu) -> Result<void> {
    if (gpu < 0 || gpu >= gpu_count) {
      return MakeError("GPU " + std::to_string(gpu) + " does not exist on node " + node.name +
                       " (" + std::to_string(gpu_count) + " GPUs)");
    }
    return {};
  };
  const int kinds = (record.devices.gpus.empty() ? 0 : 1) + (record.devices.mig.empty() ? 0 : 1) +
                    (record.devices.shares.empty() ? 0 : 1);
  if (kinds > 1) return MakeError("a pod holds one kind of device: whole GPUs, MIG or shares");
  unsigned mask = 0;
  for (int gpu : record.devices.gpus) {
    if (auto ok = check_gpu(gpu); !ok) return tl::unexpected(ok.error());
    mask |= 1u << gpu;
  }
  if (!record.devices.mig.empty()) {
    a.kind = state::Assignment::Kind::kMig;
    if (node.mig_planners.empty()) {
      return MakeError("node " + node.name + " has no MIG-capable GPUs");
    }
    for (const Record::Mig& mig : record.devices.mig) {
      if (auto ok = check_gpu(mig.gpu); !ok) return tl::unexpected(ok.error());
      // A profile of the GPU's own model's set (a node may mix models).
      const alloc::MigPlanner* planner = node.MigPlannerOf(mig.gpu);
      const int profile = planner == nullptr ? -1 : planner->set().FindProfile(mig.profile);
      if (profile < 0) {
        return MakeError(mig.profile + " is not a MIG profile of GPU " + std::to_string(mig.gpu) +
                         " (" + node.topology().gpu(mig.gpu).model + ")");
      }
      a.mig.push_back({mig.gpu, alloc::MigInstance{profile, mig.start}});
      mask |= 1u << mig.gpu;
    }
  }
  if (!record.devices.shares.empty()) {
    a.kind = state::Assignment::Kind::kShared;
    for (const Record::Share& share : record.devices.shares) {
      if (auto ok = check_gpu(share.gpu); !ok) return tl::unexpected(ok.error());
      a.shares.push_back({share.gpu, share.milli});
      mask |= 1u << share.gpu;
    }
  }
  a.gpus = static_cast<topology::GpuMask>(mask);
  LINKFIT_ASSIGN_OR_RETURN(a.nics, NicSlotsOf(record.devices.nics, node));
  return a;
}

Result<state::Assignment> AssignmentOfReport(const kube::DevicesInUse::Pod& pod,
                                             const std::string& node_name,
                                             const state::NodeInfo& node, int share_milli,
                                             int nic_milli) {
  Record record;
  record.pod = pod.pod.empty() ? "unknown/" + pod.uid : pod.pod;
  record.uid = pod.uid;
  record.node = node_name;
  std::set<int> gpus;
  std::set<int> shared;
  std::set<std::pair<int, int>> instances;  // (gpu, start)
  std::set<std::string> nics;
  for (const kube::DevicesInUse::Container& container : pod.containers) {
    gpus.insert(container.gpus.begin(), container.gpus.end());
    for (const kube::DevicesInUse::Share& share : container.shares) shared.insert(share.gpu);
    nics.insert(container.nics.begin(), container.nics.end());
    for (const Record::Mig& mig : container.mig) {
      if (instances.emplace(mig.gpu, mig.start).second) record.devices.mig.push_back(mig);
    }
  }
  record.devices.gpus.assign(gpus.begin(), gpus.end());
  const int milli = std::clamp(share_milli, 1, 1000);
  for (int gpu : shared) record.devices.shares.push_back({gpu, milli});
  const int per_nic = std::clamp(nic_milli, 1, 1000);
  for (const std::string& nic : nics) record.devices.nics.push_back({nic, "", "", -1, per_nic, -1});
  auto assignment = AssignmentOf(record, node);
  if (!assignment) {
    return WithContext(assignment.error(), "the node's report of pod " + record.pod);
  }
  return assignment;
}

}  // namespace linkfit::model
