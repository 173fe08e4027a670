// The extender wire format read: ExtenderArgs in both node modes, a pod's requests, and the
// problems of malformed bodies (codec_encode_test.cc: the replies written).

#include "linkfit/wire/codec.h"
#include "linkfit/common/json_reader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace linkfit::wire {
namespace {

constexpr std::int64_t kGiMilli = (std::int64_t{1} << 30) * 1000;

ExtenderArgs MustDecode(std::string_view body) {
  Result<ExtenderArgs> args = DecodeExtenderArgs(body);
  EXPECT_TRUE(args.has_value()) << args.error().message;
  if (!args) return ExtenderArgs{};
  return std::move(*args);
}

std::string DecodeError(std::string_view body) {
  Result<ExtenderArgs> args = DecodeExtenderArgs(body);
  EXPECT_FALSE(args.has_value()) << "decoded: " << body;
  return args ? std::string() : args.error().message;
}

std::vector<std::string> Names(const ExtenderArgs& args) {
  return {args.node_names.begin(), args.node_names.end()};
}

// ---------------------------------------------------------------------------------------------
// ExtenderArgs

TEST(DecodeExtenderArgsTest, CacheModeFromSpecExample) {
  const std::string body =
      R"({"Pod":{"metadata":{"name":"trainer-0","namespace":"ml","uid":"6f1c2b7e","labels":)"
      R"({"app":"trainer"},"annotations":{"linkfit.io/closeness":"nvlink"}},"spec":{"containers":)"
      R"([{"name":"main","resources":{"limits":{"example.com/gpu":"2"},"requests":{"cpu":"500m",)"
      R"("example.com/gpu":"2","memory":"1Gi"}}}],"priority":1000,"schedulerName":"default-)"
      R"(scheduler"},"status":{"phase":"Pending"}},"Nodes":null,"NodeNames":["node-a","node-b",)"
      R"("node-c"]})";
  ExtenderArgs args = MustDecode(body);
  EXPECT_EQ(args.pod.name, "trainer-0");
  EXPECT_EQ(args.pod.pod_namespace, "ml");
  EXPECT_EQ(args.pod.uid, "6f1c2b7e");
  EXPECT_EQ(args.pod.priority, 1000);
  EXPECT_EQ(args.pod.phase, "Pending");
  EXPECT_EQ(args.pod.scheduler_name, "default-scheduler");
  EXPECT_EQ(args.pod.labels.at("app"), "trainer");
  EXPECT_EQ(args.pod.annotations.at("linkfit.io/closeness"), "nvlink");
  EXPECT_EQ(args.pod.requests.at("cpu"), 500);
  EXPECT_EQ(args.pod.requests.at("memory"), kGiMilli);
  EXPECT_EQ(args.pod.requests.at("example.com/gpu"), 2000);
  EXPECT_TRUE(args.pod.problems.empty());
  EXPECT_TRUE(args.node_names_given);
  EXPECT_FALSE(args.nodes_given);
  EXPECT_EQ(Names(args), (std::vector<std::string>{"node-a", "node-b", "node-c"}));
  // Names without escapes are views into the body.
  EXPECT_GE(args.node_names[0].data(), body.data());
  EXPECT_LT(args.node_names[0].data(), body.data() + body.size());
  EXPECT_EQ(ReplyListFor(args), NodeListKind::kNames);
}

TEST(DecodeExtenderArgsTest, EnvelopeKeysAreCaseInsensitive) {
  ExtenderArgs lower = MustDecode(R"({"pod":{"metadata":{"name":"p"}},"nodes":null,)"
                                  R"("nodenames":["a","b"]})");
  EXPECT_EQ(lower.pod.name, "p");
  EXPECT_EQ(Names(lower), (std::vector<std::string>{"a", "b"}));
  ExtenderArgs mixed = MustDecode(R"({"POD":{"metadata":{"name":"p"}},"nODEnAMES":["x"]})");
  EXPECT_EQ(mixed.pod.name, "p");
  EXPECT_EQ(Names(mixed), (std::vector<std::string>{"x"}));
  // Go folds U+212A KELVIN SIGN to 'k' and U+017F LONG S to 's'; "NodeNames" has an 's'.
  ExtenderArgs folded = MustDecode("{\"Pod\":{},\"NodeName\xC5\xBF\":[\"y\"]}");
  EXPECT_EQ(Names(folded), (std::vector<std::string>{"y"}));
  // An escaped key is matched after unescaping.
  ExtenderArgs escaped = MustDecode(R"({"\u0050od":{},"NodeNames":[]})");
  EXPECT_TRUE(escaped.node_names_given);
}

TEST(DecodeExtenderArgsTest, EmbeddedObjectKeysAreCaseSensitive) {
  ExtenderArgs args = MustDecode(R"({"Pod":{"Metadata":{"name":"ignored"}},"NodeNames":[]})");
  EXPECT_EQ(args.pod.name, "");
}

TEST(DecodeExtenderArgsTest, NullsMeanAbsent) {
  ExtenderArgs args = MustDecode(
      R"({"Pod":{"metadata":{"name":"p","labels":null,"annotations":{"a":null},)"
      R"("creationTimestamp":null},"spec":{"containers":null,"initContainers":null,)"
      R"("priority":null,"nodeName":null},"status":null},"Nodes":null,"NodeNames":null})");
  EXPECT_FALSE(args.nodes_given);
  EXPECT_FALSE(args.node_names_given);
  EXPECT_TRUE(args.node_names.empty());
  EXPECT_EQ(args.pod.annotations.at("a"), "");
  EXPECT_EQ(args.pod.priority, 0);
  EXPECT_EQ(ReplyListFor(args), NodeListKind::kNone);
}

TEST(DecodeExtenderArgsTest, LaterDuplicateKeyWins) {
  ExtenderArgs args = MustDecode(R"({"NodeNames":["a"],"Pod":{},"nodenames":["b","c"]})");
  EXPECT_EQ(Names(args), (std::vector<std::string>{"b", "c"}));
  ExtenderArgs cleared = MustDecode(R"({"NodeNames":["a"],"Pod":{},"NODENAMES":null})");
  EXPECT_FALSE(cleared.node_names_given);
  EXPECT_TRUE(cleared.node_names.empty());
}

TEST(DecodeExtenderArgsTest, EscapedNamesAreUnescapedAndOwned) {
  ExtenderArgs args =
      MustDecode(R"({"Pod":{},"NodeNames":["a\u003cb","\u00e9t\u00e9","tab\tx","\ud83d\ude00"]})");
  EXPECT_EQ(Names(args),
            (std::vector<std::string>{"a<b", "\xC3\xA9t\xC3\xA9", "tab\tx", "\xF0\x9F\x98\x80"}));
  // Moving keeps the views valid.
  ExtenderArgs moved = std::move(args);
  EXPECT_EQ(moved.node_names[0], "a<b");
}

// NameCheck::kByCaller: every name is the bytes between its quotes, escapes and all, and the
// request says so; the same body read with kAtDecode decodes them. A value that is no string is
// refused either way, with the same message.
TEST(DecodeExtenderArgsTest, NamesReadAsSentAreTheBytesBetweenTheirQuotes) {
  const std::string body =
      R"({"Pod":{},"NodeNames":["node-1","a\u003cb","x\"y" , "\u00e9t\u00e9","a<b","tab\tx"]})";
  auto as_sent = DecodeExtenderArgs(body, NameCheck::kByCaller);
  ASSERT_TRUE(as_sent.has_value()) << as_sent.error().message;
  EXPECT_TRUE(as_sent->node_names_as_sent);
  EXPECT_FALSE(as_sent->node_names_escape_free);
  EXPECT_EQ(Names(*as_sent), (std::vector<std::string>{"node-1", R"(a\u003cb)", R"(x\"y)",
                                                       R"(\u00e9t\u00e9)", "a<b", R"(tab\tx)"}));
  EXPECT_TRUE(as_sent->owned_strings.empty());
  const ExtenderArgs decoded = MustDecode(body);
  EXPECT_FALSE(decoded.node_names_as_sent);
  EXPECT_EQ(Names(decoded), (std::vector<std::string>{"node-1", "a<b", "x\"y", "\xC3\xA9t\xC3\xA9",
                                                      "a<b", "tab\tx"}));

  const std::string clean = R"({"Pod":{},"NodeNames":["node-1","node-2"]})";
  auto clean_as_sent = DecodeExtenderArgs(clean, NameCheck::kByCaller);
  ASSERT_TRUE(clean_as_sent.has_value());
  EXPECT_FALSE(clean_as_sent->node_names_escape_free);  // not looked at
  EXPECT_TRUE(MustDecode(clean).node_names_escape_free);

  for (const char* bad :
       {R"({"Pod":{},"NodeNames":["a",7]})", R"({"Pod":{},"NodeNames":["a",null]})",
        R"({"Pod":{},"NodeNames":["a",{}]})"}) {
    auto refused = DecodeExtenderArgs(bad, NameCheck::kByCaller);
    auto reference = DecodeExtenderArgs(bad);
    ASSERT_FALSE(refused.has_value()) << bad;
    ASSERT_FALSE(reference.has_value()) << bad;
    EXPECT_EQ(refused.error().message, reference.error().message);
    EXPECT_NE(refused.error().message.find("NodeNames[1]"), std::string::npos)
        << refused.error().message;
  }
  // Nodes (non-cache mode) are read as before: their names are decoded.
  auto nodes = DecodeExtenderArgs(
      R"({"Pod":{},"Nodes":{"items":[{"metadata":{"name":"n\u002d1"}}]}})", NameCheck::kByCaller);
  ASSERT_TRUE(nodes.has_value()) << nodes.error().message;
  EXPECT_FALSE(nodes->node_names_as_sent);
  EXPECT_EQ(Names(*nodes), (std::vector<std::string>{"n-1"}));
}

// A body with kDecodePadding readable bytes after it is parsed where it lies: the same answer
// (or the same refusal) as a copied one, every name and raw node a view into the body itself,
// whatever the padding holds. Too little padding is no promise: the body is copied.
TEST(DecodeExtenderArgsTest, APaddedBodyIsReadWhereItLies) {
  const std::vector<std::string> bodies = {
      R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":["node-1","a\u003cb","n3"]})",
      R"({"Pod":{},"Nodes":{"items":[{"metadata":{"name":"n-1"}},{"metadata":{"name":"n-2"}}]}})",
      R"({"Pod":{},"NodeNames":["a",7]})",
      R"({"Pod":{},"NodeNames":["unterminated)",
      "   ",
  };
  for (const std::string& text : bodies) {
    for (const NameCheck check : {NameCheck::kAtDecode, NameCheck::kByCaller}) {
      for (const char fill : {'\0', '"', ']'}) {  // padding that would change a copied parse
        std::string buffer = text + std::string(kDecodePadding, fill);
        const std::string_view body(buffer.data(), text.size());
        auto in_place = DecodeExtenderArgs(body, check, kDecodePadding);
        auto copied = DecodeExtenderArgs(text, check);
        ASSERT_EQ(in_place.has_value(), copied.has_value()) << text;
        if (!copied) {
          EXPECT_EQ(in_place.error().message, copied.error().message);
          continue;
        }
        EXPECT_EQ(Names(*in_place), Names(*copied)) << text;
        for (std::string_view name : in_place->node_names) {
          const bool owned =
              !in_place->owned_strings.empty() &&
              (name.data() < buffer.data() || name.data() >= buffer.data() + buffer.size());
          if (!owned) {
            EXPECT_GE(name.data(), buffer.data());
            EXPECT_LE(name.data() + name.size(), buffer.data() + text.size());
          }
        }
        ASSERT_EQ(in_place->nodes.size(), copied->nodes.size());
        for (std::size_t i = 0; i < copied->nodes.size(); ++i) {
          EXPECT_EQ(in_place->nodes[i].raw_json, copied->nodes[i].raw_json);
          EXPECT_GE(in_place->nodes[i].raw_json.data(), buffer.data());
        }
      }
    }
  }
  // Less padding than promised is not relied on: decoded from a copy, the same answer.
  const std::string text = bodies[0];
  auto short_padding = DecodeExtenderArgs(text, NameCheck::kAtDecode, kDecodePadding - 1);
  ASSERT_TRUE(short_padding.has_value());
  EXPECT_EQ(Names(*short_padding), (std::vector<std::string>{"node-1", "a<b", "n3"}));
}

TEST(DecodeExtenderArgsTest, CheckNameAsSentSaysWhatANameNeeds) {
  EXPECT_EQ(CheckNameAsSent(""), NameAsSent::kWrittenAsIs);
  EXPECT_EQ(CheckNameAsSent("node-17.rack-3.example.com"), NameAsSent::kWrittenAsIs);
  EXPECT_EQ(CheckNameAsSent("UPPER case/with spaces"), NameAsSent::kWrittenAsIs);
  EXPECT_EQ(CheckNameAsSent("a<b"), NameAsSent::kNeedsEscape);
  EXPECT_EQ(CheckNameAsSent("a&b>c"), NameAsSent::kNeedsEscape);
  EXPECT_EQ(CheckNameAsSent("\xC3\xA9t\xC3\xA9"), NameAsSent::kNeedsEscape);
  EXPECT_EQ(CheckNameAsSent(R"(a\u003cb)"), NameAsSent::kNeedsDecoding);
  EXPECT_EQ(CheckNameAsSent(R"(node\)"), NameAsSent::kNeedsDecoding);
  EXPECT_EQ(CheckNameAsSent(std::string_view("a\x01b", 3)), NameAsSent::kNeedsDecoding);
  EXPECT_EQ(CheckNameAsSent(std::string(40, 'n') + "\t"), NameAsSent::kNeedsDecoding);
}

TEST(DecodeExtenderArgsTest, NonCacheModeKeepsRawNodeBytes) {
  const std::string node_a =
      R"({"metadata":{"name":"node-a","labels":{"kubernetes.io/hostname":"node-a"},)"
      R"("annotations":{"x":"\u003ctopo\u003e"},"creationTimestamp":null},"spec":)"
      R"({"podCIDR":"10.244.1.0/24"},"status":{"capacity":{"cpu":"16"},"allocatable":)"
      R"({"cpu":"15800m","memory":"63Gi","nvidia.com/gpu":"8","pods":"110"},"daemonEndpoints":)"
      R"({"kubeletEndpoint":{"Port":10250}},"nodeInfo":{"machineID":"","x":1.5e3}}})";
  const std::string node_b = R"({"metadata":{"name":"node-b"},"spec":{"unschedulable":true}})";
  const std::string body = R"({"Pod":{"metadata":{"name":"p"}},"Nodes":{"metadata":{},"items":[)" +
                           node_a + " ,\n " + node_b + R"( ]},"NodeNames":null})";
  ExtenderArgs args = MustDecode(body);
  EXPECT_TRUE(args.nodes_given);
  EXPECT_FALSE(args.node_names_given);
  ASSERT_EQ(args.nodes.size(), 2U);
  EXPECT_EQ(args.nodes[0].raw_json, node_a);
  EXPECT_EQ(args.nodes[1].raw_json, node_b);
  EXPECT_EQ(args.nodes[0].view.name, "node-a");
  EXPECT_EQ(args.nodes[0].view.labels.at("kubernetes.io/hostname"), "node-a");
  EXPECT_EQ(args.nodes[0].view.annotations.at("x"), "<topo>");
  EXPECT_EQ(args.nodes[0].view.allocatable.at("cpu"), 15800);
  EXPECT_EQ(args.nodes[0].view.allocatable.at("nvidia.com/gpu"), 8000);
  EXPECT_EQ(args.nodes[0].view.allocatable.at("memory"), 63 * kGiMilli);
  EXPECT_FALSE(args.nodes[0].view.unschedulable);
  EXPECT_TRUE(args.nodes[1].view.unschedulable);
  EXPECT_EQ(Names(args), (std::vector<std::string>{"node-a", "node-b"}));
  EXPECT_EQ(ReplyListFor(args), NodeListKind::kObjects);
}

TEST(DecodeExtenderArgsTest, EmptyAndNullItems) {
  ExtenderArgs empty = MustDecode(R"({"Pod":{},"Nodes":{"metadata":{},"items":[]}})");
  EXPECT_TRUE(empty.nodes_given);
  EXPECT_TRUE(empty.nodes.empty());
  ExtenderArgs null_items = MustDecode(R"({"Pod":{},"Nodes":{"items":null}})");
  EXPECT_TRUE(null_items.nodes_given);
  EXPECT_TRUE(null_items.nodes.empty());
}

TEST(DecodeExtenderArgsTest, NodeWithoutNameIsAProblemNotAnError) {
  ExtenderArgs args = MustDecode(R"({"Pod":{},"Nodes":{"items":[{"metadata":{}}]}})");
  ASSERT_EQ(args.nodes.size(), 1U);
  ASSERT_EQ(args.nodes[0].view.problems.size(), 1U);
  EXPECT_NE(args.nodes[0].view.problems[0].find("metadata.name"), std::string::npos);
}

TEST(DecodeExtenderArgsTest, BadNodeQuantityIsRecorded) {
  ExtenderArgs args =
      MustDecode(R"({"Pod":{},"Nodes":{"items":[{"metadata":{"name":"n"},"status":{"allocatable":)"
                 R"({"cpu":"lots","memory":"1Gi"}}}]}})");
  ASSERT_EQ(args.nodes[0].view.problems.size(), 1U);
  EXPECT_NE(args.nodes[0].view.problems[0].find("\"lots\""), std::string::npos);
  EXPECT_NE(args.nodes[0].view.problems[0].find("cpu"), std::string::npos);
  EXPECT_EQ(args.nodes[0].view.allocatable.count("cpu"), 0U);
  EXPECT_EQ(args.nodes[0].view.allocatable.at("memory"), kGiMilli);
}

// ---------------------------------------------------------------------------------------------
// Pod requests

PodView DecodePod(const std::string& pod_json) {
  ExtenderArgs args = MustDecode(R"({"Pod":)" + pod_json + R"(,"NodeNames":[]})");
  return std::move(args.pod);
}

TEST(PodRequestsTest, SumsContainersAndTakesLimitsWhenNoRequest) {
  PodView pod = DecodePod(
      R"({"spec":{"containers":[)"
      R"({"name":"a","resources":{"requests":{"cpu":"1","memory":"1Gi"},"limits":{"cpu":"2",)"
      R"("nvidia.com/gpu":"2"}}},)"
      R"({"name":"b","resources":{"limits":{"nvidia.com/gpu":"1","cpu":"250m"}}},)"
      R"({"name":"c"}]}})");
  EXPECT_EQ(pod.requests.at("cpu"), 1250);  // request 1 (not the limit) + limit 250m
  EXPECT_EQ(pod.requests.at("memory"), kGiMilli);
  EXPECT_EQ(pod.requests.at("nvidia.com/gpu"), 3000);
  EXPECT_TRUE(pod.problems.empty());
}

TEST(PodRequestsTest, InitContainersSetAFloor) {
  PodView pod = DecodePod(
      R"({"spec":{"initContainers":[)"
      R"({"name":"i1","resources":{"requests":{"cpu":"3","memory":"100Mi"}}},)"
      R"({"name":"i2","resources":{"limits":{"nvidia.com/gpu":"4"}}}],)"
      R"("containers":[{"name":"a","resources":{"requests":{"cpu":"1","nvidia.com/gpu":"1"}}},)"
      R"({"name":"b","resources":{"requests":{"cpu":"1","nvidia.com/gpu":"1"}}}],)"
      R"("overhead":{"cpu":"100m"}}})");
  EXPECT_EQ(pod.requests.at("cpu"), 3100);             // max(2, 3) + overhead
  EXPECT_EQ(pod.requests.at("nvidia.com/gpu"), 4000);  // max(2, 4)
  EXPECT_EQ(pod.requests.at("memory"), 100 * (std::int64_t{1} << 20) * 1000);
}

TEST(PodRequestsTest, SidecarInitContainersAddUp) {
  // A restartable init container runs beside the app: it adds to the sum, and to the floor of
  // every init container after it.
  PodView pod =
      DecodePod(R"({"spec":{"initContainers":[)"
                R"({"name":"side","restartPolicy":"Always","resources":{"requests":{"cpu":"1"}}},)"
                R"({"name":"init","resources":{"requests":{"cpu":"5"}}}],)"
                R"("containers":[{"name":"a","resources":{"requests":{"cpu":"2"}}}]}})");
  EXPECT_EQ(pod.requests.at("cpu"), 6000);  // max(2 + 1, 5 + 1)
}

TEST(PodRequestsTest, BadQuantityIsRecordedWithItsPlace) {
  PodView pod =
      DecodePod(R"({"spec":{"containers":[{"name":"a","resources":{"requests":{"cpu":"1.2.3",)"
                R"("memory":" 1Gi "},"limits":{"nvidia.com/gpu":2,"x.io/y":true}}}]}})");
  ASSERT_EQ(pod.problems.size(), 2U);
  EXPECT_NE(pod.problems[0].find("Pod.spec.containers[0].resources.requests[\"cpu\"]"),
            std::string::npos)
      << pod.problems[0];
  EXPECT_NE(pod.problems[0].find("\"1.2.3\""), std::string::npos) << pod.problems[0];
  EXPECT_NE(pod.problems[1].find("x.io/y"), std::string::npos) << pod.problems[1];
  EXPECT_EQ(pod.requests.count("cpu"), 0U);
  EXPECT_EQ(pod.requests.at("memory"), kGiMilli);      // trimmed, as Quantity.UnmarshalJSON
  EXPECT_EQ(pod.requests.at("nvidia.com/gpu"), 2000);  // a bare JSON number is a quantity
}

TEST(PodRequestsTest, BadPriorityIsRecorded) {
  PodView pod = DecodePod(R"({"spec":{"priority":1.5}})");
  ASSERT_EQ(pod.problems.size(), 1U);
  EXPECT_NE(pod.problems[0].find("priority"), std::string::npos);
  PodView big = DecodePod(R"({"spec":{"priority":2147483648}})");
  EXPECT_EQ(big.problems.size(), 1U);
  PodView neg = DecodePod(R"({"spec":{"priority":-2147483648}})");
  EXPECT_TRUE(neg.problems.empty());
  EXPECT_EQ(neg.priority, -2147483647 - 1);
}

TEST(PodRequestsTest, OverflowingSumIsAProblem) {
  PodView pod =
      DecodePod(R"({"spec":{"containers":[{"resources":{"requests":{"cpu":"9000000000000000"}}},)"
                R"({"resources":{"requests":{"cpu":"9000000000000000"}}}]}})");
  EXPECT_EQ(pod.problems.size(), 1U);
}

// ---------------------------------------------------------------------------------------------
// Malformed bodies

TEST(DecodeExtenderArgsTest, MalformedBodiesNameTheProblem) {
  struct Case {
    std::string body;
    std::string expect;  // a substring of the message
  };
  const Case cases[] = {
      {"", "empty"},
      {"  \n", "empty"},
      {"nope", "JSON"},
      {"[]", "must be a JSON object, got an array"},
      {"42", "must be a JSON object"},
      {"\"x\"", "must be a JSON object"},
      {"null", "must be a JSON object"},
      {"{}", "no Pod"},
      {R"({"Pod":null,"NodeNames":[]})", "no Pod"},
      {R"({"Pod":[],"NodeNames":[]})", "Pod: expected a Pod object, got an array"},
      {R"({"Pod":"x"})", "Pod: expected a Pod object"},
      {R"({"Pod":{},"NodeNames":"a"})", "NodeNames: expected an array, got a string"},
      {R"({"Pod":{},"NodeNames":[1]})", "NodeNames[0]: expected a string, got a number"},
      {R"({"Pod":{},"NodeNames":["a",null]})", "NodeNames[1]: expected a string, got null"},
      {R"({"Pod":{},"NodeNames":["a",["b"]]})", "NodeNames[1]"},
      {R"({"Pod":{},"Nodes":[]})", "Nodes: expected an object, got an array"},
      {R"({"Pod":{},"Nodes":{"items":{}}})", "Nodes.items: expected an array"},
      {R"({"Pod":{},"Nodes":{"items":[1]}})", "Nodes.items[0]: expected a Node object"},
      {R"({"Pod":{},"NodeNames":[]} x)", ""},
      {R"({"Pod":{},"NodeNames":[]}})", "trailing"},
      {R"({"Pod":{},"NodeNames":[]}{})", ""},
      {R"({"Pod":{},"NodeNames":[],})", ""},
      {R"({"Pod":{},"NodeNames":["a",]})", ""},
      {R"({"Pod":{},"NodeNames":["a"})", ""},
      {R"({"Pod":{},"NodeNames":["a)", ""},
      {R"({"Pod":{"spec":{"x":tru}},"NodeNames":[]})", "tru"},
      {R"({"Pod":{"spec":{"x":01}},"NodeNames":[]})", ""},
      {R"({"Pod":{"spec":{"x":-}},"NodeNames":[]})", ""},
      {R"({"Pod":{"spec":{"x":"\q"}},"NodeNames":[]})", ""},
      {R"({"Pod":{"spec":{"x":[1 2]}},"NodeNames":[]})", ""},
      {R"({"Pod":{"spec":{"x":{"a" 1}}},"NodeNames":[]})", ""},
      {R"({"Pod":{"spec":{"x":{1:1}}},"NodeNames":[]})", ""},
      {R"({"Pod":{"spec":{"x":[}}},"NodeNames":[]})", ""},
      {R"({"Pod":{"metadata":{"labels":{"a":1}}},"NodeNames":[]})", "labels"},
      {R"({"Pod":{"metadata":{"name":5}}})", "Pod.metadata.name: expected a string"},
      {R"({"Pod":{"spec":{"containers":{}}}})", "containers: expected an array"},
      {"{\"Pod\":{},\"NodeNames\":[\"a\tb\"]}", ""},  // raw control character
      {"{\"Pod\":{},\"NodeNames\":[\"\xff\"]}", ""},  // invalid UTF-8
      {R"({"Pod":{},"NodeNames":["\ud800"]})", ""},   // lone surrogate
      {"\xEF\xBB\xBF{\"Pod\":{}}", ""},               // byte-order mark
      {std::string(600, '[') + std::string(600, ']'), ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.substr(0, 80));
    const std::string message = DecodeError(c.body);
    EXPECT_FALSE(message.empty());
    EXPECT_NE(message.find(c.expect), std::string::npos) << message;
  }
}

TEST(DecodeExtenderArgsTest, DeepNestingIsRejectedNotACrash) {
  std::string deep = R"({"Pod":{"spec":{"x":)";
  for (int i = 0; i < 5000; ++i) deep += "[";
  for (int i = 0; i < 5000; ++i) deep += "]";
  deep += "}}}";
  EXPECT_FALSE(DecodeError(deep).empty());
}

TEST(DecodeExtenderArgsTest, UnknownKeysAndWhitespaceAreFine) {
  ExtenderArgs args = MustDecode(
      " {\n \"Extra\" : {\"a\":[1,2.5e-3,true,false,null,{\"b\":\"c\"}]} ,\n \"Pod\" : { } ,"
      " \"NodeNames\" : [ \"a\" , \"b\" ] }\n");
  EXPECT_EQ(Names(args), (std::vector<std::string>{"a", "b"}));
}

// The decoder's scratch (common/json_reader.h) seen through the request decoder: a request of full
// Node objects larger than the bound decodes whole (its views point into the caller's body, not the
// scratch), and a small request after it, which gives the scratch back, too.
TEST(ScratchTest, RequestsDecodeTheSameWhateverTheScratchHeld) {
  std::string body = R"({"Pod":{"metadata":{"name":"p","uid":"u"}},"Nodes":{"items":[)";
  std::size_t nodes = 0;
  std::string last;  // the last node's JSON, as sent
  while (body.size() < json::kKeepScratchBytes + (1 << 20)) {
    if (nodes > 0) body += ',';
    last = R"({"metadata":{"name":"node-)" + std::to_string(nodes) + R"(","annotations":{"pad":")" +
           std::string(4000, 'x') + R"("}}})";
    body += last;
    ++nodes;
  }
  body += R"(]},"NodeNames":null})";
  const Result<ExtenderArgs> args = DecodeExtenderArgs(body);
  ASSERT_TRUE(args) << args.error().message;
  ASSERT_EQ(args->nodes.size(), nodes);
  EXPECT_EQ(args->node_names.front(), "node-0");
  EXPECT_EQ(args->node_names.back(), "node-" + std::to_string(nodes - 1));
  EXPECT_EQ(args->nodes.back().raw_json, last);
  const Result<ExtenderArgs> small =
      DecodeExtenderArgs(R"({"Pod":{"metadata":{"name":"q"}},"NodeNames":["a","b"]})");
  ASSERT_TRUE(small) << small.error().message;
  EXPECT_EQ(small->node_names.size(), 2u);
  EXPECT_EQ(args->nodes.back().raw_json, last);  // the earlier request's views still hold
}

}  // namespace
}  // namespace linkfit::wire
