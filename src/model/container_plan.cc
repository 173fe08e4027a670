// Which container of a pod gets which of its devices (allocation.h's file comment), mirroring
// the kubelet's device manager.

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>

#include "linkfit/model/allocation.h"

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

bool AnyoneAsks(const std::vector<kube::ContainerView>& containers,
                const std::function<int(const kube::ContainerView&)>& need) {
  return std::any_of(containers.begin(), containers.end(),
                     [&](const kube::ContainerView& c) { return need(c) > 0; });
}

// Carves shared devices (`milli[d]` thousandths of device d) between the containers: each
// thousandth is one item of AssignInOrder, as each is one device ID of the kubelet's, so every
// container gets the thousandths its share resource asks (`need`), an app container reuses an
// init container's and a sidecar keeps its own. Thousandths are taken device by device in
// `order`. Returns, per container, its thousandths of each device (indexed as `milli`).
std::vector<std::vector<int>> CarveShares(
    const std::vector<kube::ContainerView>& containers, const std::vector<int>& milli,
    const std::vector<std::size_t>& order,
    const std::function<int(const kube::ContainerView&)>& need) {
  std::vector<std::size_t> device_of;  // item -> device
  for (const std::size_t d : order) {
    device_of.insert(device_of.end(), static_cast<std::size_t>(std::max(milli[d], 0)), d);
  }
  std::vector<std::vector<int>> parts(containers.size(), std::vector<int>(milli.size(), 0));
  AssignInOrder(containers, device_of.size(), need,
                [&](std::size_t c, std::size_t i) { ++parts[c][device_of[i]]; });
  return parts;
}

// Whether container `c` of `plan` holds GPU `gpu` (whole, MIG or a share).
bool HoldsGpu(const Record::Container& c, int gpu) {
  const Record::Devices& d = c.devices;
  return std::find(d.gpus.begin(), d.gpus.end(), gpu) != d.gpus.end() ||
         std::any_of(d.mig.begin(), d.mig.end(), [&](const auto& m) { return m.gpu == gpu; }) ||
         std::any_of(d.shares.begin(), d.shares.end(), [&](const auto& s) { return s.gpu == gpu; });
}

// The container a NIC goes with when no container asks for it by resource: an app container
// holding the GPU the NIC serves, else any container holding it (a sidecar), else the first app
// container; plan.size() where the pod has no app container.
std::size_t ContainerOfNic(const std::vector<kube::ContainerView>& containers,
                           const std::vector<Record::Container>& plan, int gpu) {
  std::size_t first_app = plan.size();
  std::size_t any_holder = plan.size();
  for (std::size_t c = 0; c < plan.size(); ++c) {
    const bool holds = gpu >= 0 && HoldsGpu(plan[c], gpu);
    if (!containers[c].init && holds) return c;
    if (holds && any_holder == plan.size()) any_holder = c;
    if (!containers[c].init && first_app == plan.size()) first_app = c;
  }
  return any_holder != plan.size() ? any_holder : first_app;
}

// The NICs of `devices` into `plan` (the file comment of allocation.h), after the GPUs.
void PlanNics(const std::vector<kube::ContainerView>& containers, const Record::Devices& devices,
              const NicResources& names, std::vector<Record::Container>& plan) {
  if (devices.nics.empty()) return;
  std::vector<const Record::Nic*> whole;
  std::vector<const Record::Nic*> shared;
  for (const Record::Nic& nic : devices.nics) (nic.milli >= 1000 ? whole : shared).push_back(&nic);
  const auto follow_gpu = [&](const Record::Nic& nic) {
    const std::size_t c = ContainerOfNic(containers, plan, nic.gpu);
    if (c < plan.size()) plan[c].devices.nics.push_back(nic);
  };
  const auto wanted = [&](const kube::ContainerView& c) {
    int count = 0;
    for (const std::string& resource : names.whole) count += CountOf(c, resource);
    return count;
  };
  if (AnyoneAsks(containers, wanted)) {
    AssignInOrder(containers, whole.size(), wanted,
                  [&](std::size_t c, std::size_t i) { plan[c].devices.nics.push_back(*whole[i]); });
  } else {
    for (const Record::Nic* nic : whole) follow_gpu(*nic);
  }
  if (shared.empty()) return;
  const auto share_wanted = [&](const kube::ContainerView& c) { return CountOf(c, names.share); };
  if (!AnyoneAsks(containers, share_wanted)) {
    for (const Record::Nic* nic : shared) follow_gpu(*nic);
    return;
  }
  // A container's thousandths come first from the NICs serving its own GPUs.
  std::vector<int> milli;
  std::vector<std::size_t> holder;
  for (const Record::Nic* nic : shared) {
    milli.push_back(nic->milli);
    holder.push_back(ContainerOfNic(containers, plan, nic->gpu));
  }
  std::vector<std::size_t> order(shared.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return holder[a] < holder[b]; });
  const auto parts = CarveShares(containers, milli, order, share_wanted);
  for (std::size_t c = 0; c < plan.size(); ++c) {
    for (std::size_t n = 0; n < shared.size(); ++n) {
      if (parts[c][n] == 0) continue;
      Record::Nic part = *shared[n];
      part.milli = parts[c][n];
      plan[c].devices.nics.push_back(std::move(part));
    }
  }
}

// The GPU shares of `devices` into `plan` (the file comment of allocation.h).
void PlanGpuShares(const std::vector<kube::ContainerView>& containers,
                   const Record::Devices& devices, const std::string& shared_gpu_resource,
                   std::vector<Record::Container>& plan) {
  if (devices.shares.empty()) return;
  const auto wanted = [&](const kube::ContainerView& c) { return CountOf(c, shared_gpu_resource); };
  if (!AnyoneAsks(containers, wanted)) {
    for (std::size_t c = 0; c < containers.size(); ++c) {
      if (containers[c].init) continue;
      plan[c].devices.shares = devices.shares;
      break;
    }
    return;
  }
  std::vector<int> milli;
  for (const Record::Share& share : devices.shares) milli.push_back(share.milli);
  std::vector<std::size_t> order(milli.size());
  std::iota(order.begin(), order.end(), 0);
  const auto parts = CarveShares(containers, milli, order, wanted);
  for (std::size_t c = 0; c < plan.size(); ++c) {
    for (std::size_t g = 0; g < milli.size(); ++g) {
      if (parts[c][g] > 0) plan[c].devices.shares.push_back({devices.shares[g].gpu, parts[c][g]});
    }
  }
}

}  // namespace

std::vector<Record::Container> PlanContainers(const std::vector<kube::ContainerView>& containers,
                                              const Record::Devices& devices,
                                              const std::string& shared_gpu_resource,
                                              const NicResources& nic_resources) {
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
  PlanGpuShares(containers, devices, shared_gpu_resource, plan);
  PlanNics(containers, devices, nic_resources, plan);
  return plan;
}

}  // namespace linkfit::model
