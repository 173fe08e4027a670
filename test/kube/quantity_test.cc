#include "linkfit/kube/quantity.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace linkfit::kube {
namespace {

constexpr std::int64_t kGi = std::int64_t{1} << 30;
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

struct Case {
  std::string_view text;
  std::int64_t milli;
  std::int64_t value;
};

TEST(QuantityTest, ParsesValidQuantities) {
  const Case cases[] = {
      {"0", 0, 0},
      {"000", 0, 0},
      {"2", 2000, 2},
      {"+1", 1000, 1},
      {"-1", -1000, -1},
      {"500m", 500, 1},
      {"1500m", 1500, 2},
      {"1.5", 1500, 2},
      {"0.1", 100, 1},
      {".5", 500, 1},
      {"1.", 1000, 1},
      {"1.G", 1000000000000, 1000000000},
      {"16Gi", 16 * kGi * 1000, 16 * kGi},
      {"1Ki", 1024000, 1024},
      {"1Mi", 1048576000, 1048576},
      {"1.5Ki", 1536000, 1536},
      {"0.5Ki", 512000, 512},
      {"1Ti", (std::int64_t{1} << 40) * 1000, std::int64_t{1} << 40},
      {"1Pi", (std::int64_t{1} << 50) * 1000, std::int64_t{1} << 50},
      {"1Ei", kMax, std::int64_t{1} << 60},  // milli overflows: checked separately below
      {"1k", 1000000, 1000},
      {"1M", 1000000000, 1000000},
      {"1G", 1000000000000, 1000000000},
      {"1T", 1000000000000000, 1000000000000},
      {"1P", 1000000000000000000, 1000000000000000},
      {"1E", kMax, 1000000000000000000},  // milli overflows: checked separately below
      {"1e3", 1000000, 1000},
      {"1E3", 1000000, 1000},
      {"1e+3", 1000000, 1000},
      {"1e-3", 1, 1},
      {"15e-1", 1500, 2},
      {"0e9999", 0, 0},
      {"100n", 1, 1},      // 1e-7, rounds up to one milli
      {"1000000n", 1, 1},  // exactly one milli
      {"1000001n", 2, 1},  // just above one milli
      {"5u", 1, 1},
      {"0.0001", 1, 1},     // sub-milli rounds away from zero (MilliValue)
      {"-0.0001", -1, -1},  // ... for negatives too
      {"0.0010", 1, 1},
      {"123.456", 123456, 124},
      {"0.000000000000000000000000000000000000000001", 1, 1},
      {"1.000000000000000000000000000000000000000000", 1000, 1},
      {"9223372036854775807m", kMax, 9223372036854776},
      {"9223372036854775.807", kMax, 9223372036854776},
      {"7.9999999999Ki", 8192000, 8192},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.text));
    if (c.milli != kMax || c.text == "9223372036854775807m" || c.text == "9223372036854775.807") {
      Result<std::int64_t> milli = ParseQuantityMilli(c.text);
      ASSERT_TRUE(milli.has_value()) << milli.error().message;
      EXPECT_EQ(*milli, c.milli);
    }
    Result<std::int64_t> value = ParseQuantityValue(c.text);
    ASSERT_TRUE(value.has_value()) << value.error().message;
    EXPECT_EQ(*value, c.value);
  }
}

TEST(QuantityTest, ExactBinaryFractions) {
  // 0.1Ki = 102.4 -> milli exact, value rounds up.
  EXPECT_EQ(*ParseQuantityMilli("0.1Ki"), 102400);
  EXPECT_EQ(*ParseQuantityValue("0.1Ki"), 103);
  // 1e-4 Ki = 0.1024 -> one milli after rounding up.
  EXPECT_EQ(*ParseQuantityMilli("0.0001Ki"), 103);
  EXPECT_EQ(*ParseQuantityMilli("0.0000001Ki"), 1);
  EXPECT_EQ(*ParseQuantityMilli("-1.5Gi"), -1536 * (std::int64_t{1} << 20) * 1000);
}

TEST(QuantityTest, RejectsGarbageNamingTheText) {
  const std::string_view invalid[] = {
      "",     "1.2.3", "Gi",   "1GB",   "1 Gi",   " 1",      "1 ",
      "--1",  "1e",    "1e+",  "1E-",   "-",      "+",       ".",
      "abc",  "1i",    ".5i",  "0.1mi", "0.1am",  "1K",      "1ki",
      "1m3",  "1e3m",  "1Ei3", "1.1.M", "1+1.0M", "-3.01e-", "1e99999999999",
      "0x10", "1_000", "∞",    "1\n",
  };
  for (std::string_view text : invalid) {
    SCOPED_TRACE(std::string(text));
    Result<std::int64_t> milli = ParseQuantityMilli(text);
    ASSERT_FALSE(milli.has_value()) << *milli;
    EXPECT_NE(milli.error().message.find("\"" + std::string(text.substr(0, 10))), std::string::npos)
        << milli.error().message;
    EXPECT_FALSE(ParseQuantityValue(text).has_value());
  }
}

TEST(QuantityTest, RejectsOverflow) {
  const std::string_view overflowing[] = {
      "1E",  "1Ei",  "9223372036854775808m",  "9223372036854776", "99999999999999999999",
      "8Ei", "1e19", "-9223372036854775809m", "1e2147483647",
  };
  for (std::string_view text : overflowing) {
    SCOPED_TRACE(std::string(text));
    Result<std::int64_t> milli = ParseQuantityMilli(text);
    ASSERT_FALSE(milli.has_value()) << *milli;
    EXPECT_NE(milli.error().message.find("int64"), std::string::npos) << milli.error().message;
  }
  EXPECT_EQ(*ParseQuantityValue("1E"), 1000000000000000000);
  EXPECT_FALSE(ParseQuantityValue("8Ei").has_value());
  EXPECT_EQ(*ParseQuantityValue("7Ei"), std::int64_t{7} << 60);
}

TEST(QuantityTest, LongTextIsShortenedInTheMessage) {
  const std::string text(1000, 'x');
  Result<std::int64_t> milli = ParseQuantityMilli(text);
  ASSERT_FALSE(milli.has_value());
  EXPECT_LT(milli.error().message.size(), 300U);
}

}  // namespace
}  // namespace linkfit::kube
