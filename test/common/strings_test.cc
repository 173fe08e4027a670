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

// The fields view the text, so splitting a temporary string is refused at compile time (a
// range-for over Split(std::string(...)) read freed memory in the whole-machines harness).
template <typename Text>
constexpr bool kSplits = requires(Text&& text) {
  Split(std::forward<Text>(text), ',');
};
static_assert(kSplits<const std::string&>);
static_assert(kSplits<std::string_view>);
static_assert(kSplits<const char (&)[4]>);
static_assert(!kSplits<std::string>);
template <typename Text>
constexpr bool kSplitsOnWhitespace = requires(Text&& text) {
  SplitWhitespace(std::forward<Text>(text));
};
static_assert(kSplitsOnWhitespace<const std::string&>);
static_assert(!kSplitsOnWhitespace<std::string>);

// Exactly the size asked for, the bytes before it kept, however the string's storage grows (GCC
// 12's resize_and_overwrite hands its operation the capacity allocated rather than the size
// asked for; a grow that kept that would leave unwritten bytes in a request body).
TEST(Strings, GrowUninitializedKeepsTheSizeAskedForAndTheBytesBefore) {
  std::string text = "{\"chunked\":";
  std::size_t expected = text.size();
  for (const std::size_t more : {5u, 1u, 17u, 100u, 3u, 4096u}) {
    const std::size_t before = text.size();
    GrowUninitialized(text, before + more);
    ASSERT_EQ(text.size(), before + more);
    for (std::size_t i = before; i < text.size(); ++i) text[i] = static_cast<char>('a' + i % 26);
    expected += more;
  }
  EXPECT_EQ(text.size(), expected);
  EXPECT_EQ(text.substr(0, 11), "{\"chunked\":");
  for (std::size_t i = 11; i < text.size(); ++i) {
    ASSERT_EQ(text[i], static_cast<char>('a' + i % 26)) << "byte " << i;
  }
  GrowUninitialized(text, 4);  // shrinking keeps the first bytes, as resize does
  EXPECT_EQ(text, "{\"ch");
}

}  // namespace
}  // namespace linkfit

namespace linkfit {
namespace {

TEST(Plural, AddsAnSUnlessOne) {
  EXPECT_EQ(Plural(1, "GPU"), "1 GPU");
  EXPECT_EQ(Plural(0, "NIC"), "0 NICs");
  EXPECT_EQ(Plural(3, "free GPU"), "3 free GPUs");
}

}  // namespace
}  // namespace linkfit
