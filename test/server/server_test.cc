#include "linkfit/server/server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "linkfit/server/prometheus_metrics.h"

namespace linkfit::server {
namespace {

// A handler that records what reached it and answers with a configurable reply.
class FakeHandler final : public ExtenderHandler {
 public:
  struct Call {
    std::string method;
    std::string body;
  };

  HttpReply Filter(Body body) override { return Record("filter", body.text); }
  HttpReply Prioritize(Body body) override { return Record("prioritize", body.text); }
  HttpReply Bind(std::string_view body) override { return Record("bind", body); }
  HttpReply Preempt(std::string_view body) override { return Record("preempt", body); }
  HttpReply Inspect(std::string_view node) override { return Record("inspect", node); }
  HttpReply Explain(std::string_view pod_json) override { return Record("explain", pod_json); }
  bool Ready() const override { return ready.load(); }

  std::vector<Call> calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }

  std::atomic<bool> ready{true};
  std::atomic<bool> throw_on_call{false};

 private:
  HttpReply Record(const std::string& method, std::string_view body) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      calls_.push_back({method, std::string(body)});
    }
    if (throw_on_call) throw std::runtime_error("boom in " + method);
    return HttpReply{200, "{\"Reply\":\"" + method + "\"}"};
  }

  mutable std::mutex mutex_;
  std::vector<Call> calls_;
};

ServerOptions LocalOptions() {
  ServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.threads = 4;
  return options;
}

class ServerTest : public ::testing::Test {
 protected:
  void StartServer(const ServerOptions& options) {
    auto server = NewServer(options, handler_, metrics_);
    ASSERT_TRUE(server.has_value()) << server.error().message;
    server_ = std::move(*server);
    auto started = server_->Start();
    ASSERT_TRUE(started.has_value()) << started.error().message;
    ASSERT_GT(server_->port(), 0);
  }

  httplib::Client Client() const {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_keep_alive(true);
    // httplib's client writes headers and body separately; without this Nagle's algorithm
    // and the server's delayed ACK add ~40 ms to every request.
    client.set_tcp_nodelay(true);
    return client;
  }

  FakeHandler handler_;
  PrometheusMetrics metrics_;
  ServerPtr server_;
};

// The extender protocol's error shape, with its PascalCase key.
bool IsJsonError(const std::string& body) { return body.rfind("{\"Error\":\"", 0) == 0; }

TEST_F(ServerTest, EachVerbReachesTheHandlerWithTheExactBody) {
  StartServer(LocalOptions());
  httplib::Client client = Client();
  // Go's encoder output: escaped <, >, & and raw UTF-8, no trailing newline.
  const std::string body =
      "{\"Pod\":{\"metadata\":{\"name\":\"a\\u003cb\\u0026\"}},\"NodeNames\":[\"n\xc3\xa9\"]}";
  for (const std::string verb : {"filter", "prioritize", "bind", "preempt"}) {
    auto response = client.Post(("/scheduler/" + verb).c_str(), body, "application/json");
    ASSERT_TRUE(response) << verb;
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(response->body, "{\"Reply\":\"" + verb + "\"}");
    EXPECT_EQ(response->get_header_value("Content-Type"), "application/json");
    ASSERT_FALSE(handler_.calls().empty());
    EXPECT_EQ(handler_.calls().back().method, verb);
    EXPECT_EQ(handler_.calls().back().body, body);
  }
}

TEST_F(ServerTest, InspectAndExplainReachTheHandler) {
  StartServer(LocalOptions());
  httplib::Client client = Client();
  auto all = client.Get("/inspect");
  ASSERT_TRUE(all);
  EXPECT_EQ(all->status, 200);
  auto one = client.Get("/inspect/gpu-node-7");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->status, 200);
  auto explain = client.Post("/explain", "{\"metadata\":{}}", "application/json");
  ASSERT_TRUE(explain);
  EXPECT_EQ(explain->status, 200);
  const auto calls = handler_.calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].method, "inspect");
  EXPECT_EQ(calls[0].body, "");
  EXPECT_EQ(calls[1].body, "gpu-node-7");
  EXPECT_EQ(calls[2].method, "explain");
  EXPECT_EQ(calls[2].body, "{\"metadata\":{}}");
}

TEST_F(ServerTest, ConfigurablePrefix) {
  ServerOptions options = LocalOptions();
  options.url_prefix = "/ext/v1";
  StartServer(options);
  httplib::Client client = Client();
  auto moved = client.Post("/ext/v1/filter", "{}", "application/json");
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->status, 200);
  auto old = client.Post("/scheduler/filter", "{}", "application/json");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->status, 404);
}

TEST_F(ServerTest, UnknownPathsAre404AndWrongMethods405) {
  StartServer(LocalOptions());
  httplib::Client client = Client();
  struct Case {
    std::string method;
    std::string path;
    int status;
  };
  const std::vector<Case> cases = {
      {"GET", "/nope", 404},
      {"POST", "/nope", 404},
      {"POST", "/scheduler/unknown-verb", 404},
      {"POST", "/scheduler/filter/", 404},
      {"GET", "/scheduler/filter", 405},
      {"PUT", "/scheduler/bind", 405},
      {"DELETE", "/scheduler/bind", 405},
      {"POST", "/healthz", 405},
      {"POST", "/metrics", 405},
      {"POST", "/inspect/node-a", 405},
      {"GET", "/explain", 405},
  };
  for (const Case& c : cases) {
    const auto send = [&]() {
      if (c.method == "GET") return client.Get(c.path.c_str());
      if (c.method == "POST") return client.Post(c.path.c_str(), "{\"x\":1}", "application/json");
      if (c.method == "PUT") return client.Put(c.path.c_str(), "{\"x\":1}", "application/json");
      return client.Delete(c.path.c_str());
    };
    httplib::Result response = send();
    ASSERT_TRUE(response) << c.method << " " << c.path;
    EXPECT_EQ(response->status, c.status) << c.method << " " << c.path;
    EXPECT_TRUE(IsJsonError(response->body)) << response->body;
    if (c.status == 405) {
      EXPECT_FALSE(response->get_header_value("Allow").empty());
    }
  }
  EXPECT_TRUE(handler_.calls().empty());
}

TEST_F(ServerTest, OversizedBodyIs413AndTheConnectionStillServes) {
  ServerOptions options = LocalOptions();
  options.max_body_bytes = 1024;
  StartServer(options);
  httplib::Client client = Client();
  auto big = client.Post("/scheduler/filter", std::string(4096, 'x'), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_TRUE(IsJsonError(big->body)) << big->body;
  EXPECT_TRUE(handler_.calls().empty());

  auto at_limit = client.Post("/scheduler/filter", std::string(1024, 'y'), "application/json");
  ASSERT_TRUE(at_limit);
  EXPECT_EQ(at_limit->status, 200);
  ASSERT_EQ(handler_.calls().size(), 1u);
  EXPECT_EQ(handler_.calls()[0].body.size(), 1024u);
  EXPECT_NE(metrics_.Render().find("outcome=\"too_large\",verb=\"filter\"} 1"), std::string::npos);
}

TEST_F(ServerTest, ChunkedBodiesAreReadAndLimited) {
  ServerOptions options = LocalOptions();
  options.max_body_bytes = 1024;
  StartServer(options);
  const auto chunked_post = [&](const std::string& data) {
    httplib::Client client = Client();
    return client.Post(
        "/scheduler/prioritize",
        [&data](std::size_t, httplib::DataSink& sink) {
          sink.write(data.data(), data.size() / 2);
          sink.write(data.data() + data.size() / 2, data.size() - data.size() / 2);
          sink.done();
          return true;
        },
        "application/json");
  };
  auto small = chunked_post("{\"chunked\":true}");
  ASSERT_TRUE(small);
  EXPECT_EQ(small->status, 200);
  ASSERT_EQ(handler_.calls().size(), 1u);
  EXPECT_EQ(handler_.calls()[0].body, "{\"chunked\":true}");

  auto big = chunked_post(std::string(2048, 'z'));
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_EQ(handler_.calls().size(), 1u);

  httplib::Client fresh = Client();
  auto after = fresh.Get("/healthz");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
}

TEST_F(ServerTest, EmptyBodyIs400) {
  StartServer(LocalOptions());
  httplib::Client client = Client();
  for (const char* path : {"/scheduler/filter", "/scheduler/bind", "/explain"}) {
    auto response = client.Post(path, "", "application/json");
    ASSERT_TRUE(response) << path;
    EXPECT_EQ(response->status, 400) << path;
    EXPECT_TRUE(IsJsonError(response->body)) << response->body;
  }
  EXPECT_TRUE(handler_.calls().empty());
}

TEST_F(ServerTest, MalformedJsonIsTheHandlersDecision) {
  StartServer(LocalOptions());
  httplib::Client client = Client();
  auto response = client.Post("/scheduler/filter", "{not json", "application/json");
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  ASSERT_EQ(handler_.calls().size(), 1u);
  EXPECT_EQ(handler_.calls()[0].body, "{not json");
}

TEST_F(ServerTest, ThrowingHandlerIs500AndTheServerStaysUp) {
  StartServer(LocalOptions());
  httplib::Client client = Client();
  handler_.throw_on_call = true;
  for (const char* path : {"/scheduler/filter", "/scheduler/bind", "/explain"}) {
    auto response = client.Post(path, "{}", "application/json");
    ASSERT_TRUE(response) << path;
    EXPECT_EQ(response->status, 500) << path;
    EXPECT_TRUE(IsJsonError(response->body)) << response->body;
    EXPECT_NE(response->body.find("boom"), std::string::npos) << response->body;
  }
  auto inspect = client.Get("/inspect/n1");
  ASSERT_TRUE(inspect);
  EXPECT_EQ(inspect->status, 500);

  handler_.throw_on_call = false;
  auto ok = client.Post("/scheduler/filter", "{}", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_NE(metrics_.Render().find("outcome=\"exception\",verb=\"filter\"} 1"), std::string::npos);
}

TEST_F(ServerTest, FiftySequentialRequestsKeepOneConnection) {
  StartServer(LocalOptions());
  httplib::Client client = Client();
  for (int i = 0; i < 50; ++i) {
    auto response =
        client.Post("/scheduler/filter", "{\"i\":" + std::to_string(i) + "}", "application/json");
    ASSERT_TRUE(response) << i;
    ASSERT_EQ(response->status, 200) << i;
    // httplib's default would answer "Connection: close" on every 5th request.
    EXPECT_NE(response->get_header_value("Connection"), "close") << i;
    EXPECT_EQ(response->get_header_value("Keep-Alive"), "timeout=90, max=100000") << i;
  }
  EXPECT_EQ(handler_.calls().size(), 50u);
}

TEST_F(ServerTest, MetricsExposeTheRequestHistogram) {
  StartServer(LocalOptions());
  httplib::Client client = Client();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client.Post("/scheduler/filter", "{}", "application/json"));
  }
  ASSERT_TRUE(client.Post("/scheduler/bind", "{}", "application/json"));
  auto response = client.Get("/metrics");
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 200);
  EXPECT_NE(response->get_header_value("Content-Type").find("version=0.0.4"), std::string::npos);
  const std::string& text = response->body;
  EXPECT_NE(text.find("# TYPE linkfit_request_duration_seconds histogram"), std::string::npos);
  EXPECT_NE(text.find("linkfit_request_duration_seconds_count{verb=\"filter\"} 3"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("linkfit_request_duration_seconds_count{verb=\"bind\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("linkfit_requests_total{outcome=\"ok\",verb=\"filter\"} 3"),
            std::string::npos);
}

TEST_F(ServerTest, HealthzAndReadyz) {
  StartServer(LocalOptions());
  httplib::Client client = Client();
  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok");

  handler_.ready = false;
  auto not_ready = client.Get("/readyz");
  ASSERT_TRUE(not_ready);
  EXPECT_EQ(not_ready->status, 503);
  handler_.ready = true;
  auto ready = client.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  auto head = client.Head("/healthz");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
}

TEST_F(ServerTest, StopClosesIdleKeepAliveConnectionsPromptly) {
  ServerOptions options = LocalOptions();
  options.keep_alive_timeout = std::chrono::seconds(120);
  StartServer(options);
  httplib::Client client = Client();  // stays connected and idle while the server stops
  auto response = client.Get("/healthz");
  ASSERT_TRUE(response);
  const auto start = std::chrono::steady_clock::now();
  server_->Stop();
  server_->Wait();
  // Without closing idle connections Stop would wait for the 120 s keep-alive timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_FALSE(client.Get("/healthz"));
  server_->Stop();  // idempotent
  server_->Wait();
}

TEST_F(ServerTest, StartFailsOnABusyPort) {
  StartServer(LocalOptions());
  ServerOptions options = LocalOptions();
  options.port = server_->port();
  auto second = NewServer(options, handler_, metrics_);
  ASSERT_TRUE(second.has_value());
  auto started = (*second)->Start();
  ASSERT_FALSE(started.has_value());
  EXPECT_NE(started.error().message.find(std::to_string(options.port)), std::string::npos);
}

TEST(NewServerTest, RejectsInconsistentOptions) {
  FakeHandler handler;
  PrometheusMetrics metrics;
  struct Case {
    std::string name;
    ServerOptions options;
    std::string expected;
  };
  std::vector<Case> cases;
  {
    ServerOptions o = LocalOptions();
    o.tls.cert_file = "/nonexistent/cert.pem";
    cases.push_back({"cert without key", o, "both cert_file and key_file"});
  }
  {
    ServerOptions o = LocalOptions();
    o.tls.cert_file = "/nonexistent/cert.pem";
    o.tls.key_file = "/nonexistent/key.pem";
    cases.push_back({"missing files", o, "/nonexistent/cert.pem"});
  }
  {
    ServerOptions o = LocalOptions();
    o.tls.client_ca_file = "/nonexistent/ca.pem";
    cases.push_back({"CA without TLS", o, "needs TLS"});
  }
  {
    ServerOptions o = LocalOptions();
    o.url_prefix = "scheduler/";
    cases.push_back({"bad prefix", o, "url_prefix"});
  }
  {
    ServerOptions o = LocalOptions();
    o.threads = 0;
    cases.push_back({"no threads", o, "threads"});
  }
  for (const Case& c : cases) {
    auto server = NewServer(c.options, handler, metrics);
    ASSERT_FALSE(server.has_value()) << c.name;
    EXPECT_NE(server.error().message.find(c.expected), std::string::npos)
        << c.name << ": " << server.error().message;
  }
}

// --- TLS -------------------------------------------------------------------------------------

class TlsTest : public ServerTest {
 protected:
  void SetUp() override {
    if (std::system("openssl version >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "openssl CLI not found";
    }
    std::string pattern = ::testing::TempDir() + "linkfit-tls-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::vector<std::string> commands = {
        "openssl req -x509 " + ec + " -keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca",
        "openssl req " + ec + " -keyout server.key -out server.csr -subj /CN=127.0.0.1",
        "printf 'subjectAltName=IP:127.0.0.1\\n' > server.ext",
        "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
        "-out server.crt -days 2 -extfile server.ext",
        "openssl req " + ec + " -keyout client.key -out client.csr -subj /CN=kube-scheduler",
        "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
        "-out client.crt -days 2",
        // A client certificate from a CA the server does not trust.
        "openssl req -x509 " + ec + " -keyout rogue.key -out rogue.crt -days 2 -subj /CN=rogue",
    };
    for (const std::string& command : commands) {
      const std::string full = "cd '" + dir_ + "' && " + command + " >/dev/null 2>&1";
      ASSERT_EQ(std::system(full.c_str()), 0) << command;
    }
  }

  void TearDown() override {
    server_.reset();
    if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
  }

  ServerOptions TlsOptionsWithClientCa(bool require) const {
    ServerOptions options = LocalOptions();
    options.tls.cert_file = dir_ + "/server.crt";
    options.tls.key_file = dir_ + "/server.key";
    options.tls.client_ca_file = dir_ + "/ca.crt";
    options.tls.require_client_cert = require;
    return options;
  }

  httplib::Result TlsGet(const std::string& cert, const std::string& key) const {
    const auto get = [&](httplib::SSLClient& client) {
      client.set_ca_cert_path((dir_ + "/ca.crt").c_str());
      client.enable_server_certificate_verification(true);
      return client.Get("/healthz");
    };
    if (cert.empty()) {
      httplib::SSLClient client("127.0.0.1", server_->port());
      return get(client);
    }
    httplib::SSLClient client("127.0.0.1", server_->port(), dir_ + "/" + cert, dir_ + "/" + key);
    return get(client);
  }

  std::string dir_;
};

TEST_F(TlsTest, MutualTlsAcceptsOnlyTrustedClientCertificates) {
  StartServer(TlsOptionsWithClientCa(/*require=*/true));
  auto trusted = TlsGet("client.crt", "client.key");
  ASSERT_TRUE(trusted) << httplib::to_string(trusted.error());
  EXPECT_EQ(trusted->status, 200);
  EXPECT_FALSE(TlsGet("", ""));
  EXPECT_FALSE(TlsGet("rogue.crt", "rogue.key"));

  httplib::Client plain("127.0.0.1", server_->port());
  auto plain_response = plain.Get("/healthz");
  EXPECT_TRUE(!plain_response || plain_response->status != 200);
}

TEST_F(TlsTest, OptionalClientCertificate) {
  StartServer(TlsOptionsWithClientCa(/*require=*/false));
  auto anonymous = TlsGet("", "");
  ASSERT_TRUE(anonymous) << httplib::to_string(anonymous.error());
  EXPECT_EQ(anonymous->status, 200);
  auto trusted = TlsGet("client.crt", "client.key");
  ASSERT_TRUE(trusted);
  EXPECT_EQ(trusted->status, 200);
  EXPECT_FALSE(TlsGet("rogue.crt", "rogue.key"));
}

TEST_F(TlsTest, MismatchedKeyIsAnError) {
  ServerOptions options = TlsOptionsWithClientCa(false);
  options.tls.key_file = dir_ + "/client.key";
  auto server = NewServer(options, handler_, metrics_);
  ASSERT_FALSE(server.has_value());
  EXPECT_NE(server.error().message.find("client.key"), std::string::npos) << server.error().message;
}

}  // namespace
}  // namespace linkfit::server
