#pragma once

// The node agent end to end, shared by its tests: the fake API server with one DGX A100 node
// (a100-0, GPU 6 in MIG mode, as the NVML recording dgx-a100-mig.json has it), a fake kubelet's
// PodResources, the real linkfit-agent binary on the fake libnvidia-ml.so.1, and linkfit in
// cluster mode.
//
// Thread-safety: one test thread (the helpers it starts are thread-safe themselves).

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "agent/fake_kubelet.h"
#include "agent/run_command.h"
#include "app/service.h"
#include "cluster/cluster_testing.h"
#include "kube/fake_api_server.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/topology/spec.h"
#include "testing/fixtures.h"
#include "testing/wait.h"

namespace linkfit::agent {
namespace testing_e2e {

using linkfit::cluster::testing::PodObject;
using linkfit::cluster::testing::PodSpec;
using nlohmann::json;

using linkfit::testing::WaitFor;

// The GPU UUIDs the DGX A100 recording gives each index.
inline std::string Uuid(int gpu) {
  const json recording = json::parse(linkfit::testing::ReadFileOrDie(
      linkfit::testing::SourcePath("test/data/nvml/dgx-a100-mig.json")));
  return recording["devices"][static_cast<std::size_t>(gpu)]["uuid"].get<std::string>();
}

class AgentEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    linkfit::testing::FakeApiServerOptions options;
    options.bookmark_interval = std::chrono::milliseconds(200);
    auto fake = linkfit::testing::StartFakeApiServer(options);
    ASSERT_TRUE(fake) << fake.error().message;
    fake_ = std::move(*fake);
    auto kubeconfig = fake_->WriteKubeconfig();
    ASSERT_TRUE(kubeconfig) << kubeconfig.error().message;
    kubeconfig_ = *kubeconfig;
    auto kubelet = linkfit::testing::StartFakeKubelet();
    ASSERT_TRUE(kubelet) << kubelet.error().message;
    kubelet_ = std::move(*kubelet);
    json node = linkfit::testing::MakeFakeNode("a100-0");
    node["status"]["allocatable"] = {{"cpu", "256"}, {"memory", "1Ti"}, {"pods", "110"}};
    ASSERT_TRUE(fake_->AddNode(node));
    recording_ = linkfit::testing::SourcePath("test/data/nvml/dgx-a100-mig.json");
  }
  void TearDown() override {
    client_.reset();
    service_.reset();
    kubelet_.reset();
    if (fake_) fake_->Stop();
  }

  // Runs the agent binary once; returns its standard output.
  Result<std::string> RunAgentOnce() {
    const std::string library_dir =
        std::filesystem::path(LINKFIT_FAKE_NVML_FULL).parent_path().string();
    setenv("LD_LIBRARY_PATH", library_dir.c_str(), 1);
    setenv("LINKFIT_FAKE_NVML", recording_.c_str(), 1);
    // --host-sys: not this machine's PCIe tree or RDMA NICs.
    auto out = RunCommand(
        {LINKFIT_AGENT_BINARY, "--once", "--node-name", "a100-0", "--kubeconfig", kubeconfig_,
         "--pod-resources-socket", kubelet_->socket_path(), "--host-sys", "/nonexistent-sysfs"},
        {});
    unsetenv("LD_LIBRARY_PATH");
    return out;
  }
  json Annotations() { return (*fake_->GetNode("a100-0"))["metadata"]["annotations"]; }
  std::size_t Patches() { return fake_->CountRequests({"PATCH", "/api/v1/nodes/a100-0"}); }

  void StartLinkfit() {
    app::Config config;
    config.listen = "127.0.0.1:0";
    config.listen_host = "127.0.0.1";
    config.listen_port = 0;
    config.mig_profiles_dir = linkfit::testing::SourcePath("config/mig");
    config.kubernetes.enabled = true;
    config.kubernetes.kubeconfig = kubeconfig_;
    auto started = app::Service::Start(config);
    ASSERT_TRUE(started) << started.error().message;
    service_ = std::move(*started);
    ASSERT_TRUE(service_->cluster()->WaitReady(std::chrono::seconds(20)));
    client_ = std::make_unique<httplib::Client>("127.0.0.1", service_->port());
    client_->set_read_timeout(30);
  }
  json InspectNode() {
    auto reply = client_->Get("/inspect");
    if (!reply || reply->status != 200) return json();
    const json inspect = json::parse(reply->body);
    for (const json& node : inspect["nodes"]) {
      if (node["name"] == "a100-0") return node;
    }
    return json();
  }
  // Waits until linkfit's /inspect reports `count` pods on a100-0 from the agent's report.
  bool WaitForReportedPods(std::size_t count, std::chrono::seconds timeout) {
    return WaitFor(
        [&] {
          const json node = InspectNode();
          return node.contains("reported_pods") && node["reported_pods"].size() == count;
        },
        timeout);
  }
  // Filter then bind on a100-0; returns the record bound, or the error.
  Result<kube::AllocationRecord> Schedule(const PodSpec& spec) {
    return ScheduleObject(PodObject(spec));
  }
  Result<kube::AllocationRecord> ScheduleObject(const json& object) {
    const cluster::testing::PodSpec spec{.ns = object["metadata"]["namespace"].get<std::string>(),
                                         .name = object["metadata"]["name"].get<std::string>()};
    auto stored = fake_->AddPod(object);
    if (!stored) return tl::unexpected(stored.error());
    const std::string args =
        R"({"Pod":)" + stored->dump() + R"(,"Nodes":null,"NodeNames":["a100-0"]})";
    auto filtered = client_->Post("/scheduler/filter", args, "application/json");
    if (!filtered) return MakeError("filter: no reply");
    const json result = json::parse(filtered->body);
    if (result["NodeNames"].empty()) return MakeError("filter: " + filtered->body);
    const json bind = {{"PodName", spec.name},
                       {"PodNamespace", spec.ns},
                       {"PodUID", (*stored)["metadata"]["uid"]},
                       {"Node", "a100-0"}};
    auto bound = client_->Post("/scheduler/bind", bind.dump(), "application/json");
    if (!bound || !json::parse(bound->body)["Error"].get<std::string>().empty()) {
      return MakeError("bind: " + (bound ? bound->body : std::string("no reply")));
    }
    const json pod = *fake_->GetPod(spec.ns, spec.name);
    return kube::DecodeAllocationRecord(
        pod["metadata"]["annotations"][kube::kAnnotationAllocation].get<std::string>());
  }

  linkfit::testing::FakeApiServerPtr fake_;
  std::unique_ptr<linkfit::testing::FakeKubelet> kubelet_;
  std::string kubeconfig_;
  std::string recording_;
  std::unique_ptr<app::Service> service_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace testing_e2e
}  // namespace linkfit::agent
