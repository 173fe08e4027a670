// The strict YAML reader the config, the cluster file and the kubeconfig read through: positions,
// typed scalars, strict mappings, path resolution, and no exception whatever the text.

#include "linkfit/common/yaml_reader.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace linkfit::yaml {
namespace {

// The node at `key` of a one-document text, for the scalar tests.
YAML::Node ValueOf(const std::string& text, const char* key = "v") { return YAML::Load(text)[key]; }

// The error's message, or "" when `result` holds a value.
template <typename T>
std::string MessageOf(const Result<T>& result) {
  return result ? std::string() : result.error().message;
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/linkfit-yaml-reader-" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(YamlReadFile, ReadsWholeFilesAndRefusesMissingDirectoriesAndOversized) {
  const std::string path = WriteTemp("read", std::string(5000, 'x'));
  EXPECT_EQ(ReadFile(path).value(), std::string(5000, 'x'));
  EXPECT_EQ(ReadFile(path, 5000).value().size(), 5000u);  // the limit itself is allowed
  EXPECT_EQ(MessageOf(ReadFile(path, 4999)), path + " is larger than 4999 bytes");
  EXPECT_EQ(MessageOf(ReadFile(path, 4096)), path + " is larger than 4096 bytes");
  const std::string empty = WriteTemp("empty", "");
  EXPECT_EQ(ReadFile(empty, 0).value(), "");
  std::remove(path.c_str());
  std::remove(empty.c_str());
  EXPECT_EQ(MessageOf(ReadFile(path)), "cannot read " + path + ": No such file or directory");
  EXPECT_EQ(MessageOf(ReadFile(::testing::TempDir())),
            "cannot read " + ::testing::TempDir() + ": Is a directory");
}

TEST(YamlReadFile, ALimitInMebibytesIsNamedSo) {
  // /dev/zero never ends: the read stops at the limit.
  EXPECT_EQ(MessageOf(ReadFile("/dev/zero", std::size_t{4} << 20)),
            "/dev/zero is larger than 4 MiB");
}

TEST(YamlPaths, JoinAndResolve) {
  EXPECT_EQ(Join("", "listen"), "listen");
  EXPECT_EQ(Join("policy", "weights"), "policy.weights");
  EXPECT_EQ(Join("nodes[0].mig[]", "gpu"), "nodes[0].mig[].gpu");
  EXPECT_EQ(ResolvePath("/etc/linkfit", ""), "");
  EXPECT_EQ(ResolvePath("/etc/linkfit", "/abs/a.crt"), "/abs/a.crt");
  EXPECT_EQ(ResolvePath("/etc/linkfit", "tls/a.crt"), "/etc/linkfit/tls/a.crt");
  EXPECT_EQ(ResolvePath("/etc/linkfit", "./a/../b.crt"), "/etc/linkfit/b.crt");
  EXPECT_EQ(ResolvePath("/etc/linkfit", "../b.crt"), "/etc/b.crt");
  EXPECT_EQ(ResolvePath("", "./certs/a.crt"), "certs/a.crt");  // a kubeconfig named as "config"
  EXPECT_EQ(ResolvePath("conf", "a.crt"), "conf/a.crt");
  EXPECT_EQ(Reader("f", "/k").Resolve("a"), "/k/a");
}

TEST(YamlDescribe, NamesWhatWasFound) {
  const YAML::Node doc = YAML::Load("{n: ~, l: [1], m: {a: 1}, s: abc, q: \"8\", e: ''}");
  EXPECT_EQ(Describe(doc["n"]), "null");
  EXPECT_EQ(Describe(doc["l"]), "a list");
  EXPECT_EQ(Describe(doc["m"]), "a mapping");
  EXPECT_EQ(Describe(doc["s"]), "\"abc\"");
  EXPECT_EQ(Describe(doc["q"]), "string \"8\"");
  EXPECT_EQ(Describe(doc["e"]), "string \"\"");
  EXPECT_EQ(Describe(doc["absent"]), "nothing");
  EXPECT_EQ(Describe(YAML::Node()), "null");
  EXPECT_EQ(Describe(YAML::Load("v: " + std::string(100, 'z'))["v"]),
            "\"" + std::string(60, 'z') + "...\"");
}

TEST(YamlScalarOr, IsLenient) {
  const YAML::Node doc = YAML::Load("{s: x, l: [1], n: ~}");
  EXPECT_EQ(ScalarOr(doc, "s"), "x");
  EXPECT_EQ(ScalarOr(doc, "l"), "");
  EXPECT_EQ(ScalarOr(doc, "n", "d"), "d");
  EXPECT_EQ(ScalarOr(doc, "absent", "d"), "d");
  EXPECT_EQ(ScalarOr(doc["s"], "x", "d"), "d");  // a scalar has no keys (yaml-cpp would throw)
  EXPECT_EQ(ScalarOr(doc["absent"], "x", "d"), "d");
}

TEST(YamlLoad, SyntaxErrorsNameSourceAndPosition) {
  EXPECT_TRUE(Reader("c").Load("").value().IsNull());
  EXPECT_EQ(Reader("c").Load("a: 1").value()["a"].Scalar(), "1");
  EXPECT_EQ(MessageOf(Reader("config").Load("a: 1\nb: [unclosed\n")),
            "config:3:1: invalid YAML: end of sequence flow not found");
  EXPECT_EQ(MessageOf(Reader("kubeconfig k", "", {.syntax_error = "not YAML"}).Load("{{{")),
            "kubeconfig k:1:1: not YAML: end of map flow not found");
}

TEST(YamlPositions, WhereAndFail) {
  const Reader reader("file.yaml");
  const YAML::Node doc = reader.Load("a:\n  b: 1\n").value();
  EXPECT_EQ(reader.Where(doc["a"]["b"]), "file.yaml:2:6");
  EXPECT_EQ(reader.Where(doc["absent"]), "file.yaml");
  EXPECT_EQ(reader.Where(MarkOf(doc["a"]["b"])), "file.yaml:2:6");
  EXPECT_EQ(MarkOf(doc["absent"]).line, -1);
  EXPECT_EQ(reader.Fail(doc["a"]["b"], "a.b", "too small").value().message,
            "file.yaml:2:6: a.b: too small");
  EXPECT_EQ(reader.Fail(doc, "", "not here").value().message, "file.yaml:1:1: not here");
  EXPECT_EQ(reader.source(), "file.yaml");
}

TEST(YamlCheckMapping, RefusesUnknownRepeatedAndNonStringKeys) {
  const Reader reader("f");
  const auto check = [&](const std::string& text) {
    return MessageOf(reader.CheckMapping(ValueOf(text), "m", {"pod", "node"}));
  };
  EXPECT_EQ(check("v: {pod: a, node: b}"), "");
  EXPECT_EQ(check("v: {}"), "");
  EXPECT_EQ(check("v: {pod: a, gpu: 1}"), "f:1:13: m.gpu: unknown key; known keys: pod, node");
  EXPECT_EQ(check("v: {pod: a, pod: b}"), "f:1:13: m.pod: duplicate key");
  EXPECT_EQ(check("v: {[1]: a}"), "f:1:5: m: keys must be strings");
  EXPECT_EQ(check("v: ~"), "f:1:4: m: expected a mapping, got null");
  EXPECT_EQ(check("v: [pod]"), "f:1:4: m: expected a mapping, got a list");
  EXPECT_EQ(MessageOf(reader.CheckMapping(ValueOf("w: 1"), "m", {"pod"})),
            "f: m: expected a mapping, got nothing");
}

TEST(YamlReadMapping, ReadsKeysInTheTextsOrder) {
  const Reader reader("f");
  std::vector<std::string> seen;
  const auto record = [&seen](std::string name) {
    return Key{name, [&seen](const YAML::Node& value, const std::string& path) -> Result<void> {
                 seen.push_back(path + "=" + value.Scalar());
                 return {};
               }};
  };
  const std::vector<Key> keys = {record("a"), record("b")};
  ASSERT_TRUE(reader.ReadMapping(ValueOf("v: {b: 2, a: 1}"), "s", keys));
  EXPECT_EQ(seen, (std::vector<std::string>{"s.b=2", "s.a=1"}));
  EXPECT_TRUE(reader.ReadMapping(ValueOf("v: ~"), "s", keys));  // an empty section
  EXPECT_TRUE(reader.ReadMapping(ValueOf("w: 1"), "s", keys));  // an absent one
  EXPECT_EQ(MessageOf(reader.ReadMapping(ValueOf("v: {c: 1}"), "", keys)),
            "f:1:5: c: unknown key; known keys: a, b");
  EXPECT_EQ(MessageOf(reader.ReadMapping(ValueOf("v: 5"), "s", keys)),
            "f:1:4: s: expected a mapping, got \"5\"");
  const std::vector<Key> failing = {
      {"a", [&reader](const YAML::Node& value, const std::string& path) -> Result<void> {
         return reader.Fail(value, path, "no");
       }}};
  EXPECT_EQ(MessageOf(reader.ReadMapping(ValueOf("v: {a: 1}"), "s", failing)), "f:1:8: s.a: no");
}

TEST(YamlReadEntries, TakesAnyNonEmptyKeyOnce) {
  const Reader reader("f");
  std::map<std::string, std::string> read;
  const auto into_map = [&read](const std::string& key, const YAML::Node& value,
                                const std::string& path) -> Result<void> {
    read[key] = path + "=" + value.Scalar();
    return {};
  };
  const auto entries = [&](const std::string& text) {
    read.clear();
    return MessageOf(reader.ReadEntries(ValueOf(text), "labels", into_map));
  };
  EXPECT_EQ(entries("v: {zone: a, rack: '7'}"), "");
  EXPECT_EQ(read, (std::map<std::string, std::string>{{"rack", "labels.rack=7"},
                                                      {"zone", "labels.zone=a"}}));
  EXPECT_EQ(entries("v: ~"), "");
  EXPECT_EQ(entries("v: {'': 1}"), "f:1:5: labels: keys must be non-empty strings");
  EXPECT_EQ(entries("v: {' ': 1}"), "f:1:5: labels: keys must be non-empty strings");
  EXPECT_EQ(entries("v: {[x]: 1}"), "f:1:5: labels: keys must be non-empty strings");
  EXPECT_EQ(entries("v: {a: 1, a: 2}"), "f:1:11: labels.a: duplicate key");
  EXPECT_EQ(entries("v: [a]"), "f:1:4: labels: expected a mapping, got a list");
}

TEST(YamlRequire, ReportsAnAbsentKeyAtItsMapping) {
  const Reader reader("f");
  const YAML::Node doc = reader.Load("x: 1\nitem:\n  pod: a\n").value();
  EXPECT_EQ(reader.Require(doc["item"], "pod", "items[0]").value().Scalar(), "a");
  EXPECT_EQ(MessageOf(reader.Require(doc["item"], "uid", "items[0]")),
            "f:3:3: items[0].uid: missing key");
  EXPECT_EQ(MessageOf(reader.Require(doc["x"], "uid", "x")),
            "f:1:4: x: expected a mapping, got \"1\"");
  EXPECT_EQ(MessageOf(reader.String(doc["item"], "uid", "items[0]", Empty::kRefused)),
            "f:3:3: items[0].uid: missing key");
  EXPECT_EQ(reader.String(doc["item"], "pod", "items[0]", Empty::kRefused).value(), "a");
  EXPECT_EQ(MessageOf(reader.Integer(doc["item"], "pod", "items[0]", 0, 7)),
            "f:3:8: items[0].pod: expected an integer in 0..7, got \"a\"");
  EXPECT_EQ(reader.Integer(doc, "x", "", 0, 7).value(), 1);
}

TEST(YamlScalars, StringsMayBeQuotedAndEmptyUnlessRefused) {
  const Reader reader("f");
  EXPECT_EQ(reader.String(ValueOf("v: \"8\""), "p").value(), "8");
  EXPECT_EQ(reader.String(ValueOf("v: ''"), "p").value(), "");
  EXPECT_EQ(MessageOf(reader.String(ValueOf("v: ''"), "p", Empty::kRefused)),
            "f:1:4: p: expected a non-empty string, got string \"\"");
  EXPECT_EQ(MessageOf(reader.String(ValueOf("v: [1]"), "p")),
            "f:1:4: p: expected a string, got a list");
  EXPECT_EQ(MessageOf(reader.String(ValueOf("v: ~"), "p")),
            "f:1:4: p: expected a string, got null");
  EXPECT_EQ(MessageOf(reader.String(ValueOf("w: 1"), "p")), "f: p: expected a string, got nothing");
}

TEST(YamlScalars, BooleansAreTrueOrFalseUnlessYaml11IsAsked) {
  const Reader strict("f");
  const Reader lenient("k", "", {.quoted_is_string = false, .yaml11_booleans = true});
  for (const char* text : {"true", "True", "TRUE"}) {
    EXPECT_TRUE(strict.Bool(ValueOf(std::string("v: ") + text), "p").value()) << text;
  }
  for (const char* text : {"false", "False", "FALSE"}) {
    EXPECT_FALSE(strict.Bool(ValueOf(std::string("v: ") + text), "p").value()) << text;
  }
  EXPECT_EQ(MessageOf(strict.Bool(ValueOf("v: yes"), "p")),
            "f:1:4: p: expected true or false, got \"yes\"");
  EXPECT_EQ(MessageOf(strict.Bool(ValueOf("v: 'true'"), "p")),
            "f:1:4: p: expected true or false, got string \"true\"");
  EXPECT_EQ(MessageOf(strict.Bool(ValueOf("v: {}"), "p")),
            "f:1:4: p: expected true or false, got a mapping");
  EXPECT_TRUE(lenient.Bool(ValueOf("v: yes"), "p").value());
  EXPECT_FALSE(lenient.Bool(ValueOf("v: off"), "p").value());
  EXPECT_TRUE(lenient.Bool(ValueOf("v: 'true'"), "p").value());
  EXPECT_EQ(MessageOf(lenient.Bool(ValueOf("v: maybe"), "p")),
            "k:1:4: p: expected true or false, got \"maybe\"");
}

TEST(YamlScalars, IntegersAreInRange) {
  const Reader strict("f");
  const Reader lenient("f", "", {.quoted_is_string = false});
  EXPECT_EQ(strict.Integer(ValueOf("v: 8"), "p", 1, 1024).value(), 8);
  EXPECT_EQ(strict.Integer(ValueOf("v: -3"), "p", -5, 0).value(), -3);
  EXPECT_EQ(MessageOf(strict.Integer(ValueOf("v: 0"), "p", 1, 1024)),
            "f:1:4: p: 0 is out of range 1..1024");
  EXPECT_EQ(MessageOf(strict.Integer(ValueOf("v: 2000"), "p", 1, 1024)),
            "f:1:4: p: 2000 is out of range 1..1024");
  EXPECT_EQ(MessageOf(strict.Integer(ValueOf("v: \"8\""), "p", 1, 1024)),
            "f:1:4: p: expected an integer in 1..1024, got string \"8\"");
  EXPECT_EQ(lenient.Integer(ValueOf("v: \"8\""), "p", 1, 1024).value(), 8);
  for (const char* bad : {"2.5", "eight", "0x10", "99999999999999999999", "~", "[1]", "''"}) {
    EXPECT_NE(MessageOf(strict.Integer(ValueOf(std::string("v: ") + bad), "p", 0, 100))
                  .find("p: expected an integer in 0..100, got "),
              std::string::npos)
        << bad;
  }
}

TEST(YamlScalars, NumbersAreFiniteAndSigned) {
  const Reader reader("f");
  EXPECT_EQ(reader.Number(ValueOf("v: 0"), "p", Sign::kNonNegative).value(), 0.0);
  EXPECT_EQ(reader.Number(ValueOf("v: +2.5"), "p", Sign::kPositive).value(), 2.5);
  EXPECT_EQ(reader.Number(ValueOf("v: 1e3"), "p", Sign::kPositive).value(), 1000.0);
  EXPECT_EQ(MessageOf(reader.Number(ValueOf("v: 0"), "p", Sign::kPositive)),
            "f:1:4: p: expected a positive number, got \"0\"");
  EXPECT_EQ(MessageOf(reader.Number(ValueOf("v: -1"), "p", Sign::kNonNegative)),
            "f:1:4: p: expected a non-negative number, got \"-1\"");
  for (const char* bad : {".nan", "nan", "inf", "1e999", "lots", "'2'", "1.5.2", "", "[1]"}) {
    EXPECT_FALSE(reader.Number(ValueOf(std::string("v: ") + bad), "p", Sign::kNonNegative)) << bad;
  }
}

TEST(YamlScalars, OneOfNamesTheChoices) {
  const Reader reader("f");
  EXPECT_EQ(reader.OneOf(ValueOf("v: ring"), "p", {"keep", "ring", "off"}).value(), "ring");
  EXPECT_EQ(MessageOf(reader.OneOf(ValueOf("v: always"), "p", {"keep", "ring", "off"})),
            "f:1:4: p: expected one of keep|ring|off, got \"always\"");
  EXPECT_FALSE(reader.OneOf(ValueOf("v: [keep]"), "p", {"keep"}));
}

TEST(YamlKeys, StoreWhatTheyRead) {
  const Reader reader("f", "/base");
  struct Out {
    std::string text = "unset";
    bool flag = false;
    int count = 0;
    double weight = 0;
    std::string mode;
    std::string dir = "default";
    std::string file = "default";
    std::optional<std::string> maybe = "default";
    int nested = 0;
  } out;
  const std::vector<Key> keys = {
      reader.StringKey("text", out.text),
      reader.BoolKey("flag", out.flag),
      reader.IntegerKey("count", out.count, 1, 10),
      reader.NumberKey("weight", out.weight, Sign::kNonNegative),
      reader.OneOfKey("mode", out.mode, {"pack", "spread"}),
      reader.PathKey("dir", out.dir, Empty::kRefused),
      reader.PathKey("file", out.file, Empty::kAllowed),
      reader.OptionalPathKey("maybe", out.maybe),
      reader.SectionKey("section", {reader.IntegerKey("nested", out.nested, 0, 5)}),
  };
  const auto read = [&](const std::string& text) {
    return MessageOf(reader.ReadMapping(YAML::Load(text), "", keys));
  };
  ASSERT_EQ(read("{text: hi, flag: true, count: 3, weight: 0.5, mode: spread, dir: d/../e, "
                 "file: '', maybe: /abs, section: {nested: 4}}"),
            "");
  EXPECT_EQ(out.text, "hi");
  EXPECT_TRUE(out.flag);
  EXPECT_EQ(out.count, 3);
  EXPECT_EQ(out.weight, 0.5);
  EXPECT_EQ(out.mode, "spread");
  EXPECT_EQ(out.dir, "/base/e");
  EXPECT_EQ(out.file, "");
  EXPECT_EQ(out.maybe, "/abs");
  EXPECT_EQ(out.nested, 4);
  ASSERT_EQ(read("{dir: ~, maybe: ''}"), "");
  EXPECT_EQ(out.dir, "/base/e");  // null keeps
  EXPECT_FALSE(out.maybe.has_value());
  out.maybe = "x";
  ASSERT_EQ(read("{maybe: ~}"), "");
  EXPECT_FALSE(out.maybe.has_value());
  EXPECT_EQ(read("{dir: ''}"), "f:1:7: dir: expected a path, got an empty string");
  EXPECT_EQ(read("{count: 11}"), "f:1:9: count: 11 is out of range 1..10");
  EXPECT_EQ(read("{section: {nested: x}}"),
            "f:1:20: section.nested: expected an integer in 0..5, got \"x\"");
  EXPECT_EQ(read("{section: {other: 1}}"),
            "f:1:12: section.other: unknown key; known keys: nested");
  EXPECT_EQ(read("{mode: random}"), "f:1:8: mode: expected one of pack|spread, got \"random\"");
  EXPECT_EQ(read("{flag: 1}"), "f:1:8: flag: expected true or false, got \"1\"");
  EXPECT_EQ(read("{weight: -1}"), "f:1:10: weight: expected a non-negative number, got \"-1\"");
  EXPECT_EQ(read("{text: [1]}"), "f:1:8: text: expected a string, got a list");
  EXPECT_EQ(read("{maybe: {}}"), "f:1:9: maybe: expected a string, got a mapping");
}

// Whatever the text, every function answers with a value or a message, never an exception.
TEST(YamlGarbage, EveryFunctionAnswersWithoutThrowing) {
  const std::vector<std::string> texts = {
      "",
      std::string("\0\xff\xfe", 3),
      "\t\t- :",
      "{{{",
      "[[[[[[[[[[",
      "a: &x [*x]",
      "*undefined",
      "!!binary zzz",
      "? [complex, key]\n: value\n",
      "a: b: c",
      "- - - -",
      "key: \"unterminated",
      "%YAML 9.9\n---\na",
      std::string(200, '[') + std::string(200, ']'),
      "{a: 1, a: 1, [1]: 2, ~: 3}",
      "--- a\n--- b\n",
  };
  const Reader reader("g", "/base", {.yaml11_booleans = true});
  for (const std::string& text : texts) {
    SCOPED_TRACE(::testing::PrintToString(text));
    const auto loaded = reader.Load(text);
    if (!loaded) {
      EXPECT_EQ(loaded.error().message.rfind("g", 0), 0u) << loaded.error().message;
      continue;
    }
    const YAML::Node root = *loaded;
    std::vector<YAML::Node> nodes = {root};
    if (root.IsMap()) nodes.push_back(root["absent"]);  // on a scalar, yaml-cpp would throw
    if (root.IsSequence() || root.IsMap()) {
      for (auto it = root.begin(); it != root.end(); ++it) {
        nodes.push_back(root.IsMap() ? YAML::Node(it->first) : YAML::Node(*it));
        if (root.IsMap()) nodes.push_back(it->second);
      }
    }
    for (const YAML::Node& node : nodes) {
      EXPECT_FALSE(Describe(node).empty());
      (void)reader.Where(node);
      (void)ScalarOr(node, "k");
      std::string text_out;
      const std::vector<Key> keys = {reader.StringKey("a", text_out)};
      for (const std::string& message :
           {MessageOf(reader.CheckMapping(node, "p", {"a"})),
            MessageOf(reader.ReadMapping(node, "p", keys)),
            MessageOf(reader.ReadEntries(node, "p",
                                         [](const std::string&, const YAML::Node&,
                                            const std::string&) { return Result<void>(); })),
            MessageOf(reader.Require(node, "a", "p")), MessageOf(reader.String(node, "p")),
            MessageOf(reader.Bool(node, "p")), MessageOf(reader.Integer(node, "p", 0, 9)),
            MessageOf(reader.Number(node, "p", Sign::kPositive)),
            MessageOf(reader.OneOf(node, "p", {"x"}))}) {
        if (!message.empty()) {
          EXPECT_EQ(message.rfind("g", 0), 0u) << message;
        }
      }
    }
  }
}

}  // namespace
}  // namespace linkfit::yaml
