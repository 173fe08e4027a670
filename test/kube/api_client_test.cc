// The API client against small scripted servers (api_client_testing.h): authentication headers,
// token files re-read on a fake clock and after a 401, Retry-After, unknown outcomes, bad
// configurations, CA pinning, client certificates and tls-server-name.

#include "kube/api_client_testing.h"

namespace linkfit::kube {
namespace {

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

}  // namespace
}  // namespace linkfit::kube
