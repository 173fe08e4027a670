#pragma once

// HttpConnection: a minimal blocking HTTP/1.1 client on one keep-alive TCP connection, for the
// load client only. It sends what Go's net/http sends for kube-scheduler's extender calls
// (POST, Content-Type: application/json, Content-Length, User-Agent: Go-http-client/1.1,
// Accept-Encoding: gzip) and reads one response at a time (one request in flight), so that the
// time it measures is the server's plus loopback, not a client library's.
//
// Thread-safety: none; one connection per thread.

#include <chrono>
#include <string>
#include <string_view>

#include "linkfit/common/result.h"

namespace linkfit::load {

struct HttpResponse {
  int status = 0;
  std::string content_encoding;  // "" or e.g. "gzip"
  std::string body;              // as received (still compressed when content_encoding is set)
};

class HttpConnection {
 public:
  HttpConnection() = default;
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;
  ~HttpConnection();

  // Connects to host:port (IPv4 literal) with TCP_NODELAY. With a positive `timeout`, every
  // later send or receive that waits longer than that fails (a stalled server is an error).
  Result<void> Connect(const std::string& host, int port,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  // Sends one POST and reads the whole response into *response. The connection stays open,
  // unless the response said `Connection: close` (a server that ends kept-alive connections
  // after so many requests): then the next call connects again first, as Go's client does.
  Result<void> Post(std::string_view path, std::string_view body, HttpResponse* response);

  // Sends one GET (as a kubelet probe does) and reads the whole response into *response.
  Result<void> Get(std::string_view path, HttpResponse* response);

  // How a response is waited for. kBlock: in read(), so the client's CPU idles while the server
  // works. kSpin: by polling the socket without blocking until bytes arrive, so the client's CPU
  // never idles. In a virtual machine a CPU that idled (halted) for longer than the hypervisor
  // polls for it is woken by the host scheduler, ~60 µs more for waits past ~145 µs on this
  // project's VM (wake_probe.h measures it): a cost of the client's, which a blocking client adds
  // to every reply that keeps it waiting longer than that and to none that is quicker. The
  // timeout given to Connect holds in both.
  enum class Wait { kBlock, kSpin };
  void set_wait(Wait wait) { wait_ = wait; }

  void Close();

 private:
  Result<void> ReadResponse(HttpResponse* response);
  // Connects again when the last response closed the connection.
  Result<void> Reopen();

  int fd_ = -1;
  std::string host_;
  int port_ = 0;
  std::chrono::milliseconds timeout_{0};
  bool closed_by_server_ = false;  // the last response said Connection: close
  Wait wait_ = Wait::kBlock;
  std::string host_header_;
  std::string head_;    // request head, rebuilt per call (reused capacity)
  std::string buffer_;  // bytes received and not yet consumed
};

// Returns the gzip-decoded body (for checks only; never on a timed path).
Result<std::string> Gunzip(std::string_view compressed);

}  // namespace linkfit::load
