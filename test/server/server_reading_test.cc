// How the server reads requests off a plain socket and hands their bodies over (connection.h:
// its own reads that never wait, the body read straight into place, kBodyPadding after it):
// bodies that arrive in one piece, in many, with the next request behind them, cut short, or
// chunked, each reach the handler exactly once, byte for byte, and padded.

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "linkfit/server/prometheus_metrics.h"
#include "linkfit/server/server.h"
#include "raw_socket.h"

namespace linkfit::server {
namespace {

using std::chrono::milliseconds;

// Records each filter and prioritize body, with what it found after the body's end.
class PaddingHandler final : public ExtenderHandler {
 public:
  struct Call {
    std::string verb;
    std::string body;
    std::size_t readable_after = 0;
    bool padding_zero = false;  // every byte of the promised padding is zero
  };

  HttpReply Filter(Body body) override { return Record("filter", body); }
  HttpReply Prioritize(Body body) override { return Record("prioritize", body); }
  HttpReply Bind(std::string_view body) override { return Record("bind", Body(body)); }
  HttpReply Preempt(std::string_view body) override { return Record("preempt", Body(body)); }
  HttpReply Inspect(std::string_view) override { return HttpReply{404, "{}"}; }
  HttpReply Explain(std::string_view) override { return HttpReply{404, "{}"}; }
  bool Ready() const override { return true; }

  std::size_t reply_padding = 0;  // bytes of "Pad" in each reply (set before requests)

  std::vector<Call> calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }

 private:
  HttpReply Record(const std::string& verb, Body body) {
    Call call{verb, std::string(body.text), body.readable_after, true};
    for (std::size_t i = 0; i < body.readable_after; ++i) {
      if (body.text.data()[body.text.size() + i] != 0) call.padding_zero = false;
    }
    std::string reply = "{\"Verb\":\"" + verb + "\",\"Bytes\":" + std::to_string(body.text.size());
    if (reply_padding > 0) reply += ",\"Pad\":\"" + std::string(reply_padding, 'x') + "\"";
    reply += "}";
    std::lock_guard<std::mutex> lock(mutex_);
    calls_.push_back(std::move(call));
    return HttpReply{200, reply};
  }

  mutable std::mutex mutex_;
  std::vector<Call> calls_;
};

class ServerReadingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.threads = 2;
    options.max_body_bytes = 8 << 20;
    auto server = NewServer(options, handler_, metrics_);
    ASSERT_TRUE(server.has_value()) << server.error().message;
    server_ = std::move(*server);
    ASSERT_TRUE(server_->Start().has_value());
  }

  static std::string Post(const std::string& verb, const std::string& body) {
    return "POST /scheduler/" + verb +
           " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  }

  // A JSON body of about `bytes` bytes whose every byte depends on `seed`.
  static std::string BodyOf(std::size_t bytes, int seed) {
    std::string body = "{\"NodeNames\":[";
    for (int i = 0; body.size() < bytes; ++i) {
      body += (i == 0 ? "\"" : ",\"") + std::string("node-") + std::to_string(seed) + "-" +
              std::to_string(i) + "\"";
    }
    return body + "]}";
  }

  // The reply to the one request sent on `socket` is 200, and the handler got `body` exactly,
  // padded with zeros.
  void ExpectOneCallOf(RawSocket& socket, const std::string& body) {
    const auto reply = socket.ReadReply(milliseconds(10000));
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->status, 200);
    const auto calls = handler_.calls();
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0].body, body);
    EXPECT_EQ(calls[0].readable_after, kBodyPadding);
    EXPECT_TRUE(calls[0].padding_zero);
  }

  PaddingHandler handler_;
  PrometheusMetrics metrics_;
  ServerPtr server_;
};

TEST_F(ServerReadingTest, BodiesOfEverySizeArriveWholeAndPadded) {
  RawSocket socket(server_->port());
  ASSERT_TRUE(socket.ok());
  // Within the header's first read, across it, and many times the socket's buffers.
  const std::vector<std::size_t> sizes = {2, 100, 4000, 5000, 70000, 140000, 3 << 20};
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::string body = BodyOf(sizes[i], static_cast<int>(i));
    std::thread sender([&] { ASSERT_TRUE(socket.Send(Post("prioritize", body))); });
    const auto reply = socket.ReadReply(milliseconds(10000));
    sender.join();
    ASSERT_TRUE(reply.has_value()) << sizes[i];
    EXPECT_EQ(reply->status, 200);
    EXPECT_EQ(reply->body,
              "{\"Verb\":\"prioritize\",\"Bytes\":" + std::to_string(body.size()) + "}");
    const auto calls = handler_.calls();
    ASSERT_EQ(calls.size(), i + 1);
    EXPECT_EQ(calls[i].body, body);
    EXPECT_EQ(calls[i].readable_after, kBodyPadding);
    EXPECT_TRUE(calls[i].padding_zero);
  }
}

TEST_F(ServerReadingTest, PipelinedRequestsInOneWriteAreAnsweredInOrder) {
  RawSocket socket(server_->port());
  ASSERT_TRUE(socket.ok());
  const std::string first = BodyOf(3000, 1);
  const std::string second = BodyOf(90000, 2);
  const std::string third = BodyOf(10, 3);
  ASSERT_TRUE(
      socket.Send(Post("filter", first) + Post("prioritize", second) + Post("filter", third)));
  for (const auto& [verb, body] : {std::pair{"filter", &first}, std::pair{"prioritize", &second},
                                   std::pair{"filter", &third}}) {
    const auto reply = socket.ReadReply(milliseconds(10000));
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->body, "{\"Verb\":\"" + std::string(verb) +
                               "\",\"Bytes\":" + std::to_string(body->size()) + "}");
  }
  const auto calls = handler_.calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].body, first);
  EXPECT_EQ(calls[1].body, second);
  EXPECT_EQ(calls[2].body, third);
}

TEST_F(ServerReadingTest, ARequestTrickledInPiecesArrivesWhole) {
  RawSocket socket(server_->port());
  ASSERT_TRUE(socket.ok());
  const std::string body = BodyOf(20000, 7);
  const std::string request = Post("filter", body);
  // Pieces that split the request line, the header's end and the body at odd places.
  for (std::size_t at = 0, piece = 1; at < request.size(); at += piece, piece = piece * 3 + 1) {
    ASSERT_TRUE(socket.Send(request.substr(at, piece)));
    std::this_thread::sleep_for(milliseconds(2));
  }
  ExpectOneCallOf(socket, body);
}

TEST_F(ServerReadingTest, ABodyCutShortIsNeverHandled) {
  RawSocket socket(server_->port());
  ASSERT_TRUE(socket.ok());
  const std::string request = Post("filter", BodyOf(50000, 9));
  ASSERT_TRUE(socket.Send(request.substr(0, request.size() - 100)));
  socket.ShutdownWrite();
  std::string received;
  EXPECT_TRUE(socket.ClosedWithin(milliseconds(10000), &received));
  // Nothing was handled; what answer there is says the request was incomplete.
  EXPECT_TRUE(handler_.calls().empty());
  if (!received.empty()) {
    EXPECT_EQ(received.rfind("HTTP/1.1 400", 0), 0u) << received;
  }
}

// The header is parsed from the connection's own reads: its limit and its syntax are still
// enforced, with the protocol's error shape, and nothing reaches the handler.
TEST_F(ServerReadingTest, AnOversizedOrMalformedHeaderGetsAnErrorReply) {
  {
    RawSocket socket(server_->port());
    ASSERT_TRUE(socket.ok());
    std::string request = "POST /scheduler/filter HTTP/1.1\r\nHost: x\r\n";
    while (request.size() < 80 * 1024) request += "X-Filler: " + std::string(100, 'f') + "\r\n";
    ASSERT_TRUE(socket.Send(request));  // never ends its header
    const auto reply = socket.ReadReply(milliseconds(10000));
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->status, 431);
    EXPECT_EQ(reply->body.rfind("{\"Error\":\"", 0), 0u) << reply->body;
  }
  {
    RawSocket socket(server_->port());
    ASSERT_TRUE(socket.ok());
    ASSERT_TRUE(socket.Send("POST /scheduler/filter HTTP/1.1\r\nContent-Length: nine\r\n\r\n"));
    const auto reply = socket.ReadReply(milliseconds(10000));
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->status, 400);
    EXPECT_EQ(reply->body.rfind("{\"Error\":\"malformed HTTP request", 0), 0u) << reply->body;
  }
  EXPECT_TRUE(handler_.calls().empty());
}

TEST_F(ServerReadingTest, ChunkedBodiesArePaddedToo) {
  RawSocket socket(server_->port());
  ASSERT_TRUE(socket.ok());
  const std::string body = BodyOf(9000, 4);
  std::string request =
      "POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (std::size_t at = 0; at < body.size(); at += 4000) {
    const std::string chunk = body.substr(at, 4000);
    char size[16];
    std::snprintf(size, sizeof(size), "%zx", chunk.size());
    request += std::string(size) + "\r\n" + chunk + "\r\n";
  }
  request += "0\r\n\r\n";
  ASSERT_TRUE(socket.Send(request));
  ExpectOneCallOf(socket, body);
}

TEST_F(ServerReadingTest, RepliesLargerThanTheSocketBuffersAreWrittenWhole) {
  handler_.reply_padding = 6 << 20;  // the server's writes fill the socket and wait
  RawSocket socket(server_->port());
  ASSERT_TRUE(socket.ok());
  const std::string body = BodyOf(100, 1);
  ASSERT_TRUE(socket.Send(Post("filter", body) + Post("prioritize", body)));
  std::this_thread::sleep_for(milliseconds(100));  // a client slow to read
  for (const std::string verb : {"filter", "prioritize"}) {
    const auto reply = socket.ReadReply(milliseconds(20000));
    ASSERT_TRUE(reply.has_value()) << verb;
    EXPECT_EQ(reply->status, 200);
    const std::string empty_pad =
        "{\"Verb\":\"" + verb + "\",\"Bytes\":" + std::to_string(body.size()) + ",\"Pad\":\"\"}";
    EXPECT_EQ(reply->body.size(), empty_pad.size() + handler_.reply_padding) << verb;
    EXPECT_EQ(reply->body.rfind("{\"Verb\":\"" + verb + "\"", 0), 0u);
  }
}

}  // namespace
}  // namespace linkfit::server
