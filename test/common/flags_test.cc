// Flags: the command line of linkfit's subcommands, the node agent and the bench tools.

#include "linkfit/common/flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace linkfit {
namespace {

const std::vector<FlagSpec> kKnown = {
    {"node-name"}, {"exempt-namespace", true, true}, {"once", false}};

TEST(Flags, ValuesSwitchesAndRepeatableFlags) {
  const auto flags = Flags::Parse({"--node-name", "n1", "--exempt-namespace=kube-system", "--once",
                                   "--exempt-namespace", "monitoring"},
                                  kKnown);
  ASSERT_TRUE(flags) << flags.error().message;
  EXPECT_EQ(flags->Get("node-name"), "n1");
  EXPECT_TRUE(flags->Has("once"));
  EXPECT_EQ(flags->GetAll("exempt-namespace"),
            (std::vector<std::string>{"kube-system", "monitoring"}));
  EXPECT_EQ(flags->Get("exempt-namespace"), "monitoring");  // the last
  EXPECT_TRUE(flags->GetAll("node-name-missing").empty());
}

TEST(Flags, ErrorsNameTheFlag) {
  EXPECT_EQ(Flags::Parse({"--node-name", "a", "--node-name", "b"}, kKnown).error().message,
            "flag --node-name given twice");
  EXPECT_EQ(Flags::Parse({"--once=yes"}, kKnown).error().message, "flag --once takes no value");
  EXPECT_EQ(Flags::Parse({"--node-name"}, kKnown).error().message,
            "flag --node-name needs a value");
  EXPECT_EQ(Flags::Parse({"--nodename", "a"}, kKnown).error().message,
            "unknown flag --nodename (known: --node-name, --exempt-namespace, --once)");
  EXPECT_EQ(Flags::Parse({"n1"}, kKnown).error().message, "unexpected argument \"n1\"");
}

}  // namespace
}  // namespace linkfit
