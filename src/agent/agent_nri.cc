#include "agent/agent_nri.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "linkfit/common/log.h"
#include "linkfit/node/nri_connection.h"

namespace linkfit::agent {

void RunNriPlugin(const std::string& socket_path, const node::NriPluginOptions& options,
                  const NodeAgent& agent, const std::atomic<bool>& stop) {
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
    auto fd = node::DialNri(socket_path);
    if (!fd) {
      log::Error(fd.error().message + "; retrying in " + std::to_string(backoff.count()) + " ms");
      continue;
    }
    node::NriPlugin plugin(
        options, [&agent] { return agent.current_spec().value_or(topology::TopologySpec{}); });
    const auto started = std::chrono::steady_clock::now();
    auto served = node::ServeNri(*fd, plugin, {}, stop);
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
