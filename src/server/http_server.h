#pragma once

// The pieces of the Asio/Beast server (server.cc) that its connections (connection.h) share:
// the transport's constants and error replies, an I/O loop, and the HttpServer class. Private
// to the server module: nothing here appears in include/linkfit/server/.
//
// Thread-safety: as server.h and server.cc say; IoLoop's counters are atomics read by the accept
// thread.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
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

#include "linkfit/common/json_string.h"
#include "linkfit/common/mutex.h"
#include "linkfit/common/strings.h"
#include "linkfit/server/server.h"
#include "server/routes.h"
#include "server/tls.h"

namespace linkfit::server::asio_server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using routes::MatchRoute;
using routes::PathOf;
using routes::Route;
using routes::RouteMatch;
using routes::Serves;
using tls::ConfigureTls;

inline constexpr std::string_view kJson = "application/json";
inline constexpr std::string_view kText = "text/plain; charset=utf-8";
inline constexpr std::string_view kPrometheusText = "text/plain; version=0.0.4; charset=utf-8";
// Request line and headers; kube-scheduler's are a few hundred bytes.
inline constexpr std::uint32_t kHeaderLimit = 64 * 1024;
// How long a connection that is being closed after an error reply keeps discarding what the
// client still sends, so that the reply is read before the kernel answers with a reset.
inline constexpr std::chrono::seconds kLingerTime{1};
// The most a body read reserves ahead (Beast reads at most 64 KiB at a time).
inline constexpr std::uint64_t kReadChunk = 64 * 1024;
// A request body read into a std::string as Beast's string_body does, but grown without
// zero-filling what each read is about to copy in (GrowUninitialized): string_body's resize
// wrote every byte of a body twice, a memset of ~100 KB per 5,000-name request.
struct RequestBody : http::string_body {
  class reader {
   public:
    template <bool kIsRequest, class Fields>
    reader(http::header<kIsRequest, Fields>&, value_type& body) : body_(body) {}

    void init(const boost::optional<std::uint64_t>& length, beast::error_code& error) {
      error = {};
      if (!length) return;
      if (*length > body_.max_size()) {
        error = http::error::buffer_overflow;
        return;
      }
      body_.reserve(static_cast<std::size_t>(*length) + kBodyPadding);  // see PadBody
    }

    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, beast::error_code& error) {
      const std::size_t extra = beast::buffer_bytes(buffers);
      const std::size_t size = body_.size();
      if (extra > body_.max_size() - size) {
        error = http::error::buffer_overflow;
        return 0;
      }
      error = {};
      GrowUninitialized(body_, size + extra);
      return asio::buffer_copy(asio::buffer(body_.data() + size, extra), buffers);
    }

    void finish(beast::error_code& error) { error = {}; }

   private:
    value_type& body_;
  };
};
using Request = http::request<RequestBody>;

// Leaves kBodyPadding zero bytes after `body` within its allocation, so that a handler may read
// that far past its end (server::Body): a JSON parser that reads ahead in blocks then parses the
// body where it lies. A body read with its length known already has the room; a chunked one is
// copied once here. (The bytes lie past size() in memory the string owns: zeroed, so that a
// parser reading them reads defined values.)
inline void PadBody(std::string& body) {
  if (body.empty()) return;  // no handler reads it
  const std::size_t size = body.size();
  if (body.capacity() - size < kBodyPadding) body.reserve(size + kBodyPadding);
  GrowUninitialized(body, size + kBodyPadding);
  std::memset(body.data() + size, 0, kBodyPadding);
  body.resize(size);
}

// The most a plain connection reads while it waits for a request's header (kube-scheduler's
// header is a few hundred bytes; what a read brings of the body goes into it): an idle
// connection keeps a buffer of this size.
inline constexpr std::size_t kHeaderRead = 4096;

// The largest filter or prioritize body run on a loop's thread: 1 MiB is ~15,000 node names
// (a few milliseconds of work); bodies with full Node objects are larger and go to a handler
// thread.
inline constexpr std::size_t kInlineBodyBytes = std::size_t{1} << 20;

// The extender protocol's error shape (spec/extender-protocol.md): {"Error":"..."}.
inline HttpReply JsonError(int status, std::string_view message) {
  return HttpReply{status, json::ErrorBody(message), std::string(kJson)};
}

inline HttpReply Text(int status, std::string body) {
  return HttpReply{status, std::move(body), std::string(kText)};
}

inline std::string_view OutcomeOf(int status) {
  if (status >= 200 && status < 300) return "ok";
  if (status >= 400 && status < 500) return "bad_request";
  return "error";
}

inline std::string_view View(beast::string_view text) { return {text.data(), text.size()}; }

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
// the loop running while it has no connection; Stop has the accept thread release it once no
// more connections can be handed to the loop.
class IoLoop {
 public:
  IoLoop() : context_(1), guard_(asio::make_work_guard(context_)) {}

  asio::io_context& context() { return context_; }
  void Release() { guard_.reset(); }  // accept thread only

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
        accept_retry_(accept_io_),
        accept_guard_(accept_io_.get_executor()) {
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
  void Handle(IoLoop& loop, Request& request, Clock::time_point deadline, Done done);

  void CountTooLarge(std::string_view target);

 private:
  void Accept();
  void OnAcceptable(beast::error_code error);
  void Open(IoLoop& loop, tcp::socket socket);
  IoLoop& PickLoop();
  HttpReply Run(const RouteMatch& match, const std::string& body);
  HttpReply CallVerb(Verb verb, const std::string& body);
  template <typename Call>
  HttpReply CallHandler(std::string_view what, Call&& call);

  const ServerOptions options_;
  ExtenderHandler& handler_;
  PrometheusMetrics& metrics_;
  const std::unique_ptr<asio::ssl::context> tls_;  // null without TLS

  // Before the loops: connections still queued in a loop when it is destroyed untrack
  // themselves.
  Mutex connections_mutex_;
  std::unordered_map<const ConnectionBase*, std::weak_ptr<ConnectionBase>> connections_
      LINKFIT_GUARDED_BY(connections_mutex_);

  std::vector<std::unique_ptr<IoLoop>> loops_;
  std::size_t next_loop_ = 0;  // round robin among equally good loops; accept thread only
  asio::io_context accept_io_;
  tcp::acceptor acceptor_;  // accept thread only
  asio::steady_timer accept_retry_;
  // Keeps the accept thread running until Stop's last step has run on it. Without it, an accept
  // that completes between Stop marking the server stopping and that step being queued waits for
  // nothing more, the accept thread ends, the step never runs, and no loop is ever released
  // (Wait then hung: HostileTest.StopLetsARequestInFlightFinish, ~1 run in 15 under ASan).
  asio::executor_work_guard<asio::io_context::executor_type> accept_guard_;  // accept thread only
  std::unique_ptr<asio::thread_pool> handlers_;                              // created by Start

  std::atomic<bool> started_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<int> port_{0};
  std::atomic<int> inline_verbs_{0};  // verbs running on I/O threads now

  Mutex wait_mutex_;
  std::vector<std::thread> threads_ LINKFIT_GUARDED_BY(wait_mutex_);  // accept thread, loops
};

}  // namespace linkfit::server::asio_server
