#include "agent/agent_nri.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "linkfit/common/log.h"
#include "linkfit/common/strings.h"
#include "linkfit/handoff/cdi_specs.h"
#include "linkfit/handoff/nri_connection.h"

namespace linkfit::agent {

void HandedDevicesView::Update(const handoff::Ledger& ledger) {
  MutexLock lock(mutex_);
  held_ = ledger.held();
}

bool HandedDevicesView::known() const {
  MutexLock lock(mutex_);
  return held_.has_value();
}

kube::DevicesInUse HandedDevicesView::Report(const topology::TopologySpec& spec) const {
  std::map<handoff::ContainerKey, handoff::HandedDevices> held;
  {
    MutexLock lock(mutex_);
    if (held_) held = *held_;
  }
  std::map<std::string, int> gpu_of;
  std::map<std::string, kube::AllocationRecord::Mig> mig_of;
  for (const topology::GpuSpec& gpu : spec.gpus) {
    gpu_of[gpu.uuid] = gpu.index;
    for (const topology::MigInstanceSpec& instance : gpu.mig_instances) {
      mig_of[instance.uuid] = {gpu.index, instance.profile, instance.start, instance.uuid};
    }
  }
  std::map<std::string, kube::DevicesInUse::Pod> pods;
  for (const auto& [key, devices] : held) {
    kube::DevicesInUse::Container container;
    container.name = key.container;
    for (const std::string& uuid : devices.gpus) {
      if (const auto it = gpu_of.find(uuid); it != gpu_of.end())
        container.gpus.push_back(it->second);
    }
    for (const std::string& uuid : devices.mig) {
      if (const auto it = mig_of.find(uuid); it != mig_of.end())
        container.mig.push_back(it->second);
    }
    for (const auto& [uuid, milli] : devices.shares) {
      if (const auto it = gpu_of.find(uuid); it != gpu_of.end()) {
        container.shares.push_back({it->second, 1});
      }
    }
    for (const auto& held_nic : devices.nics) {
      const std::string& name = held_nic.first;
      const bool known =
          std::any_of(spec.nics.begin(), spec.nics.end(),
                      [&](const topology::NicSpec& nic) { return nic.name == name; });
      if (known) container.nics.push_back(name);
    }
    std::sort(container.gpus.begin(), container.gpus.end());
    std::sort(container.nics.begin(), container.nics.end());
    container.nics.erase(std::unique(container.nics.begin(), container.nics.end()),
                         container.nics.end());
    if (container.gpus.empty() && container.mig.empty() && container.shares.empty() &&
        container.nics.empty()) {
      continue;
    }
    kube::DevicesInUse::Pod& pod = pods[key.pod_uid];
    pod.uid = key.pod_uid;
    pod.containers.push_back(std::move(container));
  }
  kube::DevicesInUse report;
  for (auto& [uid, pod] : pods) report.pods.push_back(std::move(pod));
  return report;
}

kube::DevicesInUse MergeDeviceReports(kube::DevicesInUse handed,
                                      const kube::DevicesInUse& kubelet) {
  std::set<std::string> seen;
  for (const kube::DevicesInUse::Pod& pod : handed.pods) seen.insert(pod.uid);
  for (const kube::DevicesInUse::Pod& pod : kubelet.pods) {
    if (seen.count(pod.uid) == 0) handed.pods.push_back(pod);
  }
  std::sort(handed.pods.begin(), handed.pods.end(),
            [](const auto& a, const auto& b) { return a.uid < b.uid; });
  return handed;
}

Result<handoff::NodeDeviceFiles> DeviceFilesCache::Get() {
  const auto spec = agent_.current_spec();
  if (!spec) return MakeError("no GPUs discovered yet");
  std::string key;
  for (const topology::GpuSpec& gpu : spec->gpus) {
    key += gpu.uuid + ";";
    for (const auto& instance : gpu.mig_instances) {
      key += instance.uuid + "/" + std::to_string(instance.gpu_instance) + ";";
    }
  }
  MutexLock lock(mutex_);
  if (key != key_) {
    files_ = handoff::ReadDeviceFiles(proc_root_, *spec);
    if (!files_) log::Warning("device files: " + files_.error().message);
    key_ = std::move(key);
  }
  return files_;
}

Result<handoff::NicDeviceFiles> NicDeviceFilesCache::Get() {
  const auto spec = agent_.current_spec();
  if (!spec) return MakeError("no NICs discovered yet");
  std::string key;
  for (const topology::NicSpec& nic : spec->nics) key += nic.name + "=" + nic.uverbs + ";";
  MutexLock lock(mutex_);
  if (key != key_) {
    files_ = handoff::ReadNicDeviceFiles(dev_root_, sysfs_root_, *spec);
    if (!files_) log::Warning("NIC device files: " + files_.error().message);
    key_ = std::move(key);
  }
  return files_;
}

std::map<std::string, bool> NicCdiCache::Get() {
  const auto spec = agent_.current_spec();
  if (!spec) return {};
  std::string key;
  for (const topology::NicSpec& nic : spec->nics) key += nic.name + ";";
  MutexLock lock(mutex_);
  if (key == key_) return declared_;
  key_ = std::move(key);
  const handoff::CdiDevices specs = handoff::ReadCdiSpecDirs(spec_dirs_);
  for (const std::string& problem : specs.problems) {
    log::Warning("CDI spec ignored: " + problem);
  }
  declared_ = handoff::DeclaredNicCdi(specs, kind_, *spec);
  for (const topology::NicSpec& nic : spec->nics) {
    if (!handoff::ServedNic(nic) || declared_.count(nic.name) != 0) continue;
    if (!logged_.insert(nic.name).second) continue;
    log::Warning("NIC " + nic.name + ": no CDI spec in " + JoinStrings(spec_dirs_) + " declares " +
                 kind_ + "=" + nic.name + "; it is handed over as device files");
  }
  return declared_;
}

void RunNriPlugin(const std::string& socket_path, handoff::NriPluginOptions options,
                  const NodeAgent& agent, HandedDevicesView* handed,
                  const std::atomic<bool>& stop) {
  if (handed != nullptr) {
    options.on_ledger_change = [handed](const handoff::Ledger& ledger) { handed->Update(ledger); };
  }
  std::chrono::milliseconds backoff{0};
  while (!stop.load()) {
    if (backoff.count() > 0) {
      const auto until = std::chrono::steady_clock::now() + backoff;
      while (!stop.load() && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (stop.load()) return;
    }
    backoff =
        std::clamp(backoff * 2, std::chrono::milliseconds(1000), std::chrono::milliseconds(30000));
    auto fd = handoff::DialNri(socket_path);
    if (!fd) {
      log::Error(fd.error().message + "; retrying in " + std::to_string(backoff.count()) + " ms");
      continue;
    }
    handoff::NriPlugin plugin(
        options, [&agent] { return agent.current_spec().value_or(topology::TopologySpec{}); });
    const auto started = std::chrono::steady_clock::now();
    auto served = handoff::ServeNri(*fd, plugin, {}, stop);
    ::close(*fd);
    if (served) {
      log::Warning("NRI: the runtime closed the connection; reconnecting");
    } else {
      log::Error(served.error().message + "; reconnecting");
    }
    // A connection that lived a while resets the backoff.
    if (std::chrono::steady_clock::now() - started > std::chrono::seconds(60)) {
      backoff = std::chrono::milliseconds(0);
    }
  }
}

}  // namespace linkfit::agent
