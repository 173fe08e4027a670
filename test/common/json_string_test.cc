#include "linkfit/common/json_string.h"

#include <gtest/gtest.h>

#include <string>

namespace linkfit::json {
namespace {

TEST(JsonStringTest, EscapesWhatGoEscapes) {
  EXPECT_EQ(Quote("plain text"), "\"plain text\"");
  EXPECT_EQ(Quote("say \"hi\" a\\b"), "\"say \\\"hi\\\" a\\\\b\"");
  EXPECT_EQ(Quote("l1\nl2\r\t"), "\"l1\\nl2\\r\\t\"");
  EXPECT_EQ(Quote(std::string("\x01\x1f\b\f", 4)), "\"\\u0001\\u001f\\u0008\\u000c\"");
  EXPECT_EQ(Quote(std::string("nul\0", 4)), "\"nul\\u0000\"");
  EXPECT_EQ(Quote("<a&b>"), "\"\\u003ca\\u0026b\\u003e\"");
}

TEST(JsonStringTest, KeepsValidUtf8AndReplacesEachInvalidByte) {
  EXPECT_EQ(Quote("caf\xC3\xA9 \xF0\x9F\x9A\x80"), "\"caf\xC3\xA9 \xF0\x9F\x9A\x80\"");
  EXPECT_EQ(Quote("\xE2\x80\xA8|\xE2\x80\xA9"), "\"\\u2028|\\u2029\"");
  EXPECT_EQ(Quote("a\xFF"
                  "b"),
            "\"a\\ufffdb\"");
  EXPECT_EQ(Quote("\xC0\xAF"), "\"\\ufffd\\ufffd\"");             // overlong '/'
  EXPECT_EQ(Quote("\xED\xA0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");  // a UTF-16 surrogate
  EXPECT_EQ(Quote("\xE2\x82"), "\"\\ufffd\\ufffd\"");             // cut short
}

TEST(JsonStringTest, ErrorBodyIsTheExtenderProtocolsShape) {
  EXPECT_EQ(ErrorBody(""), "{\"Error\":\"\"}");
  EXPECT_EQ(ErrorBody("bad \"Pod\"\n"), "{\"Error\":\"bad \\\"Pod\\\"\\n\"}");
}

TEST(JsonStringTest, AppendsAfterWhatIsThere) {
  std::string out = "{\"k\":";
  AppendString(out, "v");
  EXPECT_EQ(out, "{\"k\":\"v\"");
}

}  // namespace
}  // namespace linkfit::json
