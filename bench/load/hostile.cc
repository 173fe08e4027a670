#include "hostile.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>
#include <utility>

namespace linkfit::load {
namespace {

using Clock = std::chrono::steady_clock;

// The slowloris header: a plausible start, then a header line that never ends.
constexpr std::string_view kSlowHeader =
    "POST /scheduler/filter HTTP/1.1\r\nHost: linkfit\r\nContent-Type: application/json\r\n"
    "X-Padding: ";

}  // namespace

long RaiseOpenFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
    ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  return static_cast<long>(limit.rlim_cur);
}

HostileClients::HostileClients(std::string host, int port, int count)
    : host_(std::move(host)), port_(port) {
  sockets_.resize(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < sockets_.size(); ++i) {
    if (i % 2 == 1) {
      sockets_[i].kind = Kind::kSlowloris;
    } else {
      sockets_[i].kind = i % 4 == 0 ? Kind::kSilent : Kind::kKeptAlive;
    }
  }
}

HostileClients::~HostileClients() { Stop(); }

Result<void> HostileClients::Open(Socket& socket) {
  if (socket.fd >= 0) ::close(socket.fd);
  socket.sent = 0;
  socket.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (socket.fd < 0) return MakeError(std::string("socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port_));
  if (::inet_pton(AF_INET, host_.c_str(), &address.sin_addr) != 1) {
    return MakeError("not an IPv4 address: " + host_);
  }
  if (::connect(socket.fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return MakeError("hostile connect: " + std::string(std::strerror(errno)));
  }
  if (socket.kind == Kind::kKeptAlive) {
    constexpr std::string_view kRequest = "GET /healthz HTTP/1.1\r\nHost: linkfit\r\n\r\n";
    if (::send(socket.fd, kRequest.data(), kRequest.size(), MSG_NOSIGNAL) < 0) {
      return MakeError("hostile send: " + std::string(std::strerror(errno)));
    }
  }
  return {};
}

Result<void> HostileClients::Start() {
  for (Socket& socket : sockets_) {
    if (auto ok = Open(socket); !ok) return ok;
  }
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
  return {};
}

void HostileClients::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  for (Socket& socket : sockets_) {
    if (socket.fd >= 0) ::close(socket.fd);
    socket.fd = -1;
  }
}

void HostileClients::Loop() {
  auto next_byte = Clock::now();
  std::vector<pollfd> entries(sockets_.size());
  while (!stop_) {
    // Reopens what the server closed; drains what it sent (replies to the kept-alive GET).
    for (std::size_t i = 0; i < sockets_.size(); ++i) {
      entries[i] = {sockets_[i].fd, POLLIN, 0};
    }
    ::poll(entries.data(), entries.size(), 100);
    for (std::size_t i = 0; i < sockets_.size(); ++i) {
      if ((entries[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buffer[4096];
      const ssize_t got = ::recv(sockets_[i].fd, buffer, sizeof(buffer), MSG_DONTWAIT);
      if (got > 0 || (got < 0 && (errno == EAGAIN || errno == EINTR))) continue;
      ++reopened_;
      if (stop_ || !Open(sockets_[i])) continue;
    }
    if (Clock::now() < next_byte) continue;
    next_byte += std::chrono::seconds(1);
    for (Socket& socket : sockets_) {
      if (socket.kind != Kind::kSlowloris || socket.fd < 0) continue;
      const char byte = socket.sent < kSlowHeader.size() ? kSlowHeader[socket.sent] : 'x';
      if (::send(socket.fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) ++socket.sent;
    }
  }
}

}  // namespace linkfit::load
