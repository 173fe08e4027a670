// Cluster mode end to end: a linkfit Service started against the fake API server (real HTTPS,
// resourceVersions, watches, Binding semantics, injected faults), driven over HTTP the way
// kube-scheduler drives it. Every test ends by comparing linkfit's cache with the API's truth.

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "app/service.h"
#include "cluster/cluster_testing.h"
#include "kube/fake_api_server.h"
#include "linkfit/app/cli.h"
#include "linkfit/kube/annotations.h"
#include "testing/fixtures.h"
#include "testing/wait.h"

namespace linkfit::cluster {
namespace {

using linkfit::testing::DropMode;
using linkfit::testing::FakeApiServer;
using linkfit::testing::RequestMatch;
using nlohmann::json;
using testing::NodeObject;
using testing::PodObject;
using testing::PodSpec;
using testing::TopologyDocument;

using linkfit::testing::WaitFor;

class ClusterModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    linkfit::testing::FakeApiServerOptions options;
    options.bookmark_interval = std::chrono::milliseconds(200);
    auto fake = linkfit::testing::StartFakeApiServer(options);
    ASSERT_TRUE(fake.has_value()) << fake.error().message;
    fake_ = std::move(*fake);
    auto kubeconfig = fake_->WriteKubeconfig();
    ASSERT_TRUE(kubeconfig.has_value()) << kubeconfig.error().message;
    kubeconfig_ = *kubeconfig;
  }
  void TearDown() override {
    client_.reset();
    service_.reset();
    if (fake_) fake_->Stop();
  }

  app::Config ClusterConfig() const {
    app::Config config;
    config.listen = "127.0.0.1:0";
    config.listen_host = "127.0.0.1";
    config.listen_port = 0;
    config.mig_profiles_dir = linkfit::testing::SourcePath("config/mig");
    config.limits.threads = 24;
    config.kubernetes.enabled = true;
    config.kubernetes.kubeconfig = kubeconfig_;
    config.kubernetes.request_timeout_ms = 2000;
    config.kubernetes.list_page_size = 7;  // several pages even in small tests
    // Short deadlines, so that unknown outcomes settle within a test's patience.
    config.kubernetes.bind_timeout_ms = 1000;
    config.kubernetes.bind_settle_margin_ms = 200;
    config.kubernetes.binder_lease.duration_ms = 3000;
    return config;
  }
  // Starts linkfit; with `wait_ready`, returns once /readyz is true.
  void StartLinkfit(bool wait_ready = true, std::function<void()> on_ready = {}) {
    auto started = app::Service::Start(ClusterConfig(), std::move(on_ready));
    ASSERT_TRUE(started.has_value()) << started.error().message;
    service_ = std::move(*started);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", service_->port());
    client_->set_read_timeout(30);
    if (wait_ready) {
      ASSERT_TRUE(service_->cluster()->WaitReady(std::chrono::seconds(20)));
    }
  }

  void AddNode(const std::string& name, const std::string& fixture, const std::string& mig = "") {
    ASSERT_TRUE(fake_->AddNode(NodeObject(name, TopologyDocument(fixture), mig)).has_value());
  }
  // Adds a pending pod; returns the object as stored (with its UID).
  json AddPod(PodSpec spec) {
    auto stored = fake_->AddPod(PodObject(spec));
    EXPECT_TRUE(stored.has_value()) << (stored ? "" : stored.error().message);
    return stored ? *stored : json();
  }

  std::pair<int, std::string> Post(const std::string& path, const std::string& body) {
    auto reply = client_->Post(path, body, "application/json");
    if (!reply) return {-1, httplib::to_string(reply.error())};
    return {reply->status, reply->body};
  }
  static std::string NamesJson(const std::vector<std::string>& nodes) { return json(nodes).dump(); }
  // kube-scheduler's cycle for one pod: filter, prioritize, bind to the best node. Returns the
  // node, or "" with `error` set.
  std::string Schedule(const json& pod, const std::vector<std::string>& nodes,
                       std::string* error = nullptr) {
    const std::string args =
        R"({"Pod":)" + pod.dump() + R"(,"Nodes":null,"NodeNames":)" + NamesJson(nodes) + "}";
    const auto [filter_status, filter_body] = Post("/scheduler/filter", args);
    const json filtered = json::parse(filter_body, nullptr, false);
    if (filter_status != 200 || !filtered.is_object() ||
        !filtered["Error"].get<std::string>().empty() || !filtered["NodeNames"].is_array() ||
        filtered["NodeNames"].empty()) {
      if (error != nullptr) *error = "filter: " + filter_body;
      return "";
    }
    std::vector<std::string> passing = filtered["NodeNames"].get<std::vector<std::string>>();
    const std::string prioritize_args =
        R"({"Pod":)" + pod.dump() + R"(,"Nodes":null,"NodeNames":)" + NamesJson(passing) + "}";
    const auto [priority_status, priority_body] = Post("/scheduler/prioritize", prioritize_args);
    const json scores = json::parse(priority_body, nullptr, false);
    std::string best = passing.front();
    std::int64_t best_score = -1;
    if (priority_status == 200 && scores.is_array()) {
      for (const json& entry : scores) {
        if (entry["Score"].get<std::int64_t>() > best_score) {
          best_score = entry["Score"].get<std::int64_t>();
          best = entry["Host"].get<std::string>();
        }
      }
    }
    const std::string bind = BindBody(pod, best);
    const auto [bind_status, bind_body] = Post("/scheduler/bind", bind);
    const json bound = json::parse(bind_body, nullptr, false);
    if (bind_status != 200 || !bound.is_object() || !bound["Error"].get<std::string>().empty()) {
      if (error != nullptr) *error = "bind: " + bind_body;
      return "";
    }
    return best;
  }
  static std::string BindBody(const json& pod, const std::string& node) {
    return json{{"PodName", pod["metadata"]["name"]},
                {"PodNamespace", pod["metadata"]["namespace"]},
                {"PodUID", pod["metadata"]["uid"]},
                {"Node", node}}
        .dump();
  }

  // The API's truth: per node, the GPUs each bound, non-terminal pod's record touches. Fails the
  // test when two pods' records hold one whole GPU.
  std::map<std::string, std::map<std::string, std::set<int>>> RecordedGpus() {
    std::map<std::string, std::map<std::string, std::set<int>>> by_node;
    std::map<std::string, std::set<int>> whole_by_node;
    for (const json& pod : fake_->Pods()) {
      const json& spec = pod["spec"];
      if (!spec.contains("nodeName")) continue;
      const std::string phase = pod["status"].value("phase", "");
      if (phase == "Succeeded" || phase == "Failed") continue;
      const json& annotations = pod["metadata"].value("annotations", json::object());
      if (!annotations.contains(kube::kAnnotationAllocation)) continue;
      auto record =
          kube::DecodeAllocationRecord(annotations[kube::kAnnotationAllocation].get<std::string>());
      EXPECT_TRUE(record.has_value()) << (record ? "" : record.error().message);
      if (!record) continue;
      EXPECT_EQ(record->uid, pod["metadata"]["uid"].get<std::string>());
      EXPECT_EQ(record->node, spec["nodeName"].get<std::string>());
      auto& node = by_node[record->node];
      auto& whole = whole_by_node[record->node];
      for (int gpu : record->devices.gpus) {
        EXPECT_TRUE(whole.insert(gpu).second)
            << "GPU " << gpu << " of " << record->node << " given twice (" << record->uid << ")";
      }
      // Every GPU the pod touches (whole, MIG instances, shares), as the cache's mask has it.
      std::set<int> touched(record->devices.gpus.begin(), record->devices.gpus.end());
      for (const auto& mig : record->devices.mig) touched.insert(mig.gpu);
      for (const auto& share : record->devices.shares) touched.insert(share.gpu);
      node[record->uid] = touched;
    }
    return by_node;
  }
  // linkfit's cache holds exactly what the records say, for every pod with a record, once the
  // watch has caught up.
  void ExpectCacheEqualsTheApi() {
    const auto truth = RecordedGpus();
    const bool converged = WaitFor([&] {
      const state::SnapshotPtr snapshot = service_->extender().cache().Snapshot();
      for (const auto& [node_name, pods] : truth) {
        const state::NodeState* node = snapshot->Find(node_name);
        if (node == nullptr) return false;
        unsigned recorded = 0;
        for (const auto& [uid, gpus] : pods) {
          const auto held = node->pods().find(uid);
          if (held == node->pods().end()) return false;
          unsigned mask = 0;
          for (int gpu : gpus) mask |= 1u << gpu;
          if (held->second.gpus != mask) return false;
          recorded |= mask;
        }
        // Nothing else holds whole GPUs there unless it is estimated (a foreign pod).
        unsigned others = 0;
        for (const auto& [uid, held] : node->pods()) {
          if (pods.count(uid) == 0 && !held.estimated) others |= held.gpus;
        }
        if (others != 0) return false;
      }
      return service_->extender().cache().sizes().assumed == 0;
    });
    EXPECT_TRUE(converged) << "linkfit's cache did not converge to the API's records";
  }

  linkfit::testing::FakeApiServerPtr fake_;
  std::string kubeconfig_;
  std::unique_ptr<app::Service> service_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ClusterModeTest, ReadyOnlyAfterTheInitialListAndFilterSaysWhy) {
  AddNode("h100-0", "dgx-h100");
  fake_->SetLatency(std::chrono::milliseconds(1500), RequestMatch{"GET", "/api/v1/pods"});
  // `linkfit serve` releases the lists' memory in the ready hook: once, after the lists.
  std::atomic<int> ready_hooks{0};
  StartLinkfit(/*wait_ready=*/false, [&ready_hooks] { ++ready_hooks; });
  const json pod = AddPod({.name = "p", .gpus = 1});
  auto readyz = client_->Get("/readyz");
  ASSERT_TRUE(readyz);
  EXPECT_EQ(readyz->status, 503);
  EXPECT_EQ(ready_hooks.load(), 0);
  const auto [status, body] =
      Post("/scheduler/filter", R"({"Pod":)" + pod.dump() + R"(,"NodeNames":["h100-0"]})");
  EXPECT_EQ(status, 200);
  const json reply = json::parse(body);
  EXPECT_NE(reply["Error"].get<std::string>().find("still listing"), std::string::npos) << body;
  EXPECT_TRUE(reply["NodeNames"].is_null());  // an error, never an empty "nothing fits" list
  ASSERT_TRUE(service_->cluster()->WaitReady(std::chrono::seconds(20)));
  EXPECT_EQ(ready_hooks.load(), 1);
  EXPECT_EQ(client_->Get("/readyz")->status, 200);
  fake_->ClearFaults();
  EXPECT_EQ(Schedule(pod, {"h100-0"}), "h100-0");
}

TEST_F(ClusterModeTest, ABindIsOneBindingCarryingTheExactDevices) {
  AddNode("h100-0", "dgx-h100");
  AddNode("v100-0", "dgx1-v100");
  StartLinkfit();
  PodSpec spec{.name = "train", .gpus = 4};
  spec.annotations[kube::kAnnotationCloseness] = "nvlink";
  const json pod = AddPod(spec);
  std::string error;
  ASSERT_EQ(Schedule(pod, {"h100-0", "v100-0"}, &error), "h100-0") << error;
  const auto bindings = fake_->Bindings();
  ASSERT_EQ(bindings.size(), 1u);
  EXPECT_EQ(bindings[0].status, 201);
  const json& binding = bindings[0].body;
  EXPECT_EQ(binding["metadata"]["uid"], pod["metadata"]["uid"]);
  EXPECT_EQ(binding["target"]["name"], "h100-0");
  auto record = kube::DecodeAllocationRecord(
      binding["metadata"]["annotations"][kube::kAnnotationAllocation].get<std::string>());
  ASSERT_TRUE(record.has_value()) << record.error().message;
  EXPECT_EQ(record->devices.gpus.size(), 4u);
  ASSERT_EQ(record->containers.size(), 1u);
  EXPECT_EQ(record->containers[0].name, "main");
  EXPECT_EQ(record->containers[0].devices.gpus, record->devices.gpus);
  // The API server merged it into the pod; the watch confirms the assumption.
  const std::string uid = pod["metadata"]["uid"];
  ASSERT_TRUE(
      WaitFor([&] { return service_->extender().cache().Phase(uid) == state::PodPhase::kAdded; }));
  // A repeated bind (kube-scheduler retry) is answered from the cache: no second write.
  EXPECT_EQ(json::parse(Post("/scheduler/bind", BindBody(pod, "h100-0")).second)["Error"], "");
  EXPECT_EQ(fake_->Bindings().size(), 1u);
  // /inspect keeps its standalone shape: nodes[].gpus[].pods lists pod UIDs.
  const json inspect = json::parse(client_->Get("/inspect/h100-0")->body);
  int holding = 0;
  for (const json& gpu : inspect["gpus"]) {
    for (const json& holder : gpu["pods"]) holding += holder == uid ? 1 : 0;
  }
  EXPECT_EQ(holding, 4);
  ExpectCacheEqualsTheApi();
}

TEST_F(ClusterModeTest, EightSchedulersAgainstASlowApiServerNeverShareAGpu) {
  const std::vector<std::string> nodes = {"h100-0", "h100-1", "a100-0"};
  AddNode("h100-0", "dgx-h100");
  AddNode("h100-1", "dgx-h100");
  AddNode("a100-0", "dgx-a100");
  StartLinkfit();
  fake_->SetBindingDelay(std::chrono::milliseconds(20));
  std::vector<json> pods;
  for (int i = 0; i < 40; ++i) {
    pods.push_back(AddPod({.name = "p" + std::to_string(i), .gpus = 1 + i % 2}));
  }
  ASSERT_TRUE(WaitFor([&] { return service_->cluster()->pods().size() == pods.size(); }));
  std::atomic<int> next{0};
  std::atomic<int> bound_gpus{0};
  std::vector<std::thread> schedulers;
  for (int t = 0; t < 8; ++t) {
    schedulers.emplace_back([&] {
      httplib::Client client("127.0.0.1", service_->port());
      client.set_read_timeout(30);
      for (int i = next++; i < static_cast<int>(pods.size()); i = next++) {
        const json& pod = pods[static_cast<std::size_t>(i)];
        // Every scheduler binds straight to the node it guesses, to make them collide.
        const std::string node = nodes[static_cast<std::size_t>(i) % nodes.size()];
        auto reply = client.Post("/scheduler/bind", BindBody(pod, node), "application/json");
        if (reply && reply->status == 200 && json::parse(reply->body)["Error"] == "") {
          bound_gpus += 1 + i % 2;
        }
      }
    });
  }
  for (std::thread& scheduler : schedulers) scheduler.join();
  // 40 pods asking for 60 GPUs on 24: some binds must fail, none may share a GPU.
  EXPECT_LE(bound_gpus.load(), 24);
  EXPECT_GT(bound_gpus.load(), 0);
  int recorded = 0;
  for (const auto& [node, by_pod] : RecordedGpus()) {
    for (const auto& [uid, gpus] : by_pod) recorded += static_cast<int>(gpus.size());
  }
  EXPECT_EQ(recorded, bound_gpus.load());
  ExpectCacheEqualsTheApi();
}

TEST_F(ClusterModeTest, ARefusedBindingFreesTheDevices) {
  AddNode("v100-0", "dgx1-v100");
  StartLinkfit();
  const json pod = AddPod({.name = "p", .gpus = 8});
  fake_->FailNext(1, 403, RequestMatch{"POST", "/binding"});
  std::string error;
  EXPECT_EQ(Schedule(pod, {"v100-0"}, &error), "");
  EXPECT_NE(error.find("403"), std::string::npos) << error;
  const std::string uid = pod["metadata"]["uid"];
  EXPECT_EQ(service_->extender().cache().Phase(uid), state::PodPhase::kInitial);
  // Nothing is held, so the scheduler's retry gets all 8 GPUs.
  EXPECT_EQ(Schedule(pod, {"v100-0"}, &error), "v100-0") << error;
  ExpectCacheEqualsTheApi();
}

TEST_F(ClusterModeTest, ABindingWhoseReplyIsLostIsSettledWithoutADoubleAllocation) {
  AddNode("v100-0", "dgx1-v100");
  StartLinkfit();
  const json first = AddPod({.name = "first", .gpus = 4});
  const json second = AddPod({.name = "second", .gpus = 4});
  // The binding lands but its reply is lost: the outcome is unknown to linkfit.
  fake_->DropNext(1, DropMode::kAfterApply, RequestMatch{"POST", "/binding"});
  std::string error;
  // Unknown, unless the watch showed the pod bound with linkfit's record before the lost reply
  // was noticed: then the bind is known to have landed.
  if (const std::string placed = Schedule(first, {"v100-0"}, &error); placed.empty()) {
    EXPECT_NE(error.find("unknown"), std::string::npos) << error;
  } else {
    EXPECT_EQ(placed, "v100-0");
  }
  const std::string uid = first["metadata"]["uid"];
  // The devices stay assumed (never forgotten on an unknown outcome) until the watch shows the
  // pod bound.
  EXPECT_NE(service_->extender().cache().Phase(uid), state::PodPhase::kInitial);
  ASSERT_TRUE(
      WaitFor([&] { return service_->extender().cache().Phase(uid) == state::PodPhase::kAdded; }));
  // The other 4 GPUs are still free; the first pod's are not handed out again.
  EXPECT_EQ(Schedule(second, {"v100-0"}, &error), "v100-0") << error;
  const json third = AddPod({.name = "third", .gpus = 1});
  EXPECT_EQ(Schedule(third, {"v100-0"}, &error), "");
  ExpectCacheEqualsTheApi();
}

TEST_F(ClusterModeTest, ABindingDroppedBeforeItLandedIsSettledByReadingThePod) {
  AddNode("v100-0", "dgx1-v100");
  StartLinkfit();
  const json pod = AddPod({.name = "p", .gpus = 8});
  fake_->DropNext(1, DropMode::kBeforeApply, RequestMatch{"POST", "/binding"});
  std::string error;
  EXPECT_EQ(Schedule(pod, {"v100-0"}, &error), "");
  EXPECT_NE(error.find("unknown"), std::string::npos) << error;
  const std::string uid = pod["metadata"]["uid"];
  // Kept while the Binding could still land; once its deadline and margin are past, the
  // settler reads the pod (never re-sends the Binding): not bound, so the devices are released.
  EXPECT_EQ(service_->extender().cache().Phase(uid), state::PodPhase::kAssumed);
  ASSERT_TRUE(WaitFor(
      [&] { return service_->extender().cache().Phase(uid) == state::PodPhase::kInitial; }));
  EXPECT_EQ(fake_->Bindings().size(), 1u);
  // kube-scheduler's retry gets all 8 GPUs.
  EXPECT_EQ(Schedule(pod, {"v100-0"}, &error), "v100-0") << error;
  ExpectCacheEqualsTheApi();
}

TEST_F(ClusterModeTest, DeletedAndFinishedPodsFreeTheirDevices) {
  AddNode("v100-0", "dgx1-v100");
  StartLinkfit();
  const json a = AddPod({.name = "a", .gpus = 4});
  const json b = AddPod({.name = "b", .gpus = 4});
  ASSERT_EQ(Schedule(a, {"v100-0"}), "v100-0");
  ASSERT_EQ(Schedule(b, {"v100-0"}), "v100-0");
  const json c = AddPod({.name = "c", .gpus = 4});
  EXPECT_EQ(Schedule(c, {"v100-0"}), "");
  ASSERT_TRUE(fake_->SetPodPhase("ml", "a", "Succeeded").has_value());
  ASSERT_TRUE(fake_->DeletePod("ml", "b").has_value());
  ASSERT_TRUE(WaitFor([&] {
    const state::SnapshotPtr snapshot = service_->extender().cache().Snapshot();
    const state::NodeState* node = snapshot->Find("v100-0");
    return node != nullptr && node->whole_used() == 0;
  }));
  EXPECT_EQ(Schedule(c, {"v100-0"}), "v100-0");
  ExpectCacheEqualsTheApi();
}

TEST_F(ClusterModeTest, CutWatchesAndCompactedHistoryLoseNothing) {
  AddNode("v100-0", "dgx1-v100");
  AddNode("h100-0", "dgx-h100");
  StartLinkfit();
  const json a = AddPod({.name = "a", .gpus = 4});
  ASSERT_EQ(Schedule(a, {"v100-0"}), "v100-0");
  ASSERT_TRUE(WaitFor([&] {
    return service_->extender().cache().Phase(a["metadata"]["uid"]) == state::PodPhase::kAdded;
  }));
  // While no watch is open: a pod is deleted, a foreign one bound, a node removed, and the
  // history compacted, so resuming fails with 410 and linkfit must relist.
  fake_->FailNext(1000, 503, RequestMatch{"GET", "/api/v1/"});
  fake_->CutWatches();
  ASSERT_TRUE(fake_->WaitForOpenWatches(0, std::chrono::seconds(5)));
  ASSERT_TRUE(fake_->DeletePod("ml", "a").has_value());
  ASSERT_TRUE(
      fake_
          ->AddPod(PodObject(
              {.name = "foreign", .node = "h100-0", .gpus = 2, .scheduler = "default-scheduler"}))
          .has_value());
  ASSERT_TRUE(fake_->DeleteNode("v100-0").has_value());
  AddNode("l40s-0", "pcie-8x-l40s-2socket");
  fake_->Compact();
  fake_->ClearFaults();
  ASSERT_TRUE(WaitFor(
      [&] {
        const state::SnapshotPtr snapshot = service_->extender().cache().Snapshot();
        const state::NodeState* h100 = snapshot->Find("h100-0");
        return snapshot->Find("v100-0") == nullptr && snapshot->Find("l40s-0") != nullptr &&
               h100 != nullptr && __builtin_popcount(h100->whole_used()) == 2 &&
               service_->extender().cache().Phase(a["metadata"]["uid"]) ==
                   state::PodPhase::kInitial;
      },
      std::chrono::seconds(20)));
  ExpectCacheEqualsTheApi();
}

TEST_F(ClusterModeTest, NodesAreAddedChangedAndRemoved) {
  StartLinkfit();
  const json pod = AddPod({.name = "p", .gpus = 2});
  std::string error;
  EXPECT_EQ(Schedule(pod, {"new-0"}, &error), "");
  EXPECT_NE(error.find("unknown to linkfit"), std::string::npos) << error;
  AddNode("new-0", "dgx1-v100");
  ASSERT_TRUE(WaitFor([&] { return service_->extender().cache().Snapshot()->Find("new-0"); }));
  // A bad annotation: unschedulable for linkfit with the parse error as the reason.
  ASSERT_TRUE(fake_->UpdateNode(NodeObject("new-0", "{not json")).has_value());
  ASSERT_TRUE(WaitFor(
      [&] { return service_->extender().cache().Snapshot()->Problem("new-0") != nullptr; }));
  EXPECT_EQ(Schedule(pod, {"new-0"}, &error), "");
  EXPECT_NE(error.find("linkfit.io/topology"), std::string::npos) << error;
  ASSERT_TRUE(fake_->UpdateNode(NodeObject("new-0", TopologyDocument("dgx-h100"))).has_value());
  ASSERT_TRUE(WaitFor([&] {
    const state::NodeState* node = service_->extender().cache().Snapshot()->Find("new-0");
    return node != nullptr && node->info().topology().spec().id == "dgx-h100";
  }));
  EXPECT_EQ(Schedule(pod, {"new-0"}, &error), "new-0") << error;
  ASSERT_TRUE(fake_->DeleteNode("new-0").has_value());
  ASSERT_TRUE(
      WaitFor([&] { return service_->extender().cache().Snapshot()->Find("new-0") == nullptr; }));
}

TEST_F(ClusterModeTest, GpuPodsOfOtherSchedulersAreCountedAsEstimates) {
  AddNode("v100-0", "dgx1-v100");
  ASSERT_TRUE(
      fake_
          ->AddPod(PodObject(
              {.name = "theirs", .node = "v100-0", .gpus = 6, .scheduler = "default-scheduler"}))
          .has_value());
  StartLinkfit();
  const json inspect = json::parse(client_->Get("/inspect/v100-0")->body);
  ASSERT_TRUE(inspect.contains("estimated_pods")) << inspect.dump();
  EXPECT_EQ(inspect["estimated_pods"].size(), 1u);
  EXPECT_EQ(inspect["free_whole_gpus"].size(), 2u);
  const json big = AddPod({.name = "big", .gpus = 4});
  std::string error;
  EXPECT_EQ(Schedule(big, {"v100-0"}, &error), "");
  const json small = AddPod({.name = "small", .gpus = 2});
  EXPECT_EQ(Schedule(small, {"v100-0"}, &error), "v100-0") << error;
}

TEST_F(ClusterModeTest, ARestartRebuildsTheSameAllocationsFromTheApi) {
  AddNode("h100-0", "dgx-h100");
  AddNode("a100-0", "dgx-a100", "0,1");
  StartLinkfit();
  for (int i = 0; i < 6; ++i) {
    const json pod = AddPod({.name = "w" + std::to_string(i), .gpus = 1 + i % 3});
    std::string error;
    ASSERT_NE(Schedule(pod, {"h100-0", "a100-0"}, &error), "") << error;
  }
  PodSpec mig{.name = "infer"};
  mig.annotations[kube::kAnnotationMigProfile] = "3g.20gb";
  mig.annotations[kube::kAnnotationGpus] = "1";
  const json mig_pod = AddPod(mig);
  std::string error;
  ASSERT_EQ(Schedule(mig_pod, {"h100-0", "a100-0"}, &error), "a100-0") << error;
  ExpectCacheEqualsTheApi();
  const std::string before = client_->Get("/inspect")->body;
  client_.reset();
  service_.reset();
  StartLinkfit();
  ExpectCacheEqualsTheApi();
  json a = json::parse(before);
  json b = json::parse(client_->Get("/inspect")->body);
  EXPECT_EQ(a["nodes"], b["nodes"]);
}

TEST_F(ClusterModeTest, ExplainAsksTheRunningExtenderAboutAPodOfTheCluster) {
  AddNode("v100-0", "dgx1-v100");
  AddNode("l40s-0", "pcie-8x-l40s-2socket");
  StartLinkfit();
  PodSpec spec{.name = "trainer", .gpus = 4};
  spec.annotations[kube::kAnnotationCloseness] = "nvlink";
  spec.annotations[kube::kAnnotationClosenessPolicy] = "required";
  AddPod(spec);
  std::ostringstream out;
  std::ostringstream err;
  const int code = app::RunCli({"explain", "ml/trainer", "--kubeconfig", kubeconfig_, "--server",
                                "http://127.0.0.1:" + std::to_string(service_->port())},
                               out, err);
  EXPECT_EQ(code, 0) << err.str();
  EXPECT_NE(out.str().find("pod ml/trainer asks for 4 GPUs, nvlink required"), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("v100-0: fits on GPUs"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("l40s-0: never fits"), std::string::npos) << out.str();
  std::ostringstream missing_out;
  std::ostringstream missing_err;
  EXPECT_EQ(
      app::RunCli({"explain", "ml/absent", "--kubeconfig", kubeconfig_}, missing_out, missing_err),
      1);
  EXPECT_NE(missing_err.str().find("not found"), std::string::npos) << missing_err.str();
}

}  // namespace
}  // namespace linkfit::cluster
