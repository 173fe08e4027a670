#pragma once

// The API client's test rig: small scripted servers on 127.0.0.1:0 (plain HTTP, TLS with a
// throwaway CA made by the openssl CLI, a raw socket that drops replies), an observer that
// records the calls, and the fixture that starts them (api_client_test.cc,
// api_client_watch_test.cc).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "kube/fake_clock.h"
#include "linkfit/kube/api_client.h"

namespace linkfit::kube {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

using linkfit::kube::testing::FakeClock;

class RecordingObserver final : public ApiCallObserver {
 public:
  void ApiCall(std::string_view verb, int code) override {
    std::lock_guard<std::mutex> lock(mutex_);
    calls_.push_back(std::string(verb) + " " + std::to_string(code));
  }
  std::vector<std::string> calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> calls_;
};

// What a test server saw of one request.
struct Seen {
  std::string method;
  std::string target;  // path and query
  std::string authorization;
  std::string user_agent;
  std::string host;
  std::string accept;
};

// An HTTP or HTTPS server on 127.0.0.1:0 with the handlers a test installs; it records every
// request and holds blocked handlers until Release() (or its destructor).
class TestServer {
 public:
  static std::unique_ptr<TestServer> Plain() {
    return std::unique_ptr<TestServer>(new TestServer(std::make_unique<httplib::Server>()));
  }
  static std::unique_ptr<TestServer> Tls(const std::string& dir, const std::string& name,
                                         bool require_client_cert) {
    const std::string cert = dir + "/" + name + ".crt";
    const std::string key = dir + "/" + name + ".key";
    const std::string ca = dir + "/ca.crt";
    return std::unique_ptr<TestServer>(new TestServer(std::make_unique<httplib::SSLServer>(
        cert.c_str(), key.c_str(), require_client_cert ? ca.c_str() : nullptr)));
  }

  ~TestServer() {
    Release();
    server_->stop();
    if (thread_.joinable()) thread_.join();
  }

  httplib::Server& server() { return *server_; }

  void Start() {
    server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response&) {
      Seen seen{req.method,
                req.target,
                req.get_header_value("Authorization"),
                req.get_header_value("User-Agent"),
                req.get_header_value("Host"),
                req.get_header_value("Accept")};
      {
        std::lock_guard<std::mutex> lock(mutex_);
        seen_.push_back(std::move(seen));
      }
      changed_.notify_all();
      return httplib::Server::HandlerResponse::Unhandled;
    });
    server_->set_keep_alive_timeout(1);
    port_ = server_->bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_->listen_after_bind(); });
  }

  int port() const { return port_; }
  std::string url(const char* scheme) const {
    return std::string(scheme) + "://127.0.0.1:" + std::to_string(port_);
  }

  std::vector<Seen> seen() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return seen_;
  }
  bool WaitForRequests(std::size_t count) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, seconds(10), [&] { return seen_.size() >= count; });
  }

  // Blocks a handler until Release(), or 20 s at most.
  void Block() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, seconds(20), [&] { return released_; });
  }
  bool released() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return released_;
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      released_ = true;
    }
    changed_.notify_all();
  }

 private:
  explicit TestServer(std::unique_ptr<httplib::Server> server) : server_(std::move(server)) {}

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Seen> seen_;
  bool released_ = false;
};

// A TCP listener that reads one request and closes without answering (a reply lost after the
// request reached the server).
class DroppingServer {
 public:
  DroppingServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 || ::listen(fd_, 4) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      return;
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] {
      const int connection = ::accept(fd_, nullptr, nullptr);
      if (connection < 0) return;
      std::string request;
      char buffer[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::recv(connection, buffer, sizeof buffer, 0);
        if (n <= 0) break;
        request.append(buffer, static_cast<std::size_t>(n));
      }
      received_ = !request.empty();
      ::close(connection);
    });
  }
  ~DroppingServer() {
    ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  bool received() const { return received_.load(); }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> received_{false};
};

[[maybe_unused]] std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class ApiClientTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::string Dir() {
    if (dir_.empty()) {
      std::string pattern = ::testing::TempDir() + "linkfit-api-client-XXXXXX";
      EXPECT_NE(mkdtemp(pattern.data()), nullptr);
      dir_ = pattern;
    }
    return dir_;
  }

  // A throwaway CA; server certificates for IP 127.0.0.1 ("server") and for the name
  // api.example.test only ("named"); a client certificate ("client"); and a second, unrelated CA
  // ("other"). Skips the test without the openssl CLI.
  void MakePki() {
    if (std::system("openssl version >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "openssl CLI not found";
    }
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const auto sign = [&](const std::string& name, const std::string& extensions) {
      std::string command = "openssl x509 -req -in " + name + ".csr -CA ca.crt -CAkey ca.key " +
                            "-CAcreateserial -out " + name + ".crt -days 2";
      if (!extensions.empty()) {
        command = "printf '" + extensions + "\\n' > " + name + ".ext && " + command + " -extfile " +
                  name + ".ext";
      }
      return command;
    };
    const std::vector<std::string> commands = {
        "openssl req -x509 " + ec + " -keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca",
        "openssl req " + ec + " -keyout server.key -out server.csr -subj /CN=127.0.0.1",
        sign("server", "subjectAltName=IP:127.0.0.1"),
        "openssl req " + ec + " -keyout named.key -out named.csr -subj /CN=api.example.test",
        sign("named", "subjectAltName=DNS:api.example.test"),
        "openssl req " + ec + " -keyout client.key -out client.csr -subj /CN=linkfit-client",
        sign("client", ""),
        "openssl req -x509 " + ec + " -keyout other.key -out other.crt -days 2 -subj /CN=other",
    };
    for (const std::string& command : commands) {
      const std::string full = "cd '" + Dir() + "' && " + command + " >/dev/null 2>&1";
      ASSERT_EQ(std::system(full.c_str()), 0) << command;
    }
  }
  std::string Pem(const std::string& name) { return ReadFile(Dir() + "/" + name); }

  ClientConfig Config(const std::string& server) const {
    ClientConfig config;
    config.server = server;
    config.timeout = seconds(5);
    config.user_agent = "linkfit/test";
    config.source = "test";
    return config;
  }
  ApiClientPtr Client(const ClientConfig& config, Clock& clock = SystemClock(),
                      ApiCallObserver* observer = nullptr) {
    auto client = NewApiClient(config, observer, clock);
    EXPECT_TRUE(client.has_value()) << client.error().message;
    return client ? std::move(*client) : nullptr;
  }
  void WriteToken(const std::string& text) {
    std::ofstream(Dir() + "/token", std::ios::trunc) << text;
  }

  std::string dir_;
};

#define SKIP_IF_NO_PKI()                          \
  do {                                            \
    MakePki();                                    \
    if (IsSkipped() || HasFatalFailure()) return; \
  } while (false)

// --- headers and authentication ---------------------------------------------------------------

}  // namespace
}  // namespace linkfit::kube
