// kill -9 during a bind storm, then restart: linkfit's state equals the API's truth. The real
// `linkfit serve --kubeconfig` binary of this build tree runs against the fake API server; eight
// threads bind pods as fast as they can while the process is killed without warning.

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cluster/child_process.h"
#include "cluster/cluster_testing.h"
#include "kube/fake_api_server.h"
#include "linkfit/kube/annotations.h"
#include "testing/fixtures.h"

#ifdef LINKFIT_SERVE_BINARY

namespace linkfit::cluster {
namespace {

using nlohmann::json;

using linkfit::testing::ServeChild;
using linkfit::testing::ServeChildOptions;

// `linkfit serve` of this build tree as a child process (child_process.h). `config` empty: the
// test's own config (small list pages); else that file, as given.
std::unique_ptr<ServeChild> StartServe(const std::string& kubeconfig, const std::string& log_path,
                                       const std::vector<std::string>& extra = {},
                                       const std::string& config = "") {
  return std::make_unique<ServeChild>(ServeChildOptions{.binary = LINKFIT_SERVE_BINARY,
                                                        .kubeconfig = kubeconfig,
                                                        .config_path = config,
                                                        .log_path = log_path,
                                                        .extra_args = extra});
}

std::string BindBody(const json& pod, const std::string& node) {
  return json{{"PodName", pod["metadata"]["name"]},
              {"PodNamespace", pod["metadata"]["namespace"]},
              {"PodUID", pod["metadata"]["uid"]},
              {"Node", node}}
      .dump();
}

TEST(CrashRestartTest, KillNineDuringABindStormThenRestartMatchesTheApi) {
  linkfit::testing::FakeApiServerOptions options;
  options.bookmark_interval = std::chrono::milliseconds(200);
  auto fake = linkfit::testing::StartFakeApiServer(options);
  ASSERT_TRUE(fake.has_value()) << fake.error().message;
  auto kubeconfig = (*fake)->WriteKubeconfig();
  ASSERT_TRUE(kubeconfig.has_value());
  const std::vector<std::string> nodes = {"h100-0", "h100-1", "v100-0", "v100-1"};
  for (const std::string& node : nodes) {
    const std::string fixture = node.starts_with("h100") ? "dgx-h100" : "dgx1-v100";
    ASSERT_TRUE((*fake)
                    ->AddNode(testing::NodeObject(node, testing::TopologyDocument(fixture)))
                    .has_value());
  }
  std::vector<json> pods;
  for (int i = 0; i < 60; ++i) {
    auto pod =
        (*fake)->AddPod(testing::PodObject({.name = "p" + std::to_string(i), .gpus = 1 + i % 2}));
    ASSERT_TRUE(pod.has_value());
    pods.push_back(*pod);
  }
  (*fake)->SetBindingDelay(std::chrono::milliseconds(5));
  const std::string log = (*fake)->work_dir() + "/linkfit.log";
  auto first = StartServe(*kubeconfig, log);
  ASSERT_GT(first->port(), 0) << "see " << log;
  ASSERT_TRUE(first->WaitReady());

  std::atomic<int> next{0};
  std::atomic<bool> killed{false};
  std::vector<std::thread> schedulers;
  for (int t = 0; t < 8; ++t) {
    schedulers.emplace_back([&, port = first->port()] {
      httplib::Client client("127.0.0.1", port);
      client.set_read_timeout(5);
      for (int i = next++; i < static_cast<int>(pods.size()) && !killed; i = next++) {
        const json& pod = pods[static_cast<std::size_t>(i)];
        client.Post("/scheduler/bind", BindBody(pod, nodes[static_cast<std::size_t>(i) % 4]),
                    "application/json");
      }
    });
  }
  // Kill in the middle of the storm.
  const auto storm_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((*fake)->Bindings().size() < 15 && std::chrono::steady_clock::now() < storm_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE((*fake)->Bindings().size(), 15u) << "the storm never got going; see " << log;
  first->Kill();
  killed = true;
  for (std::thread& scheduler : schedulers) scheduler.join();
  (*fake)->SetBindingDelay(std::chrono::milliseconds(0));
  // Bindings the dead process sent may still be landing at the API server: wait until the
  // count of answered bindings holds still for 200 ms (bounded by 10 s).
  for (int stable = 0, rounds = 0; stable < 20 && rounds < 1000; ++rounds) {
    const std::size_t before = (*fake)->Bindings().size();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stable = (*fake)->Bindings().size() == before ? stable + 1 : 0;
  }

  // The truth: every bound pod's record; no GPU twice.
  std::map<std::string, std::map<std::string, unsigned>> truth;
  for (const json& pod : (*fake)->Pods()) {
    if (!pod["spec"].contains("nodeName")) continue;
    const auto annotations = pod["metadata"].value("annotations", json::object());
    ASSERT_TRUE(annotations.contains(kube::kAnnotationAllocation)) << pod.dump();
    auto record =
        kube::DecodeAllocationRecord(annotations[kube::kAnnotationAllocation].get<std::string>());
    ASSERT_TRUE(record.has_value());
    unsigned mask = 0;
    for (int gpu : record->devices.gpus) mask |= 1u << gpu;
    for (const auto& [other, held] : truth[record->node]) {
      ASSERT_EQ(held & mask, 0u) << record->uid << " and " << other << " share a GPU";
    }
    truth[record->node][record->uid] = mask;
  }
  ASSERT_FALSE(truth.empty());

  auto second = StartServe(*kubeconfig, log);
  ASSERT_GT(second->port(), 0);
  ASSERT_TRUE(second->WaitReady());
  httplib::Client client("127.0.0.1", second->port());
  const json inspect = json::parse(client.Get("/inspect")->body);
  std::map<std::string, std::map<std::string, unsigned>> rebuilt;
  for (const json& node : inspect["nodes"]) {
    for (const json& gpu : node["gpus"]) {
      for (const json& uid : gpu["pods"]) {
        rebuilt[node["name"]][uid.get<std::string>()] |= 1u << gpu["index"].get<int>();
      }
    }
  }
  EXPECT_EQ(rebuilt, truth);
  // And the restarted linkfit goes on scheduling the rest without sharing a GPU.
  for (const json& pod : pods) {
    const auto stored = (*fake)->GetPod("ml", pod["metadata"]["name"]);
    if (stored && (*stored)["spec"].contains("nodeName")) continue;
    for (const std::string& node : nodes) {
      auto reply = client.Post("/scheduler/bind", BindBody(pod, node), "application/json");
      if (reply && json::parse(reply->body)["Error"] == "") break;
    }
  }
  std::map<std::string, unsigned> used;
  for (const json& pod : (*fake)->Pods()) {
    if (!pod["spec"].contains("nodeName")) continue;
    auto record = kube::DecodeAllocationRecord(
        pod["metadata"]["annotations"][kube::kAnnotationAllocation].get<std::string>());
    ASSERT_TRUE(record.has_value());
    unsigned mask = 0;
    for (int gpu : record->devices.gpus) mask |= 1u << gpu;
    EXPECT_EQ(used[record->node] & mask, 0u);
    used[record->node] |= mask;
  }
}

// As an outside check runs it: the demo config (which names a cluster file: --kubeconfig wins),
// a kubeconfig, an operations listener; ready, then a Binding with the GPUs under "gpus".
TEST(CrashRestartTest, TheDemoConfigWithAKubeconfigBecomesReadyAndBinds) {
  auto fake = linkfit::testing::StartFakeApiServer();
  ASSERT_TRUE(fake.has_value()) << fake.error().message;
  auto kubeconfig = (*fake)->WriteKubeconfig();
  ASSERT_TRUE(kubeconfig.has_value());
  ASSERT_TRUE((*fake)
                  ->AddNode(testing::NodeObject("dgx-0", testing::TopologyDocument("dgx-h100")))
                  .has_value());
  auto pod = (*fake)->AddPod(testing::PodObject({.name = "train", .gpus = 4}));
  ASSERT_TRUE(pod.has_value());
  const std::string log = (*fake)->work_dir() + "/demo.log";
  auto child = StartServe(*kubeconfig, log, {"--ops-listen", "127.0.0.1:0"},
                          linkfit::testing::SourcePath("config/demo.yaml"));
  ASSERT_GT(child->port(), 0) << "see " << log;
  ASSERT_TRUE(child->WaitReady());
  httplib::Client client("127.0.0.1", child->port());
  auto bound = client.Post("/scheduler/bind", BindBody(*pod, "dgx-0"), "application/json");
  ASSERT_TRUE(bound);
  EXPECT_EQ(bound->body, R"({"Error":""})");
  const auto bindings = (*fake)->Bindings();
  ASSERT_EQ(bindings.size(), 1u);
  const json record = json::parse(
      bindings[0].body["metadata"]["annotations"][kube::kAnnotationAllocation].get<std::string>());
  EXPECT_EQ(record["gpus"].size(), 4u);
  // The extender listener does not serve the operations routes.
  EXPECT_EQ(client.Get("/metrics")->status, 404);
}

}  // namespace
}  // namespace linkfit::cluster

#endif  // LINKFIT_SERVE_BINARY
