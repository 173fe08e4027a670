// End to end over real HTTP: the golden exchanges of test/golden/e2e (README.md there) replayed
// against a Service on 127.0.0.1:0 built from test/golden/e2e/cluster.yaml, replies compared
// byte for byte. LINKFIT_UPDATE_GOLDEN=1 rewrites the response files instead (review the diff).

#include <cstdlib>
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "app/service_testing.h"

namespace linkfit::app {
namespace {

using testing::ReadFile;
using testing::Running;

const std::string kE2eDir = linkfit::testing::SourcePath("test/golden/e2e");

// The golden server: standalone on the e2e cluster, scoring by topology only, so that the
// prioritize case pins the ring comparison and not the packing/fragmentation tuning.
Config GoldenConfig() {
  Config config = testing::StandaloneConfig(kE2eDir + "/cluster.yaml");
  config.policy.weights = {1.0, 0.0, 0.0, 0.0};
  config.policy.score_range = 10;
  return config;
}

struct GoldenCase {
  const char* name;
  std::vector<const char*> after;  // cases replayed first on the same server (checked too)
};

const char* VerbOf(const std::string& name) {
  if (name.starts_with("filter")) return "filter";
  if (name.starts_with("prioritize")) return "prioritize";
  if (name.starts_with("bind")) return "bind";
  return "preempt";
}

// Replays one case and compares (or rewrites) its response file.
void Replay(Running& server, const std::string& name) {
  SCOPED_TRACE(name);
  const std::string request = ReadFile(kE2eDir + "/" + name + ".request.json");
  ASSERT_FALSE(request.empty()) << name << ".request.json is missing";
  const auto [status, body] = server.Post(std::string("/scheduler/") + VerbOf(name), request);
  EXPECT_EQ(status, 200) << body;
  const std::string response_path = kE2eDir + "/" + name + ".response.json";
  if (std::getenv("LINKFIT_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(response_path, std::ios::binary | std::ios::trunc) << body;
    return;
  }
  std::string expected = ReadFile(response_path);
  if (!expected.empty() && expected.back() == '\n') expected.pop_back();
  EXPECT_EQ(body, expected);
}

class GoldenE2eTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenE2eTest, ReplyIsByteForByte) {
  Running server(GoldenConfig());
  ASSERT_TRUE(server.ok());
  for (const char* earlier : GetParam().after) Replay(server, earlier);
  Replay(server, GetParam().name);
}

INSTANTIATE_TEST_SUITE_P(Cases, GoldenE2eTest,
                         ::testing::Values(GoldenCase{"filter_cache_mode", {}},
                                           GoldenCase{"filter_non_cache_mode", {}},
                                           GoldenCase{"filter_lowercase_envelope", {}},
                                           GoldenCase{"prioritize_cache_mode", {}},
                                           GoldenCase{"bind_ok", {"filter_cache_mode"}},
                                           GoldenCase{"bind_error", {}},
                                           GoldenCase{"preempt_cache_mode", {}},
                                           GoldenCase{"preempt_non_cache_mode", {}}),
                         [](const ::testing::TestParamInfo<GoldenCase>& param_info) {
                           return std::string(param_info.param.name);
                         });

TEST(GoldenE2eFacts, NonCacheModeEchoesNodeObjectsAsReceived) {
  // Independent of the response file: every node object in the reply is a substring of the
  // request (the same bytes), and the reply's other keys are PascalCase.
  Running server(GoldenConfig());
  ASSERT_TRUE(server.ok());
  const std::string request = ReadFile(kE2eDir + "/filter_non_cache_mode.request.json");
  const auto [status, body] = server.Post("/scheduler/filter", request);
  ASSERT_EQ(status, 200);
  const auto reply = nlohmann::json::parse(body);
  ASSERT_TRUE(reply["Nodes"].is_object());
  EXPECT_TRUE(reply["NodeNames"].is_null());
  ASSERT_EQ(reply["Nodes"]["items"].size(), 2u);
  const auto start = body.find(R"("items":[)") + 9;
  int depth = 0;
  std::size_t begin = start;
  int found = 0;
  for (std::size_t i = start; i < body.size(); ++i) {
    if (body[i] == '{') {
      if (depth++ == 0) begin = i;
    } else if (body[i] == '}') {
      if (--depth == 0) {
        EXPECT_NE(request.find(body.substr(begin, i + 1 - begin)), std::string::npos);
        ++found;
      }
    } else if (body[i] == ']' && depth == 0) {
      break;
    }
  }
  EXPECT_EQ(found, 2);
  EXPECT_TRUE(reply["FailedNodes"].contains("dgx1-0"));
}

TEST(GoldenE2eFacts, BindOkAllocatesWhatInspectShows) {
  Running server(GoldenConfig());
  ASSERT_TRUE(server.ok());
  Replay(server, "filter_cache_mode");
  Replay(server, "bind_ok");
  const auto [status, body] = server.Get("/inspect/h100-0");
  ASSERT_EQ(status, 200) << body;
  const auto node = nlohmann::json::parse(body);
  int held = 0;
  for (const auto& gpu : node["gpus"]) {
    for (const auto& uid : gpu["pods"]) {
      if (uid == "6f1c2b7e-3a51-4c1e-9f0d-2b8e5d7c9a10") ++held;
    }
  }
  EXPECT_EQ(held, 2);
  // The same bind again is a success and no second allocation.
  const auto [again_status, again] =
      server.Post("/scheduler/bind", ReadFile(kE2eDir + "/bind_ok.request.json"));
  EXPECT_EQ(again_status, 200);
  EXPECT_EQ(again, R"({"Error":""})");
  EXPECT_EQ(server.Get("/inspect/h100-0").second, body);
}

}  // namespace
}  // namespace linkfit::app
