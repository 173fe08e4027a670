#pragma once

// The agent's NRI loop: connects to the runtime's NRI socket, serves linkfit's plugin
// (node/nri_connection.h) with the node's current discovery, and reconnects with backoff when
// the runtime drops the connection. A new plugin each connection: the runtime's Synchronize
// rebuilds the ledger.
//
// Thread-safety: Run on its own thread; `stop` from any thread.

#include <atomic>
#include <string>

#include "linkfit/agent/node_agent.h"
#include "linkfit/node/nri_plugin.h"

namespace linkfit::agent {

void RunNriPlugin(const std::string& socket_path, const node::NriPluginOptions& options,
                  const NodeAgent& agent, const std::atomic<bool>& stop);

}  // namespace linkfit::agent
