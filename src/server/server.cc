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
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

// GCC's -Wnull-dereference fires inside Asio's scheduler once it is inlined here (a false
// positive in a system header that the optimiser reports at the inlining site).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#pragma GCC diagnostic pop
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "linkfit/common/log.h"
#include "linkfit/common/strings.h"
#include "linkfit/server/prometheus_metrics.h"
#include "server/routes.h"
#include "server/tls.h"

namespace linkfit::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using routes::EscapeJson;
using routes::MatchRoute;
using routes::PathOf;
using routes::Route;
using routes::RouteMatch;
using routes::Serves;
using tls::ConfigureTls;

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kText = "text/plain; charset=utf-8";
constexpr std::string_view kPrometheusText = "text/plain; version=0.0.4; charset=utf-8";
// Request line and headers; kube-scheduler's are a few hundred bytes.
constexpr std::uint32_t kHeaderLimit = 64 * 1024;
// How long a connection that is being closed after an error reply keeps discarding what the
// client still sends, so that the reply is read before the kernel answers with a reset.
constexpr std::chrono::seconds kLingerTime{1};
// The most a body read reserves ahead (Beast reads at most 64 KiB at a time).
constexpr std::uint64_t kReadChunk = 64 * 1024;
// The largest filter or prioritize body run on a loop's thread: 1 MiB is ~15,000 node names
// (a few milliseconds of work); bodies with full Node objects are larger and go to a handler
// thread.
constexpr std::size_t kInlineBodyBytes = std::size_t{1} << 20;

// The extender protocol's error shape (spec/extender-protocol.md): {"Error":"..."}.
HttpReply JsonError(int status, std::string_view message) {
  return HttpReply{status, "{\"Error\":\"" + EscapeJson(message) + "\"}", std::string(kJson)};
}

HttpReply Text(int status, std::string body) {
  return HttpReply{status, std::move(body), std::string(kText)};
}

std::string_view OutcomeOf(int status) {
  if (status >= 200 && status < 300) return "ok";
  if (status >= 400 && status < 500) return "bad_request";
  return "error";
}

std::string_view View(beast::string_view text) { return {text.data(), text.size()}; }

// A reply on its way out: the handler's reply plus what only the transport decides.
struct Outgoing {
  explicit Outgoing(HttpReply r, std::string a = {}, bool c = false)
      : reply(std::move(r)), allow(std::move(a)), close(c) {}

  HttpReply reply;
  std::string allow;   // the Allow header of a 405
  bool close = false;  // close the connection after this reply
};

class HttpServer;

// One I/O thread and the io_context that only it runs (concurrency hint 1: Asio's handler queue
// then needs no cross-thread wake-ups for work the thread posts itself). The work guard keeps
// the loop running while it has no connection; Stop releases it.
class IoLoop {
 public:
  IoLoop() : context_(1), guard_(asio::make_work_guard(context_)) {}

  asio::io_context& context() { return context_; }
  void Release() { guard_.reset(); }

  // Live connections on this loop, and whether it is running a filter or prioritize inline
  // (the accept thread gives new connections to loops that are not).
  std::atomic<int> connections{0};
  std::atomic<bool> in_verb{false};

 private:
  asio::io_context context_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
};

// What the server needs of a connection whatever its stream type.
class ConnectionBase : public std::enable_shared_from_this<ConnectionBase> {
 public:
  virtual ~ConnectionBase() = default;
  // Closes the connection if it is idle or still receiving a request; one being handled or
  // written closes after its reply. Safe from any thread.
  virtual void Shutdown() = 0;
};

class HttpServer final : public Server {
 public:
  HttpServer(const ServerOptions& options, ExtenderHandler& handler, PrometheusMetrics& metrics,
             std::unique_ptr<asio::ssl::context> tls)
      : options_(options),
        handler_(handler),
        metrics_(metrics),
        tls_(std::move(tls)),
        accept_io_(1),
        acceptor_(accept_io_),
        accept_retry_(accept_io_) {
    for (int i = 0; i < std::max(1, options.io_threads); ++i) {
      loops_.push_back(std::make_unique<IoLoop>());
    }
  }

  ~HttpServer() override {
    Stop();
    Wait();
  }

  Result<void> Start() override;
  int port() const override { return port_.load(); }
  void Stop() override;
  void Wait() override;

  // --- for connections ---------------------------------------------------------------------

  const ServerOptions& options() const { return options_; }
  bool stopping() const { return stopping_.load(); }

  // Registers a new connection. Returns false when the server is stopping (close it then).
  bool Track(const std::shared_ptr<ConnectionBase>& connection);
  void Untrack(const ConnectionBase* connection);

  // Routes a complete request that arrived on `loop`. Answers /healthz, /readyz and every
  // transport error at once; anything that calls the handler or renders metrics runs on a
  // handler thread (or inline, see the definition), and `done` is called there with the reply
  // (it must hop back to the loop's thread itself). `deadline` is the request's: a request still
  // queued when it passes is not handled.
  template <typename Done>
  void Handle(IoLoop& loop, http::request<http::string_body>& request, Clock::time_point deadline,
              Done done);

  void CountTooLarge(std::string_view target);

 private:
  void Accept();
  void OnAcceptable(beast::error_code error);
  void Open(IoLoop& loop, tcp::socket socket);
  IoLoop& PickLoop();
  HttpReply Run(const RouteMatch& match, const std::string& body);
  HttpReply CallVerb(Verb verb, std::string_view body);
  template <typename Call>
  HttpReply CallHandler(std::string_view what, Call&& call);

  const ServerOptions options_;
  ExtenderHandler& handler_;
  PrometheusMetrics& metrics_;
  const std::unique_ptr<asio::ssl::context> tls_;  // null without TLS

  // Before the loops: connections still queued in a loop when it is destroyed untrack
  // themselves.
  std::mutex connections_mutex_;
  std::unordered_map<const ConnectionBase*, std::weak_ptr<ConnectionBase>>
      connections_;  // GUARDED_BY(connections_mutex_)

  std::vector<std::unique_ptr<IoLoop>> loops_;
  std::size_t next_loop_ = 0;  // round robin among equally good loops; accept thread only
  asio::io_context accept_io_;
  tcp::acceptor acceptor_;  // accept thread only
  asio::steady_timer accept_retry_;
  std::unique_ptr<asio::thread_pool> handlers_;  // created by Start

  std::atomic<bool> started_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<int> port_{0};
  std::atomic<int> inline_verbs_{0};  // verbs running on I/O threads now

  std::mutex wait_mutex_;
  std::vector<std::thread> threads_;  // the accept thread and the loops'; GUARDED_BY(wait_mutex_)
};

// One HTTP/1.1 connection over `Stream` (a TCP socket or beast::ssl_stream of one). Every
// member is used on its loop's thread only, except while a request is being handled by a
// handler thread: then that thread reads the request, and the loop does not touch it until the
// reply is posted back.
template <typename Stream>
class Connection final : public ConnectionBase {
 public:
  Connection(HttpServer& server, IoLoop& loop, Stream stream)
      : server_(server), loop_(loop), stream_(std::move(stream)), timer_(loop.context()) {
    loop_.connections.fetch_add(1);
  }
  ~Connection() override {
    loop_.connections.fetch_sub(1);
    server_.Untrack(this);
  }

  void Begin() {
    asio::dispatch(stream_.get_executor(), [self = Self()] { self->Open(); });
  }

  void Shutdown() override {
    asio::post(stream_.get_executor(), [self = Self()] {
      self->stop_requested_ = true;
      // Idle, receiving, or lingering after a final reply: close now. A request being handled
      // or written closes after its reply.
      if (self->state_ != State::kHandling && self->state_ != State::kWriting) self->CloseNow();
    });
  }

 private:
  enum class State { kIdle, kReading, kHandling, kWriting, kClosed };

  std::shared_ptr<Connection> Self() {
    return std::static_pointer_cast<Connection>(shared_from_this());
  }
  tcp::socket& Lowest() { return beast::get_lowest_layer(stream_); }

  // Deadlines. The connection has one deadline at a time (`expiry_`; none while a handler runs)
  // and one timer, re-armed only when a deadline comes earlier than the armed one. A request
  // moves the deadline later (the next request's read deadline is later than the last one's),
  // so a busy connection sets no timer, which would cost a system call; when the timer fires
  // before the deadline it waits again for the rest.
  void ExpireAt(Clock::time_point when) {
    expiry_ = when;
    if (when < armed_) Arm(when);
  }
  void ExpireNever() { expiry_ = Clock::time_point::max(); }

  void Arm(Clock::time_point when) {
    armed_ = when;
    timer_.expires_at(when);  // cancels the wait in progress, if any
    timer_.async_wait([self = Self(), generation = ++timer_generation_](beast::error_code) {
      // A wait replaced by a later Arm (cancelled, or already completed and queued) is stale.
      if (generation != self->timer_generation_) return;
      self->armed_ = Clock::time_point::max();
      if (!self->Lowest().is_open()) return;
      if (Clock::now() >= self->expiry_) return self->CloseNow();
      if (self->expiry_ != Clock::time_point::max()) self->Arm(self->expiry_);
    });
  }

  void Open() {
    if (!server_.Track(shared_from_this())) {
      CloseNow();
      return;
    }
    if constexpr (std::is_same_v<Stream, tcp::socket>) {
      WaitForRequest();
    } else {
      // The handshake counts against the first request's deadline.
      state_ = State::kReading;
      ExpireAt(Clock::now() + server_.options().read_timeout);
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [self = Self()](beast::error_code error) {
                                if (error) return self->CloseNow();
                                self->WaitForRequest();
                              });
    }
  }

  // Idle: waits for the first byte of the next request (unless a pipelined one is buffered).
  void WaitForRequest() {
    state_ = State::kIdle;
    if (stop_requested_) return CloseNow();
    if (buffer_.size() > 0) return ReadRequest();
    // An idle connection keeps a socket, this object and a 4 KiB read buffer; what a large
    // request grew is released.
    buffer_.shrink_to_fit();
    const Clock::duration idle = requests_ == 0
                                     ? Clock::duration(server_.options().read_timeout)
                                     : Clock::duration(server_.options().keep_alive_timeout);
    ExpireAt(Clock::now() + idle);
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = Self()](beast::error_code error, std::size_t bytes) {
                              if (error) return self->CloseNow();
                              self->buffer_.commit(bytes);
                              self->ReadRequest();
                            });
  }

  // Reading: the whole request (header, then body) must arrive within read_timeout of its
  // first byte.
  void ReadRequest() {
    state_ = State::kReading;
    deadline_ = Clock::now() + server_.options().read_timeout;
    ExpireAt(deadline_);
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(static_cast<std::uint64_t>(server_.options().max_body_bytes));
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = Self()](beast::error_code error, std::size_t) { self->OnHeader(error); });
  }

  void OnHeader(beast::error_code error) {
    if (error) return OnReadError(error);
    if (parser_->is_done()) return OnRequest();
    // Room for the body up front (up to one 64 KiB read), so that it arrives in a few large
    // reads rather than many small ones that grow the buffer step by step.
    if (const auto length = parser_->content_length()) {
      buffer_.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(*length, kReadChunk)));
    }
    const auto& request = parser_->get();
    if (beast::iequals(request[http::field::expect], "100-continue") && !parser_->is_done()) {
      // curl and other clients wait for this before sending a large body.
      continue_ = std::make_unique<http::response<http::empty_body>>(http::status::continue_,
                                                                     request.version());
      http::async_write(stream_, *continue_, [self = Self()](beast::error_code e, std::size_t) {
        self->continue_.reset();
        if (e) return self->CloseNow();
        self->ReadBody();
      });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = Self()](beast::error_code error, std::size_t) {
                       if (error) return self->OnReadError(error);
                       self->OnRequest();
                     });
  }

  void OnReadError(beast::error_code error) {
    // A timeout, a reset or a client that closed between requests: nothing to answer, and a
    // request that did not arrive in time is never handed to the handler.
    if (error == beast::error::timeout || error == http::error::end_of_stream ||
        error == asio::error::eof || error == asio::error::operation_aborted ||
        error == asio::error::connection_reset || stop_requested_) {
      return CloseNow();
    }
    if (error == http::error::body_limit) {
      server_.CountTooLarge(View(parser_->get().target()));
      return Send(Outgoing{JsonError(413, "request body exceeds the limit of " +
                                              std::to_string(server_.options().max_body_bytes) +
                                              " bytes (limits.max_body_bytes)"),
                           {},
                           true});
    }
    if (error == http::error::header_limit) {
      return Send(Outgoing{JsonError(431, "request header fields too large"), {}, true});
    }
    if (error.category() == beast::error_code(http::error::bad_target).category() ||
        error == http::error::partial_message) {
      return Send(Outgoing{JsonError(400, "malformed HTTP request: " + error.message()), {}, true});
    }
    CloseNow();
  }

  void OnRequest() {
    state_ = State::kHandling;
    ExpireNever();  // the handler's time is not the client's to limit; the reply's is
    ++requests_;
    // On the loop's thread (an answer given at once, or a verb run inline) the reply is sent
    // at once; from a handler thread it is posted to the loop.
    server_.Handle(loop_, parser_->get(), deadline_, [self = Self()](Outgoing outgoing) {
      asio::dispatch(
          self->stream_.get_executor(),
          [self, outgoing = std::move(outgoing)]() mutable { self->Send(std::move(outgoing)); });
    });
  }

  // Writing: the reply must be taken within write_timeout.
  void Send(Outgoing outgoing) {
    if (state_ == State::kClosed) return;
    state_ = State::kWriting;
    const bool have_request = parser_.has_value() && parser_->is_header_done();
    const unsigned version = have_request ? parser_->get().version() : 11;
    const bool head = have_request && parser_->get().method() == http::verb::head;
    const ServerOptions& options = server_.options();
    keep_alive_ = have_request && !outgoing.close && !stop_requested_ && !server_.stopping() &&
                  parser_->get().keep_alive() && requests_ < options.keep_alive_max_requests;

    response_ = {};
    response_.version(version);
    response_.result(static_cast<unsigned>(outgoing.reply.status));
    if (!outgoing.reply.content_type.empty()) {
      response_.set(http::field::content_type, outgoing.reply.content_type);
    }
    if (!outgoing.allow.empty()) response_.set(http::field::allow, outgoing.allow);
    response_.keep_alive(keep_alive_);
    if (keep_alive_) {
      response_.set("Keep-Alive", "timeout=" + std::to_string(options.keep_alive_timeout.count()) +
                                      ", max=" + std::to_string(options.keep_alive_max_requests));
    }
    response_.body() = std::move(outgoing.reply.body);
    response_.prepare_payload();
    if (head) response_.body().clear();  // Content-Length stays that of the GET reply
    if (!keep_alive_) parser_.reset();   // a request still arriving is abandoned

    ExpireAt(Clock::now() + options.write_timeout);
    http::async_write(stream_, response_, [self = Self()](beast::error_code error, std::size_t) {
      self->response_ = {};
      if (error) return self->CloseNow();
      if (!self->keep_alive_) return self->Linger();
      self->parser_.reset();
      self->WaitForRequest();
    });
  }

  // Closes after an error reply without resetting the connection: stops sending and discards
  // what the client still sends (the rest of a refused body) for a short while, so that the
  // client reads the reply rather than a reset.
  void Linger() {
    state_ = State::kClosed;
    beast::error_code ignored;
    Lowest().shutdown(tcp::socket::shutdown_send, ignored);
    ExpireAt(Clock::now() + kLingerTime);
    DiscardUntilClosed();
  }

  void DiscardUntilClosed() {
    Lowest().async_read_some(asio::buffer(discard_),
                             [self = Self()](beast::error_code error, std::size_t) {
                               if (error) return self->CloseNow();
                               self->DiscardUntilClosed();
                             });
  }

  void CloseNow() {
    state_ = State::kClosed;
    beast::error_code ignored;
    Lowest().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close(ignored);
    // The timer's wait holds a reference: release it now rather than at the deadline.
    ++timer_generation_;
    timer_.cancel();
  }

  HttpServer& server_;
  IoLoop& loop_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::unique_ptr<http::response<http::empty_body>> continue_;
  http::response<http::string_body> response_;
  std::array<char, 4096> discard_{};
  State state_ = State::kIdle;
  Clock::time_point deadline_{};  // the request's
  asio::steady_timer timer_;
  Clock::time_point expiry_ = Clock::time_point::max();  // the connection's deadline now
  Clock::time_point armed_ = Clock::time_point::max();   // when the timer fires
  std::uint64_t timer_generation_ = 0;
  std::size_t requests_ = 0;
  bool keep_alive_ = true;
  bool stop_requested_ = false;
};

bool HttpServer::Track(const std::shared_ptr<ConnectionBase>& connection) {
  std::lock_guard<std::mutex> lock(connections_mutex_);
  if (stopping_) return false;
  connections_.emplace(connection.get(), connection);
  return true;
}

void HttpServer::Untrack(const ConnectionBase* connection) {
  std::lock_guard<std::mutex> lock(connections_mutex_);
  connections_.erase(connection);
}

void HttpServer::CountTooLarge(std::string_view target) {
  const RouteMatch match = MatchRoute(PathOf(target), options_.url_prefix);
  if (match.route == Route::kVerb) metrics_.CountRequest(match.verb, "too_large");
}

template <typename Done>
void HttpServer::Handle(IoLoop& loop, http::request<http::string_body>& request,
                        Clock::time_point deadline, Done done) {
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

HttpReply HttpServer::CallVerb(Verb verb, std::string_view body) {
  const auto start = Clock::now();
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
        reply = handler_.Bind(body);
        break;
      case Verb::kPreempt:
        reply = handler_.Preempt(body);
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
  std::lock_guard<std::mutex> lock(wait_mutex_);
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
    std::lock_guard<std::mutex> lock(connections_mutex_);
    if (stopping_.exchange(true) || !started_) return;
    for (const auto& [key, weak] : connections_) {
      if (auto connection = weak.lock()) live.push_back(std::move(connection));
    }
  }
  asio::post(accept_io_, [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
    accept_retry_.cancel();
  });
  for (const auto& connection : live) connection->Shutdown();
  // Each loop runs until its last connection has closed.
  for (const auto& loop : loops_) loop->Release();
}

void HttpServer::Wait() {
  std::lock_guard<std::mutex> lock(wait_mutex_);
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
  if (handlers_) handlers_->join();
}

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
    std::unique_ptr<asio::ssl::context> tls;
    if (options.tls.enabled()) {
      ERR_clear_error();
      tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
      std::string error;
      if (!ConfigureTls(*tls->native_handle(), options.tls, error)) return MakeError(error);
    }
    return ServerPtr(std::make_unique<HttpServer>(options, handler, metrics, std::move(tls)));
  } catch (const std::exception& e) {
    return MakeError(std::string("cannot create the HTTP server: ") + e.what());
  }
}

}  // namespace linkfit::server
