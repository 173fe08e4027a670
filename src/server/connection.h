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
  // A plain TCP connection reads its requests itself, with reads that never wait (the socket is
  // non-blocking) until the socket is empty, and only then waits for it. Beast's composed reads
  // (kept for TLS and chunked bodies) go through Asio's queue at every step: a 5,000-name
  // prioritize body took 4 reads and 7 polls of epoll before its handler ran, ~10 µs of system
  // calls on a virtual machine, and was copied twice on the way (bench/RESULTS.md, 27 Nov 2026).
  static constexpr bool kPlain = std::is_same_v<Stream, tcp::socket>;
  // What a read that does not wait found.
  enum class Got { kBytes, kNothing, kEnd, kError };

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
    if constexpr (kPlain) {
      beast::error_code error;
      Lowest().non_blocking(true, error);
      if (error) return CloseNow();
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
    if constexpr (kPlain) return AwaitRequest();
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = Self()](beast::error_code error, std::size_t bytes) {
                              if (error) return self->CloseNow();
                              self->buffer_.commit(bytes);
                              self->ReadRequest();
                            });
  }

  // Idle on a plain socket: reads the next request's first bytes if they are there, else waits
  // until they are.
  void AwaitRequest() {
    beast::error_code error;
    switch (ReadAvailable(kHeaderRead, error)) {
      case Got::kBytes:
        return ReadRequest();
      case Got::kNothing:
        return WhenReadable([](Connection& self) { self.AwaitRequest(); });
      case Got::kEnd:
      case Got::kError:
        return CloseNow();
    }
  }

  static bool WouldBlock(const beast::error_code& error) {
    return error == asio::error::would_block || error == asio::error::try_again;
  }

  // Reads what the socket holds now, at most `most` bytes, into buffer_, without waiting.
  Got ReadAvailable(std::size_t most, beast::error_code& error) {
    const std::size_t n = Lowest().read_some(buffer_.prepare(most), error);
    if (!error) {
      buffer_.commit(n);
      return Got::kBytes;
    }
    if (WouldBlock(error)) return Got::kNothing;
    return error == asio::error::eof ? Got::kEnd : Got::kError;
  }

  // Calls next(*this) once the socket has bytes to read (or has been closed: the deadline's
  // timer closes it, and the wait ends with an error).
  template <typename Next>
  void WhenReadable(Next next) {
    Lowest().async_wait(tcp::socket::wait_read, [self = Self(), next](beast::error_code error) {
      if (error) return self->OnReadError(error);
      next(*self);
    });
  }

  // What the end of the input means for the request being read: Beast's composed read says
  // end_of_stream before its first byte and partial_message after.
  beast::error_code EndOfInput() {
    if (!parser_->got_some()) return http::error::end_of_stream;
    return http::error::partial_message;
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
    if constexpr (kPlain) return ParseHeader();
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = Self()](beast::error_code error, std::size_t) { self->OnHeader(error); });
  }

  // The header from what is buffered and what the socket holds, waiting only when it is empty.
  void ParseHeader() {
    for (;;) {
      beast::error_code error;
      if (buffer_.size() > 0) {
        buffer_.consume(parser_->put(buffer_.data(), error));
        if (!error && parser_->is_header_done()) return OnHeader({});
        if (error && error != http::error::need_more) return OnReadError(error);
      }
      switch (ReadAvailable(kHeaderRead, error)) {
        case Got::kBytes:
          continue;
        case Got::kNothing:
          return WhenReadable([](Connection& self) { self.ParseHeader(); });
        case Got::kEnd:
          return OnReadError(EndOfInput());
        case Got::kError:
          return OnReadError(error);
      }
    }
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
    if constexpr (kPlain) {
      if (!parser_->chunked() && parser_->content_length()) {
        // The parser checked the length against body_limit with the header.
        return StartBody(static_cast<std::size_t>(*parser_->content_length()));
      }
    }
    http::async_read(stream_, buffer_, *parser_,
                     [self = Self()](beast::error_code error, std::size_t) {
                       if (error) return self->OnReadError(error);
                       self->OnRequest();
                     });
  }

  // A body of known length, read by the connection itself straight into the request's body,
  // with room for kBodyPadding after it (the handler then parses it where it lies): the bytes
  // the header's read brought along, then the rest as the socket has it. The parser, past the
  // header, is not given the body (its state stays at the body's start; it is discarded with
  // the request).
  void StartBody(std::size_t length) {
    std::string& body = parser_->get().body();
    body.reserve(length + kBodyPadding);
    GrowUninitialized(body, length);
    body_read_ = asio::buffer_copy(asio::buffer(body.data(), length), buffer_.data());
    buffer_.consume(body_read_);
    ReadBodyBytes();
  }

  void ReadBodyBytes() {
    std::string& body = parser_->get().body();
    while (body_read_ < body.size()) {
      beast::error_code error;
      body_read_ += Lowest().read_some(
          asio::buffer(body.data() + body_read_, body.size() - body_read_), error);
      if (WouldBlock(error)) {
        return WhenReadable([](Connection& self) { self.ReadBodyBytes(); });
      }
      if (error == asio::error::eof) return OnReadError(http::error::partial_message);
      if (error) return OnReadError(error);
    }
    OnRequest();
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
    PadBody(parser_->get().body());
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
    if constexpr (kPlain) {
      serializer_.emplace(response_);
      return WriteReply();
    }
    http::async_write(stream_, response_, [self = Self()](beast::error_code error, std::size_t) {
      self->AfterReply(error);
    });
  }

  // A plain connection writes the reply itself, as much as the socket takes at each try, and
  // waits only when it takes no more (see kPlain).
  void WriteReply() {
    for (;;) {
      beast::error_code error;
      http::write_some(Lowest(), *serializer_, error);
      if (WouldBlock(error)) {
        Lowest().async_wait(tcp::socket::wait_write, [self = Self()](beast::error_code e) {
          if (e) return self->AfterReply(e);
          self->WriteReply();
        });
        return;
      }
      if (error || serializer_->is_done()) return AfterReply(error);
    }
  }

  void AfterReply(beast::error_code error) {
    serializer_.reset();
    response_ = {};
    if (error) return CloseNow();
    if (!keep_alive_) return Linger();
    parser_.reset();
    WaitForRequest();
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
  std::optional<http::response_serializer<http::string_body>> serializer_;  // of response_
  std::array<char, 4096> discard_{};
  State state_ = State::kIdle;
  Clock::time_point deadline_{};  // the request's
  asio::steady_timer timer_;
  Clock::time_point expiry_ = Clock::time_point::max();  // the connection's deadline now
  Clock::time_point armed_ = Clock::time_point::max();   // when the timer fires
  std::uint64_t timer_generation_ = 0;
  std::size_t requests_ = 0;
  std::size_t body_read_ = 0;  // of a body read by StartBody
  bool keep_alive_ = true;
  bool stop_requested_ = false;
};

}  // namespace linkfit::server::asio_server
