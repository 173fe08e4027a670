#pragma once

// Server: linkfit's HTTP front end. It owns transport only: routes, body-size limits, timeouts,
// keep-alive, TLS (optionally mTLS) and the status codes for transport problems. What a body
// means is the ExtenderHandler's business (server/handler.h); the server never decides a
// placement.
//
// Routes (the verb prefix is ServerOptions::url_prefix, "/scheduler" by default):
//
//   POST {prefix}/filter|prioritize|bind|preempt  -> ExtenderHandler::Filter/... (exact body)
//   GET  /inspect, /inspect/{node}                -> ExtenderHandler::Inspect
//   POST /explain                                 -> ExtenderHandler::Explain
//   GET  /healthz                                 -> 200 "ok" while the process serves
//   GET  /readyz                                  -> 200 when ExtenderHandler::Ready(), else 503
//   GET  /metrics                                 -> Prometheus text exposition
//
// Every error the server itself answers has the extender protocol's shape {"Error":"..."}
// (spec/extender-protocol.md): unknown paths get 404, known paths with the wrong method 405 (with
// Allow), an empty body on a POST route 400, a body over max_body_bytes 413, a malformed request
// 400, and anything the handler throws 500: no request can stop the server.
// The time spent in the handler is reported per verb through PrometheusMetrics::ObserveRequest
// with the outcome "ok" (2xx), "bad_request" (4xx), "error" (5xx) or "exception"; the extender
// module therefore must not report ObserveRequest itself.
//
// Design (event-driven, Boost.Asio/Beast): a connection costs a socket, a small state object and
// a read buffer while a request arrives; it never holds a thread. An accept thread hands each new
// connection to one of a few I/O loops (ServerOptions::io_threads), each a thread with an event
// loop of its own, preferring a loop that is not running a verb; the connection stays on that
// loop, which runs its TLS handshake, reads and parses its requests, writes its replies and
// answers /healthz and /readyz itself, so a request's work never waits for another thread to
// wake. The handler threads (ServerOptions::threads) run every other call into the
// ExtenderHandler and /metrics, so a verb in progress delays neither other connections nor the
// health checks. The exception saves the scheduler's critical path two thread hand-offs: a
// filter or prioritize (short, CPU-bound) with a body of up to 1 MiB runs on its connection's
// loop while that leaves at least one loop free (io_threads - 1 of them at a time); the other
// connections of that loop wait for it (a few milliseconds), new ones go to a free loop. Hundreds
// of idle or slow connections therefore cost file descriptors and a little memory, not service.
// Deadlines, all enforced by the server:
//   - a request (its header and its body) must arrive within read_timeout of its first byte; the
//     deadline is a total, so a client that trickles bytes cannot extend it, and a request that
//     misses it is dropped without a reply and never reaches the handler;
//   - a request still waiting for a handler thread when its deadline passes gets 503 and is not
//     handled (its client has given up);
//   - a new connection must start its first request within read_timeout (a TLS handshake counts
//     against it), and a kept-alive connection its next request within keep_alive_timeout;
//   - a reply must be taken within write_timeout.
// A connection that breaks a deadline is closed.
//
// Lifecycle:  NewServer --> Start (bound, accepting) --> Stop --> (Wait returns)
//
// Thread-safety: Start, Stop and Wait may be called from different threads (typically Start and
// Wait from main and Stop from a signal-handling thread). Stop closes the listening socket and
// every connection that is idle or still receiving a request; requests being handled finish and
// their replies are written (then those connections close), so Wait returns promptly. Stop and
// Wait are idempotent. The destructor stops and waits. The handler is called concurrently from
// the handler threads and (filter and prioritize) the I/O threads, and ExtenderHandler::Ready
// from the I/O threads.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "linkfit/common/result.h"
#include "linkfit/server/handler.h"

namespace linkfit::server {

class PrometheusMetrics;

struct TlsOptions {
  // PEM certificate chain and private key. TLS is on when both are set.
  std::string cert_file;
  std::string key_file;
  // PEM CA bundle used to verify client certificates. Set it to verify certificates that
  // clients present; with require_client_cert a client without a valid certificate is refused
  // during the handshake (mTLS).
  std::string client_ca_file;
  bool require_client_cert = false;

  bool enabled() const { return !cert_file.empty() && !key_file.empty(); }
};

// Which routes a listener serves. With an operations address linkfit runs two listeners, each
// with its own I/O and handler threads, so that a scrape storm or a slow client of the operations
// routes never delays a scheduling call.
enum class RouteSet {
  kAll,         // every route (one listener)
  kExtender,    // the verbs, /standalone/release, /healthz and /readyz
  kOperations,  // /healthz, /readyz, /metrics, /inspect, /explain
};

struct ServerOptions {
  RouteSet routes = RouteSet::kAll;
  std::string host = "0.0.0.0";
  // 0 binds a free port; Server::port() returns the one chosen.
  int port = 8888;
  // Prefix of the extender verbs, without a trailing '/' ("" serves them at "/filter" ...).
  std::string url_prefix = "/scheduler";
  TlsOptions tls;

  std::size_t max_body_bytes = std::size_t{64} << 20;
  // The whole-request deadline, from a request's first byte to its last (and the time a new
  // connection has to start its first request).
  std::chrono::milliseconds read_timeout{10000};
  std::chrono::milliseconds write_timeout{10000};
  // Handler threads: the most handler calls (verbs, /inspect, /explain, /metrics) that run at
  // once; further complete requests queue for one. Connections do not hold them.
  int threads = 16;
  // I/O threads (one event loop each): sockets, TLS, HTTP parsing, /healthz and /readyz. Two
  // keep the health checks answered while one runs a verb or parses a large body.
  int io_threads = 2;
  // Go's http.Transport closes idle connections after 90 s; the server keeps them at least as
  // long, and for effectively unlimited requests, so that kube-scheduler's connection is reused.
  // An idle connection holds no thread, so a long timeout costs only a file descriptor.
  std::chrono::seconds keep_alive_timeout{90};
  std::size_t keep_alive_max_requests = 100000;
};

class Server {
 public:
  virtual ~Server() = default;

  // Binds and starts accepting. Returns once the socket is listening, so a client may connect
  // as soon as Start returns. An error names the address (in use, permission, bad host).
  // REQUIRES: called at most once.
  virtual Result<void> Start() = 0;

  // The bound port (the chosen one when ServerOptions::port was 0); 0 before Start.
  virtual int port() const = 0;

  // Stops accepting, finishes requests in flight and closes keep-alive connections.
  virtual void Stop() = 0;

  // Blocks until the server has stopped (after Stop, or at once if Start was never called or
  // failed).
  virtual void Wait() = 0;
};

using ServerPtr = std::unique_ptr<Server>;

// Returns a server for `options`, or an error naming the bad option (an unreadable certificate
// or key, a key that does not match the certificate, an unreadable client CA, a bad prefix).
// `handler` and `metrics` must outlive the server.
Result<ServerPtr> NewServer(const ServerOptions& options, ExtenderHandler& handler,
                            PrometheusMetrics& metrics);

}  // namespace linkfit::server
