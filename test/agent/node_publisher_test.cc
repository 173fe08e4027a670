// NodePublisher and NodeAgent against the fake API server: the agent's annotations are patched
// once, never again while nothing changes, again when a GPU turns unhealthy or a MIG instance
// appears, and errors (5xx, 429, a lost reply) neither lose an update nor double it.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kube/fake_api_server.h"
#include "linkfit/agent/agent_metrics.h"
#include "linkfit/agent/node_agent.h"
#include "linkfit/agent/node_publisher.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/topology/spec.h"
#include "testing/fixtures.h"

namespace linkfit::agent {
namespace {

using linkfit::testing::DropMode;
using linkfit::testing::RequestMatch;

class NodePublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = linkfit::testing::StartFakeApiServer();
    ASSERT_TRUE(server) << server.error().message;
    server_ = std::move(*server);
    auto node = linkfit::testing::MakeFakeNode("gpu-0");
    node["metadata"]["annotations"] = {{"other.io/keep", "yes"}};
    ASSERT_TRUE(server_->AddNode(node));
    auto kubeconfig = server_->WriteKubeconfig();
    ASSERT_TRUE(kubeconfig) << kubeconfig.error().message;
    auto config = kube::LoadKubeconfig(*kubeconfig);
    ASSERT_TRUE(config) << config.error().message;
    auto client = kube::NewApiClient(std::move(*config));
    ASSERT_TRUE(client) << client.error().message;
    client_ = std::move(*client);
  }

  std::map<std::string, std::string> Annotations() {
    std::map<std::string, std::string> out;
    const auto node = server_->GetNode("gpu-0");
    if (!node) return out;
    for (const auto& [key, value] : (*node)["metadata"]["annotations"].items()) {
      out[key] = value.get<std::string>();
    }
    return out;
  }
  std::size_t Patches() { return server_->CountRequests({"PATCH", "/api/v1/nodes/gpu-0"}); }

  linkfit::testing::FakeApiServerPtr server_;
  kube::ApiClientPtr client_;
};

TEST(AnnotationPatch, NamesOnlyWhatChangedAndNullRemoves) {
  const std::map<std::string, std::string> current = {{"a", "1"}, {"b", "2"}};
  EXPECT_EQ(AnnotationPatch(current, {{"a", "1"}}), "");
  EXPECT_EQ(AnnotationPatch(current, {{"a", "1"}, {"b", "3"}}),
            R"({"metadata":{"annotations":{"b":"3"}}})");
  EXPECT_EQ(AnnotationPatch(current, {{"a", std::nullopt}, {"c", std::nullopt}}),
            R"({"metadata":{"annotations":{"a":null}}})");
  EXPECT_EQ(AnnotationPatch({}, {{"q", "say \"hi\""}}),
            R"({"metadata":{"annotations":{"q":"say \"hi\""}}})");
}

TEST_F(NodePublisherTest, PatchesOnceAndNotAgainWhileNothingChanges) {
  NodePublisher publisher(*client_, "gpu-0");
  auto first = publisher.Publish({{kube::kAnnotationTopology, "{\"doc\":1}"}});
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_TRUE(*first);
  EXPECT_EQ(Annotations()[kube::kAnnotationTopology], "{\"doc\":1}");
  EXPECT_EQ(Annotations()["other.io/keep"], "yes");  // a merge patch leaves others alone
  const std::string rv = server_->CurrentResourceVersion();
  for (int i = 0; i < 5; ++i) {
    auto again = publisher.Publish({{kube::kAnnotationTopology, "{\"doc\":1}"}});
    ASSERT_TRUE(again);
    EXPECT_FALSE(*again);
  }
  EXPECT_EQ(Patches(), 1u);
  EXPECT_EQ(server_->CurrentResourceVersion(), rv);  // no watch event for anyone
  // A change is one patch; removing an annotation is one patch.
  ASSERT_TRUE(publisher.Publish({{kube::kAnnotationTopology, "{\"doc\":2}"},
                                 {kube::kAnnotationDevicesInUse, "{\"v\":1,\"pods\":[]}"}}));
  ASSERT_TRUE(publisher.Publish(
      {{kube::kAnnotationTopology, "{\"doc\":2}"}, {kube::kAnnotationDevicesInUse, std::nullopt}}));
  EXPECT_EQ(Patches(), 3u);
  EXPECT_EQ(Annotations().count(kube::kAnnotationDevicesInUse), 0u);
  EXPECT_EQ(publisher.patches(), 3);
}

TEST_F(NodePublisherTest, AnAnnotationSomeoneElseRemovedIsPutBackAfterARead) {
  NodePublisher publisher(*client_, "gpu-0");
  ASSERT_TRUE(publisher.Publish({{kube::kAnnotationTopology, "{}"}}));
  auto node = *server_->GetNode("gpu-0");
  node["metadata"]["annotations"].erase(kube::kAnnotationTopology);
  ASSERT_TRUE(server_->UpdateNode(node));
  publisher.Invalidate();
  auto put_back = publisher.Publish({{kube::kAnnotationTopology, "{}"}});
  ASSERT_TRUE(put_back);
  EXPECT_TRUE(*put_back);
  EXPECT_EQ(Annotations()[kube::kAnnotationTopology], "{}");
}

TEST_F(NodePublisherTest, ErrorsAreReturnedAndTheNextPublishCatchesUp) {
  NodePublisher publisher(*client_, "gpu-0");
  server_->FailNext(1, 500, {"PATCH", "/nodes/gpu-0"});
  auto failed = publisher.Publish({{kube::kAnnotationTopology, "a"}});
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().message.find("HTTP 500"), std::string::npos) << failed.error().message;
  ASSERT_TRUE(publisher.Publish({{kube::kAnnotationTopology, "a"}}));
  EXPECT_EQ(Annotations()[kube::kAnnotationTopology], "a");
  // 429: the client waits out Retry-After and retries once by itself.
  server_->FailNext(1, 429, {"PATCH", "/nodes/gpu-0"}, 1);
  auto throttled = publisher.Publish({{kube::kAnnotationTopology, "b"}});
  ASSERT_TRUE(throttled) << throttled.error().message;
  EXPECT_EQ(Annotations()[kube::kAnnotationTopology], "b");
  // A reply lost after the patch applied: the next Publish reads the node, sees it applied, and
  // does not patch again.
  server_->DropNext(1, DropMode::kAfterApply, {"PATCH", "/nodes/gpu-0"});
  EXPECT_FALSE(publisher.Publish({{kube::kAnnotationTopology, "c"}}));
  const std::size_t patches = Patches();
  auto settled = publisher.Publish({{kube::kAnnotationTopology, "c"}});
  ASSERT_TRUE(settled) << settled.error().message;
  EXPECT_FALSE(*settled);
  EXPECT_EQ(Patches(), patches);
  EXPECT_EQ(Annotations()[kube::kAnnotationTopology], "c");
}

TEST_F(NodePublisherTest, AMissingNodeIsAnErrorNamingIt) {
  NodePublisher publisher(*client_, "nowhere");
  auto result = publisher.Publish({{kube::kAnnotationTopology, "a"}});
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("/api/v1/nodes/nowhere"), std::string::npos);
  EXPECT_NE(result.error().message.find("404"), std::string::npos) << result.error().message;
}

// The agent loop with a scripted discovery and device source.
class NodeAgentTest : public NodePublisherTest {
 protected:
  Discovery Found() {
    Discovery found;
    found.source = "test";
    found.spec = linkfit::testing::LoadFixture("dgx-a100")->spec();
    for (topology::GpuSpec& gpu : found.spec.gpus) {
      gpu.uuid = "GPU-" + std::to_string(gpu.index);
      gpu.mig_mode = gpu.index == 0 ? topology::MigMode::kEnabled : topology::MigMode::kDisabled;
    }
    found.spec.gpus[0].mig_instances = instances_;
    return found;
  }
  topology::TopologySpec Published() {
    auto spec = topology::ParseTopologyDocument(Annotations()[kube::kAnnotationTopology]);
    EXPECT_TRUE(spec) << spec.error().message;
    return spec ? *spec : topology::TopologySpec{};
  }

  std::vector<topology::MigInstanceSpec> instances_;
  bool discovery_fails_ = false;
  bool devices_fail_ = false;
  kube::DevicesInUse devices_;
};

TEST_F(NodeAgentTest, PublishesOnChangeOnly) {
  NodePublisher publisher(*client_, "gpu-0");
  NodeAgent agent(
      {},
      [this]() -> Result<Discovery> {
        if (discovery_fails_) return MakeError("nvidia-smi: exit status 9");
        return Found();
      },
      [this](const topology::TopologySpec&) -> Result<kube::DevicesInUse> {
        if (devices_fail_) return MakeError("kubelet.sock: unavailable");
        return devices_;
      },
      publisher);
  auto first = agent.RunRound(true);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_TRUE(*first);
  EXPECT_EQ(Published().gpus.size(), 8u);
  EXPECT_EQ(Annotations()[kube::kAnnotationDevicesInUse], "{\"v\":1,\"pods\":[]}");
  EXPECT_FALSE(*agent.RunRound(true));  // rediscovered, nothing new
  EXPECT_EQ(Patches(), 1u);

  // A MIG instance appears: one patch.
  instances_ = {{"3g.20gb", 4, 4, "MIG-x"}};
  EXPECT_TRUE(*agent.RunRound(true));
  ASSERT_EQ(Published().gpus[0].mig_instances.size(), 1u);
  EXPECT_EQ(Published().gpus[0].mig_instances[0].uuid, "MIG-x");

  // An Xid event: the GPU is published unhealthy, and stays so across rediscovery.
  agent.MarkUnhealthy(3, "Xid 79: GPU has fallen off the bus");
  EXPECT_TRUE(*agent.RunRound(true));
  EXPECT_FALSE(Published().gpus[3].healthy);
  EXPECT_EQ(Published().gpus[3].health_problem, "Xid 79: GPU has fallen off the bus");
  EXPECT_FALSE(*agent.RunRound(true));
  EXPECT_EQ(Patches(), 3u);

  // Failures keep what was published: a failed discovery keeps the document, a failed
  // PodResources read keeps the devices.
  devices_.pods = {{"uid-1", "ml/a", {{"main", {1}, {}, {}, {}}}}};
  ASSERT_TRUE(*agent.RunRound(true));
  const std::string devices = Annotations()[kube::kAnnotationDevicesInUse];
  EXPECT_NE(devices.find("uid-1"), std::string::npos);
  discovery_fails_ = true;
  devices_fail_ = true;
  auto degraded = agent.RunRound(true);
  ASSERT_TRUE(degraded) << degraded.error().message;
  EXPECT_FALSE(*degraded);
  EXPECT_EQ(Annotations()[kube::kAnnotationDevicesInUse], devices);
  EXPECT_EQ(Published().gpus.size(), 8u);
}

// A figure the machine did not tell is counted every discovery and logged once per figure and
// model; the agent's other warnings are logged every discovery.
TEST_F(NodeAgentTest, GuessedFiguresAreCountedEachRoundAndLoggedOnce) {
  NodePublisher publisher(*client_, "gpu-0");
  NodeAgent agent(
      {},
      [this]() -> Result<Discovery> {
        Discovery found = Found();
        const std::string guess = "PCIe generation of NVIDIA A100-SXM4-40GB not stated by NVML";
        found.guessed.push_back({"pcie", "NVIDIA A100-SXM4-40GB", guess});
        found.warnings = {guess, "an ordinary warning"};
        return found;
      },
      {}, publisher);
  AgentMetrics metrics;
  agent.SetMetrics(&metrics);
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(agent.RunRound(true));
  ASSERT_TRUE(agent.RunRound(true));
  const std::string logged = ::testing::internal::GetCapturedStderr();
  const auto count = [&](const std::string& text) {
    std::size_t n = 0;
    for (std::size_t at = logged.find(text); at != std::string::npos;
         at = logged.find(text, at + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(count("PCIe generation of NVIDIA A100-SXM4-40GB not stated by NVML"), 1u) << logged;
  EXPECT_EQ(count("an ordinary warning"), 2u) << logged;
  EXPECT_NE(metrics.Render().find("linkfit_agent_guessed_figures_total{figure=\"pcie\",model="
                                  "\"NVIDIA A100-SXM4-40GB\"} 2"),
            std::string::npos)
      << metrics.Render();
}

TEST_F(NodeAgentTest, AFirstDiscoveryThatFailsIsAnError) {
  NodePublisher publisher(*client_, "gpu-0");
  NodeAgent agent(
      {}, []() -> Result<Discovery> { return MakeError("no NVML, no nvidia-smi"); }, {}, publisher);
  auto round = agent.RunRound();
  ASSERT_FALSE(round);
  EXPECT_NE(round.error().message.find("no NVML"), std::string::npos);
  EXPECT_EQ(Patches(), 0u);
}

}  // namespace
}  // namespace linkfit::agent
