#include "http_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>

#include "linkfit/common/strings.h"

namespace linkfit::load {
namespace {

bool HeaderNameIs(std::string_view line, std::string_view name) {
  if (line.size() <= name.size() || line[name.size()] != ':') return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char a = line[i] >= 'A' && line[i] <= 'Z' ? static_cast<char>(line[i] + 32) : line[i];
    if (a != name[i]) return false;
  }
  return true;
}

std::string_view HeaderValue(std::string_view line, std::string_view name) {
  return Trim(line.substr(name.size() + 1));
}

}  // namespace

HttpConnection::~HttpConnection() { Close(); }

void HttpConnection::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<void> HttpConnection::Connect(const std::string& host, int port,
                                     std::chrono::milliseconds timeout) {
  Close();
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return MakeError(std::string("socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) {
    return MakeError("not an IPv4 address: " + host);
  }
  if (timeout.count() > 0) {
    timeval limit{};
    limit.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    limit.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  }
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    return MakeError("connect " + host + ":" + std::to_string(port) + ": " + std::strerror(errno));
  }
  int yes = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  host_header_ = host + ":" + std::to_string(port);
  host_ = host;
  port_ = port;
  timeout_ = timeout;
  closed_by_server_ = false;
  buffer_.clear();
  return {};
}

Result<void> HttpConnection::Reopen() {
  if (!closed_by_server_) return {};
  return Connect(host_, port_, timeout_);
}

Result<void> HttpConnection::Post(std::string_view path, std::string_view body,
                                  HttpResponse* response) {
  if (fd_ < 0) return MakeError("not connected");
  if (auto reopened = Reopen(); !reopened) return reopened;
  // Header order and values as Go's net/http client writes them.
  head_.clear();
  head_.append("POST ").append(path).append(" HTTP/1.1\r\nHost: ").append(host_header_);
  head_.append("\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: ");
  head_.append(std::to_string(body.size()));
  head_.append("\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n");
  std::size_t head_sent = 0;
  std::size_t body_sent = 0;
  while (head_sent < head_.size() || body_sent < body.size()) {
    iovec parts[2];
    int count = 0;
    if (head_sent < head_.size()) {
      parts[count++] = {head_.data() + head_sent, head_.size() - head_sent};
    }
    if (body_sent < body.size()) {
      parts[count++] = {const_cast<char*>(body.data()) + body_sent, body.size() - body_sent};
    }
    const ssize_t written = ::writev(fd_, parts, count);
    if (written < 0) {
      if (errno == EINTR) continue;
      return MakeError(std::string("write: ") + std::strerror(errno));
    }
    auto left = static_cast<std::size_t>(written);
    const std::size_t to_head = std::min(left, head_.size() - head_sent);
    head_sent += to_head;
    body_sent += left - to_head;
  }
  return ReadResponse(response);
}

Result<void> HttpConnection::Get(std::string_view path, HttpResponse* response) {
  if (fd_ < 0) return MakeError("not connected");
  if (auto reopened = Reopen(); !reopened) return reopened;
  head_.clear();
  head_.append("GET ").append(path).append(" HTTP/1.1\r\nHost: ").append(host_header_);
  head_.append("\r\nUser-Agent: kube-probe/1.29\r\nAccept: */*\r\n\r\n");
  std::size_t sent = 0;
  while (sent < head_.size()) {
    const ssize_t written = ::write(fd_, head_.data() + sent, head_.size() - sent);
    if (written < 0) {
      if (errno == EINTR) continue;
      return MakeError(std::string("write: ") + std::strerror(errno));
    }
    sent += static_cast<std::size_t>(written);
  }
  return ReadResponse(response);
}

Result<void> HttpConnection::ReadResponse(HttpResponse* response) {
  // Spinning, the deadline is checked every so many empty polls (a poll is a system call of a
  // few hundred nanoseconds; the clock is read far less often than that).
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  const auto fill = [&]() -> Result<void> {
    char chunk[1 << 16];
    for (std::uint64_t polls = 1;; ++polls) {
      const ssize_t got = wait_ == Wait::kSpin ? ::recv(fd_, chunk, sizeof(chunk), MSG_DONTWAIT)
                                               : ::read(fd_, chunk, sizeof(chunk));
      if (got > 0) {
        buffer_.append(chunk, static_cast<std::size_t>(got));
        return {};
      }
      if (got == 0) return MakeError("server closed the connection");
      if (wait_ == Wait::kSpin && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (timeout_.count() > 0 && polls % 1024 == 0 &&
            std::chrono::steady_clock::now() > deadline) {
          return MakeError("read: no reply within " + std::to_string(timeout_.count()) + " ms");
        }
        continue;
      }
      if (errno != EINTR) return MakeError(std::string("read: ") + std::strerror(errno));
    }
  };
  std::size_t head_end = 0;
  while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    if (auto ok = fill(); !ok) return ok;
  }
  const std::string_view head(buffer_.data(), head_end);
  if (head.size() < 12 || !StartsWith(head, "HTTP/1.1 ")) return MakeError("bad status line");
  response->status = 0;
  std::from_chars(head.data() + 9, head.data() + 12, response->status);
  response->content_encoding.clear();
  std::size_t length = 0;
  bool have_length = false;
  closed_by_server_ = false;
  std::size_t line_start = head.find("\r\n") + 2;
  while (line_start < head.size()) {
    std::size_t line_end = head.find("\r\n", line_start);
    if (line_end == std::string_view::npos) line_end = head.size();
    const std::string_view line = head.substr(line_start, line_end - line_start);
    if (HeaderNameIs(line, "content-length")) {
      const auto value = ParseInt(HeaderValue(line, "content-length"));
      if (!value || *value < 0) return MakeError("bad Content-Length");
      length = static_cast<std::size_t>(*value);
      have_length = true;
    } else if (HeaderNameIs(line, "content-encoding")) {
      response->content_encoding = std::string(HeaderValue(line, "content-encoding"));
    } else if (HeaderNameIs(line, "connection")) {
      std::string value(HeaderValue(line, "connection"));
      std::transform(value.begin(), value.end(), value.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      closed_by_server_ = value == "close";
    } else if (HeaderNameIs(line, "transfer-encoding")) {
      return MakeError("chunked responses are not supported by the load client");
    }
    line_start = line_end + 2;
  }
  if (!have_length) return MakeError("response without Content-Length");
  const std::size_t body_start = head_end + 4;
  while (buffer_.size() < body_start + length) {
    if (auto ok = fill(); !ok) return ok;
  }
  response->body.assign(buffer_, body_start, length);
  buffer_.erase(0, body_start + length);
  return {};
}

Result<std::string> Gunzip(std::string_view compressed) {
  z_stream stream{};
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) return MakeError("inflateInit2 failed");
  std::string out;
  char chunk[1 << 16];
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  int code = Z_OK;
  while (code != Z_STREAM_END) {
    stream.next_out = reinterpret_cast<Bytef*>(chunk);
    stream.avail_out = sizeof(chunk);
    code = inflate(&stream, Z_NO_FLUSH);
    if (code != Z_OK && code != Z_STREAM_END) {
      inflateEnd(&stream);
      return MakeError("gzip body does not decode");
    }
    out.append(chunk, sizeof(chunk) - stream.avail_out);
  }
  inflateEnd(&stream);
  return out;
}

}  // namespace linkfit::load
