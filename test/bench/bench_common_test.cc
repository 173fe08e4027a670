// bench/common: the flag parser, the request bodies and the child-process launcher (with a shell
// script standing in for a server).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/child_process.h"
#include "common/extender_args.h"
#include "common/flags.h"

namespace linkfit::bench {
namespace {

Result<void> ParseArgs(const Flags& flags, std::vector<std::string> args) {
  std::vector<char*> argv = {const_cast<char*>("tool")};
  for (std::string& arg : args) argv.push_back(arg.data());
  return flags.Parse(static_cast<int>(argv.size()), argv.data());
}

TEST(Flags, ReadsSwitchesValuesAndNumbersInRange) {
  bool quiet = false;
  std::string out = "out";
  int jobs = 2000;
  std::string mode;
  Flags flags;
  flags.Switch("--quiet", &quiet)
      .String("--out", &out)
      .Int("--jobs", &jobs, 1, 100)
      .Value("--mode", [&mode](const std::string& value) {
        mode = value;
        return value == "a" || value == "b";
      });
  ASSERT_TRUE(ParseArgs(flags, {"--out", "x", "--quiet", "--jobs", "7", "--mode", "b"}));
  EXPECT_TRUE(quiet);
  EXPECT_EQ(out, "x");
  EXPECT_EQ(jobs, 7);
  EXPECT_EQ(mode, "b");

  ASSERT_TRUE(ParseArgs(flags, {"--jobs=9"}));
  EXPECT_EQ(jobs, 9);

  auto error = ParseArgs(flags, {"--jobs", "0"});
  ASSERT_FALSE(error);
  EXPECT_EQ(error.error().message, "bad option --jobs 0");
  error = ParseArgs(flags, {"--mode", "c"});
  ASSERT_FALSE(error);
  EXPECT_EQ(error.error().message, "bad option --mode c");
  // The parsing's own errors are linkfit's (common/flags.h).
  error = ParseArgs(flags, {"--out"});
  ASSERT_FALSE(error);
  EXPECT_EQ(error.error().message, "flag --out needs a value");
  error = ParseArgs(flags, {"--jobs", "1", "--jobs", "2"});
  ASSERT_FALSE(error);
  EXPECT_EQ(error.error().message, "flag --jobs given twice");
  error = ParseArgs(flags, {"--nope", "1"});
  ASSERT_FALSE(error);
  EXPECT_NE(error.error().message.find("unknown flag --nope"), std::string::npos);
}

TEST(ExtenderArgs, WritesKubeSchedulersBodies) {
  const std::vector<std::string> names = {"a", "b", "c"};
  EXPECT_EQ(CacheModeArgs("{}", names), R"({"Pod":{},"Nodes":null,"NodeNames":["a","b","c"]})");
  EXPECT_EQ(CacheModeArgs("{}", names, 2, 2), R"({"Pod":{},"Nodes":null,"NodeNames":["c","a"]})");
  EXPECT_EQ(NonCacheModeArgs("{}", {"{\"n\":1}", "{}"}),
            R"({"Pod":{},"Nodes":{"metadata":{},"items":[{"n":1},{}]},"NodeNames":null})");
  EXPECT_EQ(BindingArgs("p", "ns", "u", "n"),
            R"({"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"n"})");
}

TEST(ChildProcess, StartsReadsTheAddressAndStops) {
  ChildProcessOptions options;
  options.argv = {"/bin/sh", "-c",
                  "echo 'fake listening on http://127.0.0.1:4321/'; echo more; exec sleep 30"};
  options.drain_stdout = true;
  auto child = ChildProcess::Start(options);
  ASSERT_TRUE(child) << child.error().message;
  EXPECT_EQ(child->host(), "127.0.0.1");
  EXPECT_EQ(child->port(), 4321);
  EXPECT_TRUE(child->Alive());
  EXPECT_GT(child->RssBytes(), 0);
  child->Stop();
  EXPECT_FALSE(child->Alive());
}

TEST(ChildProcess, ReportsAChildThatExitsEarlyWithItsLog) {
  const std::string log = ::testing::TempDir() + "/bench_common_child.log";
  ChildProcessOptions options;
  options.argv = {"/bin/sh", "-c", "echo 'no config' >&2; exit 3"};
  options.name = "fake server";
  options.stderr_log = log;
  auto child = ChildProcess::Start(options);
  ASSERT_FALSE(child);
  EXPECT_NE(child.error().message.find("fake server exited before it was ready; log: "),
            std::string::npos)
      << child.error().message;
  EXPECT_NE(child.error().message.find("no config"), std::string::npos);
}

TEST(ChildProcess, GivesUpOnAChildThatNeverGetsReady) {
  ChildProcessOptions options;
  options.argv = {"/bin/sh", "-c", "exec sleep 30"};
  options.ready_timeout_s = 0.2;
  auto child = ChildProcess::Start(options);
  ASSERT_FALSE(child);
  EXPECT_NE(child.error().message.find("printed no ready line"), std::string::npos);
}

}  // namespace
}  // namespace linkfit::bench
