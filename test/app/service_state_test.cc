// The standalone Service's files: a restart with the same state file keeps every allocation (and
// every release), and bad cluster files stop start-up with errors naming file:line and the key.

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "app/service_testing.h"

namespace linkfit::app {
namespace {

using testing::Running;
using testing::TempDir;

const std::string kE2eDir = linkfit::testing::SourcePath("test/golden/e2e");

std::string PodJson(const std::string& uid, const std::string& resources,
                    const std::string& annotations = "{}") {
  return R"({"metadata":{"name":"pod-)" + uid + R"(","namespace":"ml","uid":")" + uid +
         R"(","annotations":)" + annotations +
         R"(},"spec":{"containers":[{"name":"c","resources":{"limits":)" + resources + "}}]}}";
}

// Filters the pod against `node` and binds it there; returns the bind reply.
std::string FilterAndBind(Running& server, const std::string& uid, const std::string& pod,
                          const std::string& node) {
  const auto filtered =
      server.Post("/scheduler/filter", R"({"Pod":)" + pod + R"(,"NodeNames":[")" + node + R"("]})");
  EXPECT_EQ(filtered.first, 200) << filtered.second;
  EXPECT_EQ(nlohmann::json::parse(filtered.second)["NodeNames"], nlohmann::json::array({node}))
      << filtered.second;
  return server
      .Post("/scheduler/bind", R"({"PodName":"pod-)" + uid + R"(","PodNamespace":"ml","PodUID":")" +
                                   uid + R"(","Node":")" + node + R"("})")
      .second;
}

TEST(ServiceRestartTest, RestartWithTheStateFileKeepsAllocations) {
  TempDir dir;
  Config config = testing::StandaloneConfig(kE2eDir + "/cluster.yaml");
  config.state_file = dir.Path("state.json");
  std::string before;
  {
    Running first(config);
    ASSERT_TRUE(first.ok());
    EXPECT_EQ(
        FilterAndBind(first, "whole-1", PodJson("whole-1", R"({"nvidia.com/gpu":"2"})"), "h100-0"),
        R"({"Error":""})");
    EXPECT_EQ(FilterAndBind(first, "mig-1", PodJson("mig-1", R"({"nvidia.com/mig-1g.5gb":"2"})"),
                            "a100-mig-0"),
              R"({"Error":""})");
    EXPECT_EQ(
        FilterAndBind(first, "share-1",
                      PodJson("share-1", "{}", R"({"linkfit.io/gpu-share":"250"})"), "l40s-0"),
        R"({"Error":""})");
    // A cluster-file allocation released while running must stay released.
    EXPECT_EQ(
        first.Post("/standalone/release", R"({"PodUID":"11111111-0000-4000-8000-000000000002"})")
            .first,
        200);
    const auto inspect = first.Get("/inspect");
    ASSERT_EQ(inspect.first, 200);
    before = inspect.second;
  }
  ASSERT_TRUE(testing::fs::exists(*config.state_file));
  EXPECT_FALSE(testing::fs::exists(*config.state_file + ".tmp"));

  Running second(config);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second.service().load_stats().nodes, 5);
  const auto inspect = second.Get("/inspect");
  ASSERT_EQ(inspect.first, 200);
  EXPECT_EQ(nlohmann::json::parse(inspect.second), nlohmann::json::parse(before));
  // A retried bind of a restored pod is a success, not a second allocation.
  EXPECT_EQ(
      second
          .Post(
              "/scheduler/bind",
              R"({"PodName":"pod-whole-1","PodNamespace":"ml","PodUID":"whole-1","Node":"h100-0"})")
          .second,
      R"({"Error":""})");
  EXPECT_EQ(second.Get("/inspect").second, inspect.second);
}

TEST(ServiceRestartTest, ABindWhoseStateFileCannotBeWrittenIsForgotten) {
  TempDir dir;
  Config config = testing::StandaloneConfig(kE2eDir + "/cluster.yaml");
  config.state_file = dir.Path("missing-dir/state.json");
  Running server(config);
  ASSERT_TRUE(server.ok());
  const std::string reply =
      FilterAndBind(server, "whole-1", PodJson("whole-1", R"({"nvidia.com/gpu":"2"})"), "h100-0");
  EXPECT_NE(reply.find("state file"), std::string::npos) << reply;
  const auto node = nlohmann::json::parse(server.Get("/inspect/h100-0").second);
  EXPECT_EQ(node["free_whole_gpus"].size(), 8u);
}

// Cluster files ------------------------------------------------------------------------------

struct BadCluster {
  const char* name;
  std::string yaml;
  std::vector<std::string> must_contain;  // "@LINE" is replaced by "<file>:<LINE>:"
};

std::string Topology(const std::string& id) {
  return linkfit::testing::SourcePath("config/topologies/" + id + ".json");
}

TEST(ClusterFileTest, BadInputsNameFileLineAndKey) {
  const std::string dgx1 = Topology("dgx1-v100");
  const std::string a100 = Topology("dgx-a100");
  const std::vector<BadCluster> cases = {
      {"unknown top-level key",
       "nodes:\n  - name: a\n    topology: " + dgx1 + "\nnodez: []\n",
       {"@4", "$.nodez", "unknown key"}},
      {"unknown node key",
       "nodes:\n  - name: a\n    topolgy: " + dgx1 + "\n",
       {"@3", "nodes[0].topolgy", "unknown key"}},
      {"missing topology file",
       "nodes:\n  - name: a\n    topology: no/such/topology.json\n",
       {"@3", "nodes[0].topology", "no/such/topology.json"}},
      {"missing topology key", "nodes:\n  - name: a\n", {"@2", "nodes[0].topology"}},
      {"duplicate node name",
       "nodes:\n  - name: a\n    topology: " + dgx1 + "\n  - name: a\n    topology: " + dgx1 + "\n",
       {"@4", "nodes[1].name", "duplicate node name a"}},
      {"duplicate through a prefix",
       "nodes:\n  - name: gpu-1\n    topology: " + dgx1 +
           "\n  - name_prefix: gpu-\n    count: 3\n    topology: " + dgx1 + "\n",
       {"@4", "nodes[1]", "duplicate node name gpu-1"}},
      {"mig GPU out of range",
       "nodes:\n  - name: a\n    topology: " + a100 + "\n    mig: [0, 9]\n",
       {"@4", "nodes[0].mig"}},
      {"mig not a list",
       "nodes:\n  - name: a\n    topology: " + a100 + "\n    mig: sometimes\n",
       {"@4", "nodes[0].mig"}},
      {"mig on GPUs without MIG",
       "nodes:\n  - name: a\n    topology: " + dgx1 + "\n    mig: all\n",
       {"@4", "nodes[0].mig", "not MIG-capable"}},
      {"count out of range",
       "nodes:\n  - name_prefix: n-\n    count: 0\n    topology: " + dgx1 + "\n",
       {"@3", "nodes[0].count"}},
      {"colliding allocations",
       "nodes:\n  - name: a\n    topology: " + dgx1 +
           "\nallocations:\n  - {pod: ml/x, uid: u1, node: a, gpus: [0, 1]}\n"
           "  - {pod: ml/y, uid: u2, node: a, gpus: [1]}\n",
       {"@6", "allocations[1]", "in use"}},
      {"a collision before a bad allocation",  // the file's order, though nodes are built last
       "nodes:\n  - name: a\n    topology: " + dgx1 +
           "\nallocations:\n  - {pod: ml/x, uid: u1, node: a, gpus: [0, 1]}\n"
           "  - {pod: ml/y, uid: u2, node: a, gpus: [1]}\n"
           "  - {pod: z, uid: u3, node: a, gpus: [2]}\n",
       {"@6", "allocations[1]", "in use"}},
      {"repeated allocation uid",
       "nodes:\n  - name: a\n    topology: " + dgx1 +
           "\nallocations:\n  - {pod: ml/x, uid: u1, node: a, gpus: [0]}\n"
           "  - {pod: ml/y, uid: u1, node: a, gpus: [1]}\n",
       {"@6", "allocations[1]", "u1"}},
      {"allocation on an unknown node",
       "nodes:\n  - name: a\n    topology: " + dgx1 +
           "\nallocations:\n  - {pod: ml/x, uid: u1, node: b, gpus: [0]}\n",
       {"@5", "allocations[0].node", "unknown node b"}},
      {"allocation with an unknown key",
       "nodes:\n  - name: a\n    topology: " + dgx1 +
           "\nallocations:\n  - {pod: ml/x, uid: u1, node: a, gpu: [0]}\n",
       {"@5", "allocations[0].gpu", "unknown key"}},
      {"allocation with a bad MIG profile",
       "nodes:\n  - name: a\n    topology: " + a100 +
           "\n    mig: all\nallocations:\n"
           "  - {pod: ml/x, uid: u1, node: a, mig: [{gpu: 0, profile: 3g.40gb, start: 0}]}\n",
       {"@6", "allocations[0].mig[].profile", "3g.40gb"}},
      {"allocation with overlapping MIG instances",
       "nodes:\n  - name: a\n    topology: " + a100 +
           "\n    mig: all\nallocations:\n"
           "  - {pod: ml/x, uid: u1, node: a, mig: [{gpu: 0, profile: 3g.20gb, start: 4}]}\n"
           "  - {pod: ml/y, uid: u2, node: a, mig: [{gpu: 0, profile: 1g.5gb, start: 5}]}\n",
       {"@7", "allocations[1]", "does not fit"}},
      {"share over 1000",
       "nodes:\n  - name: a\n    topology: " + dgx1 +
           "\nallocations:\n  - {pod: ml/x, uid: u1, node: a, shares: [{gpu: 0, milli: 1200}]}\n",
       {"@5", "allocations[0].shares[].milli"}},
      {"pod without namespace",
       "nodes:\n  - name: a\n    topology: " + dgx1 +
           "\nallocations:\n  - {pod: x, uid: u1, node: a, gpus: [0]}\n",
       {"@5", "allocations[0].pod", "namespace/name"}},
  };
  TempDir dir;
  for (const BadCluster& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.Write("cluster.yaml", c.yaml);
    auto started = Service::Start(testing::StandaloneConfig(path));
    ASSERT_FALSE(started.has_value()) << "started with:\n" << c.yaml;
    const std::string& message = started.error().message;
    for (std::string needle : c.must_contain) {
      if (needle.starts_with("@")) needle = path + ":" + needle.substr(1) + ":";
      EXPECT_NE(message.find(needle), std::string::npos)
          << "'" << message << "' lacks '" << needle << "'";
    }
  }
}

TEST(ClusterFileTest, AGoodFileLoadsEveryNodeAndAllocation) {
  TempDir dir;
  const std::string path = dir.Write(
      "cluster.yaml", "nodes:\n  - name_prefix: l40s-\n    count: 3\n    topology: " +
                          Topology("pcie-8x-l40s-2socket") +
                          "\n  - name: a100\n    topology: " + Topology("dgx-a100") +
                          "\n    mig: [0, 1]\n    labels: {zone: a}\nallocations:\n"
                          "  - {pod: ml/x, uid: u1, node: l40s-2, shares: [{gpu: 3, milli: 500}]}\n"
                          "  - {pod: ml/y, uid: u2, node: a100, mig: [{gpu: 1, profile: "
                          "1g.5gb, start: 6}]}\n");
  Running server(testing::StandaloneConfig(path));
  ASSERT_TRUE(server.ok());
  EXPECT_EQ(server.service().load_stats().nodes, 4);
  EXPECT_EQ(server.service().load_stats().topologies, 2);
  EXPECT_EQ(server.service().load_stats().allocations, 2);
  const auto node = nlohmann::json::parse(server.Get("/inspect/l40s-2").second);
  EXPECT_EQ(node["gpus"][3]["shared_milli"], 500);
  const auto a100 = nlohmann::json::parse(server.Get("/inspect/a100").second);
  EXPECT_EQ(a100["labels"]["zone"], "a");
  EXPECT_EQ(a100["gpus"][1]["mig_instances"][0]["profile"], "1g.5gb");
}

// The config's NIC keys reach the pod parser: config -> ExtenderOptions -> RequestDefaults.
TEST(ServiceConfigTest, NicKeysReachTheRequestDefaults) {
  const auto config = ParseConfig(
      "shared_gpu_resource: example.com/gpu-share\nnic_resource: example.com/ib\n"
      "nic_resources: [rdma/hca]\nnic_share_resource: example.com/ib-milli\n"
      "nic_closeness: numa\n");
  ASSERT_TRUE(config.has_value()) << config.error().message;
  const auto options = ExtenderOptionsFrom(*config);
  ASSERT_TRUE(options.has_value()) << options.error().message;
  const extender::RequestDefaults& defaults = options->defaults;
  EXPECT_EQ(defaults.shared_gpu_resource, "example.com/gpu-share");
  EXPECT_EQ(defaults.nic_resource, "example.com/ib");
  EXPECT_EQ(defaults.nic_resources, std::vector<std::string>{"rdma/hca"});
  EXPECT_EQ(defaults.nic_share_resource, "example.com/ib-milli");
  EXPECT_EQ(defaults.nic_closeness, alloc::NicCloseness::kNuma);
  kube::PodView pod;
  pod.requests = {{"nvidia.com/gpu", 2000}, {"rdma/hca", 2000}};
  const auto request = extender::ParseGpuRequest(pod, defaults);
  ASSERT_TRUE(request.has_value()) << request.error().message;
  EXPECT_EQ(request->Describe(), "2 GPUs; 2 NICs at numa");
  // The defaults of an empty config are RequestDefaults' own.
  const auto plain = ExtenderOptionsFrom(*ParseConfig(""));
  ASSERT_TRUE(plain.has_value()) << plain.error().message;
  const extender::RequestDefaults none;
  EXPECT_EQ(plain->defaults.nic_resource, none.nic_resource);
  EXPECT_EQ(plain->defaults.nic_resources, none.nic_resources);
  EXPECT_EQ(plain->defaults.nic_share_resource, none.nic_share_resource);
  EXPECT_EQ(plain->defaults.nic_closeness, none.nic_closeness);
}

// The config module keeps its own defaults (it depends on common only, so that its fuzzer stays
// small): an empty config must give the extender's defaults, the measured setting.
TEST(ServiceConfigTest, AnEmptyConfigGivesTheExtendersScoringDefaults) {
  const auto plain = ExtenderOptionsFrom(*ParseConfig(""));
  ASSERT_TRUE(plain.has_value()) << plain.error().message;
  const extender::ScoreWeights weights;
  EXPECT_EQ(plain->weights.topology, weights.topology);
  EXPECT_EQ(plain->weights.packing, weights.packing);
  EXPECT_EQ(plain->weights.fragmentation, weights.fragmentation);
  EXPECT_EQ(plain->weights.balance, weights.balance);
  EXPECT_EQ(plain->weights.whole_machines, weights.whole_machines);
  EXPECT_EQ(plain->weights.whole_machine_penalty, weights.whole_machine_penalty);
  const extender::ExtenderOptions options;
  EXPECT_EQ(plain->score_range, options.score_range);
  EXPECT_EQ(plain->fit.nic_alignment, options.fit.nic_alignment);
}

TEST(ServiceReadyHookTest, StandaloneCallsItOnceBeforeStartReturns) {
  TempDir dir;
  const std::string path = dir.Write(
      "cluster.yaml", "nodes:\n  - name: a100\n    topology: " + Topology("dgx-a100") + "\n");
  int calls = 0;
  auto started = Service::Start(testing::StandaloneConfig(path), [&calls] { ++calls; });
  ASSERT_TRUE(started.has_value()) << started.error().message;
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace linkfit::app
