#include "agent/agent_device_plugin.h"

#include <algorithm>
#include <thread>

#include "linkfit/agent/steering.h"
#include "linkfit/common/log.h"

namespace linkfit::agent {

void RunDevicePlugins(const DevicePluginLoopOptions& options, const NodeAgent& agent,
                      const NodePods& pods, const std::atomic<bool>& stop) {
  const handoff::SteeringSource steering = [&options, &pods]() -> Result<handoff::SteeringView> {
    auto listed = ListPodResources(options.pod_resources_socket, std::chrono::milliseconds(1000));
    if (!listed) return tl::unexpected(listed.error());
    handoff::SteeringView view;
    std::vector<std::string> warnings;
    view.plans = ValidPlans(pods.Plans(), options.node_name, &warnings);
    for (const std::string& warning : warnings) log::Warning("device plugin steering: " + warning);
    view.kubelet = HoldingsOf(*listed);
    return view;
  };
  std::unique_ptr<handoff::DevicePlugins> plugins;
  std::string served_document;  // the facts the plugins serve now
  auto next_try = std::chrono::steady_clock::now();
  std::chrono::milliseconds backoff{1000};
  while (!stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const auto spec = agent.current_spec();
    if (!spec) continue;  // nothing discovered yet
    if (plugins && plugins->KubeletRestarted()) {
      log::Warning("device plugin: the kubelet restarted; serving and registering again");
      plugins.reset();
      next_try = std::chrono::steady_clock::now();
    }
    const std::string document = topology::ToTopologyDocument(*spec);
    if (!plugins) {
      if (std::chrono::steady_clock::now() < next_try) continue;
      auto started = handoff::StartDevicePlugins(options.plugin, *spec, steering);
      if (!started) {
        log::Error(started.error().message + "; retrying in " + std::to_string(backoff.count()) +
                   " ms");
        next_try = std::chrono::steady_clock::now() + backoff;
        backoff = std::min(backoff * 2, std::chrono::milliseconds(30000));
        continue;
      }
      plugins = std::move(*started);
      served_document = document;
      backoff = std::chrono::milliseconds(1000);
      continue;
    }
    if (document != served_document) {
      if (auto updated = plugins->Update(*spec); !updated) {
        log::Error(updated.error().message);
        continue;
      }
      served_document = document;
    }
  }
}

}  // namespace linkfit::agent
