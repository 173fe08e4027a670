#pragma once

// FakeDeviceManager: the kubelet's device manager as seen by device plugins, for tests. It serves
// the Registration service on <temp dir>/kubelet.sock, dials every plugin that registers, reads its
// options and follows its ListAndWatch stream, and admits pods the way the kubelet's
// devicesToAllocate does (../shared/design/node-handoff.md §1.2), re-implemented here:
//
//   - containers one at a time: init containers in order, then app containers;
//   - a container's devices come first from its pod's non-restartable init containers' devices
//     (picked in random order, as from a Go set), without asking the plugin;
//   - available = healthy − in use; with a NUMA hint, split into aligned, unaligned and
//     no-affinity devices; GetPreferredAllocation is asked (when the plugin offers it) with
//     available ∪ chosen-so-far, must-include = chosen-so-far and the container's total; only
//     preferred ∩ available is kept; a shortfall is filled in random order (aligned first); when
//     the aligned devices exactly cover the need the plugin is not asked;
//   - Allocate with the final IDs; its annotations become the container's annotations, its envs
//     the container's environment, its devices the container's device nodes;
//   - at a container's start, PreStartContainer with its IDs, for plugins that require it.
//
// The PodResources view (pods the kubelet knows, their containers' devices) shows a pod from the
// moment its admission starts, as the kubelet's does; a listener is told of every change.
//
// Thread-safety: every method may be called from any thread; the listener is called on the
// admitting thread, outside the manager's lock.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "linkfit/agent/pod_resources.h"
#include "linkfit/common/result.h"

namespace linkfit::testing {

struct FakePodSpec {
  std::string pod_namespace = "ml";
  std::string name;
  struct Container {
    std::string name;
    bool init = false;
    bool restartable = false;             // a sidecar: an init container that keeps running
    std::map<std::string, int> requests;  // resource -> count
  };
  std::vector<Container> containers;
  std::optional<int> numa_hint;  // the Topology Manager's preferred NUMA node, if any
};

struct AdmittedContainer {
  std::map<std::string, std::vector<std::string>> ids;  // resource -> device IDs, sorted
  std::map<std::string, std::string> annotations;       // from the plugins' Allocate answers
  std::map<std::string, std::string> envs;              // likewise
  std::vector<std::string> devices;  // likewise: "container_path=host_path:permissions"
  bool asked_preferred = false;      // GetPreferredAllocation was called
};

class FakeDeviceManager {
 public:
  virtual ~FakeDeviceManager() = default;
  virtual const std::string& directory() const = 0;
  // Waits until `resource` is registered and has listed at least `devices` devices.
  virtual bool WaitForDevices(const std::string& resource, std::size_t devices,
                              std::chrono::milliseconds timeout) const = 0;
  // The devices a plugin listed last (ID -> healthy), empty when unknown.
  virtual std::map<std::string, bool> Devices(const std::string& resource) const = 0;
  // Admits a pod; an error names the container and resource that could not be allocated (the
  // pod then holds nothing).
  virtual Result<std::map<std::string, AdmittedContainer>> Admit(const FakePodSpec& pod) = 0;
  // The kubelet starts an admitted container: PreStartContainer for each resource it holds whose
  // plugin requires it; an error is the plugin's refusal.
  virtual Result<void> StartContainer(const std::string& pod_namespace, const std::string& name,
                                      const std::string& container) = 0;
  // The pod ended: its devices are free again.
  virtual void Remove(const std::string& pod_namespace, const std::string& name) = 0;
  virtual std::vector<agent::PodDeviceUse> PodResources() const = 0;
  virtual void SetListener(std::function<void(std::vector<agent::PodDeviceUse>)> listener) = 0;
  // Registrations received so far (a plugin that re-registers counts again).
  virtual int registrations() const = 0;
  // The kubelet restarts: it stops serving, forgets every plugin and its devices (admitted pods
  // stay, as in its checkpoint), removes every socket in its directory and serves Registration
  // again on a new kubelet.sock. Plugins must notice and register again.
  virtual Result<void> Restart() = 0;
};

// Creates a temporary directory and serves Registration there; `seed` drives every random choice.
Result<std::unique_ptr<FakeDeviceManager>> StartFakeDeviceManager(unsigned seed);

}  // namespace linkfit::testing
