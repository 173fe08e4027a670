#include "linkfit/model/allocation.h"

#include <algorithm>
#include <functional>
#include <set>

#include "linkfit/alloc/placement_table.h"

namespace linkfit::model {
namespace {

using Record = kube::AllocationRecord;

int CountOf(const kube::ContainerView& container, const std::string& resource) {
  const auto it = container.extended.find(resource);
  if (it == container.extended.end() || it->second <= 0) return 0;
  return static_cast<int>((it->second + 999) / 1000);
}

// Hands `items` (device positions 0..n-1) to the containers by the rules in the header; `need`
// is each container's count. `give(container, item)` records one hand-over.
void AssignInOrder(const std::vector<kube::ContainerView>& containers, std::size_t items,
                   const std::function<int(const kube::ContainerView&)>& need,
                   const std::function<void(std::size_t, std::size_t)>& give) {
  if (items == 0) return;
  std::vector<bool> reserved(items, false);
  std::vector<bool> handed(items, false);
  std::size_t first_app = containers.size();
  bool anyone_asked = false;
  for (std::size_t c = 0; c < containers.size(); ++c) {
    const kube::ContainerView& container = containers[c];
    if (!container.init && first_app == containers.size()) first_app = c;
    if (!container.init || !container.restartable) continue;
    int wanted = need(container);
    anyone_asked = anyone_asked || wanted > 0;
    for (std::size_t i = 0; i < items && wanted > 0; ++i) {
      if (reserved[i]) continue;
      reserved[i] = handed[i] = true;
      give(c, i);
      --wanted;
    }
  }
  for (std::size_t c = 0; c < containers.size(); ++c) {
    const kube::ContainerView& container = containers[c];
    if (!container.init || container.restartable) continue;
    int wanted = need(container);
    anyone_asked = anyone_asked || wanted > 0;
    for (std::size_t i = 0; i < items && wanted > 0; ++i) {
      if (reserved[i]) continue;
      handed[i] = true;
      give(c, i);
      --wanted;
    }
  }
  std::size_t cursor = 0;
  for (std::size_t c = 0; c < containers.size(); ++c) {
    const kube::ContainerView& container = containers[c];
    if (container.init) continue;
    int wanted = need(container);
    anyone_asked = anyone_asked || wanted > 0;
    for (; cursor < items && wanted > 0; ++cursor) {
      if (reserved[cursor]) continue;
      handed[cursor] = true;
      give(c, cursor);
      --wanted;
    }
  }
  if (first_app == containers.size()) return;
  for (std::size_t i = 0; i < items; ++i) {
    if (!handed[i]) give(first_app, i);
  }
}

}  // namespace

Record RecordOf(const state::Assignment& assignment, const state::NodeInfo& node) {
  Record record;
  record.pod = assignment.PodKey();
  record.uid = assignment.pod_uid;
  record.node = assignment.node;
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
  return a;
}

std::vector<Record::Container> PlanContainers(const std::vector<kube::ContainerView>& containers,
                                              const Record::Devices& devices,
                                              const std::string& shared_gpu_resource) {
  std::vector<Record::Container> plan;
  plan.reserve(containers.size());
  for (const kube::ContainerView& container : containers) {
    Record::Container& entry = plan.emplace_back();
    entry.name = container.name;
    entry.init = container.init;
  }
  const bool uuids = devices.uuids.size() == devices.gpus.size();
  AssignInOrder(
      containers, devices.gpus.size(),
      [](const kube::ContainerView& c) { return CountOf(c, kube::kGpuResource); },
      [&](std::size_t c, std::size_t i) {
        plan[c].devices.gpus.push_back(devices.gpus[i]);
        if (uuids) plan[c].devices.uuids.push_back(devices.uuids[i]);
      });
  std::set<std::string> profiles;
  for (const Record::Mig& mig : devices.mig) profiles.insert(mig.profile);
  for (const std::string& profile : profiles) {
    std::vector<const Record::Mig*> instances;
    for (const Record::Mig& mig : devices.mig) {
      if (mig.profile == profile) instances.push_back(&mig);
    }
    const std::string resource = kube::kMigResourcePrefix + profile;
    AssignInOrder(
        containers, instances.size(),
        [&](const kube::ContainerView& c) { return CountOf(c, resource); },
        [&](std::size_t c, std::size_t i) { plan[c].devices.mig.push_back(*instances[i]); });
  }
  if (!devices.shares.empty()) {
    bool given = false;
    for (std::size_t c = 0; c < containers.size(); ++c) {
      if (CountOf(containers[c], shared_gpu_resource) > 0 ||
          containers[c].extended.count(shared_gpu_resource) > 0) {
        plan[c].devices.shares = devices.shares;
        given = true;
      }
    }
    if (!given) {
      for (std::size_t c = 0; c < containers.size(); ++c) {
        if (containers[c].init) continue;
        plan[c].devices.shares = devices.shares;
        break;
      }
    }
  }
  return plan;
}

Result<state::Assignment> AssignmentOfReport(const kube::DevicesInUse::Pod& pod,
                                             const std::string& node_name,
                                             const state::NodeInfo& node, int share_milli) {
  Record record;
  record.pod = pod.pod.empty() ? "unknown/" + pod.uid : pod.pod;
  record.uid = pod.uid;
  record.node = node_name;
  std::set<int> gpus;
  std::set<int> shared;
  std::set<std::pair<int, int>> instances;  // (gpu, start)
  for (const kube::DevicesInUse::Container& container : pod.containers) {
    gpus.insert(container.gpus.begin(), container.gpus.end());
    for (const kube::DevicesInUse::Share& share : container.shares) shared.insert(share.gpu);
    for (const Record::Mig& mig : container.mig) {
      if (instances.emplace(mig.gpu, mig.start).second) record.devices.mig.push_back(mig);
    }
  }
  record.devices.gpus.assign(gpus.begin(), gpus.end());
  const int milli = std::clamp(share_milli, 1, 1000);
  for (int gpu : shared) record.devices.shares.push_back({gpu, milli});
  auto assignment = AssignmentOf(record, node);
  if (!assignment) {
    return WithContext(assignment.error(), "the node's report of pod " + record.pod);
  }
  return assignment;
}

}  // namespace linkfit::model
