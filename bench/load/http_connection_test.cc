// The load client's connection waiting for replies by polling (HttpConnection::Wait::kSpin): it
// reads a reply that comes late, and gives up at the timeout given to Connect rather than
// polling forever.

#include "http_connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace linkfit::load {
namespace {

// A one-connection server on 127.0.0.1: reads one request (its body "body"), then answers
// `reply` after `delay`, or never with an empty `reply` (the connection stays open).
class OneShotServer {
 public:
  OneShotServer(std::string reply, std::chrono::milliseconds delay) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&address), length), 0);
    EXPECT_EQ(::listen(listener_, 1), 0);
    EXPECT_EQ(::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length), 0);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this, reply = std::move(reply), delay] {
      connection_ = ::accept(listener_, nullptr, nullptr);
      std::string received;
      char chunk[4096];
      while (received.find("\r\n\r\nbody") == std::string::npos) {  // every test posts "body"
        const ssize_t got = ::read(connection_, chunk, sizeof(chunk));
        if (got <= 0) return;
        received.append(chunk, static_cast<std::size_t>(got));
      }
      if (reply.empty()) return;  // never answers; the connection stays open
      std::this_thread::sleep_for(delay);
      EXPECT_EQ(::write(connection_, reply.data(), reply.size()),
                static_cast<ssize_t>(reply.size()));
    });
  }
  ~OneShotServer() {
    thread_.join();
    if (connection_ >= 0) ::close(connection_);
    ::close(listener_);
  }
  int port() const { return port_; }

 private:
  int listener_ = -1;
  int connection_ = -1;
  int port_ = 0;
  std::thread thread_;
};

TEST(HttpConnectionTest, ASpinningClientReadsAReplyThatComesLate) {
  OneShotServer server("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                       std::chrono::milliseconds(50));
  HttpConnection connection;
  ASSERT_TRUE(connection.Connect("127.0.0.1", server.port(), std::chrono::milliseconds(5000)));
  connection.set_wait(HttpConnection::Wait::kSpin);
  HttpResponse response;
  const auto ok = connection.Post("/scheduler/filter", "body", &response);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "ok");
}

TEST(HttpConnectionTest, ASpinningClientGivesUpAtItsTimeout) {
  OneShotServer server("", std::chrono::milliseconds(0));
  HttpConnection connection;
  ASSERT_TRUE(connection.Connect("127.0.0.1", server.port(), std::chrono::milliseconds(200)));
  connection.set_wait(HttpConnection::Wait::kSpin);
  HttpResponse response;
  const auto start = std::chrono::steady_clock::now();
  const auto ok = connection.Post("/scheduler/filter", "body", &response);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(ok);
  EXPECT_EQ(ok.error().message, "read: no reply within 200 ms");
  EXPECT_GE(waited, std::chrono::milliseconds(200));
  EXPECT_LT(waited, std::chrono::seconds(5));
}

}  // namespace
}  // namespace linkfit::load
