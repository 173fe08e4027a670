#pragma once

// One HTTP/1.1 connection of the Asio/Beast server: the state machine server.cc's header comment
// draws, over a TCP socket or a TLS stream of one. Private to the server module.

#include "server/http_server.h"

namespace linkfit::server::asio_server {

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
  std::optional<http::request_parser<RequestBody>> parser_;
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

}  // namespace linkfit::server::asio_server
