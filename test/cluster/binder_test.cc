// ApiBinder and BinderLease against the fake API server: what a 409 means is read from the pod,
// an unknown outcome is settled by reading the pod once no Binding can land, and only the holder
// of the binder lease sends Bindings, a successor waiting out a holder that stopped renewing.

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cluster/cluster_testing.h"
#include "kube/fake_api_server.h"
#include "linkfit/cluster/api_binder.h"
#include "linkfit/cluster/binder_lease.h"
#include "linkfit/cluster/node_store.h"
#include "linkfit/cluster/pod_store.h"
#include "linkfit/kube/annotations.h"
#include "testing/cluster.h"
#include "testing/wait.h"

namespace linkfit::cluster {
namespace {

using linkfit::testing::FakeApiServerPtr;
using linkfit::testing::Mask;
using linkfit::testing::WaitFor;
using nlohmann::json;
using std::chrono::milliseconds;
using testing::NodeObject;
using testing::PodObject;
using testing::TopologyDocument;

FakeApiServerPtr StartFake() {
  auto fake = linkfit::testing::StartFakeApiServer();
  EXPECT_TRUE(fake.has_value()) << fake.error().message;
  return fake ? std::move(*fake) : nullptr;
}

kube::ApiClientPtr ClientOf(const linkfit::testing::FakeApiServer& fake) {
  auto path = fake.WriteKubeconfig();
  EXPECT_TRUE(path.has_value());
  auto config = kube::LoadKubeconfig(*path);
  EXPECT_TRUE(config.has_value()) << config.error().message;
  config->timeout = milliseconds(3000);
  auto client = kube::NewApiClient(*config);
  EXPECT_TRUE(client.has_value()) << client.error().message;
  return std::move(*client);
}

// One linkfit's binding side, as a process has it: cache, stores, lease, binder.
struct Binding {
  explicit Binding(linkfit::testing::FakeApiServer& fake, bool lease_enabled = false)
      : client(ClientOf(fake)),
        lease(*client, BinderLeaseOptions{.enabled = lease_enabled, .identity = "test"}, metrics),
        binder(*client, cache, pods, lease, "linkfit.io/gpu-share", metrics,
               SettleOptions{.bind_timeout = milliseconds(500), .margin = milliseconds(100)}) {
    for (const json& node : fake.Nodes()) nodes.Event(kube::WatchEventType::kAdded, node.dump());
  }
  // The pod as the watch showed it at some moment (pending, say).
  void See(const json& pod) { pods.Event(kube::WatchEventType::kModified, pod.dump()); }
  Result<state::ClusterCache::AssumeResult> Assume(const json& pod, const std::string& node,
                                                   topology::GpuMask gpus) {
    const std::string uid = pod["metadata"]["uid"];
    return cache.Assume(uid, node, [&](const state::NodeState&) -> Result<state::Assignment> {
      state::Assignment assignment;
      assignment.pod_uid = uid;
      assignment.pod_namespace = pod["metadata"]["namespace"];
      assignment.pod_name = pod["metadata"]["name"];
      assignment.node = node;
      assignment.gpus = gpus;
      return assignment;
    });
  }
  // What Extender::Bind does around the binder: assume, write, advance by the reply.
  struct Outcome {
    extender::BindReply reply;
    state::BindStage stage;
  };
  Result<Outcome> Bind(const json& pod, const std::string& node, topology::GpuMask gpus) {
    auto assumed = Assume(pod, node, gpus);
    if (!assumed) return tl::unexpected(assumed.error());
    const std::string uid = pod["metadata"]["uid"];
    if (auto writing = cache.Advance(uid, state::BindEvent::kWrite); !writing) {
      return tl::unexpected(writing.error());
    }
    const extender::BindTarget target{pod["metadata"]["name"], pod["metadata"]["namespace"], uid,
                                      node};
    extender::BindReply reply = binder.Bind(Request(target, assumed->assignment));
    auto step = cache.Advance(uid, reply.event);
    if (!step) return tl::unexpected(step.error());
    return Outcome{std::move(reply), step->stage};
  }
  extender::BindRequest Request(const extender::BindTarget& target,
                                const state::Assignment& assignment) {
    const state::SnapshotPtr snapshot = cache.Snapshot();
    const state::NodeState* node = snapshot->Find(target.node);
    EXPECT_NE(node, nullptr) << target.node;
    return {target, assignment, node != nullptr ? node->info_ptr() : nullptr, nullptr};
  }
  topology::GpuMask HeldBy(const json& pod) {
    const auto held = cache.Find(pod["metadata"]["uid"]);
    return held ? held->gpus : 0;
  }

  NullMetrics metrics;
  state::ClusterCache cache;
  alloc::PlacementTableCache registry;
  model::NodeModelFactory factory{registry, linkfit::testing::Catalog(),
                                  topology::BandwidthModel::Defaults()};
  PodStore pods{cache, {}, {}, metrics};
  NodeStore nodes{cache, factory, pods, metrics};
  kube::ApiClientPtr client;
  BinderLease lease;
  ApiBinder binder;
};

class BinderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_ = StartFake();
    ASSERT_NE(fake_, nullptr);
    for (const char* name : {"a-0", "b-0"}) {
      ASSERT_TRUE(fake_->AddNode(NodeObject(name, TopologyDocument("dgx1-v100"))).has_value());
    }
    auto pod = fake_->AddPod(PodObject({.name = "p", .gpus = 4}));
    ASSERT_TRUE(pod.has_value());
    pending_ = *pod;
  }
  // A first process's Binding of GPUs 0-3 on a-0 lands, but its answer is lost (it was killed).
  void BoundByAnEarlierAttempt() {
    Binding first(*fake_);
    first.See(pending_);
    fake_->DropNext(1, linkfit::testing::DropMode::kAfterApply, {"POST", "/binding"});
    auto outcome = first.Bind(pending_, "a-0", Mask({0, 1, 2, 3}));
    ASSERT_TRUE(outcome.has_value()) << outcome.error().message;
    EXPECT_EQ(outcome->stage, state::BindStage::kUnknown);
    const auto stored = fake_->GetPod("ml", "p");
    ASSERT_TRUE(stored.has_value());
    ASSERT_EQ((*stored)["spec"]["nodeName"], "a-0");
  }
  // After BoundByAnEarlierAttempt: the next process, which has not seen the pod bound yet,
  // binds it to `node` with `gpus`; the outcome is in `again_`.
  std::unique_ptr<Binding> BindAgain(const std::string& node, topology::GpuMask gpus) {
    BoundByAnEarlierAttempt();
    auto second = std::make_unique<Binding>(*fake_);
    second->See(pending_);
    again_ = second->Bind(pending_, node, gpus);
    EXPECT_TRUE(again_.has_value()) << again_.error().message;
    return second;
  }

  FakeApiServerPtr fake_;
  Result<Binding::Outcome> again_;  // BindAgain's outcome
  json pending_;
};

TEST_F(BinderTest, AConflictWithTheSameRecordIsTheEarlierAttemptsSuccess) {
  BindAgain("a-0", Mask({0, 1, 2, 3}));  // the same devices
  ASSERT_TRUE(again_.has_value());
  EXPECT_EQ(again_->reply.event, state::BindEvent::kConflictSameRecord);
  EXPECT_EQ(again_->stage, state::BindStage::kAccepted);
  EXPECT_EQ(fake_->Bindings().back().status, 409);
}

TEST_F(BinderTest, AConflictWithAnotherRecordLeavesThePodHoldingWhatTheApiSays) {
  const std::unique_ptr<Binding> second = BindAgain("a-0", Mask({4, 5, 6, 7}));
  ASSERT_TRUE(again_.has_value());
  EXPECT_EQ(again_->reply.event, state::BindEvent::kConflictOtherRecord);
  EXPECT_EQ(again_->stage, state::BindStage::kReplaced);
  EXPECT_EQ(again_->reply.bound_node, "a-0");  // bound where kube-scheduler asked
  EXPECT_EQ(second->HeldBy(pending_), Mask({0, 1, 2, 3}));
  EXPECT_EQ(second->cache.Phase(pending_["metadata"]["uid"]), state::PodPhase::kAdded);
}

TEST_F(BinderTest, AConflictOnAnotherNodeIsAnErrorAndThePodCountsWhereItIs) {
  const std::unique_ptr<Binding> second = BindAgain("b-0", Mask({0, 1, 2, 3}));
  ASSERT_TRUE(again_.has_value());
  // Ended (the store applied the API's object first, so the reply came late), never forgotten.
  EXPECT_TRUE(state::BindEnded(again_->stage));
  EXPECT_NE(again_->stage, state::BindStage::kForgotten);
  EXPECT_EQ(again_->reply.bound_node, "a-0");
  EXPECT_NE(again_->reply.detail.find("bound to a-0"), std::string::npos) << again_->reply.detail;
  const auto held = second->cache.Find(pending_["metadata"]["uid"]);
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->node, "a-0");
  EXPECT_EQ(held->gpus, Mask({0, 1, 2, 3}));
}

TEST_F(BinderTest, AConflictWithAReplacedPodIsRefused) {
  Binding binding(*fake_);
  binding.See(pending_);
  // Deleted and created again under the same name: the Binding's UID precondition fails.
  ASSERT_TRUE(fake_->DeletePod("ml", "p").has_value());
  ASSERT_TRUE(fake_->AddPod(PodObject({.name = "p", .gpus = 4})).has_value());
  auto outcome = binding.Bind(pending_, "a-0", Mask({0, 1, 2, 3}));
  ASSERT_TRUE(outcome.has_value()) << outcome.error().message;
  EXPECT_EQ(outcome->stage, state::BindStage::kForgotten);
  EXPECT_NE(outcome->reply.detail.find("409"), std::string::npos) << outcome->reply.detail;
  EXPECT_NE(outcome->reply.detail.find("replaced"), std::string::npos) << outcome->reply.detail;
}

TEST_F(BinderTest, AnUnknownOutcomeIsSettledByReadingThePodNeverByResending) {
  Binding binding(*fake_);
  binding.See(pending_);
  // A 500 that committed, and one that did not.
  fake_->DropNext(1, linkfit::testing::DropMode::kAfterApply, {"POST", "/binding"});
  auto landed = binding.Bind(pending_, "a-0", Mask({0, 1, 2, 3}));
  ASSERT_TRUE(landed.has_value());
  EXPECT_EQ(landed->stage, state::BindStage::kUnknown);
  auto other = fake_->AddPod(PodObject({.name = "q", .gpus = 4}));
  ASSERT_TRUE(other.has_value());
  binding.See(*other);
  fake_->FailNext(1, 500, {"POST", "/binding"});
  auto failed = binding.Bind(*other, "a-0", Mask({4, 5, 6, 7}));
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->stage, state::BindStage::kUnknown);
  EXPECT_EQ(binding.binder.unsettled(), 2u);
  // Both stay assumed until their horizon (500 + 100 ms) has passed.
  EXPECT_EQ(binding.cache.Phase((*other)["metadata"]["uid"]), state::PodPhase::kAssumed);
  ASSERT_TRUE(WaitFor([&] { return binding.binder.unsettled() == 0; }));
  EXPECT_TRUE(binding.cache.BindDone(pending_["metadata"]["uid"]));
  EXPECT_EQ(binding.cache.Phase((*other)["metadata"]["uid"]), state::PodPhase::kInitial);
  EXPECT_EQ(fake_->Bindings().size(), 2u);  // nothing re-sent
}

TEST_F(BinderTest, AThrottledBindingIsNotRetriedBehindTheBindersBack) {
  Binding binding(*fake_);
  binding.See(pending_);
  fake_->FailNext(1, 429, {"POST", "/binding"}, 1);
  auto outcome = binding.Bind(pending_, "a-0", Mask({0, 1, 2, 3}));
  ASSERT_TRUE(outcome.has_value()) << outcome.error().message;
  EXPECT_EQ(outcome->stage, state::BindStage::kForgotten);
  EXPECT_NE(outcome->reply.detail.find("429"), std::string::npos) << outcome->reply.detail;
  EXPECT_EQ(fake_->Bindings().size(), 1u);
}

TEST_F(BinderTest, ABindingCarriesItsDeadline) {
  Binding binding(*fake_);
  binding.See(pending_);
  ASSERT_TRUE(binding.Bind(pending_, "a-0", Mask({0, 1, 2, 3})).has_value());
  bool found = false;
  for (const auto& request : fake_->Requests()) {
    if (request.path.ends_with("/binding")) {
      found = true;
      EXPECT_NE(request.target.find("timeout=500ms"), std::string::npos) << request.target;
    }
  }
  EXPECT_TRUE(found);
}

// A committed record that collides with a bind not yet sent: the record counts, the bind is
// refused before anything is written.
TEST_F(BinderTest, ACommittedRecordDisplacesAnAssumptionWhoseBindingWasNotSent) {
  Binding binding(*fake_);
  binding.See(pending_);
  ASSERT_TRUE(binding.Assume(pending_, "a-0", Mask({0, 1, 2, 3})).has_value());
  // Another writer binds pod r to GPUs 2-5 with a record.
  kube::AllocationRecord record;
  record.pod = "ml/r";
  record.node = "a-0";
  record.devices.gpus = {2, 3, 4, 5};
  json r = PodObject({.name = "r", .gpus = 4});
  auto stored = fake_->AddPod(r);
  ASSERT_TRUE(stored.has_value());
  record.uid = (*stored)["metadata"]["uid"];
  (*stored)["spec"]["nodeName"] = "a-0";
  (*stored)["metadata"]["annotations"][kube::kAnnotationAllocation] =
      kube::EncodeAllocationRecord(record);
  binding.See(*stored);
  EXPECT_EQ(binding.HeldBy(*stored), Mask({2, 3, 4, 5}));
  EXPECT_EQ(binding.cache.Phase(pending_["metadata"]["uid"]), state::PodPhase::kInitial);
  const extender::BindTarget target{"p", "ml", pending_["metadata"]["uid"], "a-0"};
  state::Assignment planned;
  planned.pod_uid = target.pod_uid;
  planned.node = "a-0";
  planned.gpus = Mask({0, 1, 2, 3});
  const extender::BindReply outcome = binding.binder.Bind(binding.Request(target, planned));
  EXPECT_EQ(outcome.event, state::BindEvent::kRecordTookDevices);
  EXPECT_NE(outcome.detail.find("committed record"), std::string::npos) << outcome.detail;
  EXPECT_TRUE(fake_->Bindings().empty());
}

// Two committed records naming one GPU: counted once, logged, an Event, /inspect's list.
TEST_F(BinderTest, TwoRecordsOfOneGpuAreACollisionReportedOnce) {
  Binding binding(*fake_);
  const auto bound = [&](const std::string& name, std::vector<int> gpus) {
    auto stored = fake_->AddPod(PodObject({.name = name, .gpus = 2}));
    EXPECT_TRUE(stored.has_value());
    kube::AllocationRecord record;
    record.pod = "ml/" + name;
    record.uid = (*stored)["metadata"]["uid"];
    record.node = "a-0";
    record.devices.gpus = std::move(gpus);
    (*stored)["spec"]["nodeName"] = "a-0";
    (*stored)["metadata"]["annotations"][kube::kAnnotationAllocation] =
        kube::EncodeAllocationRecord(record);
    return *stored;
  };
  const json first = bound("first", {0, 1});
  const json second = bound("second", {1, 2});
  binding.See(first);
  binding.See(second);
  binding.See(second);  // a status update: not a second report
  EXPECT_EQ(binding.HeldBy(first), Mask({0, 1}));
  EXPECT_EQ(binding.HeldBy(second), 0u);
  const auto collisions = binding.pods.collisions();
  ASSERT_EQ(collisions.size(), 1u);
  EXPECT_EQ(collisions[0].pod, "ml/second");
  EXPECT_NE(collisions[0].holders.find("ml/first"), std::string::npos);
  EXPECT_EQ(collisions[0].devices, "GPUs 1,2");
}

TEST_F(BinderTest, WithoutTheBinderLeaseNothingIsSent) {
  NullMetrics metrics;
  kube::ApiClientPtr other_client = ClientOf(*fake_);
  BinderLease other(*other_client, BinderLeaseOptions{.identity = "other"}, metrics);
  ASSERT_TRUE(other.Permit(milliseconds(1000)).has_value());
  Binding binding(*fake_, /*lease_enabled=*/true);
  binding.See(pending_);
  auto outcome = binding.Bind(pending_, "a-0", Mask({0, 1, 2, 3}));
  ASSERT_TRUE(outcome.has_value()) << outcome.error().message;
  EXPECT_EQ(outcome->stage, state::BindStage::kForgotten);
  EXPECT_NE(outcome->reply.detail.find("another linkfit (other) holds the binder lease"),
            std::string::npos)
      << outcome->reply.detail;
  EXPECT_TRUE(fake_->Bindings().empty());
  EXPECT_EQ(binding.lease.status().binds_held, 1u);
}

// ---- the binder lease ----

BinderLeaseOptions LeaseOptions(const std::string& identity) {
  return BinderLeaseOptions{.lease_namespace = "linkfit-system",
                            .name = "linkfit-binder",
                            .duration = milliseconds(1500),
                            .idle_release = milliseconds(300),
                            .identity = identity};
}

TEST(BinderLeaseTest, OneHolderAtATimeAndAnIdleHolderReleases) {
  FakeApiServerPtr fake = StartFake();
  ASSERT_NE(fake, nullptr);
  NullMetrics metrics;
  kube::ApiClientPtr client_a = ClientOf(*fake);
  kube::ApiClientPtr client_b = ClientOf(*fake);
  BinderLease a(*client_a, LeaseOptions("a"), metrics);
  BinderLease b(*client_b, LeaseOptions("b"), metrics);
  a.Start();
  b.Start();
  ASSERT_TRUE(a.Permit(milliseconds(500)).has_value());
  auto lease = fake->GetLease("linkfit-system", "linkfit-binder");
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "a");
  auto refused = b.Permit(milliseconds(500));
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("(a)"), std::string::npos) << refused.error().message;
  // A permit longer than what is left of the lease is refused even to the holder.
  EXPECT_FALSE(a.Permit(milliseconds(5000)).has_value());
  // a binds no more: it releases once its horizon is past, and b takes the lease at once.
  ASSERT_TRUE(WaitFor(
      [&] {
        lease = fake->GetLease("linkfit-system", "linkfit-binder");
        return (*lease)["spec"]["holderIdentity"] == "";
      },
      std::chrono::seconds(5)));
  EXPECT_FALSE(a.status().holding);
  // (A refused Permit reads the lease again at most every 200 ms.)
  ASSERT_TRUE(
      WaitFor([&] { return b.Permit(milliseconds(500)).has_value(); }, std::chrono::seconds(2)));
  EXPECT_EQ(b.status().takeovers, 0u);
}

TEST(BinderLeaseTest, ASuccessorWaitsAWholeDurationForAHolderThatStoppedRenewing) {
  FakeApiServerPtr fake = StartFake();
  ASSERT_NE(fake, nullptr);
  NullMetrics metrics;
  kube::ApiClientPtr client_a = ClientOf(*fake);
  kube::ApiClientPtr client_b = ClientOf(*fake);
  BinderLease a(*client_a, LeaseOptions("a"), metrics);
  a.Start();
  ASSERT_TRUE(a.Permit(milliseconds(500)).has_value());
  // a's process dies: no renewal, no release.
  client_a->Stop();
  const auto died = std::chrono::steady_clock::now();
  BinderLease b(*client_b, LeaseOptions("b"), metrics);
  b.Start();
  std::chrono::steady_clock::time_point granted;
  ASSERT_TRUE(WaitFor(
      [&] {
        if (!b.Permit(milliseconds(500))) return false;
        granted = std::chrono::steady_clock::now();
        return true;
      },
      std::chrono::seconds(10)));
  // Never before a's last renewal had lapsed: a whole duration after b first read it.
  EXPECT_GE(granted - died, milliseconds(1500));
  EXPECT_EQ(b.status().takeovers, 1u);
  // And a, had it survived, no longer grants itself anything past its own expiry.
  EXPECT_FALSE(a.Permit(milliseconds(500)).has_value());
}

}  // namespace
}  // namespace linkfit::cluster

namespace linkfit::cluster {
namespace {

TEST(BinderLeaseTest, ARefusedWriteIsNamedInTheHeldBindsError) {
  FakeApiServerPtr fake = StartFake();
  ASSERT_NE(fake, nullptr);
  NullMetrics metrics;
  kube::ApiClientPtr client = ClientOf(*fake);
  BinderLease lease(*client, LeaseOptions("a"), metrics);
  fake->FailNext(1, 403, {"POST", "/leases"});
  auto refused = lease.Permit(milliseconds(500));
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("answered 403"), std::string::npos)
      << refused.error().message;
  EXPECT_TRUE(WaitFor([&] { return lease.Permit(milliseconds(500)).has_value(); }));
}

}  // namespace
}  // namespace linkfit::cluster
