#pragma once

// The agent's NRI loop: connects to the runtime's NRI socket, serves linkfit's plugin
// (handoff/nri_connection.h) with the node's current discovery, and reconnects with backoff when
// the runtime drops the connection. A new plugin each connection: the runtime's Synchronize
// rebuilds the ledger.
//
// Thread-safety: Run on its own thread; `stop` from any thread.

#include <atomic>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "linkfit/agent/node_agent.h"
#include "linkfit/common/mutex.h"
#include "linkfit/handoff/device_files.h"
#include "linkfit/handoff/nic_device_files.h"
#include "linkfit/handoff/nri_plugin.h"

namespace linkfit::agent {

// What linkfit's NRI plugin handed to live containers, as it last reported (thread-safe: the NRI
// thread updates it, the agent loop reads it). Published as linkfit.io/devices-in-use, it is the
// truth of the hand-off, so the node's reports match linkfit's plans wherever NRI runs.
class HandedDevicesView {
 public:
  void Update(const handoff::Ledger& ledger);
  // False until the plugin has synchronised with the runtime once.
  bool known() const;
  // The handed devices on `spec` (UUIDs back to GPU indexes and MIG placements, NICs by name),
  // keyed by pod UID; devices the spec does not know are left out.
  kube::DevicesInUse Report(const topology::TopologySpec& spec) const;

 private:
  mutable Mutex mutex_;
  std::optional<std::map<handoff::ContainerKey, handoff::HandedDevices>> held_
      LINKFIT_GUARDED_BY(mutex_);
};

// The devices in use to publish: the plugin's hand-offs, plus the kubelet's view of pods the
// plugin did not hand anything (containers created before it ran, or without a plan).
kube::DevicesInUse MergeDeviceReports(kube::DevicesInUse handed, const kube::DevicesInUse& kubelet);

// The device files of the node's current GPUs and MIG instances (handoff/device_files.h), read from
// `proc_root` when the discovered devices change, never per container. Thread-safe.
class DeviceFilesCache {
 public:
  DeviceFilesCache(std::string proc_root, const NodeAgent& agent)
      : proc_root_(std::move(proc_root)), agent_(agent) {}
  Result<handoff::NodeDeviceFiles> Get();

 private:
  const std::string proc_root_;
  const NodeAgent& agent_;
  Mutex mutex_;
  std::string key_ LINKFIT_GUARDED_BY(mutex_);
  Result<handoff::NodeDeviceFiles> files_ LINKFIT_GUARDED_BY(mutex_) = MakeError("not read yet");
};

// The device files of the node's current RDMA NICs (handoff/nic_device_files.h), read from the
// host's /dev (`dev_root`) and sysfs when the discovered NICs change, never per container.
// Thread-safe.
class NicDeviceFilesCache {
 public:
  NicDeviceFilesCache(std::string dev_root, std::string sysfs_root, const NodeAgent& agent)
      : dev_root_(std::move(dev_root)), sysfs_root_(std::move(sysfs_root)), agent_(agent) {}
  Result<handoff::NicDeviceFiles> Get();

 private:
  const std::string dev_root_;
  const std::string sysfs_root_;
  const NodeAgent& agent_;
  Mutex mutex_;
  std::string key_ LINKFIT_GUARDED_BY(mutex_);
  Result<handoff::NicDeviceFiles> files_ LINKFIT_GUARDED_BY(mutex_) = MakeError("not read yet");
};

// The NICs whose CDI device `<kind>=<name>` the node's CDI specs declare (handoff/cdi_specs.h),
// read from `spec_dirs` when the discovered NICs change, never per container. Logs each spec file
// that does not parse (its path and why) at each read, and each NIC without a declared CDI device
// once (it goes to containers as device files). Thread-safe.
class NicCdiCache {
 public:
  NicCdiCache(std::string kind, std::vector<std::string> spec_dirs, const NodeAgent& agent)
      : kind_(std::move(kind)), spec_dirs_(std::move(spec_dirs)), agent_(agent) {}
  std::map<std::string, bool> Get();

 private:
  const std::string kind_;
  const std::vector<std::string> spec_dirs_;
  const NodeAgent& agent_;
  Mutex mutex_;
  std::string key_ LINKFIT_GUARDED_BY(mutex_);
  std::map<std::string, bool> declared_ LINKFIT_GUARDED_BY(mutex_);
  std::set<std::string> logged_ LINKFIT_GUARDED_BY(mutex_);  // NICs said to have no CDI device
};

// `handed` (may be null) receives every change of the plugin's ledger.
void RunNriPlugin(const std::string& socket_path, handoff::NriPluginOptions options,
                  const NodeAgent& agent, HandedDevicesView* handed, const std::atomic<bool>& stop);

}  // namespace linkfit::agent
