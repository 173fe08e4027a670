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

#include "kube/fake_api_server_fixture.h"

namespace linkfit::testing {
namespace {

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

}  // namespace

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

namespace {

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
