#include "linkfit/handoff/nri_connection.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "linkfit/common/log.h"

namespace linkfit::handoff {
namespace {

Result<void> WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t wrote = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote <= 0) return MakeError(std::string("NRI: write: ") + std::strerror(errno));
    bytes.remove_prefix(static_cast<std::size_t>(wrote));
  }
  return {};
}

}  // namespace

Result<int> DialNri(const std::string& socket_path) {
  sockaddr_un address{};
  if (socket_path.size() >= sizeof(address.sun_path)) {
    return MakeError("NRI socket path " + socket_path + " is too long");
  }
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return MakeError(std::string("NRI: socket: ") + std::strerror(errno));
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return MakeError("NRI: cannot connect to " + socket_path + ": " + why);
  }
  return fd;
}

Result<void> ServeNri(int fd, NriPlugin& plugin, const NriServeOptions& options,
                      const std::atomic<bool>& stop) {
  // Register as the Runtime service's client: stream 1, the first odd stream id.
  constexpr std::uint32_t kRegisterStream = 1;
  const TtrpcRequest registration{kRuntimeService,
                                  "RegisterPlugin",
                                  EncodeRegisterPlugin(options.plugin_name, options.plugin_index),
                                  0,
                                  {}};
  auto frame =
      EncodeTtrpcFrame({kRegisterStream, TtrpcType::kRequest, 0, EncodeTtrpcRequest(registration)});
  if (!frame) return tl::unexpected(frame.error());
  if (auto sent = WriteAll(fd, EncodeMuxMessage(kRuntimeConn, *frame)); !sent) return sent;

  const auto started = std::chrono::steady_clock::now();
  bool registered = false;
  MuxReader mux;
  TtrpcReader runtime_replies;
  char buffer[65536];
  while (!stop.load()) {
    if (!registered && std::chrono::steady_clock::now() - started > options.registration_timeout) {
      return MakeError("NRI: the runtime did not answer RegisterPlugin in time");
    }
    pollfd poll_fd{fd, POLLIN, 0};
    const int ready = ::poll(&poll_fd, 1, 200);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return MakeError(std::string("NRI: poll: ") + std::strerror(errno));
    if (ready == 0) continue;
    const ssize_t got = ::recv(fd, buffer, sizeof(buffer), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return {};  // the runtime closed the connection
    if (auto fed = mux.Feed(std::string_view(buffer, static_cast<std::size_t>(got))); !fed) {
      return tl::unexpected(fed.error());
    }
    while (auto incoming = mux.Next()) {
      if (incoming->conn == kPluginConn) {
        std::vector<std::string> replies;
        LINKFIT_ASSIGN_OR_RETURN(replies, plugin.HandleStream(incoming->payload));
        for (const std::string& reply : replies) {
          if (auto sent = WriteAll(fd, EncodeMuxMessage(kPluginConn, reply)); !sent) return sent;
        }
      } else if (incoming->conn == kRuntimeConn) {
        if (auto fed = runtime_replies.Feed(incoming->payload); !fed) {
          return tl::unexpected(fed.error());
        }
        while (auto message = runtime_replies.Next()) {
          if (message->type != TtrpcType::kResponse || message->stream != kRegisterStream) continue;
          auto response = DecodeTtrpcResponse(message->payload);
          if (!response) return tl::unexpected(response.error());
          if (response->status_code != 0) {
            return MakeError("NRI: the runtime refused the registration: " +
                             response->status_message);
          }
          registered = true;
          log::Info("NRI: registered as " + options.plugin_index + "-" + options.plugin_name);
        }
      }
    }
  }
  return {};
}

}  // namespace linkfit::handoff
