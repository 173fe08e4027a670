// The string helpers every module shares: joining, splitting, trimming.

#include "linkfit/common/strings.h"

#include <gtest/gtest.h>

namespace linkfit {
namespace {

TEST(Strings, JoinWithTheSeparatorBetweenItemsOnly) {
  EXPECT_EQ(JoinStrings({}), "");
  EXPECT_EQ(JoinStrings({"GPU-0"}), "GPU-0");
  EXPECT_EQ(JoinStrings({"a", "", "c"}), "a,,c");
  EXPECT_EQ(JoinStrings({"a", "b"}, "; "), "a; b");
  EXPECT_EQ(JoinInts({4, 5}), "4,5");
}

TEST(Strings, SplitKeepsEmptyFieldsAndTrimDropsBlanks) {
  EXPECT_EQ(Split("a,,b", ','), (std::vector<std::string_view>{"a", "", "b"}));
  EXPECT_EQ(Trim(" \tGPU-1 \n"), "GPU-1");
}

}  // namespace
}  // namespace linkfit
