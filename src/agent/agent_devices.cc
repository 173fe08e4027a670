#include "agent/agent_devices.h"

#include <memory>
#include <set>

#include "linkfit/agent/pod_resources.h"
#include "linkfit/common/log.h"

namespace linkfit::agent {

NodeAgent::DevicesFn MakeDevicesFn(std::string socket_path, UidLookup uid_of,
                                   std::set<std::string> nic_resources,
                                   std::set<std::string> gpu_resources) {
  // Each warning is logged once while it lasts (the loop polls every few seconds).
  auto logged = std::make_shared<std::set<std::string>>();
  return [socket_path = std::move(socket_path), uid_of = std::move(uid_of),
          nic_resources = std::move(nic_resources), gpu_resources = std::move(gpu_resources),
          logged](const topology::TopologySpec& spec) -> Result<kube::DevicesInUse> {
    auto pods = ListPodResources(socket_path, std::chrono::seconds(5));
    if (!pods) return tl::unexpected(pods.error());
    DeviceUseReport report = MapDeviceUse(*pods, spec, uid_of, nic_resources, gpu_resources);
    std::set<std::string> now(report.warnings.begin(), report.warnings.end());
    for (const std::string& warning : now) {
      if (logged->count(warning) == 0) log::Warning("devices in use: " + warning);
    }
    *logged = std::move(now);
    return std::move(report.devices);
  };
}

}  // namespace linkfit::agent
