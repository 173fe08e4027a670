#pragma once

// ServeNri: linkfit's plugin on one connection to the container runtime's NRI socket
// (/var/run/nri/nri.sock, or the pre-connected descriptor of NRI_PLUGIN_SOCKET when the runtime
// launched the plugin). It registers (RegisterPlugin on the Runtime connection, as a ttrpc client)
// and serves the runtime's calls on the Plugin connection through NriPlugin until the runtime
// closes the connection, refuses the registration, sends bytes that do not frame, or `stop` is
// set. A closed connection is the runtime's way of dropping a plugin: the caller reconnects, and
// the runtime's Synchronize rebuilds the ledger.
//
// Thread-safety: runs on the calling thread; `stop` may be set from any thread (checked at least
// every 200 ms).

#include <atomic>
#include <chrono>
#include <string>
#include <string_view>

#include "linkfit/common/result.h"
#include "linkfit/handoff/nri_plugin.h"

namespace linkfit::handoff {

struct NriServeOptions {
  std::string plugin_name = "linkfit";
  std::string plugin_index = "10";  // NRI orders plugins by index ("00".."99")
  std::chrono::milliseconds registration_timeout{5000};
};

// Connects to a unix socket; the descriptor is the caller's to close.
Result<int> DialNri(const std::string& socket_path);

// Serves on `fd` (a connected stream socket); returns when the connection ends: an error says
// why (registration refused or timed out, framing broken), success means the runtime closed it
// or `stop` was set.
Result<void> ServeNri(int fd, NriPlugin& plugin, const NriServeOptions& options,
                      const std::atomic<bool>& stop);

}  // namespace linkfit::handoff
