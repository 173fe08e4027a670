#pragma once

// The agent's device plugin loop: serves linkfit's device plugin (handoff/device_plugin.h) with the
// node's current discovery, steering from the API's plans (NodePods) and the kubelet's PodResources
// List; re-serves and re-registers when the kubelet restarts, and retries with backoff while the
// kubelet is not there.
//
// Thread-safety: Run on its own thread; `stop` from any thread.

#include <atomic>
#include <string>

#include "linkfit/agent/node_agent.h"
#include "linkfit/agent/node_pods.h"
#include "linkfit/handoff/device_plugin.h"

namespace linkfit::agent {

struct DevicePluginLoopOptions {
  handoff::DevicePluginConfig plugin;
  std::string node_name;
  std::string pod_resources_socket;  // the kubelet's PodResources socket
};

void RunDevicePlugins(const DevicePluginLoopOptions& options, const NodeAgent& agent,
                      const NodePods& pods, const std::atomic<bool>& stop);

}  // namespace linkfit::agent
