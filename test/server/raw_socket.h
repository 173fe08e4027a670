#pragma once

// A raw TCP client socket for the server's tests, so that a test can misbehave as no HTTP library
// would (trickle bytes, pipeline requests, stop half-way). Test-only.
//
// Thread-safety: one thread per socket.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace linkfit::server {

// A raw TCP client socket (so that a test can misbehave as no HTTP library would).
class RawSocket {
 public:
  explicit RawSocket(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 &&
        ::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  RawSocket(RawSocket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;
  ~RawSocket() {
    if (fd_ >= 0) ::close(fd_);
  }

  bool ok() const { return fd_ >= 0; }

  // Stops sending (the server reads the end of the stream); replies can still be read.
  void ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }

  // Reads one HTTP reply with a Content-Length (what this server sends), waiting up to `wait`
  // for it: its status and body, or nullopt if none came whole in time.
  struct Reply {
    int status = 0;
    std::string body;
  };
  std::optional<Reply> ReadReply(std::chrono::milliseconds wait) {
    const auto until = std::chrono::steady_clock::now() + wait;
    for (;;) {
      if (auto reply = TakeReply()) return reply;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      pollfd entry{fd_, POLLIN, 0};
      if (::poll(&entry, 1, static_cast<int>(std::max<long>(0, left.count()))) <= 0) {
        return std::nullopt;
      }
      char buffer[65536];
      const ssize_t got = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (got <= 0) return TakeReply();
      pending_.append(buffer, static_cast<std::size_t>(got));
    }
  }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t sent = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (sent <= 0) return false;
      data.remove_prefix(static_cast<std::size_t>(sent));
    }
    return true;
  }

  // True once the server has closed the connection (end of stream or reset) within `wait`;
  // whatever arrived before that is appended to *received.
  bool ClosedWithin(std::chrono::milliseconds wait, std::string* received) {
    const auto until = std::chrono::steady_clock::now() + wait;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      pollfd entry{fd_, POLLIN, 0};
      const int ready = ::poll(&entry, 1, static_cast<int>(std::max<long>(0, left.count())));
      if (ready <= 0) return false;
      char buffer[4096];
      const ssize_t got = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (got <= 0) return true;
      received->append(buffer, static_cast<std::size_t>(got));
    }
  }

 private:
  // A whole reply from the front of pending_, if there is one.
  std::optional<Reply> TakeReply() {
    const std::size_t header_end = pending_.find("\r\n\r\n");
    if (header_end == std::string::npos || pending_.size() < 12) return std::nullopt;
    const std::string header = pending_.substr(0, header_end);
    std::size_t length = 0;
    const std::size_t at = header.find("Content-Length: ");
    if (at != std::string::npos) length = std::stoul(header.substr(at + 16));
    const std::size_t end = header_end + 4 + length;
    if (pending_.size() < end) return std::nullopt;
    Reply reply{std::stoi(pending_.substr(9, 3)), pending_.substr(header_end + 4, length)};
    pending_.erase(0, end);
    return reply;
  }

  int fd_ = -1;
  std::string pending_;  // bytes read and not yet taken as a reply
};

}  // namespace linkfit::server
