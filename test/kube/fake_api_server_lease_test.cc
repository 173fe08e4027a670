#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "kube/fake_api_server_fixture.h"

// Request deadlines (?timeout=) and coordination.k8s.io Leases as kube-apiserver serves them.

namespace linkfit::testing {
namespace {

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

}  // namespace
}  // namespace linkfit::testing
