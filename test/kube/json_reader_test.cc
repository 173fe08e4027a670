// The decoders' scratch (kube/json_reader.h): a thread's parser and padded buffer are reused
// while bodies keep their size, and given back when a small body follows a large one (Open).

#include "kube/json_reader.h"

#include <gtest/gtest.h>

#include <string>

#include "linkfit/kube/codec.h"

namespace linkfit::kube::json {
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

// Through the public decoder: a request of full Node objects larger than the bound decodes whole
// (its views point into the caller's body, not the scratch), and a small request after it, which
// gives the scratch back, too.
TEST(ScratchTest, RequestsDecodeTheSameWhateverTheScratchHeld) {
  std::string body = R"({"Pod":{"metadata":{"name":"p","uid":"u"}},"Nodes":{"items":[)";
  std::size_t nodes = 0;
  std::string last;  // the last node's JSON, as sent
  while (body.size() < kKeepScratchBytes + (1 << 20)) {
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
}  // namespace linkfit::kube::json
