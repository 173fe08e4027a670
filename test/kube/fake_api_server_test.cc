#include "kube/fake_api_server.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

namespace linkfit::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr char kToken[] = "fake-token";
constexpr char kUserAgent[] = "linkfit-test/0.1";
constexpr milliseconds kWait{5000};  // upper bound of every wait; they all end much sooner

// Returns the value of a store call, failing the test (and returning null) on an error.
json Must(const Result<json>& result) {
  EXPECT_TRUE(result.has_value()) << result.error().message;
  return result.has_value() ? *result : json();
}
json Must(const std::optional<json>& object) {
  EXPECT_TRUE(object.has_value());
  return object.value_or(json());
}

uint64_t Revision(const json& object) {
  return std::stoull(object["metadata"]["resourceVersion"].get<std::string>());
}

// Reads a watch stream on its own thread, one JSON object per line.
class WatchReader {
 public:
  WatchReader(std::unique_ptr<httplib::ClientImpl> client, std::string path)
      : client_(std::move(client)) {
    thread_ = std::thread([this, path = std::move(path)] {
      httplib::Result result = client_->Get(path, [this](const char* data, size_t length) {
        std::lock_guard<std::mutex> lock(mutex_);
        buffer_.append(data, length);
        for (size_t newline; (newline = buffer_.find('\n')) != std::string::npos;) {
          lines_.push_back(json::parse(buffer_.substr(0, newline)));
          buffer_.erase(0, newline + 1);
        }
        changed_.notify_all();
        return true;
      });
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = result.error();
      status_ = result ? result->status : 0;
      done_ = true;
      changed_.notify_all();
    });
  }
  ~WatchReader() {
    client_->stop();
    thread_.join();
  }

  // Returns the next event, or nullopt when none came within `timeout` or the stream ended.
  std::optional<json> Next(milliseconds timeout = kWait) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, timeout, [this] { return !lines_.empty() || done_; });
    if (lines_.empty()) return std::nullopt;
    json line = std::move(lines_.front());
    lines_.pop_front();
    return line;
  }
  // Returns the next event that is not a BOOKMARK.
  std::optional<json> NextChange() {
    for (std::optional<json> event = Next(); event; event = Next()) {
      if ((*event)["type"] != "BOOKMARK") return event;
    }
    return std::nullopt;
  }
  // Waits for the stream to end; returns false on timeout.
  bool WaitDone(milliseconds timeout = kWait) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [this] { return done_; });
  }
  httplib::Error error() {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }
  int status() {
    std::lock_guard<std::mutex> lock(mutex_);
    return status_;
  }
  void Close() { client_->stop(); }

 private:
  std::unique_ptr<httplib::ClientImpl> client_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string buffer_;
  std::deque<json> lines_;
  bool done_ = false;
  httplib::Error error_ = httplib::Error::Success;
  int status_ = 0;
};

class FakeApiServerTest : public ::testing::Test {
 protected:
  void Start(FakeApiServerOptions options = {}) {
    options.bookmark_interval = milliseconds(100);
    auto started = StartFakeApiServer(std::move(options));
    ASSERT_TRUE(started.has_value()) << started.error().message;
    server_ = std::move(*started);
  }
  void SetUp() override { Start(); }

  // A client that trusts the server's CA (and sends `token` when not empty).
  std::unique_ptr<httplib::ClientImpl> Client(const std::string& token = kToken) {
    std::unique_ptr<httplib::ClientImpl> client;
    if (server_->pki() != nullptr) {
      auto tls = std::make_unique<httplib::SSLClient>("127.0.0.1", server_->port());
      tls->set_ca_cert_path(server_->pki()->ca_cert_path());
      tls->enable_server_certificate_verification(true);
      client = std::move(tls);
    } else {
      client = std::make_unique<httplib::ClientImpl>("127.0.0.1", server_->port());
    }
    httplib::Headers headers = {{"User-Agent", kUserAgent}};
    if (!token.empty()) headers.emplace("Authorization", std::string("Bearer ") + token);
    client->set_default_headers(headers);
    client->set_connection_timeout(5, 0);
    client->set_read_timeout(5, 0);
    return client;
  }

  httplib::Result Get(const std::string& path) { return Client()->Get(path); }
  // One request of any method with a body ("" for none).
  httplib::Result Send(const std::string& method, const std::string& path,
                       const std::string& body = "",
                       const std::string& content_type = "application/json") {
    std::unique_ptr<httplib::ClientImpl> client = Client();
    if (method == "POST") return client->Post(path, body, content_type);
    if (method == "PUT") return client->Put(path, body, content_type);
    if (method == "PATCH") return client->Patch(path, body, content_type);
    if (method == "DELETE") {
      return body.empty() ? client->Delete(path) : client->Delete(path, body, content_type);
    }
    return client->Get(path);
  }
  httplib::Result Bind(const std::string& name, const json& binding) {
    return Client()->Post("/api/v1/namespaces/default/pods/" + name + "/binding", binding.dump(),
                          "application/json");
  }
  json Binding(const std::string& name, const std::string& node, const std::string& uid = "") {
    json binding = {{"apiVersion", "v1"},
                    {"kind", "Binding"},
                    {"metadata", {{"name", name}, {"namespace", "default"}}},
                    {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
    if (!uid.empty()) binding["metadata"]["uid"] = uid;
    return binding;
  }
  json AddPod(const std::string& name, const std::string& node = "") {
    auto added = server_->AddPod(MakeFakePod("default", name, node));
    EXPECT_TRUE(added.has_value()) << added.error().message;
    return added ? *added : json();
  }
  std::unique_ptr<WatchReader> Watch(const std::string& path, bool accept_gzip = false) {
    std::unique_ptr<httplib::ClientImpl> client = Client();
    if (accept_gzip) {
      client->set_default_headers({{"User-Agent", kUserAgent},
                                   {"Authorization", std::string("Bearer ") + kToken},
                                   {"Accept-Encoding", "gzip, deflate"}});
    }
    return std::make_unique<WatchReader>(std::move(client), path);
  }

  void ExpectDrops();

  FakeApiServerPtr server_;
};

TEST_F(FakeApiServerTest, RefusesRequestsWithoutValidCredentials) {
  httplib::Result anonymous = Client("")->Get("/api/v1/pods");
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 401);
  EXPECT_EQ(anonymous->body,
            R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
            R"("message":"Unauthorized","reason":"Unauthorized","code":401})");
  httplib::Result wrong = Client("not-a-token")->Get("/api/v1/pods");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);

  // Rotation: the old token stops working as soon as the test says so.
  server_->AddToken("rotated");
  EXPECT_EQ(Client("rotated")->Get("/api/v1/pods")->status, 200);
  server_->RemoveToken(kToken);
  EXPECT_EQ(Client(kToken)->Get("/api/v1/pods")->status, 401);

  std::vector<RecordedRequest> requests = server_->Requests();
  ASSERT_EQ(requests.size(), 4u);
  EXPECT_EQ(requests[0].user, "");
  EXPECT_EQ(requests[0].authorization, "");
  EXPECT_EQ(requests[2].user_agent, kUserAgent);
  EXPECT_EQ(requests[2].authorization, "Bearer rotated");
  EXPECT_EQ(requests[2].user, "token");
  EXPECT_EQ(requests[3].status, 401);
}

TEST_F(FakeApiServerTest, AcceptsClientCertificatesSignedByItsCa) {
  httplib::SSLClient client("127.0.0.1", server_->port(), server_->pki()->client_cert_path(),
                            server_->pki()->client_key_path());
  client.set_ca_cert_path(server_->pki()->ca_cert_path());
  client.enable_server_certificate_verification(true);
  httplib::Result result = client.Get("/api/v1/nodes");
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(server_->Requests().back().user, "cert:linkfit-test-client");
}

TEST_F(FakeApiServerTest, ServesPlainHttpWhenAsked) {
  FakeApiServerOptions options;
  options.tls = false;
  Start(options);
  EXPECT_EQ(server_->url().rfind("http://127.0.0.1:", 0), 0u);
  AddPod("p");
  httplib::Result result = Get("/api/v1/namespaces/default/pods/p");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  const json pod = json::parse(result->body);
  EXPECT_EQ(pod["kind"], "Pod");
  EXPECT_EQ(pod["apiVersion"], "v1");
  ASSERT_TRUE(server_->AddPod(MakeFakePod("other", "q")));
  ASSERT_TRUE(server_->AddNode(MakeFakeNode("n1")));
  const json namespaced = json::parse(Get("/api/v1/namespaces/other/pods")->body);
  ASSERT_EQ(namespaced["items"].size(), 1u);
  EXPECT_EQ(namespaced["items"][0]["metadata"]["name"], "q");
  EXPECT_EQ(json::parse(Get("/api/v1/nodes/n1")->body)["kind"], "Node");
  EXPECT_EQ(Get("/api/v1/namespaces/default/pods/absent")->status, 404);
  EXPECT_EQ(Get("/api/v1/services")->status, 404);
  EXPECT_EQ(json::parse(Get("/api/v1/namespaces/default/pods/absent")->body)["message"],
            "pods \"absent\" not found");
}

TEST_F(FakeApiServerTest, PaginatesOneSnapshotAndExpiresContinueTokensOnCompaction) {
  for (int i = 0; i < 5; ++i) AddPod("p" + std::to_string(i));
  const json first = json::parse(Get("/api/v1/pods?limit=2")->body);
  EXPECT_EQ(first["kind"], "PodList");
  ASSERT_EQ(first["items"].size(), 2u);
  EXPECT_FALSE(first["items"][0].contains("kind"));
  EXPECT_EQ(first["metadata"]["remainingItemCount"], 3);
  const std::string revision = first["metadata"]["resourceVersion"];
  EXPECT_EQ(revision, server_->CurrentResourceVersion());

  AddPod("p9");  // after the first page: not part of this list
  const json second = json::parse(
      Get("/api/v1/pods?limit=2&continue=" + first["metadata"]["continue"].get<std::string>())
          ->body);
  ASSERT_EQ(second["items"].size(), 2u);
  EXPECT_EQ(second["metadata"]["resourceVersion"], revision);
  const json last = json::parse(
      Get("/api/v1/pods?limit=2&continue=" + second["metadata"]["continue"].get<std::string>())
          ->body);
  ASSERT_EQ(last["items"].size(), 1u);
  EXPECT_EQ(last["items"][0]["metadata"]["name"], "p4");
  EXPECT_FALSE(last["metadata"].contains("continue"));
  EXPECT_FALSE(last["metadata"].contains("remainingItemCount"));

  // resourceVersion=0 ignores limit.
  EXPECT_EQ(json::parse(Get("/api/v1/pods?limit=2&resourceVersion=0")->body)["items"].size(), 6u);

  const json again = json::parse(Get("/api/v1/pods?limit=2")->body);
  server_->Compact();
  httplib::Result expired =
      Get("/api/v1/pods?limit=2&continue=" + again["metadata"]["continue"].get<std::string>());
  ASSERT_TRUE(expired);
  EXPECT_EQ(expired->status, 410);
  EXPECT_EQ(json::parse(expired->body)["reason"], "Expired");
}

TEST_F(FakeApiServerTest, ResourceVersionsIncreaseAcrossKinds) {
  const json node = Must(server_->AddNode(MakeFakeNode("n1")));
  const json pod = AddPod("p");
  json changed = node;
  changed["metadata"]["labels"]["zone"] = "a";
  const json updated = Must(server_->UpdateNode(changed));
  EXPECT_LT(Revision(node), Revision(pod));
  EXPECT_LT(Revision(pod), Revision(updated));
  EXPECT_EQ(updated["metadata"]["uid"], node["metadata"]["uid"]);
  EXPECT_FALSE(pod["metadata"]["uid"].get<std::string>().empty());
  EXPECT_EQ(std::to_string(Revision(updated)), server_->CurrentResourceVersion());
  // Replacing an object by itself changes nothing.
  EXPECT_EQ(Revision(Must(server_->UpdateNode(updated))), Revision(updated));
  EXPECT_EQ(json::parse(Get("/api/v1/nodes")->body)["metadata"]["resourceVersion"],
            server_->CurrentResourceVersion());
}

TEST_F(FakeApiServerTest, FiltersListsBySelectors) {
  AddPod("a", "n1");
  AddPod("b", "n2");
  AddPod("c");
  server_->SetPodPhase("default", "b", "Succeeded");
  json labelled = MakeFakePod("default", "d");
  labelled["metadata"]["labels"]["app"] = "x";
  ASSERT_TRUE(server_->AddPod(labelled));
  auto names = [this](const std::string& query) {
    std::vector<std::string> found;
    const json list = json::parse(Get("/api/v1/pods?" + query)->body);
    for (const json& pod : list["items"]) {
      found.push_back(pod["metadata"]["name"]);
    }
    return found;
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(names("fieldSelector=spec.nodeName%3Dn1"), Names({"a"}));
  EXPECT_EQ(names("fieldSelector=spec.nodeName%3D"), Names({"c", "d"}));
  EXPECT_EQ(names("fieldSelector=spec.nodeName!%3D"), Names({"a", "b"}));
  EXPECT_EQ(names("fieldSelector=spec.nodeName!%3D,status.phase!%3DSucceeded"), Names({"a"}));
  EXPECT_EQ(names("labelSelector=app%3Dx"), Names({"d"}));
  EXPECT_EQ(names("labelSelector=app!%3Dx"), Names({"a", "b", "c"}));
  EXPECT_EQ(Get("/api/v1/pods?fieldSelector=spec.bogus%3Dx")->status, 400);
}

TEST_F(FakeApiServerTest, WatchDeliversChangesInOrderThenBookmarks) {
  const std::string start = server_->CurrentResourceVersion();
  auto watch = Watch(
      "/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=30"
      "&resourceVersion=" +
      start);
  ASSERT_TRUE(server_->WaitForOpenWatches(1, kWait));
  AddPod("p");
  ASSERT_TRUE(server_->SetPodPhase("default", "p", "Running"));
  ASSERT_TRUE(server_->DeletePod("default", "p"));
  uint64_t previous = std::stoull(start);
  for (const char* type : {"ADDED", "MODIFIED", "DELETED"}) {
    std::optional<json> event = watch->NextChange();
    ASSERT_TRUE(event) << type;
    EXPECT_EQ((*event)["type"], type);
    EXPECT_EQ((*event)["object"]["kind"], "Pod");
    EXPECT_EQ((*event)["object"]["metadata"]["name"], "p");
    EXPECT_GT(Revision((*event)["object"]), previous);
    previous = Revision((*event)["object"]);
  }
  std::optional<json> bookmark = watch->Next();
  ASSERT_TRUE(bookmark);
  EXPECT_EQ((*bookmark)["type"], "BOOKMARK");
  EXPECT_EQ((*bookmark)["object"],
            json::parse(R"({"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":")" +
                        server_->CurrentResourceVersion() + R"(","creationTimestamp":null}})"));
  EXPECT_EQ(server_->WatchRequests(), 1u);
}

TEST_F(FakeApiServerTest, WatchStreamsUncompressedEvenWhenTheClientAcceptsGzip) {
  auto watch = Watch("/api/v1/pods?watch=1&resourceVersion=" + server_->CurrentResourceVersion(),
                     /*accept_gzip=*/true);
  ASSERT_TRUE(server_->WaitForOpenWatches(1, kWait));
  AddPod("p");
  std::optional<json> event = watch->Next();  // arrives while the stream is still open
  ASSERT_TRUE(event);
  EXPECT_EQ((*event)["type"], "ADDED");
}

TEST_F(FakeApiServerTest, WatchFromResourceVersionZeroStartsWithTheCurrentState) {
  AddPod("a");
  AddPod("b");
  auto watch = Watch("/api/v1/pods?watch=true&resourceVersion=0");
  EXPECT_EQ((*watch->Next())["object"]["metadata"]["name"], "a");
  EXPECT_EQ((*watch->Next())["object"]["metadata"]["name"], "b");
}

TEST_F(FakeApiServerTest, WatchTurnsSelectorTransitionsIntoAddedAndDeleted) {
  const json pod = AddPod("p");
  auto watch = Watch("/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Dn1&resourceVersion=" +
                     server_->CurrentResourceVersion());
  ASSERT_TRUE(server_->WaitForOpenWatches(1, kWait));
  AddPod("elsewhere", "n2");  // never matches: not sent
  ASSERT_EQ(Bind("p", Binding("p", "n1"))->status, 201);
  std::optional<json> added = watch->NextChange();
  ASSERT_TRUE(added);
  EXPECT_EQ((*added)["type"], "ADDED");
  EXPECT_EQ((*added)["object"]["metadata"]["name"], "p");
  json moved = Must(server_->GetPod("default", "p"));
  moved["spec"]["nodeName"] = "n3";
  ASSERT_TRUE(server_->UpdatePod(moved));
  std::optional<json> deleted = watch->NextChange();
  ASSERT_TRUE(deleted);
  EXPECT_EQ((*deleted)["type"], "DELETED");
  EXPECT_EQ((*deleted)["object"]["spec"]["nodeName"], "n1");  // the last state that matched
  EXPECT_EQ((*deleted)["object"]["metadata"]["resourceVersion"], server_->CurrentResourceVersion());
}

TEST_F(FakeApiServerTest, WatchFromACompactedResourceVersionGetsOneExpiredError) {
  const std::string old = server_->CurrentResourceVersion();
  AddPod("p");
  server_->Compact();
  auto watch = Watch("/api/v1/pods?watch=1&resourceVersion=" + old);
  std::optional<json> error = watch->Next();
  ASSERT_TRUE(error);
  EXPECT_EQ((*error)["type"], "ERROR");
  EXPECT_EQ((*error)["object"]["kind"], "Status");
  EXPECT_EQ((*error)["object"]["code"], 410);
  EXPECT_EQ((*error)["object"]["reason"], "Expired");
  EXPECT_EQ((*error)["object"]["message"],
            "too old resource version: " + old + " (" + server_->CurrentResourceVersion() + ")");
  ASSERT_TRUE(watch->WaitDone());
  EXPECT_EQ(watch->status(), 200);
  EXPECT_EQ(watch->error(), httplib::Error::Success);
  EXPECT_FALSE(watch->Next(milliseconds(0)));
}

TEST_F(FakeApiServerTest, SlowWatcherBeyondTheHistoryLimitGetsExpired) {
  FakeApiServerOptions options;
  options.history_limit = 2;
  Start(options);
  const std::string start = server_->CurrentResourceVersion();
  for (int i = 0; i < 4; ++i) AddPod("p" + std::to_string(i));
  auto watch = Watch("/api/v1/pods?watch=1&resourceVersion=" + start);
  std::optional<json> error = watch->Next();
  ASSERT_TRUE(error);
  EXPECT_EQ((*error)["object"]["code"], 410);
}

TEST_F(FakeApiServerTest, WatchEndsCleanlyAfterTimeoutSeconds) {
  auto watch = Watch("/api/v1/nodes?watch=1&timeoutSeconds=1&resourceVersion=" +
                     server_->CurrentResourceVersion());
  ASSERT_TRUE(watch->WaitDone(milliseconds(3000)));
  EXPECT_EQ(watch->error(), httplib::Error::Success);
  EXPECT_EQ(watch->status(), 200);
  EXPECT_TRUE(server_->WaitForOpenWatches(0, kWait));
}

TEST_F(FakeApiServerTest, CutWatchesBreaksOpenStreams) {
  auto watch = Watch("/api/v1/pods?watch=1&resourceVersion=" + server_->CurrentResourceVersion());
  ASSERT_TRUE(server_->WaitForOpenWatches(1, kWait));
  AddPod("p");
  ASSERT_TRUE(watch->NextChange());
  server_->CutWatches();
  ASSERT_TRUE(watch->WaitDone());
  EXPECT_NE(watch->error(), httplib::Error::Success);  // no final chunk: a broken stream
  EXPECT_TRUE(server_->WaitForOpenWatches(0, kWait));
}

TEST_F(FakeApiServerTest, NoticesAWatchClientThatWentAway) {
  auto watch = Watch("/api/v1/pods?watch=1&resourceVersion=" + server_->CurrentResourceVersion());
  ASSERT_TRUE(server_->WaitForOpenWatches(1, kWait));
  watch->Close();
  EXPECT_TRUE(server_->WaitForOpenWatches(0, kWait));
}

TEST_F(FakeApiServerTest, BindingMergesAnnotationsAndSetsTheNodeInOneEvent) {
  json pod = MakeFakePod("default", "p");
  pod["metadata"]["annotations"] = {{"kept", "1"}};
  const json stored = Must(server_->AddPod(pod));
  auto watch = Watch("/api/v1/pods?watch=1&resourceVersion=" + server_->CurrentResourceVersion());
  ASSERT_TRUE(server_->WaitForOpenWatches(1, kWait));

  json binding = Binding("p", "n1", stored["metadata"]["uid"]);
  binding["metadata"]["annotations"] = {{"linkfit.io/devices", "0,1"}};
  httplib::Result result = Bind("p", binding);
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 201);
  EXPECT_EQ(json::parse(result->body),
            json::parse(R"({"kind":"Status","apiVersion":"v1","metadata":{},)"
                        R"("status":"Success","code":201})"));

  const json bound = Must(server_->GetPod("default", "p"));
  EXPECT_EQ(bound["spec"]["nodeName"], "n1");
  EXPECT_EQ(bound["metadata"]["annotations"], json({{"kept", "1"}, {"linkfit.io/devices", "0,1"}}));
  EXPECT_EQ(Revision(bound), Revision(stored) + 1);
  std::optional<json> event = watch->NextChange();
  ASSERT_TRUE(event);
  EXPECT_EQ((*event)["type"], "MODIFIED");
  EXPECT_EQ((*event)["object"]["spec"]["nodeName"], "n1");
  EXPECT_EQ((*event)["object"]["metadata"]["annotations"]["linkfit.io/devices"], "0,1");
  ASSERT_EQ(server_->Bindings().size(), 1u);
  EXPECT_EQ(server_->Bindings()[0].pod_name, "p");
  EXPECT_EQ(server_->Bindings()[0].status, 201);
}

TEST_F(FakeApiServerTest, BindingRefusalsMatchUpstream) {
  const json pod = AddPod("p");
  const std::string uid = pod["metadata"]["uid"];
  struct Case {
    std::string name;
    std::function<void()> prepare;
    std::string url_name;
    json binding;
    int status;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"absent", [] {}, "absent", Binding("absent", "n1"), 404, R"(pods "absent" not found)"},
      {"name mismatch", [] {}, "p", Binding("other", "n1"), 400,
       "name in URL does not match name in Binding object"},
      {"uid mismatch", [] {}, "p", Binding("p", "n1", "another-uid"), 409,
       "Operation cannot be fulfilled on pods \"p\": StorageError: invalid object, Code: 4, Key: "
       "/registry/pods/default/p, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: "
       "UID in precondition: another-uid, UID in object meta: " +
           uid},
      {"gated",
       [this] {
         json gated = Must(server_->GetPod("default", "p"));
         gated["spec"]["schedulingGates"] = {{{"name", "wait"}}};
         ASSERT_TRUE(server_->UpdatePod(gated));
       },
       "p", Binding("p", "n1", uid), 409,
       "Operation cannot be fulfilled on pods/binding \"p\": pod p has non-empty "
       ".spec.schedulingGates"},
      {"assigned",
       [this] {
         json assigned = Must(server_->GetPod("default", "p"));
         assigned["spec"].erase("schedulingGates");
         assigned["spec"]["nodeName"] = "n2";
         ASSERT_TRUE(server_->UpdatePod(assigned));
       },
       "p", Binding("p", "n1", uid), 409,
       "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node "
       "\"n2\""},
      {"terminating", [this] { ASSERT_TRUE(server_->MarkPodTerminating("default", "p")); }, "p",
       Binding("p", "n1", uid), 409,
       "Operation cannot be fulfilled on pods/binding \"p\": pod p is being deleted, cannot be "
       "assigned to a host"},
  };
  for (const Case& test : cases) {
    SCOPED_TRACE(test.name);
    test.prepare();
    httplib::Result result = Bind(test.url_name, test.binding);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, test.status);
    const json status = json::parse(result->body);
    EXPECT_EQ(status["kind"], "Status");
    EXPECT_EQ(status["status"], "Failure");
    EXPECT_EQ(status["code"], test.status);
    EXPECT_EQ(status["message"], test.message);
  }
  EXPECT_EQ(server_->Bindings().size(), cases.size());
  EXPECT_EQ(server_->GetPod("default", "p").value()["spec"]["nodeName"], "n2");
}

TEST_F(FakeApiServerTest, MergePatchesNodesAndMakesNoEventForANoOp) {
  const json node = Must(server_->AddNode(MakeFakeNode("n1")));
  auto patch = [this](const json& body, const std::string& type) {
    return Client()->Patch("/api/v1/nodes/n1", body.dump(), type.c_str());
  };
  const json annotate = {{"metadata", {{"annotations", {{"a", "1"}, {"b", "2"}}}}}};
  httplib::Result first = patch(annotate, "application/merge-patch+json");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200);
  const json patched = json::parse(first->body);
  EXPECT_EQ(patched["kind"], "Node");
  EXPECT_EQ(Revision(patched), Revision(node) + 1);

  auto watch = Watch("/api/v1/nodes?watch=1&resourceVersion=" + server_->CurrentResourceVersion());
  ASSERT_TRUE(server_->WaitForOpenWatches(1, kWait));
  httplib::Result again = patch(annotate, "application/merge-patch+json");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
  EXPECT_EQ(Revision(json::parse(again->body)), Revision(patched));
  EXPECT_EQ(server_->CurrentResourceVersion(), std::to_string(Revision(patched)));

  EXPECT_EQ(patch({{"metadata", {{"annotations", {{"a", nullptr}}}}}},
                  "application/merge-patch+json; charset=utf-8")
                ->status,
            200);
  std::optional<json> event = watch->NextChange();  // the removal, not the no-op
  ASSERT_TRUE(event);
  EXPECT_EQ((*event)["object"]["metadata"]["annotations"], json({{"b", "2"}}));

  EXPECT_EQ(patch(annotate, "application/json")->status, 415);
  EXPECT_EQ(patch(annotate, "application/strategic-merge-patch+json")->status, 415);
  const json stale = {
      {"metadata",
       {{"resourceVersion", std::to_string(Revision(node))}, {"annotations", {{"c", "3"}}}}}};
  EXPECT_EQ(patch(stale, "application/merge-patch+json")->status, 409);
  const json current = {
      {"metadata",
       {{"resourceVersion", server_->CurrentResourceVersion()}, {"annotations", {{"c", "3"}}}}}};
  EXPECT_EQ(patch(current, "application/merge-patch+json")->status, 200);
  EXPECT_EQ(Client()->Patch("/api/v1/nodes/absent", "{}", "application/merge-patch+json")->status,
            404);
}

TEST_F(FakeApiServerTest, RecordsPostedEvents) {
  const json event = {{"apiVersion", "events.k8s.io/v1"},
                      {"kind", "Event"},
                      {"metadata", {{"generateName", "p."}, {"namespace", "default"}}},
                      {"reason", "Scheduled"},
                      {"note", "bound to n1"}};
  httplib::Result result = Client()->Post("/apis/events.k8s.io/v1/namespaces/default/events",
                                          event.dump(), "application/json");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 201);
  ASSERT_EQ(server_->PostedEvents().size(), 1u);
  EXPECT_EQ(server_->PostedEvents()[0]["reason"], "Scheduled");
}

TEST_F(FakeApiServerTest, InjectedFailuresCarryStatusAndRetryAfter) {
  server_->FailNext(1, 429, RequestMatch{"GET", "/api/v1/pods"}, 3);
  server_->FailNext(1, 503, RequestMatch{"GET", "/api/v1/nodes"});
  httplib::Result throttled = Get("/api/v1/pods");
  ASSERT_TRUE(throttled);
  EXPECT_EQ(throttled->status, 429);
  EXPECT_EQ(throttled->get_header_value("Retry-After"), "3");
  EXPECT_EQ(json::parse(throttled->body)["reason"], "TooManyRequests");
  EXPECT_EQ(json::parse(throttled->body)["details"]["retryAfterSeconds"], 3);
  EXPECT_EQ(Get("/api/v1/pods")->status, 200);  // only the next one
  EXPECT_EQ(Get("/api/v1/nodes")->status, 503);
  EXPECT_EQ(Get("/api/v1/nodes")->status, 200);
  EXPECT_EQ(server_->CountRequests(RequestMatch{"GET", "/api/v1/pods"}), 2u);
}

TEST_F(FakeApiServerTest, InjectedLatencyDelaysMatchingRequests) {
  server_->SetLatency(milliseconds(50), RequestMatch{"GET", "/api/v1/nodes"});
  const Clock::time_point start = Clock::now();
  EXPECT_EQ(Get("/api/v1/nodes")->status, 200);
  EXPECT_GE(Clock::now() - start, milliseconds(50));
  server_->SetBindingDelay(milliseconds(50));
  AddPod("p");
  const Clock::time_point bind_start = Clock::now();
  EXPECT_EQ(Bind("p", Binding("p", "n1"))->status, 201);
  EXPECT_GE(Clock::now() - bind_start, milliseconds(50));
}

// The 504 of upstream's timeout filter, byte for byte.
constexpr char kTimeoutBody[] =
    "{\"metadata\":{},\"status\":\"Failure\",\"message\":\"Timeout: request did not complete "
    "within the allotted timeout\",\"reason\":\"Timeout\",\"details\":{},\"code\":504}\n";

TEST_F(FakeApiServerTest, ARequestPastItsDeadlineIsAnswered504AndNotApplied) {
  AddPod("late");
  AddPod("early");
  const std::string revision = server_->CurrentResourceVersion();
  server_->SetBindingDelay(milliseconds(600));
  const Clock::time_point start = Clock::now();
  httplib::Result late = Send("POST", "/api/v1/namespaces/default/pods/late/binding?timeout=100ms",
                              Binding("late", "n1").dump());
  const Clock::duration took = Clock::now() - start;
  ASSERT_TRUE(late);
  EXPECT_EQ(late->status, 504);
  EXPECT_EQ(late->body, kTimeoutBody);
  EXPECT_EQ(late->get_header_value("Content-Type"), "text/plain; charset=utf-8");
  EXPECT_GE(took, milliseconds(100));
  EXPECT_LT(took, milliseconds(500));  // answered at the deadline, not after the delay
  ASSERT_EQ(server_->Bindings().size(), 1u);
  EXPECT_EQ(server_->Bindings()[0].status, 504);
  ASSERT_FALSE(server_->Requests().empty());
  EXPECT_EQ(server_->Requests().back().status, 504);
  // Abandoned: the delay passing does not land it.
  std::this_thread::sleep_for(milliseconds(600) - took + milliseconds(100));
  EXPECT_FALSE(Must(server_->GetPod("default", "late"))["spec"].contains("nodeName"));
  EXPECT_EQ(server_->CurrentResourceVersion(), revision);

  // A deadline longer than the delay: applied.
  httplib::Result early = Send("POST", "/api/v1/namespaces/default/pods/early/binding?timeout=5s",
                               Binding("early", "n1").dump());
  ASSERT_TRUE(early);
  EXPECT_EQ(early->status, 201);
  EXPECT_EQ(Must(server_->GetPod("default", "early"))["spec"]["nodeName"], "n1");
  ASSERT_EQ(server_->Bindings().size(), 2u);
  EXPECT_EQ(server_->Bindings()[1].status, 201);
}

TEST_F(FakeApiServerTest, TheRequestTimeoutBoundsEveryRequestButWatches) {
  FakeApiServerOptions options;
  options.request_timeout = milliseconds(150);
  Start(options);
  Must(server_->AddNode(MakeFakeNode("n1")));
  server_->SetLatency(milliseconds(600), RequestMatch{"", "/api/v1/nodes"});
  // No timeout, a longer one, "0" and a negative one: the server's own (upstream ignores a
  // timeout that is not positive or not below --request-timeout).
  for (const std::string query : {"", "?timeout=1m", "?timeout=0s", "?timeout=-5s"}) {
    httplib::Result result = Get("/api/v1/nodes" + query);
    ASSERT_TRUE(result) << query;
    EXPECT_EQ(result->status, 504) << query;
    EXPECT_EQ(json::parse(result->body)["reason"], "Timeout") << query;
  }
  // A PATCH that times out changes nothing.
  const std::string revision = server_->CurrentResourceVersion();
  httplib::Result patch =
      Send("PATCH", "/api/v1/nodes/n1", R"({"metadata":{"annotations":{"a":"1"}}})",
           "application/merge-patch+json");
  ASSERT_TRUE(patch);
  EXPECT_EQ(patch->status, 504);
  EXPECT_FALSE(Must(server_->GetNode("n1"))["metadata"].contains("annotations"));
  EXPECT_EQ(server_->CurrentResourceVersion(), revision);
  // A watch is long-running: its `timeout` and the request timeout do not apply.
  auto watch =
      Watch("/api/v1/nodes?watch=1&timeout=10ms&timeoutSeconds=30&resourceVersion=" + revision);
  EXPECT_TRUE(server_->WaitForOpenWatches(1, kWait));  // not answered 504
  // Below the deadline: served. "0s" and "-1s" ask for no deadline of their own (not for one
  // already past); a timeout shorter than the latency still cuts it.
  server_->SetLatency(milliseconds(50), RequestMatch{"", "/api/v1/nodes"});
  EXPECT_EQ(Get("/api/v1/nodes")->status, 200);
  EXPECT_EQ(Get("/api/v1/nodes?timeout=0s")->status, 200);
  EXPECT_EQ(Get("/api/v1/nodes?timeout=-1s")->status, 200);
  EXPECT_EQ(Get("/api/v1/nodes?timeout=10ms")->status, 504);
}

TEST_F(FakeApiServerTest, AnUnparsableTimeoutAnswers400BeforeAuthentication) {
  struct Case {
    std::string timeout;
    int status;
    std::string message;  // of a 400
  };
  const std::vector<Case> cases = {
      {"soon", 400, "time: invalid duration \"soon\""},
      {"5", 400, "time: missing unit in duration \"5\""},
      {"5x", 400, "time: unknown unit \"x\" in duration \"5x\""},
      {"1.2.3s", 400, "time: missing unit in duration \"1.2.3s\""},
      {".s", 400, "time: invalid duration \".s\""},
      {"-", 400, "time: invalid duration \"-\""},
      {"99999999999999999999s", 400, "time: invalid duration \"99999999999999999999s\""},
      {"1m30s", 200, ""},
      {"1.5h", 200, ""},
      {".5s", 200, ""},
      {"+2s", 200, ""},
      {"-1s", 200, ""},
      {"0", 200, ""},
      {"1500ms", 200, ""},
      {"2us", 200, ""},  // far below any latency, but there is none here
  };
  for (const Case& test : cases) {
    httplib::Result result = Get("/api/v1/pods?timeout=" + test.timeout);
    ASSERT_TRUE(result) << test.timeout;
    EXPECT_EQ(result->status, test.status) << test.timeout;
    if (test.status != 400) continue;
    const json status = json::parse(result->body);
    EXPECT_EQ(status["reason"], "BadRequest") << test.timeout;
    EXPECT_EQ(status["message"], "invalid timeout specified in the request URL - " + test.message);
  }
  // An empty timeout is no timeout.
  EXPECT_EQ(Get("/api/v1/pods?timeout=")->status, 200);
  // The deadline filter runs before authentication.
  EXPECT_EQ(Client("wrong-token")->Get("/api/v1/pods?timeout=soon")->status, 400);
  EXPECT_EQ(Client("wrong-token")->Get("/api/v1/pods?timeout=5s")->status, 401);
}

TEST_F(FakeApiServerTest, ARequestThatTimesOutTakesNoInjectedFailure) {
  server_->SetLatency(milliseconds(400), RequestMatch{"GET", "/api/v1/nodes"});
  server_->FailNext(1, 503, RequestMatch{"GET", "/api/v1/nodes"});
  EXPECT_EQ(Get("/api/v1/nodes?timeout=50ms")->status, 504);
  server_->SetLatency(milliseconds(0), RequestMatch{"GET", "/api/v1/nodes"});
  EXPECT_EQ(Get("/api/v1/nodes")->status, 503);
  EXPECT_EQ(Get("/api/v1/nodes")->status, 200);
}

constexpr char kLeases[] = "/apis/coordination.k8s.io/v1/namespaces/ops/leases";
constexpr char kMergePatch[] = "application/merge-patch+json";

json Lease(const std::string& name, const std::string& holder) {
  return {{"apiVersion", "coordination.k8s.io/v1"},
          {"kind", "Lease"},
          {"metadata", {{"name", name}, {"namespace", "ops"}}},
          {"spec",
           {{"holderIdentity", holder},
            {"leaseDurationSeconds", 15},
            {"acquireTime", "2024-05-01T10:00:00.000000Z"},
            {"renewTime", "2024-05-01T12:00:01.250000+02:00"},
            {"leaseTransitions", 2}}}};
}

json Body(const httplib::Result& result) {
  return result ? json::parse(result->body, nullptr, false) : json();
}

json LeaseDetails(const std::string& name) {
  return {{"name", name}, {"group", "coordination.k8s.io"}, {"kind", "leases"}};
}

std::string Modified(const std::string& name) {
  return "Operation cannot be fulfilled on leases.coordination.k8s.io \"" + name +
         "\": the object has been modified; please apply your changes to the latest version "
         "and try again";
}

TEST_F(FakeApiServerTest, LeasesAreCreatedReadAndRefusedAsUpstream) {
  const std::string path = std::string(kLeases) + "/binder";
  httplib::Result missing = Get(path);
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(Body(missing)["reason"], "NotFound");
  EXPECT_EQ(Body(missing)["message"], "leases.coordination.k8s.io \"binder\" not found");
  EXPECT_EQ(Body(missing)["details"], LeaseDetails("binder"));

  const uint64_t before = std::stoull(server_->CurrentResourceVersion());
  json sent = Lease("binder", "a");
  sent["spec"]["unknownField"] = true;  // dropped, as the decoder drops it
  sent["metadata"]["uid"] = "ignored";  // the system sets it
  httplib::Result created = Send("POST", kLeases, sent.dump());
  ASSERT_TRUE(created);
  ASSERT_EQ(created->status, 201) << created->body;
  const json stored = Body(created);
  EXPECT_EQ(stored["kind"], "Lease");
  EXPECT_EQ(stored["apiVersion"], "coordination.k8s.io/v1");
  EXPECT_EQ(stored["metadata"]["namespace"], "ops");
  EXPECT_NE(stored["metadata"]["uid"], "ignored");
  EXPECT_EQ(stored["metadata"]["uid"].get<std::string>().size(), 36u);
  EXPECT_TRUE(stored["metadata"]["creationTimestamp"].is_string());
  EXPECT_EQ(Revision(stored), before + 1);
  const json spec = {{"holderIdentity", "a"},
                     {"leaseDurationSeconds", 15},
                     {"acquireTime", "2024-05-01T10:00:00.000000Z"},
                     {"renewTime", "2024-05-01T10:00:01.250000Z"},  // in UTC, as MicroTime writes
                     {"leaseTransitions", 2}};
  EXPECT_EQ(stored["spec"], spec);
  EXPECT_EQ(Body(Get(path)), stored);
  json without_kind = stored;
  without_kind.erase("kind");
  without_kind.erase("apiVersion");
  EXPECT_EQ(Must(server_->GetLease("ops", "binder")), without_kind);
  // Pods and leases share the revision counter.
  EXPECT_EQ(Revision(AddPod("p")), before + 2);

  httplib::Result again = Send("POST", kLeases, Lease("binder", "b").dump());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 409);
  EXPECT_EQ(Body(again)["reason"], "AlreadyExists");
  EXPECT_EQ(Body(again)["message"], "leases.coordination.k8s.io \"binder\" already exists");
  EXPECT_EQ(Body(again)["details"], LeaseDetails("binder"));
  EXPECT_EQ(Must(server_->GetLease("ops", "binder"))["spec"]["holderIdentity"], "a");

  // Refusals: status, reason and (where exact) message.
  struct Case {
    std::string name;
    std::function<void(json&)> change;
    int status;
    std::string reason;  // "" for none (an error upstream does not turn into a Status reason)
    std::string message;
  };
  const std::vector<Case> cases = {
      {"bad-duration", [](json& l) { l["spec"]["leaseDurationSeconds"] = 0; }, 422, "Invalid",
       "Lease.coordination.k8s.io \"bad-duration\" is invalid: spec.leaseDurationSeconds: Invalid "
       "value: 0: must be greater than 0"},
      {"bad-both",
       [](json& l) {
         l["spec"]["leaseDurationSeconds"] = -3;
         l["spec"]["leaseTransitions"] = -1;
       },
       422, "Invalid",
       "Lease.coordination.k8s.io \"bad-both\" is invalid: [spec.leaseDurationSeconds: Invalid "
       "value: -3: must be greater than 0, spec.leaseTransitions: Invalid value: -1: must be "
       "greater than or equal to 0]"},
      {"", [](json& l) { l["metadata"].erase("name"); }, 422, "Invalid",
       "Lease.coordination.k8s.io \"\" is invalid: metadata.name: Required value: name or "
       "generateName is required"},
      {"Upper_Case", nullptr, 422, "Invalid", ""},
      {"other-namespace", [](json& l) { l["metadata"]["namespace"] = "kube-system"; }, 400,
       "BadRequest",
       "the namespace of the provided object does not match the namespace sent on the request"},
      {"string-duration", [](json& l) { l["spec"]["leaseDurationSeconds"] = "15"; }, 400,
       "BadRequest", ""},
      {"float-duration", [](json& l) { l["spec"]["leaseDurationSeconds"] = 1.5; }, 400,
       "BadRequest", ""},
      {"int64-duration", [](json& l) { l["spec"]["leaseDurationSeconds"] = 4294967296; }, 400,
       "BadRequest", ""},
      {"seconds-only", [](json& l) { l["spec"]["renewTime"] = "2024-05-01T10:00:00Z"; }, 400,
       "BadRequest",
       "Lease in version \"v1\" cannot be handled as a Lease: parsing time "
       "\"2024-05-01T10:00:00Z\" as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse \"Z\" as "
       "\".000000\""},
      {"millis", [](json& l) { l["spec"]["acquireTime"] = "2024-05-01T10:00:00.123Z"; }, 400,
       "BadRequest", ""},
      {"no-month-13", [](json& l) { l["spec"]["acquireTime"] = "2024-13-01T10:00:00.000000Z"; },
       400, "BadRequest",
       "Lease in version \"v1\" cannot be handled as a Lease: parsing time "
       "\"2024-13-01T10:00:00.000000Z\": month out of range"},
      {"holder-number", [](json& l) { l["spec"]["holderIdentity"] = 7; }, 400, "BadRequest", ""},
      {"wrong-kind", [](json& l) { l["kind"] = "Pod"; }, 400, "BadRequest", ""},
      {"with-version", [](json& l) { l["metadata"]["resourceVersion"] = "5"; }, 500, "",
       "resourceVersion should not be set on objects to be created"},
  };
  for (const Case& test : cases) {
    json body = Lease(test.name, "a");
    if (test.change) test.change(body);
    httplib::Result result = Send("POST", kLeases, body.dump());
    ASSERT_TRUE(result) << test.name;
    EXPECT_EQ(result->status, test.status) << test.name << ": " << result->body;
    const json status = Body(result);
    EXPECT_EQ(status["kind"], "Status") << test.name;
    EXPECT_EQ(status["code"], test.status) << test.name;
    EXPECT_EQ(status.value("reason", ""), test.reason) << test.name;
    if (!test.message.empty()) {
      EXPECT_EQ(status["message"], test.message) << test.name;
    }
    if (test.status == 422 && !test.name.empty()) {
      EXPECT_EQ(status["details"]["kind"], "Lease") << test.name;
      EXPECT_EQ(status["details"]["group"], "coordination.k8s.io") << test.name;
      EXPECT_FALSE(status["details"]["causes"].empty()) << test.name;
    }
  }
  EXPECT_EQ(Body(Send("POST", kLeases, "{not json"))["code"], 400);
  EXPECT_EQ(Body(Send("POST", kLeases, "[]"))["code"], 400);
  EXPECT_EQ(Body(Send("POST", kLeases, "{}"))["code"], 422);  // no metadata: no name
  EXPECT_EQ(Body(Send("POST", kLeases, json(Lease("a..b", "x")).dump()))["code"], 422);
  EXPECT_EQ(Body(Send("POST", kLeases, json(Lease(std::string(254, 'a'), "x")).dump()))["code"],
            422);
  json no_namespace = Lease("n", "x");
  no_namespace["metadata"].erase("namespace");
  const json bad_namespace = Body(
      Send("POST", "/apis/coordination.k8s.io/v1/namespaces/Bad_NS/leases", no_namespace.dump()));
  EXPECT_EQ(bad_namespace["code"], 422);
  EXPECT_EQ(bad_namespace["details"]["causes"][0]["field"], "metadata.namespace");
  const json duration_causes = Body(Send("POST", kLeases, [] {
    json l = Lease("zero", "a");
    l["spec"]["leaseDurationSeconds"] = 0;
    return l.dump();
  }()))["details"]["causes"];
  EXPECT_EQ(duration_causes, json::parse(R"([{"reason":"FieldValueInvalid","message":"Invalid )"
                                         R"(value: 0: must be greater than 0","field":)"
                                         R"("spec.leaseDurationSeconds"}])"));
  EXPECT_EQ(server_->Leases().size(), 1u);  // nothing refused was stored

  // An empty namespace in the body takes the URL's; generateName makes a name; null is absent.
  json generated = Lease("", "b");
  generated["metadata"] = {{"generateName", "binder-"}, {"namespace", ""}};
  generated["spec"]["renewTime"] = nullptr;
  httplib::Result with_generated = Send("POST", kLeases, generated.dump());
  ASSERT_TRUE(with_generated);
  ASSERT_EQ(with_generated->status, 201) << with_generated->body;
  const json named = Body(with_generated);
  const std::string name = named["metadata"]["name"];
  EXPECT_EQ(name.size(), std::string("binder-").size() + 5);
  EXPECT_EQ(name.rfind("binder-", 0), 0u);
  EXPECT_EQ(named["metadata"]["namespace"], "ops");
  EXPECT_FALSE(named["spec"].contains("renewTime"));
  EXPECT_EQ(server_->Leases().size(), 2u);
}

TEST_F(FakeApiServerTest, LeaseUpdatesNeedTheCurrentResourceVersion) {
  const std::string path = std::string(kLeases) + "/binder";
  const json created = Body(Send("POST", kLeases, Lease("binder", "a").dump()));
  ASSERT_EQ(created["kind"], "Lease");
  const std::string first = created["metadata"]["resourceVersion"];

  json update = created;
  update["spec"]["holderIdentity"] = "b";
  httplib::Result put = Send("PUT", path, update.dump());
  ASSERT_TRUE(put);
  ASSERT_EQ(put->status, 200) << put->body;
  const json second = Body(put);
  EXPECT_EQ(Revision(second), Revision(created) + 1);
  EXPECT_EQ(second["metadata"]["uid"], created["metadata"]["uid"]);
  EXPECT_EQ(second["metadata"]["creationTimestamp"], created["metadata"]["creationTimestamp"]);
  EXPECT_EQ(Must(server_->GetLease("ops", "binder"))["spec"]["holderIdentity"], "b");

  // The old version loses, with upstream's message; the stored lease is untouched.
  update["spec"]["holderIdentity"] = "c";
  httplib::Result stale = Send("PUT", path, update.dump());
  ASSERT_TRUE(stale);
  EXPECT_EQ(stale->status, 409);
  EXPECT_EQ(Body(stale)["reason"], "Conflict");
  EXPECT_EQ(Body(stale)["message"], Modified("binder"));
  EXPECT_EQ(Body(stale)["details"], LeaseDetails("binder"));
  EXPECT_EQ(Must(server_->GetLease("ops", "binder"))["spec"]["holderIdentity"], "b");

  // No resourceVersion: leases allow no unconditional update.
  json unconditional = second;
  unconditional["metadata"].erase("resourceVersion");
  httplib::Result refused = Send("PUT", path, unconditional.dump());
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 422);
  EXPECT_EQ(Body(refused)["reason"], "Invalid");
  EXPECT_EQ(Body(refused)["message"],
            "leases.coordination.k8s.io \"binder\" is invalid: metadata.resourceVersion: Invalid "
            "value: 0x0: must be specified for an update");

  // The same lease again: 200, no new revision.
  const std::string revision = server_->CurrentResourceVersion();
  httplib::Result same = Send("PUT", path, second.dump());
  ASSERT_TRUE(same);
  EXPECT_EQ(same->status, 200);
  EXPECT_EQ(Body(same), second);
  EXPECT_EQ(server_->CurrentResourceVersion(), revision);

  // Invalid values, a name or a uid that do not match.
  json invalid = second;
  invalid["spec"]["leaseDurationSeconds"] = -1;
  EXPECT_EQ(Send("PUT", path, invalid.dump())->status, 422);
  json renamed = second;
  renamed["metadata"]["name"] = "other";
  httplib::Result mismatch = Send("PUT", path, renamed.dump());
  EXPECT_EQ(mismatch->status, 400);
  EXPECT_EQ(Body(mismatch)["message"],
            "the name of the object (other) does not match the name on the URL (binder)");
  json other_uid = second;
  other_uid["metadata"]["uid"] = "6f1b2c3d-0000-4000-8000-000000000000";
  httplib::Result uid_conflict = Send("PUT", path, other_uid.dump());
  EXPECT_EQ(uid_conflict->status, 409);
  EXPECT_NE(Body(uid_conflict)["message"].get<std::string>().find(
                "Precondition failed: UID in precondition: 6f1b2c3d-0000-4000-8000-000000000000"),
            std::string::npos);
  EXPECT_EQ(server_->CurrentResourceVersion(), revision);

  // A PUT of an absent lease creates it (the lease strategy allows create on update).
  json fresh = Lease("fresh", "z");
  fresh["metadata"]["resourceVersion"] = "12345";
  httplib::Result put_created = Send("PUT", std::string(kLeases) + "/fresh", fresh.dump());
  ASSERT_TRUE(put_created);
  EXPECT_EQ(put_created->status, 201);
  EXPECT_EQ(Revision(Body(put_created)), std::stoull(revision) + 1);
  EXPECT_EQ(server_->Leases().size(), 2u);
}

TEST_F(FakeApiServerTest, LeaseMergePatchesTakeTheResourceVersionAsAPrecondition) {
  const std::string path = std::string(kLeases) + "/binder";
  const json created = Body(Send("POST", kLeases, Lease("binder", "a").dump()));
  const std::string first = created["metadata"]["resourceVersion"];
  auto patch = [&](const json& body, const std::string& type = kMergePatch) {
    return Send("PATCH", path, body.dump(), type);
  };
  httplib::Result renewed = patch({{"metadata", {{"resourceVersion", first}}},
                                   {"spec", {{"renewTime", "2024-05-01T10:00:05.000000Z"}}}});
  ASSERT_TRUE(renewed);
  ASSERT_EQ(renewed->status, 200) << renewed->body;
  const json second = Body(renewed);
  EXPECT_EQ(Revision(second), Revision(created) + 1);
  EXPECT_EQ(second["spec"]["renewTime"], "2024-05-01T10:00:05.000000Z");
  EXPECT_EQ(second["spec"]["holderIdentity"], "a");  // a merge: the rest is kept

  // The stale version loses: 409 Conflict with upstream's message, nothing changes.
  httplib::Result stale =
      patch({{"metadata", {{"resourceVersion", first}}}, {"spec", {{"holderIdentity", "b"}}}});
  ASSERT_TRUE(stale);
  EXPECT_EQ(stale->status, 409);
  EXPECT_EQ(Body(stale)["reason"], "Conflict");
  EXPECT_EQ(Body(stale)["message"], Modified("binder"));
  EXPECT_EQ(Must(server_->GetLease("ops", "binder"))["spec"]["holderIdentity"], "a");

  // A patch that changes nothing: 200 with the same resourceVersion, no revision taken.
  const std::string revision = server_->CurrentResourceVersion();
  httplib::Result noop = patch({{"spec", {{"renewTime", "2024-05-01T10:00:05.000000Z"}}}});
  ASSERT_TRUE(noop);
  EXPECT_EQ(noop->status, 200);
  EXPECT_EQ(Body(noop), second);
  EXPECT_EQ(server_->CurrentResourceVersion(), revision);

  // Without a resourceVersion the patch applies to whatever is stored; removing it (or "")
  // leaves the update without one: 422.
  httplib::Result released = patch({{"spec", {{"holderIdentity", nullptr}}}});
  ASSERT_TRUE(released);
  EXPECT_EQ(released->status, 200);
  EXPECT_FALSE(Body(released)["spec"].contains("holderIdentity"));
  EXPECT_EQ(Revision(Body(released)), Revision(second) + 1);
  EXPECT_EQ(patch({{"metadata", {{"resourceVersion", ""}}}})->status, 422);
  EXPECT_EQ(patch({{"metadata", {{"resourceVersion", nullptr}}}})->status, 422);
  EXPECT_EQ(Body(patch({{"metadata", {{"resourceVersion", "abc"}}}}))["code"], 500);

  // Values are validated as in a PUT; uid and name cannot change.
  EXPECT_EQ(patch({{"spec", {{"leaseDurationSeconds", 0}}}})->status, 422);
  httplib::Result uid = patch({{"metadata", {{"uid", "x"}}}});
  EXPECT_EQ(uid->status, 422);
  EXPECT_EQ(Body(uid)["message"],
            "Lease.coordination.k8s.io \"binder\" is invalid: metadata.uid: Invalid value: "
            "\"x\": field is immutable");
  EXPECT_EQ(Body(uid)["details"]["causes"].size(), 2u);  // both validations report it
  EXPECT_EQ(patch({{"metadata", {{"name", "other"}}}})->status, 400);

  // Media types other than a merge patch, a body that is not JSON, an absent lease.
  EXPECT_EQ(patch({{"spec", json::object()}}, "application/json")->status, 415);
  EXPECT_EQ(patch({{"spec", json::object()}}, "application/strategic-merge-patch+json")->status,
            415);
  EXPECT_EQ(Body(patch({}, "application/json-patch+json"))["reason"], "UnsupportedMediaType");
  EXPECT_EQ(Send("PATCH", path, "{", kMergePatch)->status, 400);
  httplib::Result absent = Send("PATCH", std::string(kLeases) + "/absent", "{}", kMergePatch);
  EXPECT_EQ(absent->status, 404);
  EXPECT_EQ(Body(absent)["details"], LeaseDetails("absent"));
  EXPECT_EQ(Revision(Must(server_->GetLease("ops", "binder"))), Revision(second) + 1);
}

TEST_F(FakeApiServerTest, LeaseDeletesAnswerAStatusAndHonourPreconditions) {
  const std::string path = std::string(kLeases) + "/binder";
  const json created = Body(Send("POST", kLeases, Lease("binder", "a").dump()));
  const std::string uid = created["metadata"]["uid"];
  httplib::Result stale =
      Send("DELETE", path, json({{"preconditions", {{"resourceVersion", "1"}}}}).dump());
  ASSERT_TRUE(stale);
  EXPECT_EQ(stale->status, 409);
  EXPECT_EQ(Body(stale)["reason"], "Conflict");
  EXPECT_EQ(Body(stale)["message"],
            "Operation cannot be fulfilled on Lease.coordination.k8s.io \"binder\": the "
            "ResourceVersion in the precondition (1) does not match the ResourceVersion in record "
            "(" +
                created["metadata"]["resourceVersion"].get<std::string>() +
                "). The object might have been modified");
  EXPECT_EQ(Send("DELETE", path, json({{"preconditions", {{"uid", "other"}}}}).dump())->status,
            409);
  ASSERT_TRUE(server_->GetLease("ops", "binder").has_value());

  const uint64_t before = std::stoull(server_->CurrentResourceVersion());
  httplib::Result deleted = Send("DELETE", path, json({{"preconditions", {{"uid", uid}}}}).dump());
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted->status, 200);
  EXPECT_EQ(Body(deleted), json::parse(R"({"kind":"Status","apiVersion":"v1","metadata":{},)"
                                       R"("status":"Success","details":{"name":"binder",)"
                                       R"("group":"coordination.k8s.io","kind":"leases","uid":")" +
                                       uid + R"("}})"));
  EXPECT_FALSE(server_->GetLease("ops", "binder").has_value());
  EXPECT_TRUE(server_->Leases().empty());
  EXPECT_EQ(std::stoull(server_->CurrentResourceVersion()), before + 1);
  httplib::Result again = Send("DELETE", path);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 404);
  EXPECT_EQ(Body(again)["reason"], "NotFound");
  EXPECT_EQ(Get(path)->status, 404);
}

TEST_F(FakeApiServerTest, FaultsAndDeadlinesApplyToLeases) {
  const std::string path = std::string(kLeases) + "/binder";
  // A failure before apply: nothing is created.
  server_->FailNext(1, 429, RequestMatch{"POST", "/leases"});
  httplib::Result throttled = Send("POST", kLeases, Lease("binder", "a").dump());
  ASSERT_TRUE(throttled);
  EXPECT_EQ(throttled->status, 429);
  EXPECT_EQ(throttled->get_header_value("Retry-After"), "1");
  EXPECT_TRUE(server_->Leases().empty());
  const json created = Body(Send("POST", kLeases, Lease("binder", "a").dump()));
  ASSERT_EQ(created["kind"], "Lease");

  server_->FailNext(1, 503, RequestMatch{"GET", "/leases/"});
  EXPECT_EQ(Get(path)->status, 503);
  EXPECT_EQ(Get(path)->status, 200);

  // Dropped before apply: no reply and no change; after apply: no reply, but applied.
  const std::string version = created["metadata"]["resourceVersion"];
  const std::string renew =
      json({{"metadata", {{"resourceVersion", version}}}, {"spec", {{"holderIdentity", "b"}}}})
          .dump();
  server_->DropNext(1, DropMode::kBeforeApply, RequestMatch{"PATCH", "/leases/"});
  EXPECT_FALSE(Send("PATCH", path, renew, kMergePatch));
  EXPECT_EQ(Revision(Must(server_->GetLease("ops", "binder"))), Revision(created));
  server_->DropNext(1, DropMode::kAfterApply, RequestMatch{"PATCH", "/leases/"});
  EXPECT_FALSE(Send("PATCH", path, renew, kMergePatch));
  EXPECT_EQ(Must(server_->GetLease("ops", "binder"))["spec"]["holderIdentity"], "b");
  // The retry of the applied patch finds its precondition stale.
  EXPECT_EQ(Send("PATCH", path, renew, kMergePatch)->status, 409);

  // A write slower than its deadline: 504, not applied.
  const json current = Must(server_->GetLease("ops", "binder"));
  json update = current;
  update["spec"]["holderIdentity"] = "c";
  server_->SetLatency(milliseconds(400), RequestMatch{"PUT", "/leases/"});
  httplib::Result late = Send("PUT", path + "?timeout=50ms", update.dump());
  ASSERT_TRUE(late);
  EXPECT_EQ(late->status, 504);
  EXPECT_EQ(late->body, kTimeoutBody);
  EXPECT_EQ(Must(server_->GetLease("ops", "binder")), current);
  httplib::Result in_time = Send("PUT", path + "?timeout=5s", update.dump());
  ASSERT_TRUE(in_time);
  EXPECT_EQ(in_time->status, 200);
  EXPECT_EQ(Must(server_->GetLease("ops", "binder"))["spec"]["holderIdentity"], "c");

  EXPECT_EQ(server_->CountRequests(RequestMatch{"PATCH", "/leases/binder"}), 3u);
  EXPECT_EQ(server_->CountRequests(RequestMatch{"PUT", "/leases/binder"}), 2u);
  EXPECT_EQ(server_->Requests().back().status, 200);
}

TEST_F(FakeApiServerTest, ConcurrentBindingsOfOnePodHaveOneWinner) {
  AddPod("p");
  server_->SetBindingDelay(milliseconds(20));  // every bind is in flight at once
  constexpr int kBinders = 8;
  std::vector<int> statuses(kBinders);
  std::vector<std::thread> binders;
  for (int i = 0; i < kBinders; ++i) {
    binders.emplace_back([this, i, &statuses] {
      httplib::Result result = Bind("p", Binding("p", "n" + std::to_string(i)));
      statuses[static_cast<size_t>(i)] = result ? result->status : 0;
    });
  }
  for (std::thread& binder : binders) binder.join();
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), 201), 1);
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), 409), kBinders - 1);
  EXPECT_EQ(server_->Bindings().size(), static_cast<size_t>(kBinders));
}

// A dropped binding is lost in transit: the client gets no reply, whether or not it applied.
void FakeApiServerTest::ExpectDrops() {
  FakeApiServer& server = *server_;
  auto bind = [this](const std::string& name) { return Bind(name, Binding(name, "n1")); };
  ASSERT_TRUE(server.AddPod(MakeFakePod("default", "applied")));
  ASSERT_TRUE(server.AddPod(MakeFakePod("default", "lost")));
  server.DropNext(1, DropMode::kAfterApply, RequestMatch{"POST", "/binding"});
  httplib::Result applied = bind("applied");
  EXPECT_FALSE(applied);
  EXPECT_EQ(server.GetPod("default", "applied").value()["spec"]["nodeName"], "n1");
  server.DropNext(1, DropMode::kBeforeApply, RequestMatch{"POST", "/binding"});
  httplib::Result lost = bind("lost");
  EXPECT_FALSE(lost);
  EXPECT_FALSE(server.GetPod("default", "lost").value()["spec"].contains("nodeName"));
  ASSERT_EQ(server.Bindings().size(), 2u);
  EXPECT_EQ(server.Bindings()[0].status, 0);
  EXPECT_EQ(server.Bindings()[1].status, 0);
  // The retry after an applied drop finds the pod on the intended node.
  httplib::Result retry = bind("applied");
  ASSERT_TRUE(retry);
  EXPECT_EQ(retry->status, 409);
}

TEST_F(FakeApiServerTest, DropsConnectionsBeforeOrAfterApplying) { ExpectDrops(); }

TEST_F(FakeApiServerTest, DropsPlainHttpConnectionsToo) {
  FakeApiServerOptions options;
  options.tls = false;
  Start(options);
  ExpectDrops();
}

TEST_F(FakeApiServerTest, StopEndsIdleKeepAliveConnectionsPromptly) {
  auto client = Client();
  client->set_keep_alive(true);
  ASSERT_EQ(client->Get("/api/v1/nodes")->status, 200);
  auto watch = Watch("/api/v1/pods?watch=1&resourceVersion=" + server_->CurrentResourceVersion());
  ASSERT_TRUE(server_->WaitForOpenWatches(1, kWait));
  const Clock::time_point start = Clock::now();
  server_->Stop();
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
  EXPECT_TRUE(watch->WaitDone());
}

TEST_F(FakeApiServerTest, WritesKubeconfigs) {
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  auto embedded = server_->WriteKubeconfig();
  ASSERT_TRUE(embedded) << embedded.error().message;
  const std::string text = read(*embedded);
  EXPECT_NE(text.find("server: \"" + server_->url() + "\""), std::string::npos) << text;
  EXPECT_NE(text.find("certificate-authority-data: "), std::string::npos) << text;
  EXPECT_NE(text.find("token: \"fake-token\""), std::string::npos) << text;
  EXPECT_NE(text.find("current-context: \"fake\""), std::string::npos) << text;

  KubeconfigOptions files;
  files.credential = KubeconfigOptions::Credential::kClientCertificate;
  files.embed_ca = false;
  files.embed_client_certificate = false;
  files.relative_paths = true;
  files.path = server_->work_dir() + "/pki/kubeconfig";
  auto with_files = server_->WriteKubeconfig(files);
  ASSERT_TRUE(with_files) << with_files.error().message;
  const std::string file_text = read(*with_files);
  EXPECT_NE(file_text.find("certificate-authority: \"ca.crt\""), std::string::npos) << file_text;
  EXPECT_NE(file_text.find("client-certificate: \"client.crt\""), std::string::npos);
  EXPECT_NE(file_text.find("client-key: \"client.key\""), std::string::npos);

  KubeconfigOptions token_file;
  token_file.credential = KubeconfigOptions::Credential::kTokenFile;
  token_file.token = "from-file";
  auto with_token_file = server_->WriteKubeconfig(token_file);
  ASSERT_TRUE(with_token_file);
  EXPECT_NE(read(*with_token_file).find("tokenFile: \"" + server_->work_dir() + "/token\""),
            std::string::npos);
  EXPECT_EQ(read(server_->work_dir() + "/token"), "from-file");
}

}  // namespace
}  // namespace linkfit::testing
