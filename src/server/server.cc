// The Boost.Asio/Beast implementation of Server: an event-driven front end in which a connection
// costs a socket, a small state object and its read buffer, never a thread.
//
//   An accept thread takes new connections and gives each to one of the I/O loops
//   (ServerOptions::io_threads), preferring one that is not running a verb. An I/O loop is one
//   thread with an io_context that only it runs: a connection lives on one loop for its whole
//   life, and its TLS handshake, reading and parsing, /healthz and /readyz, and writing the
//   reply all happen on that thread, so a request never waits for another thread to wake up
//   (on a virtual machine each wake-up, context switch and system call costs microseconds).
//   Handler threads (ServerOptions::threads) run everything else that calls the ExtenderHandler
//   or renders metrics. Filter and prioritize may run on their loop's thread instead while
//   another loop stays free (see Handle).
//
// Each connection is a small state machine, driven on its loop's thread:
//
//   Idle ----first byte----> Reading ----complete----> Handling ----> Writing --+--> Idle
//    |  (idle timeout)        | (request deadline)   (handler thread,  (write     |
//    v                        v                       or inline)       timeout)   v
//  closed                  closed, nothing served                             closed
//
// A connection's deadlines share one timer (see ExpireAt).
//
// The request deadline (read_timeout) starts with the request's first byte and is a total for
// the header and the body: a client cannot extend it by trickling bytes. The idle timeout is
// read_timeout before the first request (a client that connects and says nothing is not a
// scheduler) and keep_alive_timeout between requests.
#include "linkfit/server/server.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <openssl/err.h>

#include "linkfit/common/log.h"
#include "linkfit/common/mutex.h"
#include "linkfit/common/strings.h"
#include "linkfit/server/prometheus_metrics.h"
#include "server/connection.h"
#include "server/http_server.h"
#include "server/routes.h"
#include "server/tls.h"

namespace linkfit::server {
namespace asio_server {

bool HttpServer::Track(const std::shared_ptr<ConnectionBase>& connection) {
  MutexLock lock(connections_mutex_);
  if (stopping_) return false;
  connections_.emplace(connection.get(), connection);
  return true;
}

void HttpServer::Untrack(const ConnectionBase* connection) {
  MutexLock lock(connections_mutex_);
  connections_.erase(connection);
}

void HttpServer::CountTooLarge(std::string_view target) {
  const RouteMatch match = MatchRoute(PathOf(target), options_.url_prefix);
  if (match.route == Route::kVerb) metrics_.CountRequest(match.verb, "too_large");
}

template <typename Done>
void HttpServer::Handle(IoLoop& loop, Request& request, Clock::time_point deadline, Done done) {
  const std::string path = PathOf(View(request.target()));
  const RouteMatch match = MatchRoute(path, options_.url_prefix);
  const http::verb method = request.method();
  const bool is_post = method == http::verb::post;
  const bool method_ok =
      match.post ? is_post : (method == http::verb::get || method == http::verb::head);
  const std::string method_name(request.method_string());

  if (match.route != Route::kNotFound && !Serves(options_.routes, match.route)) {
    return done(Outgoing{
        JsonError(404, path + " is served on the " +
                           (options_.routes == RouteSet::kExtender ? "operations" : "extender") +
                           " listener, not this one")});
  }
  if (match.route == Route::kNotFound) {
    return done(Outgoing{JsonError(404, "no route for " + method_name + " " + path)});
  }
  if (!method_ok) {
    return done(Outgoing{JsonError(405, "method " + method_name + " not allowed for " + path +
                                            "; use " + (match.post ? "POST" : "GET")),
                         match.post ? "POST" : "GET, HEAD"});
  }
  if (match.route == Route::kHealthz) return done(Outgoing{Text(200, "ok")});
  if (match.route == Route::kReadyz) {
    bool ready = false;
    try {
      ready = handler_.Ready();
    } catch (...) {
      ready = false;
    }
    return done(Outgoing{ready ? Text(200, "ok") : Text(503, "not ready")});
  }
  const bool needs_body = match.post;
  if (needs_body && request.body().empty()) {
    if (match.route == Route::kVerb) metrics_.CountRequest(match.verb, "empty_body");
    return done(Outgoing{JsonError(400, "empty request body; expected JSON")});
  }
  // Filter and prioritize are short and CPU-bound (no I/O, no locks held for long): one runs on
  // its loop's thread when that leaves another loop free for new connections and the probes,
  // which saves two thread hand-offs on the scheduler's critical path. Its loop's other
  // connections wait for it (a few milliseconds at most: a body over kInlineBodyBytes, such as a
  // filter with full Node objects, goes to a handler thread).
  if (match.route == Route::kVerb &&
      (match.verb == Verb::kFilter || match.verb == Verb::kPrioritize) &&
      request.body().size() <= kInlineBodyBytes) {
    if (inline_verbs_.fetch_add(1) < static_cast<int>(loops_.size()) - 1) {
      loop.in_verb.store(true);
      Outgoing outgoing{Run(match, request.body())};
      loop.in_verb.store(false);
      inline_verbs_.fetch_sub(1);
      return done(std::move(outgoing));
    }
    inline_verbs_.fetch_sub(1);
  }
  // The rest runs on a handler thread. The work guard keeps the loop running until the reply
  // is posted back, even when Stop has closed everything else.
  asio::post(*handlers_, [this, match, path, deadline, &request, done = std::move(done),
                          work = asio::make_work_guard(loop.context())]() mutable {
    if (Clock::now() > deadline) {
      // The client's deadline passed while the request waited for a handler thread; whatever
      // it decides now would arrive after the client gave up.
      if (match.route == Route::kVerb) metrics_.CountRequest(match.verb, "deadline");
      done(Outgoing{JsonError(503, "the request waited past its deadline"), {}, true});
      return;
    }
    // `match.node` points into the caller's `path`; re-derive it from this copy.
    const RouteMatch local = MatchRoute(path, options_.url_prefix);
    Outgoing outgoing{Run(local, request.body())};
    done(std::move(outgoing));
  });
}

HttpReply HttpServer::Run(const RouteMatch& match, const std::string& body) {
  try {
    switch (match.route) {
      case Route::kMetrics:
        return HttpReply{200, metrics_.Render(), std::string(kPrometheusText)};
      case Route::kInspect: {
        const std::string node(match.node);
        return CallHandler("inspect", [&] { return handler_.Inspect(node); });
      }
      case Route::kRelease:
        return CallHandler("release", [&] { return handler_.Release(body); });
      case Route::kExplain:
        return CallHandler("explain", [&] { return handler_.Explain(body); });
      case Route::kVerb:
        return CallVerb(match.verb, body);
      case Route::kHealthz:
      case Route::kReadyz:
      case Route::kNotFound:
        break;
    }
  } catch (const std::exception& e) {
    return JsonError(500, std::string("internal error: ") + e.what());
  } catch (...) {
  }
  return JsonError(500, "internal error");
}

HttpReply HttpServer::CallVerb(Verb verb, const std::string& request_body) {
  const auto start = Clock::now();
  // Every body comes padded (PadBody): filter and prioritize are parsed where they lie.
  const Body body(request_body,
                  request_body.capacity() - request_body.size() >= kBodyPadding ? kBodyPadding : 0);
  HttpReply reply;
  std::string_view outcome = "exception";
  try {
    switch (verb) {
      case Verb::kFilter:
        reply = handler_.Filter(body);
        break;
      case Verb::kPrioritize:
        reply = handler_.Prioritize(body);
        break;
      case Verb::kBind:
        reply = handler_.Bind(body.text);
        break;
      case Verb::kPreempt:
        reply = handler_.Preempt(body.text);
        break;
    }
    outcome = OutcomeOf(reply.status);
  } catch (const std::exception& e) {
    log::Error(std::string("handler for ") + std::string(VerbName(verb)) + " threw: " + e.what());
    reply = JsonError(500, std::string("internal error: ") + e.what());
  } catch (...) {
    log::Error(std::string("handler for ") + std::string(VerbName(verb)) + " threw");
    reply = JsonError(500, "internal error");
  }
  const std::chrono::duration<double> seconds = Clock::now() - start;
  metrics_.ObserveRequest(verb, outcome, seconds.count());
  return reply;
}

template <typename Call>
HttpReply HttpServer::CallHandler(std::string_view what, Call&& call) {
  try {
    return call();
  } catch (const std::exception& e) {
    log::Error(std::string(what) + " handler threw: " + e.what());
    return JsonError(500, std::string("internal error: ") + e.what());
  } catch (...) {
    log::Error(std::string(what) + " handler threw");
    return JsonError(500, "internal error");
  }
}

void HttpServer::Accept() {
  acceptor_.async_wait(tcp::acceptor::wait_read,
                       [this](beast::error_code error) { OnAcceptable(error); });
}

// Accepts what is pending (the listening socket is non-blocking), each connection straight onto
// the loop chosen for it, then waits again.
void HttpServer::OnAcceptable(beast::error_code error) {
  if (stopping_ || !acceptor_.is_open()) return;
  for (int accepted = 0; !error && accepted < 64; ++accepted) {
    IoLoop& loop = PickLoop();
    tcp::socket socket(loop.context());
    acceptor_.accept(socket, error);
    if (error == asio::error::would_block || error == asio::error::try_again) {
      error = {};
      break;
    }
    if (error == asio::error::connection_aborted) {  // reset before it was accepted
      error = {};
      continue;
    }
    if (!error) Open(loop, std::move(socket));
  }
  if (error && error != asio::error::operation_aborted) {
    // Out of file descriptors or memory: wait a little rather than spin, then go on.
    log::Warning("accept on port " + std::to_string(port_.load()) + ": " + error.message());
    accept_retry_.expires_after(std::chrono::milliseconds(50));
    accept_retry_.async_wait([this](beast::error_code) {
      if (!stopping_) Accept();
    });
    return;
  }
  if (!error) Accept();
}

// The loop with the fewest connections among those not running a verb (all of them when every
// one is), the next in turn among equals.
IoLoop& HttpServer::PickLoop() {
  const std::size_t n = loops_.size();
  IoLoop* best = nullptr;
  bool best_busy = true;
  int best_count = 0;
  for (std::size_t i = 0; i < n; ++i) {
    IoLoop& loop = *loops_[(next_loop_ + i) % n];
    const bool busy = loop.in_verb.load();
    const int count = loop.connections.load();
    if (best == nullptr || (best_busy && !busy) || (busy == best_busy && count < best_count)) {
      best = &loop;
      best_busy = busy;
      best_count = count;
    }
  }
  next_loop_ = (next_loop_ + 1) % n;
  return *best;
}

void HttpServer::Open(IoLoop& loop, tcp::socket socket) {
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  if (tls_) {
    using TlsStream = beast::ssl_stream<tcp::socket>;
    std::make_shared<Connection<TlsStream>>(*this, loop, TlsStream(std::move(socket), *tls_))
        ->Begin();
  } else {
    std::make_shared<Connection<tcp::socket>>(*this, loop, std::move(socket))->Begin();
  }
}

Result<void> HttpServer::Start() {
  if (stopping_) return MakeError("server was stopped before Start");
  if (started_.exchange(true)) return MakeError("server already started");
  const std::string address = options_.host + ":" + std::to_string(options_.port);
  beast::error_code error;
  tcp::resolver resolver(accept_io_);
  const auto endpoints =
      resolver.resolve(options_.host, std::to_string(options_.port),
                       tcp::resolver::passive | tcp::resolver::numeric_service, error);
  if (error || endpoints.empty()) {
    started_ = false;
    return MakeError("cannot listen on " + address + ": " +
                     (error ? error.message() : std::string("no address")));
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  // SO_REUSEADDR allows a quick restart; no SO_REUSEPORT, so that a second server cannot bind
  // the same port silently and split the traffic.
  if (acceptor_.open(endpoint.protocol(), error) ||
      acceptor_.set_option(tcp::acceptor::reuse_address(true), error) ||
      acceptor_.bind(endpoint, error) ||
      acceptor_.listen(asio::socket_base::max_listen_connections, error)) {
    beast::error_code ignored;
    acceptor_.close(ignored);
    started_ = false;
    return MakeError("cannot listen on " + address + ": " + error.message());
  }
  port_ = acceptor_.local_endpoint(error).port();
  MutexLock lock(wait_mutex_);
  try {
    handlers_ = std::make_unique<asio::thread_pool>(static_cast<std::size_t>(options_.threads));
    acceptor_.non_blocking(true);
    Accept();
    const auto run = [](asio::io_context& context) {
      for (;;) {
        try {
          context.run();
          return;
        } catch (const std::exception& e) {
          log::Error(std::string("server I/O thread: ") + e.what());
        }
      }
    };
    threads_.emplace_back([this, run] { run(accept_io_); });
    for (const auto& loop : loops_) {
      threads_.emplace_back([run, &loop = *loop] { run(loop.context()); });
    }
  } catch (const std::exception& e) {
    return MakeError(std::string("cannot start the server threads: ") + e.what());
  }
  log::Info("linkfit server listening on " + options_.host + ":" + std::to_string(port_.load()) +
            (tls_ ? " (TLS)" : ""));
  return {};
}

void HttpServer::Stop() {
  std::vector<std::shared_ptr<ConnectionBase>> live;
  {
    MutexLock lock(connections_mutex_);
    if (stopping_.exchange(true) || !started_) return;
    for (const auto& [key, weak] : connections_) {
      if (auto connection = weak.lock()) live.push_back(std::move(connection));
    }
  }
  // On the accept thread, after any accept in progress: every connection accepted so far has its
  // first step queued on its loop (which closes it, the server stopping), so only now may a loop
  // stop for want of work. Each loop then runs until its last connection has closed.
  asio::post(accept_io_, [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
    accept_retry_.cancel();
    for (const auto& loop : loops_) loop->Release();
    accept_guard_.reset();  // the accept thread ends once nothing else is queued on it
  });
  for (const auto& connection : live) connection->Shutdown();
}

void HttpServer::Wait() {
  MutexLock lock(wait_mutex_);
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
  if (handlers_) handlers_->join();
}

}  // namespace asio_server

namespace {

Result<void> ValidateOptions(const ServerOptions& options) {
  if (options.port < 0 || options.port > 65535) {
    return MakeError("port " + std::to_string(options.port) + " is out of range 0..65535");
  }
  if (!options.url_prefix.empty() &&
      (options.url_prefix.front() != '/' || options.url_prefix.back() == '/')) {
    return MakeError("url_prefix " + QuoteForMessage(options.url_prefix) +
                     " must start with '/' and not end with '/'");
  }
  if (options.threads < 1) return MakeError("threads must be at least 1");
  if (options.io_threads < 1) return MakeError("io_threads must be at least 1");
  if (options.max_body_bytes == 0) return MakeError("max_body_bytes must be positive");
  if (options.keep_alive_max_requests == 0) {
    return MakeError("keep_alive_max_requests must be positive");
  }
  if (options.read_timeout.count() <= 0 || options.write_timeout.count() <= 0 ||
      options.keep_alive_timeout.count() <= 0) {
    return MakeError("read_timeout, write_timeout and keep_alive_timeout must be positive");
  }
  const TlsOptions& tls = options.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return MakeError("TLS needs both cert_file and key_file");
  }
  if (!tls.enabled() && (!tls.client_ca_file.empty() || tls.require_client_cert)) {
    return MakeError("client certificate verification needs TLS (cert_file and key_file)");
  }
  if (tls.require_client_cert && tls.client_ca_file.empty()) {
    return MakeError("require_client_cert needs client_ca_file");
  }
  return {};
}

}  // namespace

Result<ServerPtr> NewServer(const ServerOptions& options, ExtenderHandler& handler,
                            PrometheusMetrics& metrics) {
  if (auto valid = ValidateOptions(options); !valid) return tl::unexpected(valid.error());
  try {
    std::unique_ptr<boost::asio::ssl::context> tls;
    if (options.tls.enabled()) {
      ERR_clear_error();
      tls = std::make_unique<boost::asio::ssl::context>(boost::asio::ssl::context::tls_server);
      std::string error;
      if (!tls::ConfigureTls(*tls->native_handle(), options.tls, error)) return MakeError(error);
    }
    return ServerPtr(
        std::make_unique<asio_server::HttpServer>(options, handler, metrics, std::move(tls)));
  } catch (const std::exception& e) {
    return MakeError(std::string("cannot create the HTTP server: ") + e.what());
  }
}

}  // namespace linkfit::server
