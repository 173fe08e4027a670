// End to end over real HTTP: bad requests (400/404/413 with JSON bodies, and the server keeps
// answering), /inspect, /inspect/{node}, /explain and /standalone/release.

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "app/service_testing.h"

namespace linkfit::app {
namespace {

using testing::ReadFile;
using testing::Running;

const std::string kE2eDir = linkfit::testing::SourcePath("test/golden/e2e");

class ServiceHttpTest : public ::testing::Test {
 protected:
  static Config MakeConfig() {
    Config config = testing::StandaloneConfig(kE2eDir + "/cluster.yaml");
    config.limits.max_body_bytes = 1 << 20;
    return config;
  }
  void SetUp() override { ASSERT_TRUE(server_.ok()); }

  // Expects `status` and a JSON object body with a non-empty error message under the extender
  // protocol's key, "Error", whoever answered (the server or the handler).
  void ExpectJsonError(const std::pair<int, std::string>& reply, int status) {
    EXPECT_EQ(reply.first, status) << reply.second;
    const auto body = nlohmann::json::parse(reply.second, nullptr, false);
    ASSERT_TRUE(body.is_object()) << reply.second;
    ASSERT_TRUE(body.contains("Error")) << reply.second;
    EXPECT_FALSE(body.contains("error")) << reply.second;
    EXPECT_FALSE(body["Error"].get<std::string>().empty()) << reply.second;
  }
  void ExpectHealthy() {
    const auto reply = server_.Get("/healthz");
    EXPECT_EQ(reply.first, 200) << reply.second;
  }

  Running server_{MakeConfig()};
};

TEST_F(ServiceHttpTest, MalformedJsonIs400) {
  for (const char* verb : {"filter", "prioritize", "bind", "preempt"}) {
    SCOPED_TRACE(verb);
    ExpectJsonError(server_.Post(std::string("/scheduler/") + verb, R"({"Pod":{"metadata":)"), 400);
    ExpectJsonError(server_.Post(std::string("/scheduler/") + verb, "not json"), 400);
  }
  ExpectHealthy();
}

TEST_F(ServiceHttpTest, EmptyBodyIs400) {
  for (const char* verb : {"filter", "prioritize", "bind", "preempt"}) {
    SCOPED_TRACE(verb);
    ExpectJsonError(server_.Post(std::string("/scheduler/") + verb, ""), 400);
  }
  ExpectHealthy();
}

TEST_F(ServiceHttpTest, WrongTypesAre400) {
  ExpectJsonError(server_.Post("/scheduler/filter", R"({"Pod":5,"Nodes":null,"NodeNames":[]})"),
                  400);
  ExpectJsonError(
      server_.Post("/scheduler/filter", R"({"Pod":{},"Nodes":null,"NodeNames":"dgx1-0"})"), 400);
  ExpectJsonError(server_.Post("/scheduler/prioritize", R"([1,2,3])"), 400);
  ExpectJsonError(server_.Post("/scheduler/bind",
                               R"({"PodName":1,"PodNamespace":"ml","PodUID":"u","Node":"n"})"),
                  400);
  ExpectJsonError(server_.Post("/scheduler/bind", R"({"PodName":"p"})"), 400);
  ExpectJsonError(
      server_.Post("/scheduler/preempt", R"({"Pod":{},"NodeNameToMetaVictims":{"n":{"Pods":7}}})"),
      400);
  ExpectHealthy();
}

TEST_F(ServiceHttpTest, UnknownVerbIs404) {
  ExpectJsonError(server_.Post("/scheduler/frobnicate", "{}"), 404);
  ExpectJsonError(server_.Post("/filter", "{}"), 404);
  ExpectJsonError(server_.Get("/nothing/here"), 404);
  ExpectHealthy();
}

TEST_F(ServiceHttpTest, OversizedBodyIs413AndTheServerStillAnswers) {
  std::string huge = R"({"Pod":{},"NodeNames":[)";
  while (huge.size() < (std::size_t{2} << 20)) huge += R"("node-with-a-long-name-0000000000",)";
  huge += R"("last"]})";
  const auto reply = server_.Post("/scheduler/filter", huge);
  EXPECT_EQ(reply.first, 413) << reply.second.substr(0, 200);
  ExpectHealthy();
  // A normal request right after is served normally.
  const auto ok =
      server_.Post("/scheduler/filter", ReadFile(kE2eDir + "/filter_cache_mode.request.json"));
  EXPECT_EQ(ok.first, 200) << ok.second;
}

TEST_F(ServiceHttpTest, UnknownNodesAreUnresolvableNotErrors) {
  const auto reply = server_.Post(
      "/scheduler/filter",
      R"({"Pod":{"metadata":{"name":"p","namespace":"ml","uid":"u1"},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}},"Nodes":null,"NodeNames":["nope-1","nope-2"]})");
  ASSERT_EQ(reply.first, 200) << reply.second;
  const auto body = nlohmann::json::parse(reply.second);
  EXPECT_EQ(body["NodeNames"], nlohmann::json::array());
  EXPECT_EQ(body["FailedAndUnresolvableNodes"].size(), 2u);
  EXPECT_EQ(body["Error"], "");
}

TEST_F(ServiceHttpTest, InspectShowsNodesAndDevices) {
  const auto reply = server_.Get("/inspect");
  ASSERT_EQ(reply.first, 200) << reply.second;
  const auto body = nlohmann::json::parse(reply.second);
  ASSERT_EQ(body["nodes"].size(), 5u);
  std::map<std::string, nlohmann::json> nodes;
  for (const auto& node : body["nodes"]) nodes[node["name"].get<std::string>()] = node;
  ASSERT_TRUE(nodes.count("dgx1-0"));
  const auto& gpus = nodes["dgx1-0"]["gpus"];
  ASSERT_EQ(gpus.size(), 8u);
  EXPECT_EQ(gpus[0]["index"], 0);
  EXPECT_EQ(gpus[0]["pods"], nlohmann::json::array());
  EXPECT_EQ(gpus[5]["pods"], nlohmann::json::array({"11111111-0000-4000-8000-000000000002"}));
  EXPECT_EQ(gpus[5]["pod_names"], nlohmann::json::array({"batch/low-0"}));
  // MIG instances are shown on the MIG GPU.
  const auto& mig_gpu = nodes["a100-mig-0"]["gpus"][0];
  EXPECT_EQ(mig_gpu["mode"], "mig");
  ASSERT_EQ(mig_gpu["mig_instances"].size(), 1u);
  EXPECT_EQ(mig_gpu["mig_instances"][0]["profile"], "3g.20gb");
  EXPECT_EQ(mig_gpu["mig_instances"][0]["start"], 4);
  EXPECT_EQ(body["pods"]["bound"], 5);

  const auto one = server_.Get("/inspect/dgx1-0");
  ASSERT_EQ(one.first, 200);
  EXPECT_EQ(nlohmann::json::parse(one.second), nodes["dgx1-0"]);
  ExpectJsonError(server_.Get("/inspect/no-such-node"), 404);
}

TEST_F(ServiceHttpTest, InspectShowsShares) {
  const auto filtered = server_.Post(
      "/scheduler/filter",
      R"({"Pod":{"metadata":{"name":"nb","namespace":"ml","uid":"share-1","annotations":{"linkfit.io/gpu-share":"300"}},"spec":{}},"NodeNames":["l40s-0"]})");
  ASSERT_EQ(filtered.first, 200) << filtered.second;
  ASSERT_EQ(nlohmann::json::parse(filtered.second)["NodeNames"], nlohmann::json::array({"l40s-0"}));
  const auto bound =
      server_.Post("/scheduler/bind",
                   R"({"PodName":"nb","PodNamespace":"ml","PodUID":"share-1","Node":"l40s-0"})");
  ASSERT_EQ(bound.second, R"({"Error":""})");
  const auto node = nlohmann::json::parse(server_.Get("/inspect/l40s-0").second);
  int shared = 0;
  for (const auto& gpu : node["gpus"]) {
    if (gpu["mode"] != "shared") continue;
    ++shared;
    EXPECT_EQ(gpu["shared_milli"], 300);
    EXPECT_EQ(gpu["shares"], nlohmann::json::parse(R"([{"milli":300,"pod":"share-1"}])"));
  }
  EXPECT_EQ(shared, 1);
}

TEST_F(ServiceHttpTest, ExplainSaysWhyPerNode) {
  const auto reply = server_.Post(
      "/explain",
      R"({"metadata":{"name":"p","namespace":"ml","uid":"u1","annotations":{"linkfit.io/closeness":"nvlink","linkfit.io/closeness-policy":"required"}},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"2"}}}]}})");
  ASSERT_EQ(reply.first, 200) << reply.second;
  const auto lines = nlohmann::json::parse(reply.second)["lines"];
  ASSERT_EQ(lines.size(), 6u);  // the request, then one line per node
  EXPECT_NE(lines[0].get<std::string>().find("2 GPUs, nvlink required"), std::string::npos);
  std::map<std::string, std::string> by_node;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string line = lines[i];
    by_node[line.substr(0, line.find(':'))] = line;
  }
  EXPECT_NE(by_node["h100-0"].find("fits on GPUs"), std::string::npos) << by_node["h100-0"];
  EXPECT_NE(by_node["l40s-0"].find("never fits"), std::string::npos) << by_node["l40s-0"];
  EXPECT_NE(by_node["dgx1-0"].find("does not fit now"), std::string::npos) << by_node["dgx1-0"];
  // A bad hint is one line naming it; a body that is not a Pod is a 400.
  const auto bad = server_.Post(
      "/explain", R"({"metadata":{"name":"p","annotations":{"linkfit.io/gpus":"lots"}}})");
  ASSERT_EQ(bad.first, 200);
  EXPECT_NE(bad.second.find("linkfit.io/gpus"), std::string::npos) << bad.second;
  ExpectJsonError(server_.Post("/explain", "[]"), 400);
  ExpectJsonError(server_.Post("/explain", R"({"metadata":{}},"NodeNames":["x"]})"), 400);
}

TEST_F(ServiceHttpTest, ReleaseFreesDevices) {
  const std::string uid = "11111111-0000-4000-8000-000000000002";
  const auto released = server_.Post("/standalone/release", R"({"PodUID":")" + uid + R"("})");
  EXPECT_EQ(released.first, 200) << released.second;
  const auto node = nlohmann::json::parse(server_.Get("/inspect/dgx1-0").second);
  EXPECT_EQ(node["gpus"][5]["pods"], nlohmann::json::array());
  ExpectJsonError(server_.Post("/standalone/release", R"({"PodUID":")" + uid + R"("})"), 404);
  ExpectJsonError(server_.Post("/standalone/release", R"({"uid":1})"), 400);
  ExpectJsonError(server_.Post("/standalone/release", ""), 400);
  // With GPU 5 free, the 2-GPU NVLink pod still does not fit dgx1-0 (0 and 5 are not linked),
  // but a 2-GPU pod without the requirement does.
  const auto filtered = server_.Post(
      "/scheduler/filter",
      R"({"Pod":{"metadata":{"name":"p","namespace":"ml","uid":"u2"},"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":"2"}}}]}},"NodeNames":["dgx1-0"]})");
  EXPECT_EQ(nlohmann::json::parse(filtered.second)["NodeNames"], nlohmann::json::array({"dgx1-0"}));
}

}  // namespace
}  // namespace linkfit::app
