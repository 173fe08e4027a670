// The extender wire format written: JSON strings escaped as Go escapes them, filter and
// prioritize replies, Binding and preemption (codec_test.cc: requests read).

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/json_string.h"
#include "linkfit/wire/codec.h"

namespace linkfit::wire {
namespace {

// ---------------------------------------------------------------------------------------------
// Encoding

std::string Escaped(std::string_view text) {
  std::string out;
  json::AppendString(out, text);
  return out;
}

TEST(AppendJsonStringTest, EscapesLikeGo) {
  EXPECT_EQ(Escaped(""), R"("")");
  EXPECT_EQ(Escaped("plain node-1"), R"("plain node-1")");
  EXPECT_EQ(Escaped("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(Escaped("\n\r\t"), R"("\n\r\t")");
  EXPECT_EQ(Escaped(std::string_view("\x00\x01\x08\x0c\x1f", 5)),
            R"("\u0000\u0001\u0008\u000c\u001f")");
  EXPECT_EQ(Escaped("<a&b>"), R"("\u003ca\u0026b\u003e")");
  EXPECT_EQ(Escaped("\x7f/"), "\"\x7f/\"");
  EXPECT_EQ(Escaped("\xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80 \xE4\xB8\xAD"),
            "\"\xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80 \xE4\xB8\xAD\"");
  EXPECT_EQ(Escaped("\xE2\x80\xA8\xE2\x80\xA9\xE2\x80\xAA"), "\"\\u2028\\u2029\xE2\x80\xAA\"");
  // Invalid UTF-8: each bad byte becomes U+FFFD, as utf8.DecodeRuneInString reads it.
  EXPECT_EQ(Escaped("a\xff"
                    "b"),
            R"("a\ufffdb")");
  EXPECT_EQ(Escaped("\xC0\xAF"), R"("\ufffd\ufffd")");                      // overlong
  EXPECT_EQ(Escaped("\xED\xA0\x80"), R"("\ufffd\ufffd\ufffd")");            // surrogate
  EXPECT_EQ(Escaped("\xE2\x82"), R"("\ufffd\ufffd")");                      // truncated
  EXPECT_EQ(Escaped("\xF4\x90\x80\x80"), R"("\ufffd\ufffd\ufffd\ufffd")");  // > U+10FFFF
  EXPECT_EQ(Escaped("\xF4\x8F\xBF\xBF"), "\"\xF4\x8F\xBF\xBF\"");
}

TEST(EncodeFilterResultTest, CacheMode) {
  FilterResult result;
  result.list = NodeListKind::kNames;
  result.node_names = {"node-a"};
  result.failed_nodes = {{"node-b", "example.com/gpu: 1 free, 2 requested"}};
  result.failed_and_unresolvable_nodes = {{"node-c", "node has no example.com/gpu devices"}};
  EXPECT_EQ(EncodeFilterResult(result),
            R"({"Nodes":null,"NodeNames":["node-a"],"FailedNodes":{"node-b":"example.com/gpu: )"
            R"(1 free, 2 requested"},"FailedAndUnresolvableNodes":{"node-c":"node has no )"
            R"(example.com/gpu devices"},"Error":""})");
}

TEST(EncodeFilterResultTest, MapsAreSortedAndLastDuplicateWins) {
  FilterResult result;
  result.list = NodeListKind::kNames;
  result.failed_nodes = {{"b", "1"}, {"a", "2"}, {"c", "3"}, {"a", "4"}, {"B", "5"}};
  EXPECT_EQ(EncodeFilterResult(result),
            R"({"Nodes":null,"NodeNames":[],"FailedNodes":{"B":"5","a":"4","b":"1","c":"3"},)"
            R"("FailedAndUnresolvableNodes":{},"Error":""})");
}

TEST(EncodeFilterResultTest, ObjectModeEchoesRawNodes) {
  FilterResult result;
  result.list = NodeListKind::kObjects;
  result.nodes_json = {R"({"metadata":{"name":"a"}})", R"({"metadata":{"name":"b"}})"};
  EXPECT_EQ(EncodeFilterResult(result),
            R"({"Nodes":{"metadata":{},"items":[{"metadata":{"name":"a"}},{"metadata":)"
            R"({"name":"b"}}]},"NodeNames":null,"FailedNodes":{},)"
            R"("FailedAndUnresolvableNodes":{},"Error":""})");
  result.nodes_json.clear();
  EXPECT_EQ(EncodeFilterResult(result),
            R"({"Nodes":{"metadata":{},"items":[]},"NodeNames":null,"FailedNodes":{},)"
            R"("FailedAndUnresolvableNodes":{},"Error":""})");
}

TEST(EncodeFilterResultTest, ErrorReply) {
  EXPECT_EQ(EncodeFilterError("device inventory unavailable <now>"),
            R"({"Nodes":null,"NodeNames":null,"FailedNodes":{},"FailedAndUnresolvableNodes":{},)"
            R"("Error":"device inventory unavailable \u003cnow\u003e"})");
}

TEST(EncodeHostPriorityListTest, BareArray) {
  EXPECT_EQ(EncodeHostPriorityList({}), "[]");
  EXPECT_EQ(EncodeHostPriorityList({{"myhost", 1}}), R"([{"Host":"myhost","Score":1}])");
  EXPECT_EQ(EncodeHostPriorityList({{"node-a", 8}, {"node-d", 3}, {"n", -9223372036854775807}}),
            R"([{"Host":"node-a","Score":8},{"Host":"node-d","Score":3},)"
            R"({"Host":"n","Score":-9223372036854775807}])");
}

// The scores beside the request's own names: the same bytes as the list of pairs.
TEST(EncodeHostPriorityListTest, ScoresBesideNamesWriteTheSameArray) {
  EXPECT_EQ(EncodeHostScores({}, {}), "[]");
  const std::vector<std::string_view> hosts = {"node-a", "quote\"d", "n", "x\ny"};
  const std::vector<std::uint32_t> scores = {8, 0, 1000000, 4294967295u};
  std::vector<HostPriority> pairs;
  for (std::size_t i = 0; i < hosts.size(); ++i) pairs.push_back({hosts[i], scores[i]});
  EXPECT_EQ(EncodeHostScores(hosts, scores), EncodeHostPriorityList(pairs));
  EXPECT_EQ(EncodeHostScores(hosts, scores),
            R"([{"Host":"node-a","Score":8},{"Host":"quote\"d","Score":0},)"
            R"({"Host":"n","Score":1000000},{"Host":"x\ny","Score":4294967295}])");
  EXPECT_EQ(EncodeHostScores(std::vector<std::string_view>{"a", "b"},
                             std::vector<std::uint32_t>{1, 2}, /*hosts_escape_free=*/true),
            R"([{"Host":"a","Score":1},{"Host":"b","Score":2}])");
}

// ---------------------------------------------------------------------------------------------
// bind

TEST(BindingTest, DecodesAndEncodes) {
  Result<BindingArgs> args = DecodeBindingArgs(
      R"({"PodName":"mypodname","PodNamespace":"mypodnamespace","PodUID":"mypoduid",)"
      R"("Node":"mynode"})");
  ASSERT_TRUE(args.has_value()) << args.error().message;
  EXPECT_EQ(args->pod_name, "mypodname");
  EXPECT_EQ(args->pod_namespace, "mypodnamespace");
  EXPECT_EQ(args->pod_uid, "mypoduid");
  EXPECT_EQ(args->node, "mynode");
  Result<BindingArgs> lower = DecodeBindingArgs(
      R"({"podname":"a","podnamespace":"b","poduid":"c","node":"d","extra":[1]})");
  ASSERT_TRUE(lower.has_value());
  EXPECT_EQ(lower->node, "d");
  EXPECT_EQ(EncodeBindingResult("myerror"), R"({"Error":"myerror"})");
  EXPECT_EQ(EncodeBindingResult(""), R"({"Error":""})");
  EXPECT_EQ(json::ErrorBody("bad \"x\""), R"({"Error":"bad \"x\""})");
}

TEST(BindingTest, RejectsMissingFields) {
  Result<BindingArgs> missing = DecodeBindingArgs(R"({"PodName":"a","PodUID":null,"Node":""})");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().message, "binding request lacks PodNamespace, PodUID, Node");
  EXPECT_FALSE(DecodeBindingArgs("").has_value());
  EXPECT_FALSE(DecodeBindingArgs("[]").has_value());
  Result<BindingArgs> wrong = DecodeBindingArgs(R"({"PodName":1})");
  ASSERT_FALSE(wrong.has_value());
  EXPECT_NE(wrong.error().message.find("PodName: expected a string"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// preempt

TEST(PreemptionTest, CacheMode) {
  Result<PreemptionArgs> args =
      DecodePreemptionArgs(R"({"Pod":{"metadata":{"name":"trainer-0"},"spec":{"priority":1000}},)"
                           R"("NodeNameToVictims":null,"NodeNameToMetaVictims":{)"
                           R"("node-b":{"Pods":[{"UID":"u2"},{"UID":"u3"}],"NumPDBViolations":1},)"
                           R"("node-a":{"Pods":[{"UID":"u1"}],"NumPDBViolations":0}}})");
  ASSERT_TRUE(args.has_value()) << args.error().message;
  EXPECT_EQ(args->pod.priority, 1000);
  EXPECT_FALSE(args->victims_given);
  EXPECT_TRUE(args->meta_victims_given);
  ASSERT_EQ(args->node_meta_victims.size(), 2U);
  EXPECT_EQ(args->node_meta_victims[0].node, "node-b");
  ASSERT_EQ(args->node_meta_victims[0].pods.size(), 2U);
  EXPECT_EQ(args->node_meta_victims[0].pods[0].uid, "u2");
  EXPECT_EQ(args->node_meta_victims[0].pods[1].uid, "u3");
  EXPECT_FALSE(args->node_meta_victims[0].pods[0].pod.has_value());
  EXPECT_EQ(args->node_meta_victims[0].num_pdb_violations, 1);
  EXPECT_EQ(EncodePreemptionResult(args->node_meta_victims),
            R"({"NodeNameToMetaVictims":{"node-a":{"Pods":[{"UID":"u1"}],"NumPDBViolations":0},)"
            R"("node-b":{"Pods":[{"UID":"u2"},{"UID":"u3"}],"NumPDBViolations":1}}})");
}

TEST(PreemptionTest, NonCacheModeReadsFullVictims) {
  Result<PreemptionArgs> args = DecodePreemptionArgs(
      R"({"pod":{"metadata":{"name":"p"}},"nodenametometavictims":null,"nodenametovictims":{)"
      R"("node-a":{"pods":[{"metadata":{"name":"v1","uid":"u1"},"spec":{"priority":100,)"
      R"("containers":[{"resources":{"limits":{"nvidia.com/gpu":"2"}}}]}},)"
      R"({"metadata":{"name":"v2","uid":"u2"},"spec":{"priority":50}}],"numpdbviolations":2},)"
      R"("node-b":null}})");
  ASSERT_TRUE(args.has_value()) << args.error().message;
  EXPECT_TRUE(args->victims_given);
  EXPECT_FALSE(args->meta_victims_given);
  ASSERT_EQ(args->node_victims.size(), 2U);
  const NodeVictims& a = args->node_victims[0];
  ASSERT_EQ(a.pods.size(), 2U);
  EXPECT_EQ(a.pods[0].uid, "u1");
  EXPECT_EQ(a.pods[0].priority, 100);
  ASSERT_TRUE(a.pods[0].pod.has_value());
  EXPECT_EQ(a.pods[0].pod->requests.at("nvidia.com/gpu"), 2000);
  EXPECT_EQ(a.pods[1].uid, "u2");
  EXPECT_EQ(a.num_pdb_violations, 2);
  EXPECT_TRUE(args->node_victims[1].pods.empty());
  std::vector<NodeVictims> keep = {args->node_victims[0]};
  EXPECT_EQ(EncodePreemptionResult(keep),
            R"({"NodeNameToMetaVictims":{"node-a":{"Pods":[{"UID":"u1"},{"UID":"u2"}],)"
            R"("NumPDBViolations":2}}})");
}

TEST(PreemptionTest, EmptyResultAndErrors) {
  EXPECT_EQ(EncodePreemptionResult({}), R"({"NodeNameToMetaVictims":{}})");
  EXPECT_FALSE(DecodePreemptionArgs(R"({"NodeNameToMetaVictims":{}})").has_value());
  Result<PreemptionArgs> bad =
      DecodePreemptionArgs(R"({"Pod":{},"NodeNameToMetaVictims":{"n":{"Pods":[null]}}})");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("Pods[0]"), std::string::npos) << bad.error().message;
  Result<PreemptionArgs> pdb = DecodePreemptionArgs(
      R"({"Pod":{},"NodeNameToMetaVictims":{"n":{"Pods":[],"NumPDBViolations":1.0}}})");
  ASSERT_FALSE(pdb.has_value());
  EXPECT_NE(pdb.error().message.find("NumPDBViolations"), std::string::npos);
  Result<PreemptionArgs> dup = DecodePreemptionArgs(
      R"({"Pod":{},"NodeNameToMetaVictims":{"n":{"Pods":[{"UID":"a"}]},"m":null,)"
      R"("n":{"Pods":[{"UID":"b"}]}}})");
  ASSERT_TRUE(dup.has_value());
  ASSERT_EQ(dup->node_meta_victims.size(), 2U);
  EXPECT_EQ(dup->node_meta_victims[0].pods[0].uid, "b");
}

}  // namespace
}  // namespace linkfit::wire
