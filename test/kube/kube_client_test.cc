// The API client and the reflector against the fake API server: authentication (tokens, rotating
// token files, client certificates), TLS verification, Retry-After, unknown outcomes, kubeconfig
// and in-cluster configuration errors, the token bucket, and the list/watch loop's requests.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kube/fake_api_server.h"
#include "kube/fake_clock.h"
#include "kube/rate_limiter.h"
#include "linkfit/kube/api_client.h"
#include "linkfit/kube/reflector.h"
#include "testing/wait.h"

namespace linkfit::kube {
namespace {

using linkfit::testing::FakeApiServer;
using linkfit::testing::KubeconfigOptions;
using linkfit::testing::RequestMatch;

using linkfit::kube::testing::FakeClock;

class KubeClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    linkfit::testing::FakeApiServerOptions options;
    options.bookmark_interval = std::chrono::milliseconds(100);
    auto fake = linkfit::testing::StartFakeApiServer(options);
    ASSERT_TRUE(fake.has_value()) << fake.error().message;
    fake_ = std::move(*fake);
  }
  ApiClientPtr Client(const KubeconfigOptions& options = {}, Clock& clock = SystemClock()) {
    auto path = fake_->WriteKubeconfig(options);
    EXPECT_TRUE(path.has_value());
    auto config = LoadKubeconfig(*path);
    EXPECT_TRUE(config.has_value()) << (config ? "" : config.error().message);
    config->timeout = std::chrono::milliseconds(2000);
    auto client = NewApiClient(*config, nullptr, clock);
    EXPECT_TRUE(client.has_value()) << (client ? "" : client.error().message);
    return std::move(*client);
  }

  linkfit::testing::FakeApiServerPtr fake_;
};

TEST_F(KubeClientTest, SendsTheTokenAndUserAgent) {
  ApiClientPtr client = Client();
  auto reply = client->Get("/api/v1/nodes", "list");
  ASSERT_TRUE(reply.has_value()) << reply.error().message;
  EXPECT_EQ(reply->status, 200);
  const auto requests = fake_->Requests();
  ASSERT_FALSE(requests.empty());
  EXPECT_EQ(requests.back().authorization, "Bearer fake-token");
  EXPECT_EQ(requests.back().user_agent.rfind("linkfit/", 0), 0u);
}

TEST_F(KubeClientTest, ARotatedTokenFileIsReadAgainAfterA401AndEveryMinute) {
  FakeClock clock;
  KubeconfigOptions options;
  options.credential = KubeconfigOptions::Credential::kTokenFile;
  ApiClientPtr client = Client(options, clock);
  ASSERT_EQ(client->Get("/api/v1/nodes", "list")->status, 200);
  const std::string token_file = fake_->work_dir() + "/token";
  // The kubelet rotates the token; the old one stops working at once.
  std::ofstream(token_file, std::ios::trunc) << "rotated-1\n";
  fake_->SetTokens({"rotated-1"});
  EXPECT_EQ(client->Get("/api/v1/nodes", "list")->status, 200);  // a 401, re-read, retried
  // Without a 401: read again once a minute has passed.
  std::ofstream(token_file, std::ios::trunc) << "rotated-2";
  fake_->SetTokens({"rotated-1", "rotated-2"});
  clock.Advance(std::chrono::seconds(61));
  ASSERT_EQ(client->Get("/api/v1/nodes", "list")->status, 200);
  EXPECT_EQ(fake_->Requests().back().authorization, "Bearer rotated-2");
  // A token that is simply wrong stays a 401 (one re-read, no loop).
  fake_->SetTokens({"other"});
  EXPECT_EQ(client->Get("/api/v1/nodes", "list")->status, 401);
}

TEST_F(KubeClientTest, A429IsRetriedOnceAfterItsRetryAfter) {
  FakeClock clock;
  ApiClientPtr client = Client({}, clock);
  fake_->FailNext(1, 429, RequestMatch{"GET", "/api/v1/nodes"}, 3);
  auto reply = client->Get("/api/v1/nodes", "list");
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 200);
  bool slept_three = false;
  for (auto sleep : clock.sleeps()) slept_three = slept_three || sleep == std::chrono::seconds(3);
  EXPECT_TRUE(slept_three);
  fake_->FailNext(2, 429, RequestMatch{"GET", "/api/v1/nodes"}, 1);
  EXPECT_EQ(client->Get("/api/v1/nodes", "list")->status, 429);  // only one retry
}

TEST_F(KubeClientTest, AWrongCaFailsBeforeSendingAndInsecureSkipWorks) {
  auto other = linkfit::testing::TestPki::Create();
  ASSERT_TRUE(other.has_value());
  ClientConfig config;
  config.server = fake_->url();
  config.token = "fake-token";
  config.ca_pem = (*other)->ca_cert_pem();
  config.source = "test";
  auto client = NewApiClient(config);
  ASSERT_TRUE(client.has_value());
  auto reply = (*client)->Post("/api/v1/namespaces/ml/pods/p/binding", "{}", "bind");
  ASSERT_FALSE(reply.has_value());
  EXPECT_FALSE(reply.error().maybe_sent) << reply.error().message;
  EXPECT_EQ(fake_->CountRequests(RequestMatch{"POST", ""}), 0u);
  KubeconfigOptions insecure;
  insecure.insecure_skip_tls_verify = true;
  EXPECT_EQ(Client(insecure)->Get("/api/v1/nodes", "list")->status, 200);
}

TEST_F(KubeClientTest, ClientCertificatesAuthenticate) {
  KubeconfigOptions options;
  options.credential = KubeconfigOptions::Credential::kClientCertificate;
  options.embed_client_certificate = false;
  options.relative_paths = true;
  ApiClientPtr client = Client(options);
  ASSERT_EQ(client->Get("/api/v1/nodes", "list")->status, 200);
  EXPECT_EQ(fake_->Requests().back().user.rfind("cert:", 0), 0u);
}

TEST_F(KubeClientTest, ALostReplyIsAnUnknownOutcome) {
  ApiClientPtr client = Client();
  ASSERT_TRUE(fake_->AddPod(linkfit::testing::MakeFakePod("ml", "p")).has_value());
  fake_->AddNode(linkfit::testing::MakeFakeNode("n"));
  fake_->DropNext(1, linkfit::testing::DropMode::kAfterApply, RequestMatch{"POST", "/binding"});
  auto reply = client->Post(
      "/api/v1/namespaces/ml/pods/p/binding",
      R"({"apiVersion":"v1","kind":"Binding","metadata":{"name":"p","namespace":"ml"},)"
      R"("target":{"apiVersion":"v1","kind":"Node","name":"n"}})",
      "bind");
  ASSERT_FALSE(reply.has_value());
  EXPECT_TRUE(reply.error().maybe_sent);
  EXPECT_EQ((*fake_->GetPod("ml", "p"))["spec"]["nodeName"], "n");  // it did land
}

TEST_F(KubeClientTest, StopInterruptsAWatchPromptly) {
  ApiClientPtr client = Client();
  std::atomic<bool> returned{false};
  std::thread watcher([&] {
    (void)client->Watch(
        "/api/v1/pods?watch=1&resourceVersion=" + fake_->CurrentResourceVersion(),
        [](std::string_view) { return true; }, std::chrono::seconds(60));
    returned = true;
  });
  ASSERT_TRUE(fake_->WaitForOpenWatches(1, std::chrono::seconds(5)));
  const auto stop = std::chrono::steady_clock::now();
  client->Stop();
  watcher.join();
  EXPECT_TRUE(returned);
  EXPECT_LT(std::chrono::steady_clock::now() - stop, std::chrono::seconds(5));
}

TEST(KubeconfigTest, RefusesWhatItCannotUseNamingTheProblem) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("linkfit-kubeconfig-" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  const auto write = [&](const std::string& text) {
    const std::string path = dir + "/config";
    std::ofstream(path, std::ios::trunc) << text;
    return path;
  };
  const std::string head =
      "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: "
      "{cluster: k, user: u}\nclusters:\n- name: k\n  cluster: {server: 'https://10.0.0.1:6443'";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {head + "}\nusers:\n- name: u\n  user:\n    exec: {command: aws}\n", "exec plugin"},
      {head + "}\nusers:\n- name: u\n  user:\n    auth-provider: {name: gcp}\n", "auth-provider"},
      {head + ", certificate-authority-data: '!!!'}\nusers:\n- name: u\n  user: {token: t}\n",
       "base64"},
      {head + ", certificate-authority-data: aGVsbG8=}\nusers:\n- name: u\n  user: {token: t}\n",
       "PEM"},
      {head + ", certificate-authority: missing.crt}\nusers:\n- name: u\n  user: {token: t}\n",
       "missing.crt"},
      {head + "}\nusers:\n- name: v\n  user: {token: t}\n", "no users entry named"},
      {"current-context: nope\ncontexts: []\n", "no contexts entry named"},
      {"{{{", "not YAML"},
  };
  for (const auto& [text, expected] : cases) {
    auto config = LoadKubeconfig(write(text));
    ASSERT_FALSE(config.has_value()) << text;
    EXPECT_NE(config.error().message.find(expected), std::string::npos) << config.error().message;
    EXPECT_NE(config.error().message.find(dir), std::string::npos) << config.error().message;
  }
  EXPECT_FALSE(LoadKubeconfig(dir + "/absent").has_value());
  auto ok = LoadKubeconfig(write(head + "}\nusers:\n- name: u\n  user: {token: t}\n"));
  ASSERT_TRUE(ok.has_value()) << ok.error().message;
  EXPECT_EQ(ok->server, "https://10.0.0.1:6443");
  EXPECT_EQ(ok->token, "t");
  std::filesystem::remove_all(dir);
}

TEST(KubeconfigTest, InClusterConfigBracketsIpv6AndNeedsItsFiles) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("linkfit-incluster-" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/token") << "abc\n";
  std::ofstream(dir + "/ca.crt") << "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n";
  InClusterPaths paths{dir + "/token", dir + "/ca.crt", std::string("fd00::1"), std::string("443")};
  auto config = InClusterConfig(paths);
  ASSERT_TRUE(config.has_value()) << config.error().message;
  EXPECT_EQ(config->server, "https://[fd00::1]:443");
  EXPECT_EQ(config->token_file, dir + "/token");
  paths.token_file = dir + "/absent";
  EXPECT_FALSE(InClusterConfig(paths).has_value());
  std::filesystem::remove_all(dir);
}

TEST(RateLimiterTest, BurstThenQps) {
  FakeClock clock;
  RateLimiter limiter(10, 3, clock);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limiter.Reserve().count(), 0);
  EXPECT_EQ(limiter.Reserve(), std::chrono::milliseconds(100));
  EXPECT_EQ(limiter.Reserve(), std::chrono::milliseconds(200));
  clock.Advance(std::chrono::seconds(1));  // 10 refilled, 2 owed: capped at the burst of 3
  EXPECT_EQ(limiter.Reserve().count(), 0);
  RateLimiter unlimited(0, 1, clock);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(unlimited.Reserve().count(), 0);
}

// Records what the reflector hands its sink.
class RecordingSink final : public ReflectorSink {
 public:
  void BeginList() override { Add("begin"); }
  void ListItem(std::string_view json) override { Add("item " + Name(json)); }
  void EndList(std::string_view rv) override { Add("end " + std::string(rv)); }
  void Event(WatchEventType type, std::string_view json) override {
    const char* names[] = {"ADDED", "MODIFIED", "DELETED"};
    Add(std::string(names[static_cast<int>(type)]) + " " + Name(json));
  }
  std::vector<std::string> calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }
  bool Has(const std::string& call) const {
    const auto all = calls();
    return std::find(all.begin(), all.end(), call) != all.end();
  }

 private:
  static std::string Name(std::string_view json) {
    const auto object = nlohmann::json::parse(json);
    return object["metadata"]["name"];
  }
  void Add(std::string call) {
    std::lock_guard<std::mutex> lock(mutex_);
    calls_.push_back(std::move(call));
  }
  mutable std::mutex mutex_;
  std::vector<std::string> calls_;
};

using linkfit::testing::WaitFor;

TEST_F(KubeClientTest, TheReflectorListsInPagesWatchesResumesAndRelistsAfterCompaction) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(
        fake_->AddPod(linkfit::testing::MakeFakePod("ml", "p" + std::to_string(i))).has_value());
  }
  ApiClientPtr client = Client();
  RecordingSink sink;
  ReflectorOptions options;
  options.kind = "pods";
  options.path = "/api/v1/pods";
  options.page_size = 2;
  options.initial_backoff = std::chrono::milliseconds(10);
  Reflector reflector(*client, sink, options);
  reflector.Start();
  ASSERT_TRUE(WaitFor([&] { return reflector.synced(); }));
  int pages = 0;
  for (const auto& request : fake_->Requests()) {
    pages += request.target.find("limit=2") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(pages, 3);  // 2 + 2 + 1 items
  const auto calls = sink.calls();
  ASSERT_GE(calls.size(), 7u);
  EXPECT_EQ(calls[0], "begin");
  EXPECT_EQ(calls[6].rfind("end ", 0), 0u);
  ASSERT_TRUE(fake_->WaitForOpenWatches(1, std::chrono::seconds(5)));
  ASSERT_TRUE(fake_->AddPod(linkfit::testing::MakeFakePod("ml", "live")).has_value());
  ASSERT_TRUE(WaitFor([&] { return sink.Has("ADDED live"); }));
  // A cut watch resumes from the last resourceVersion: the events in between arrive once.
  const std::string before_cut = reflector.last_resource_version();
  fake_->CutWatches();
  ASSERT_TRUE(fake_->DeletePod("ml", "p0").has_value());
  ASSERT_TRUE(WaitFor([&] { return sink.Has("DELETED p0"); }));
  EXPECT_EQ(reflector.lists_completed(), 1u);
  bool resumed = false;
  for (const auto& request : fake_->Requests()) {
    resumed = resumed || request.target.find("resourceVersion=" + before_cut) != std::string::npos;
  }
  EXPECT_TRUE(resumed);
  // History compacted while no watch is open: 410, relist.
  fake_->FailNext(1000, 503, RequestMatch{"GET", "/api/v1/pods"});
  fake_->CutWatches();
  ASSERT_TRUE(fake_->WaitForOpenWatches(0, std::chrono::seconds(5)));
  ASSERT_TRUE(fake_->DeletePod("ml", "p1").has_value());
  fake_->Compact();
  fake_->ClearFaults();
  ASSERT_TRUE(WaitFor([&] { return reflector.lists_completed() == 2; }));
  reflector.Stop();
}

}  // namespace
}  // namespace linkfit::kube
