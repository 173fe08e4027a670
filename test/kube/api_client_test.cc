// The API client against small scripted servers on 127.0.0.1:0 (plain HTTP, TLS with a throwaway
// CA made by the openssl CLI, a raw socket that drops replies): authentication headers, token
// files re-read on a fake clock and after a 401, Retry-After, unknown outcomes, CA pinning,
// client certificates, tls-server-name, watches split across chunks, and cutting calls with
// Stop() and CancelTokens.

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

std::string ReadFile(const std::string& path) {
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

TEST_F(ApiClientTest, SendsTheBearerTokenUserAgentAndHost) {
  auto server = TestServer::Plain();
  server->server().Get("/api/v1/nodes", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"kind":"NodeList"})", "application/json");
  });
  server->Start();
  ClientConfig config = Config(server->url("http"));
  config.token = "t0ken";
  RecordingObserver observer;
  ApiClientPtr client = Client(config, SystemClock(), &observer);
  auto reply = client->Get("/api/v1/nodes?limit=5", "list");
  ASSERT_TRUE(reply.has_value()) << reply.error().message;
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->body, R"({"kind":"NodeList"})");
  EXPECT_EQ(reply->content_type, "application/json");
  const std::vector<Seen> seen = server->seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].target, "/api/v1/nodes?limit=5");
  EXPECT_EQ(seen[0].authorization, "Bearer t0ken");
  EXPECT_EQ(seen[0].user_agent, "linkfit/test");
  EXPECT_EQ(seen[0].accept, "application/json");
  EXPECT_EQ(seen[0].host, "127.0.0.1:" + std::to_string(server->port()));
  EXPECT_EQ(observer.calls(), std::vector<std::string>{"list 200"});
}

TEST_F(ApiClientTest, SendsBasicAuthAndRefusesItTogetherWithAToken) {
  auto server = TestServer::Plain();
  server->server().Get("/api", [](const httplib::Request&, httplib::Response&) {});
  server->Start();
  ClientConfig config = Config(server->url("http"));
  config.username = "admin";
  config.password = "hunter2";
  ApiClientPtr client = Client(config);
  ASSERT_EQ(client->Get("/api", "get")->status, 200);
  EXPECT_EQ(server->seen().back().authorization, "Basic YWRtaW46aHVudGVyMg==");
  config.token = "t";
  auto refused = NewApiClient(config);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("not both"), std::string::npos);
}

TEST_F(ApiClientTest, ATokenFileIsReadAgainOnceAMinuteHasPassed) {
  auto server = TestServer::Plain();
  server->server().Get("/api", [](const httplib::Request&, httplib::Response&) {});
  server->Start();
  FakeClock clock;
  WriteToken("one\n");
  ClientConfig config = Config(server->url("http"));
  config.token_file = Dir() + "/token";
  ApiClientPtr client = Client(config, clock);
  const auto sent = [&] {
    EXPECT_EQ(client->Get("/api", "get")->status, 200);
    return server->seen().back().authorization;
  };
  EXPECT_EQ(sent(), "Bearer one");  // trimmed
  WriteToken("two");
  clock.Advance(seconds(59));
  EXPECT_EQ(sent(), "Bearer one");  // read less than a minute ago
  clock.Advance(seconds(1));
  EXPECT_EQ(sent(), "Bearer two");
  // A file that cannot be read keeps the last token.
  fs::remove(Dir() + "/token");
  clock.Advance(seconds(61));
  EXPECT_EQ(sent(), "Bearer two");
  WriteToken("");
  clock.Advance(seconds(61));
  EXPECT_EQ(sent(), "Bearer two");
}

TEST_F(ApiClientTest, A401ReadsTheTokenFileAgainOnceAndRetries) {
  std::mutex mutex;
  std::string accepted = "Bearer old";
  auto server = TestServer::Plain();
  server->server().Get("/api", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mutex);
    if (req.get_header_value("Authorization") != accepted) res.status = 401;
  });
  server->Start();
  FakeClock clock;  // never advances: only the 401 can cause a re-read
  WriteToken("old");
  ClientConfig config = Config(server->url("http"));
  config.token_file = Dir() + "/token";
  ApiClientPtr client = Client(config, clock);
  ASSERT_EQ(client->Get("/api", "get")->status, 200);
  // The kubelet rotates the token; the old one stops working at once.
  WriteToken("new");
  {
    std::lock_guard<std::mutex> lock(mutex);
    accepted = "Bearer new";
  }
  EXPECT_EQ(client->Get("/api", "get")->status, 200);
  std::vector<Seen> seen = server->seen();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[1].authorization, "Bearer old");
  EXPECT_EQ(seen[2].authorization, "Bearer new");
  // A token the server keeps refusing: one re-read and retry, then the 401.
  {
    std::lock_guard<std::mutex> lock(mutex);
    accepted = "Bearer other";
  }
  EXPECT_EQ(client->Get("/api", "get")->status, 401);
  EXPECT_EQ(server->seen().size(), 5u);
  // A fixed token is not retried.
  ClientConfig fixed = Config(server->url("http"));
  fixed.token = "wrong";
  EXPECT_EQ(Client(fixed)->Get("/api", "get")->status, 401);
  EXPECT_EQ(server->seen().size(), 6u);
}

// --- Retry-After ------------------------------------------------------------------------------

TEST_F(ApiClientTest, A429IsRetriedOnceAfterItsRetryAfter) {
  struct Case {
    const char* retry_after;  // nullptr: no header
    milliseconds expected;
  };
  const std::vector<Case> cases = {{"3", seconds(3)},
                                   {"0", seconds(0)},
                                   {"60", seconds(10)},
                                   {nullptr, seconds(1)},
                                   {"Wed, 21 Oct 2015 07:28:00 GMT", seconds(1)},
                                   {"-5", seconds(1)}};
  for (const Case& c : cases) {
    std::atomic<int> calls{0};
    auto server = TestServer::Plain();
    server->server().Post("/apis/x", [&](const httplib::Request&, httplib::Response& res) {
      if (calls++ == 0) {
        res.status = 429;
        if (c.retry_after != nullptr) res.set_header("Retry-After", c.retry_after);
      } else {
        res.status = 201;
      }
    });
    server->Start();
    FakeClock clock;
    RecordingObserver observer;
    ApiClientPtr client = Client(Config(server->url("http")), clock, &observer);
    auto reply = client->Post("/apis/x", "{}", "post");
    ASSERT_TRUE(reply.has_value()) << reply.error().message;
    EXPECT_EQ(reply->status, 201);
    EXPECT_EQ(clock.sleeps(), std::vector<std::chrono::nanoseconds>{c.expected})
        << (c.retry_after ? c.retry_after : "(none)");
    EXPECT_EQ(observer.calls(), (std::vector<std::string>{"post 429", "post 201"}));
  }
}

TEST_F(ApiClientTest, ASecond429IsReturned) {
  auto server = TestServer::Plain();
  server->server().Get("/api", [](const httplib::Request&, httplib::Response& res) {
    res.status = 429;
    res.set_header("Retry-After", "2");
    res.set_content(R"({"kind":"Status","message":"slow down","code":429})", "application/json");
  });
  server->Start();
  FakeClock clock;
  ApiClientPtr client = Client(Config(server->url("http")), clock);
  auto reply = client->Get("/api", "get");
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 429);
  EXPECT_EQ(StatusMessage(reply->body), "slow down");
  EXPECT_EQ(server->seen().size(), 2u);
  EXPECT_EQ(clock.sleeps(), std::vector<std::chrono::nanoseconds>{seconds(2)});
}

// --- transport errors -------------------------------------------------------------------------

TEST_F(ApiClientTest, ARefusedConnectionWasNotSentAndALostReplyMayHaveBeen) {
  // A bound socket that does not listen refuses connections.
  const int closed = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ASSERT_EQ(::bind(closed, reinterpret_cast<sockaddr*>(&address), length), 0);
  ASSERT_EQ(::getsockname(closed, reinterpret_cast<sockaddr*>(&address), &length), 0);
  RecordingObserver observer;
  ApiClientPtr refused =
      Client(Config("http://127.0.0.1:" + std::to_string(ntohs(address.sin_port))), SystemClock(),
             &observer);
  auto reply = refused->Post("/api/v1/namespaces/a/pods/b/binding", "{}", "bind");
  ::close(closed);
  ASSERT_FALSE(reply.has_value());
  EXPECT_FALSE(reply.error().maybe_sent) << reply.error().message;
  EXPECT_EQ(observer.calls(), std::vector<std::string>{"bind 0"});

  DroppingServer dropping;
  ASSERT_GT(dropping.port(), 0);
  ApiClientPtr lost = Client(Config("http://127.0.0.1:" + std::to_string(dropping.port())));
  reply = lost->Post("/api/v1/namespaces/a/pods/b/binding", "{}", "bind");
  ASSERT_FALSE(reply.has_value());
  EXPECT_TRUE(reply.error().maybe_sent) << reply.error().message;
  EXPECT_TRUE(dropping.received());
}

TEST_F(ApiClientTest, BadConfigurationsAreRefusedUpFront) {
  SKIP_IF_NO_PKI();
  struct Case {
    std::string name;
    ClientConfig config;
    std::string expected;
  };
  std::vector<Case> cases;
  const auto with = [&](std::string name, const std::function<void(ClientConfig&)>& change,
                        std::string expected) {
    ClientConfig config = Config("https://127.0.0.1:6443");
    change(config);
    cases.push_back({std::move(name), config, std::move(expected)});
  };
  with(
      "scheme", [](ClientConfig& c) { c.server = "ftp://h"; }, "expected https://host[:port]");
  with(
      "path", [](ClientConfig& c) { c.server = "https://h/prefix"; }, "not supported");
  with(
      "ipv6", [](ClientConfig& c) { c.server = "https://fd00::1:443"; }, "brackets");
  with(
      "port", [](ClientConfig& c) { c.server = "https://h:70000"; }, "bad port");
  with(
      "no host", [](ClientConfig& c) { c.server = "https://:1"; }, "no host");
  with(
      "CA", [](ClientConfig& c) { c.ca_pem = "hello"; }, "CA (test) does not hold a PEM");
  with(
      "cert alone", [&](ClientConfig& c) { c.client_cert_pem = Pem("client.crt"); },
      "given together");
  with(
      "key mismatch",
      [&](ClientConfig& c) {
        c.client_cert_pem = Pem("client.crt");
        c.client_key_pem = Pem("other.key");
      },
      "does not match");
  with(
      "key garbage",
      [&](ClientConfig& c) {
        c.client_cert_pem = Pem("client.crt");
        c.client_key_pem = Pem("client.crt");
      },
      "client key (test) does not hold");
  for (const Case& c : cases) {
    auto client = NewApiClient(c.config);
    ASSERT_FALSE(client.has_value()) << c.name;
    EXPECT_NE(client.error().message.find(c.expected), std::string::npos)
        << c.name << ": " << client.error().message;
  }
  ClientConfig ipv6 = Config("https://[::1]:6443");
  EXPECT_TRUE(NewApiClient(ipv6).has_value());
}

// --- TLS --------------------------------------------------------------------------------------

TEST_F(ApiClientTest, TheServerIsVerifiedAgainstTheConfiguredCa) {
  SKIP_IF_NO_PKI();
  auto server = TestServer::Tls(Dir(), "server", /*require_client_cert=*/false);
  server->server().Get("/api", [](const httplib::Request&, httplib::Response&) {});
  server->Start();
  ClientConfig config = Config(server->url("https"));
  config.ca_pem = Pem("ca.crt");
  EXPECT_EQ(Client(config)->Get("/api", "get")->status, 200);
  // Another CA: the handshake fails before the request is written.
  config.ca_pem = Pem("other.crt");
  auto reply = Client(config)->Post("/api", "{}", "post");
  ASSERT_FALSE(reply.has_value());
  EXPECT_FALSE(reply.error().maybe_sent) << reply.error().message;
  EXPECT_EQ(server->seen().size(), 1u);
  // insecure-skip-tls-verify accepts it anyway.
  config.insecure_skip_tls_verify = true;
  EXPECT_EQ(Client(config)->Get("/api", "get")->status, 200);
}

TEST_F(ApiClientTest, AConfiguredCaReplacesTheSystemStore) {
  SKIP_IF_NO_PKI();
  auto server = TestServer::Tls(Dir(), "server", /*require_client_cert=*/false);
  server->server().Get("/api", [](const httplib::Request&, httplib::Response&) {});
  server->Start();
  // Make the test CA part of OpenSSL's default ("system") store for this process.
  ASSERT_EQ(setenv("SSL_CERT_FILE", (Dir() + "/ca.crt").c_str(), 1), 0);
  ClientConfig config = Config(server->url("https"));
  auto system = Client(config)->Get("/api", "get");  // no CA given: the system store
  config.ca_pem = Pem("other.crt");
  auto pinned = Client(config)->Get("/api", "get");  // a CA given: only that CA
  unsetenv("SSL_CERT_FILE");
  ASSERT_TRUE(system.has_value()) << system.error().message;
  EXPECT_EQ(system->status, 200);
  EXPECT_FALSE(pinned.has_value());
}

TEST_F(ApiClientTest, AClientCertificateAuthenticates) {
  SKIP_IF_NO_PKI();
  auto server = TestServer::Tls(Dir(), "server", /*require_client_cert=*/true);
  std::mutex mutex;
  std::string subject;
  server->server().Get("/api", [&](const httplib::Request& req, httplib::Response&) {
    X509* peer = req.ssl != nullptr ? SSL_get1_peer_certificate(req.ssl) : nullptr;
    if (peer == nullptr) return;
    char name[256] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, name, sizeof name);
    X509_free(peer);
    std::lock_guard<std::mutex> lock(mutex);
    subject = name;
  });
  server->Start();
  ClientConfig config = Config(server->url("https"));
  config.ca_pem = Pem("ca.crt");
  EXPECT_FALSE(Client(config)->Get("/api", "get").has_value());  // no certificate: refused
  config.client_cert_pem = Pem("client.crt");
  config.client_key_pem = Pem("client.key");
  auto reply = Client(config)->Get("/api", "get");
  ASSERT_TRUE(reply.has_value()) << reply.error().message;
  EXPECT_EQ(reply->status, 200);
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_EQ(subject, "linkfit-client");
}

TEST_F(ApiClientTest, TlsServerNameVerifiesAnotherNameThanTheHost) {
  SKIP_IF_NO_PKI();
  // The certificate names api.example.test only; the URL says 127.0.0.1.
  auto server = TestServer::Tls(Dir(), "named", /*require_client_cert=*/false);
  server->server().Get("/api", [](const httplib::Request&, httplib::Response&) {});
  server->Start();
  ClientConfig config = Config(server->url("https"));
  config.ca_pem = Pem("ca.crt");
  auto mismatch = Client(config)->Get("/api", "get");
  ASSERT_FALSE(mismatch.has_value());
  EXPECT_FALSE(mismatch.error().maybe_sent);
  config.tls_server_name = "api.example.test";
  auto reply = Client(config)->Get("/api", "get");
  ASSERT_TRUE(reply.has_value()) << reply.error().message;
  EXPECT_EQ(reply->status, 200);
  // The connection went to the URL's host, and says so in its Host header.
  EXPECT_EQ(server->seen().back().host, "127.0.0.1:" + std::to_string(server->port()));
  config.tls_server_name = "wrong.example.test";
  EXPECT_FALSE(Client(config)->Get("/api", "get").has_value());
}

// --- watches ----------------------------------------------------------------------------------

// Collects a watch's lines.
struct Lines {
  std::function<bool(std::string_view)> Callback() {
    return [this](std::string_view line) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.emplace_back(line);
      return true;
    };
  }
  std::vector<std::string> Get() {
    std::lock_guard<std::mutex> lock(mutex);
    return lines;
  }
  std::mutex mutex;
  std::vector<std::string> lines;
};

TEST_F(ApiClientTest, WatchLinesMaySpanChunks) {
  auto server = TestServer::Plain();
  server->server().Get("/w", [](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [](size_t, httplib::DataSink& sink) {
      for (const char* piece :
           {"{\"a\":", "1}\n{\"b\"", ":2}\r\n", "\n  \n{\"c\":3", "}\n{\"d\":4}"}) {
        sink.write(piece, std::strlen(piece));
      }
      sink.done();
      return true;
    });
  });
  server->Start();
  ApiClientPtr client = Client(Config(server->url("http")));
  Lines lines;
  auto status = client->Watch("/w", lines.Callback(), seconds(5));
  ASSERT_TRUE(status.has_value()) << status.error().message;
  EXPECT_EQ(*status, 200);
  // The last line had no newline: delivered at the clean end.
  EXPECT_EQ(lines.Get(),
            (std::vector<std::string>{R"({"a":1})", R"({"b":2})", R"({"c":3})", R"({"d":4})"}));
}

TEST_F(ApiClientTest, AWatchStatusOtherThan200ReturnsItsBody) {
  const std::string status =
      R"json({"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old )json"
      R"json(resource version: 1 (5)","reason":"Expired","code":410})json";
  auto server = TestServer::Plain();
  server->server().Get("/w", [&](const httplib::Request&, httplib::Response& res) {
    res.status = 410;
    res.set_content(status, "application/json");
  });
  server->Start();
  ApiClientPtr client = Client(Config(server->url("http")));
  Lines lines;
  std::string body;
  auto result = client->Watch("/w", lines.Callback(), seconds(5), &body);
  ASSERT_TRUE(result.has_value()) << result.error().message;
  EXPECT_EQ(*result, 410);
  EXPECT_EQ(body, status);
  EXPECT_EQ(StatusMessage(body), "too old resource version: 1 (5)");
  EXPECT_TRUE(lines.Get().empty());
}

TEST_F(ApiClientTest, AWatchEndsWhenTheReaderSaysStopOrALineIsTooLong) {
  auto server = TestServer::Plain();
  server->server().Get("/lines", [](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [](size_t, httplib::DataSink& sink) {
      sink.write("1\n2\n3\n", 6);
      sink.done();
      return true;
    });
  });
  server->server().Get("/huge", [](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [](size_t, httplib::DataSink& sink) {
      const std::string mebibyte(std::size_t{1} << 20, 'x');
      for (int i = 0; i < 66 && sink.is_writable(); ++i) {
        if (!sink.write(mebibyte.data(), mebibyte.size())) return false;
      }
      sink.done();
      return true;
    });
  });
  server->Start();
  ApiClientPtr client = Client(Config(server->url("http")));
  std::vector<std::string> seen;
  auto stopped = client->Watch(
      "/lines",
      [&](std::string_view line) {
        seen.emplace_back(line);
        return line != "2";
      },
      seconds(5));
  ASSERT_FALSE(stopped.has_value());
  EXPECT_EQ(seen, (std::vector<std::string>{"1", "2"}));
  std::size_t calls = 0;
  auto huge = client->Watch(
      "/huge",
      [&](std::string_view) {
        ++calls;
        return true;
      },
      seconds(10));
  ASSERT_FALSE(huge.has_value());
  EXPECT_NE(huge.error().message.find("64 MiB"), std::string::npos) << huge.error().message;
  EXPECT_EQ(calls, 0u);
}

TEST_F(ApiClientTest, AWatchWithNoByteWithinItsIdleTimeoutFails) {
  auto server = TestServer::Plain();
  TestServer* raw = server.get();
  server->server().Get("/w", [raw](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [raw](size_t, httplib::DataSink&) {
      raw->Block();
      return false;
    });
  });
  server->Start();
  ApiClientPtr client = Client(Config(server->url("http")));
  Lines lines;
  const auto began = std::chrono::steady_clock::now();
  auto result = client->Watch("/w", lines.Callback(), milliseconds(300));
  const auto took = std::chrono::steady_clock::now() - began;
  ASSERT_FALSE(result.has_value());
  EXPECT_GE(took, milliseconds(250));
  EXPECT_LT(took, seconds(5));
}

// A server whose /hang handler sends nothing until released, and whose /stream handler sends
// one line and then nothing.
std::unique_ptr<TestServer> HangingServer() {
  auto server = TestServer::Plain();
  TestServer* raw = server.get();
  server->server().Get("/hang",
                       [raw](const httplib::Request&, httplib::Response&) { raw->Block(); });
  server->server().Get("/stream", [raw](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [raw](size_t, httplib::DataSink& sink) {
      sink.write("{\"first\":1}\n", 12);
      raw->Block();
      return false;
    });
  });
  server->server().Get("/ok", [](const httplib::Request&, httplib::Response&) {});
  server->Start();
  return server;
}

TEST_F(ApiClientTest, StopCutsHangingCallsPromptly) {
  for (const char* path : {"/hang", "/stream"}) {
    auto server = HangingServer();
    ApiClientPtr client = Client(Config(server->url("http")));
    Lines lines;
    std::atomic<bool> returned{false};
    ApiResult<int> result = 0;
    std::thread watcher([&] {
      result = client->Watch(path, lines.Callback(), seconds(60));
      returned = true;
    });
    ASSERT_TRUE(server->WaitForRequests(1));
    if (std::string_view(path) == "/stream") {
      for (int i = 0; i < 1000 && lines.Get().empty(); ++i)
        std::this_thread::sleep_for(milliseconds(5));
      EXPECT_EQ(lines.Get(), std::vector<std::string>{"{\"first\":1}"});
    }
    const auto stop = std::chrono::steady_clock::now();
    client->Stop();
    watcher.join();
    EXPECT_LT(std::chrono::steady_clock::now() - stop, seconds(2)) << path;
    EXPECT_FALSE(server->released()) << "the watch returned on its own";
    ASSERT_FALSE(result.has_value());
    EXPECT_NE(result.error().message.find("stopped"), std::string::npos) << result.error().message;
    // Later calls fail at once, without a request.
    auto later = client->Get("/ok", "get");
    ASSERT_FALSE(later.has_value());
    EXPECT_FALSE(later.error().maybe_sent);
    EXPECT_EQ(server->seen().size(), 1u);
  }
}

TEST_F(ApiClientTest, ACancelTokenCutsItsOwnCallsOnly) {
  auto server = HangingServer();
  ApiClientPtr client = Client(Config(server->url("http")));
  CancelToken cancel;
  Lines lines;
  ApiResult<int> watched = 0;
  ApiResult<ApiResponse> got = ApiResponse{};
  std::thread watcher(
      [&] { watched = client->Watch("/stream", lines.Callback(), seconds(60), nullptr, &cancel); });
  std::thread getter([&] { got = client->Get("/hang", "get", &cancel); });
  ASSERT_TRUE(server->WaitForRequests(2));
  // The same client serves other callers meanwhile.
  EXPECT_EQ(client->Get("/ok", "get")->status, 200);
  const auto began = std::chrono::steady_clock::now();
  cancel.Cancel();
  watcher.join();
  getter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - began, seconds(2));
  EXPECT_FALSE(server->released());
  EXPECT_FALSE(watched.has_value());
  ASSERT_FALSE(got.has_value());
  EXPECT_TRUE(got.error().maybe_sent);  // it was written: a write's outcome would be unknown
  // After the cut, the client still works; the cancelled token cuts new calls at once.
  EXPECT_EQ(client->Get("/ok", "get")->status, 200);
  const std::size_t requests = server->seen().size();
  EXPECT_FALSE(client->Get("/ok", "get", &cancel).has_value());
  EXPECT_EQ(server->seen().size(), requests);
}

TEST_F(ApiClientTest, ACutBeforeTheSocketExistsStillCutsTheCall) {
  // The cut lands after the call registered and before httplib made its socket (the token file
  // is read in between, on the fake clock): ClientImpl::stop() can do nothing then, and the
  // socket hook must fail the connection instead.
  auto server = HangingServer();
  FakeClock clock;
  WriteToken("t");
  ClientConfig config = Config(server->url("http"));
  config.token_file = Dir() + "/token";
  config.qps = 0;  // no rate limit: the token file read is the call's only look at the clock
  ApiClientPtr client = Client(config, clock);
  for (const bool watch : {false, true}) {
    CancelToken cancel;
    clock.OnNow([&] { cancel.Cancel(); });
    const auto began = std::chrono::steady_clock::now();
    bool failed = false;
    bool maybe_sent = true;
    if (watch) {
      Lines lines;
      auto result = client->Watch("/hang", lines.Callback(), seconds(60), nullptr, &cancel);
      failed = !result.has_value();
      if (failed) maybe_sent = result.error().maybe_sent;
    } else {
      auto result = client->Get("/hang", "get", &cancel);
      failed = !result.has_value();
      if (failed) maybe_sent = result.error().maybe_sent;
    }
    clock.OnNow(nullptr);
    EXPECT_TRUE(failed) << watch;
    EXPECT_FALSE(maybe_sent) << watch;
    EXPECT_LT(std::chrono::steady_clock::now() - began, seconds(2)) << watch;
    EXPECT_TRUE(server->seen().empty()) << watch;
  }
  EXPECT_EQ(client->Get("/ok", "get")->status, 200);
}

TEST(StatusMessageTest, ReadsTheMessageOrShortensTheBody) {
  EXPECT_EQ(StatusMessage(R"({"kind":"Status","code":409,"message":"pod a is already assigned"})"),
            "pod a is already assigned");
  EXPECT_EQ(StatusMessage("  upstream connect error  "), "upstream connect error");
  EXPECT_EQ(StatusMessage(""), "(empty body)");
  EXPECT_EQ(StatusMessage(R"({"kind":"Status"})"), R"({"kind":"Status"})");
  const std::string long_body(500, 'x');
  EXPECT_EQ(StatusMessage(long_body), std::string(200, 'x') + "...");
}

}  // namespace
}  // namespace linkfit::kube
