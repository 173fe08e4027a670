// The decoders' scratch (common/json_reader.h): a thread's parser and padded buffer are reused
// while bodies keep their size, and given back when a small body follows a large one (Open).

#include "linkfit/common/json_reader.h"

#include <gtest/gtest.h>

#include <string>

namespace linkfit::json {
namespace {

std::string ArrayOfBytes(std::size_t bytes) {
  std::string text = "[";
  while (text.size() + 3 < bytes) text += "1,";
  return text + "1]";
}

void Decode(Scratch& scratch, const std::string& text) {
  Ctx c;
  od::document doc;
  ASSERT_TRUE(Open(c, text, &doc, scratch)) << c.error;
}

TEST(ScratchTest, LargeBuffersStayForLargeBodiesAndGoWhenASmallOneFollows) {
  Scratch scratch;
  const std::string small = ArrayOfBytes(150 << 10);  // a cache-mode request of 5,000 names
  const std::string large = ArrayOfBytes(kKeepScratchBytes + (1 << 20));
  EXPECT_FALSE(ShrinkFor(scratch, small));  // nothing to give back
  Decode(scratch, small);
  EXPECT_FALSE(ShrinkFor(scratch, small));  // the usual size: reused
  EXPECT_GE(scratch.buffer.capacity(), small.size());

  EXPECT_FALSE(ShrinkFor(scratch, large));
  Decode(scratch, large);
  EXPECT_FALSE(ShrinkFor(scratch, large));  // large after large (non-cache mode): kept
  EXPECT_GE(scratch.parser.capacity(), large.size());
  Decode(scratch, large);

  EXPECT_TRUE(ShrinkFor(scratch, small));  // a small one follows: given back
  EXPECT_EQ(scratch.buffer.capacity(), 0u);
  EXPECT_EQ(scratch.parser.capacity(), 0u);
  Decode(scratch, small);  // and the scratch still works
  EXPECT_LT(scratch.buffer.capacity(), kKeepScratchBytes);

  // Open does it by itself: a small body decoded after a large one finds the scratch given back.
  Decode(scratch, large);
  EXPECT_GE(scratch.parser.capacity(), large.size());
  Decode(scratch, small);
  EXPECT_LT(scratch.buffer.capacity(), kKeepScratchBytes);
  EXPECT_LT(scratch.parser.capacity(), kKeepScratchBytes);
}

}  // namespace
}  // namespace linkfit::json
