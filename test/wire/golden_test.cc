// Golden exchanges (test/golden/README.md): each <verb>/<case>.request.json is decoded, the
// extender's decision from <case>.decision.json is applied, and the encoded reply must equal
// <case>.response.json byte for byte.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/wire/codec.h"

namespace linkfit::wire {
namespace {

namespace fs = std::filesystem;

const fs::path kGoldenDir = fs::path(LINKFIT_SOURCE_DIR) / "test" / "golden";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<std::size_t>(fs::file_size(path)), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  return text;
}

// A response file may end in one newline that is not part of the reply.
std::string ReadResponse(const fs::path& path) {
  std::string text = ReadFile(path);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

std::vector<fs::path> Cases(const std::string& verb) {
  std::vector<fs::path> cases;
  for (const auto& entry : fs::directory_iterator(kGoldenDir / verb)) {
    const std::string name = entry.path().filename().string();
    const std::string suffix = ".request.json";
    if (name.size() > suffix.size() && name.ends_with(suffix)) {
      cases.push_back(entry.path().parent_path() / name.substr(0, name.size() - suffix.size()));
    }
  }
  std::sort(cases.begin(), cases.end());
  return cases;
}

fs::path With(const fs::path& base, const std::string& suffix) {
  return fs::path(base.string() + suffix);
}

// Returns the request's own view of a node name (so that unescaping is exercised too).
std::string_view NameInArgs(const ExtenderArgs& args, const std::string& name) {
  auto it = std::find(args.node_names.begin(), args.node_names.end(), name);
  EXPECT_NE(it, args.node_names.end()) << name << " is not in the request";
  return it == args.node_names.end() ? std::string_view() : *it;
}

std::vector<NodeFailure> Failures(const ExtenderArgs& args, const nlohmann::json& list,
                                  FilterResult& result) {
  std::vector<NodeFailure> out;
  for (const auto& pair : list) {
    out.push_back(
        {NameInArgs(args, pair[0].get<std::string>()), result.Keep(pair[1].get<std::string>())});
  }
  return out;
}

TEST(GoldenTest, Filter) {
  const std::vector<fs::path> cases = Cases("filter");
  ASSERT_GE(cases.size(), 5U);
  for (const fs::path& base : cases) {
    SCOPED_TRACE(base.string());
    const std::string request = ReadFile(With(base, ".request.json"));
    const nlohmann::json decision = nlohmann::json::parse(ReadFile(With(base, ".decision.json")));
    Result<ExtenderArgs> args = DecodeExtenderArgs(request);
    ASSERT_TRUE(args.has_value()) << args.error().message;
    EXPECT_TRUE(args->pod.problems.empty());
    std::string reply;
    if (!decision.value("error", std::string()).empty()) {
      reply = EncodeFilterError(decision["error"].get<std::string>());
    } else {
      FilterResult result;
      result.list = ReplyListFor(*args);
      for (const auto& name : decision.value("pass", nlohmann::json::array())) {
        const std::string_view view = NameInArgs(*args, name.get<std::string>());
        if (result.list == NodeListKind::kObjects) {
          const auto index = static_cast<std::size_t>(
              std::find(args->node_names.begin(), args->node_names.end(), view) -
              args->node_names.begin());
          ASSERT_LT(index, args->nodes.size());
          result.nodes_json.push_back(args->nodes[index].raw_json);
        } else {
          result.node_names.push_back(view);
        }
      }
      result.failed_nodes =
          Failures(*args, decision.value("failed", nlohmann::json::array()), result);
      result.failed_and_unresolvable_nodes =
          Failures(*args, decision.value("unresolvable", nlohmann::json::array()), result);
      reply = EncodeFilterResult(result);
    }
    EXPECT_EQ(reply, ReadResponse(With(base, ".response.json")));
  }
}

TEST(GoldenTest, Prioritize) {
  const std::vector<fs::path> cases = Cases("prioritize");
  ASSERT_GE(cases.size(), 2U);
  for (const fs::path& base : cases) {
    SCOPED_TRACE(base.string());
    const std::string request = ReadFile(With(base, ".request.json"));
    const nlohmann::json decision = nlohmann::json::parse(ReadFile(With(base, ".decision.json")));
    Result<ExtenderArgs> args = DecodeExtenderArgs(request);
    ASSERT_TRUE(args.has_value()) << args.error().message;
    std::vector<HostPriority> priorities;
    for (const auto& pair : decision["scores"]) {
      priorities.push_back(
          {NameInArgs(*args, pair[0].get<std::string>()), pair[1].get<std::int64_t>()});
    }
    EXPECT_EQ(EncodeHostPriorityList(priorities), ReadResponse(With(base, ".response.json")));
  }
}

TEST(GoldenTest, Bind) {
  const std::vector<fs::path> cases = Cases("bind");
  ASSERT_GE(cases.size(), 2U);
  for (const fs::path& base : cases) {
    SCOPED_TRACE(base.string());
    const nlohmann::json decision = nlohmann::json::parse(ReadFile(With(base, ".decision.json")));
    Result<BindingArgs> args = DecodeBindingArgs(ReadFile(With(base, ".request.json")));
    ASSERT_TRUE(args.has_value()) << args.error().message;
    if (decision.contains("expect")) {
      const nlohmann::json& expect = decision["expect"];
      EXPECT_EQ(args->pod_name, expect["pod_name"].get<std::string>());
      EXPECT_EQ(args->pod_namespace, expect["pod_namespace"].get<std::string>());
      EXPECT_EQ(args->pod_uid, expect["pod_uid"].get<std::string>());
      EXPECT_EQ(args->node, expect["node"].get<std::string>());
    }
    EXPECT_EQ(EncodeBindingResult(decision["error"].get<std::string>()),
              ReadResponse(With(base, ".response.json")));
  }
}

TEST(GoldenTest, Preempt) {
  const std::vector<fs::path> cases = Cases("preempt");
  ASSERT_GE(cases.size(), 2U);
  for (const fs::path& base : cases) {
    SCOPED_TRACE(base.string());
    const nlohmann::json decision = nlohmann::json::parse(ReadFile(With(base, ".decision.json")));
    Result<PreemptionArgs> args = DecodePreemptionArgs(ReadFile(With(base, ".request.json")));
    ASSERT_TRUE(args.has_value()) << args.error().message;
    const std::vector<NodeVictims>& candidates =
        args->victims_given ? args->node_victims : args->node_meta_victims;
    std::set<std::string> keep;
    for (const auto& name : decision["keep"]) keep.insert(name.get<std::string>());
    std::vector<NodeVictims> kept;
    for (const NodeVictims& node : candidates) {
      if (keep.count(node.node) > 0) kept.push_back(node);
    }
    EXPECT_EQ(kept.size(), keep.size());
    EXPECT_EQ(EncodePreemptionResult(kept), ReadResponse(With(base, ".response.json")));
  }
}

}  // namespace
}  // namespace linkfit::wire
