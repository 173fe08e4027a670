// The NRI transport's framing, against golden bytes written by hand from the protocol
// descriptions (nri pkg/net/multiplex, containerd/ttrpc PROTOCOL.md and request.proto), not from
// the encoder: a registration request as the plugin sends it, a response with a status, readers
// fed one byte at a time, and every malformed input refused with a message.

#include <gtest/gtest.h>

#include "linkfit/node/nri_frames.h"
#include "linkfit/node/proto_wire.h"
#include "node/node_testing.h"

namespace linkfit::node {
namespace {

using linkfit::testing::Bytes;

// RegisterPluginRequest{plugin_name = "linkfit", plugin_idx = "10"}.
const std::string kRegisterPayload = Bytes({0x0a, 0x07}) + "linkfit" + Bytes({0x12, 0x02}) + "10";
// ttrpc.Request{service, method, payload}: 2 + 28 + 2 + 14 + 2 + 13 = 61 bytes.
const std::string kRequest = Bytes({0x0a, 28}) + "nri.pkg.api.v1alpha1.Runtime" +
                             Bytes({0x12, 14}) + "RegisterPlugin" + Bytes({0x1a, 13}) +
                             kRegisterPayload;
// ttrpc frame: length 61, stream 1 (the client's first), type 1 (request), flags 0.
const std::string kTtrpcFrame = Bytes({0, 0, 0, 61, 0, 0, 0, 1, 1, 0}) + kRequest;
// mux frame: connection 2 (the Runtime service), length 71.
const std::string kMuxFrame = Bytes({0, 0, 0, 2, 0, 0, 0, 71}) + kTtrpcFrame;

TEST(NriFrames, ARegistrationIsByteForByteTheGoldenFrame) {
  TtrpcRequest request;
  request.service = "nri.pkg.api.v1alpha1.Runtime";
  request.method = "RegisterPlugin";
  request.payload = kRegisterPayload;
  EXPECT_EQ(EncodeTtrpcRequest(request), kRequest);
  auto frame = EncodeTtrpcFrame({1, TtrpcType::kRequest, 0, EncodeTtrpcRequest(request)});
  ASSERT_TRUE(frame);
  EXPECT_EQ(*frame, kTtrpcFrame);
  EXPECT_EQ(EncodeMuxFrame(kRuntimeConn, *frame), kMuxFrame);
}

TEST(NriFrames, ReadersReassembleFramesFromAnySplit) {
  const std::string two = kMuxFrame + EncodeMuxFrame(kPluginConn, "xyz");
  MuxReader mux;
  for (char byte : two) {
    ASSERT_TRUE(mux.Feed(std::string_view(&byte, 1)));
  }
  auto first = mux.Next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->conn, kRuntimeConn);
  EXPECT_EQ(first->payload, kTtrpcFrame);
  auto second = mux.Next();
  ASSERT_TRUE(second);
  EXPECT_EQ(*second, (MuxFrame{kPluginConn, "xyz"}));
  EXPECT_FALSE(mux.Next());

  TtrpcReader ttrpc;
  ASSERT_TRUE(ttrpc.Feed(std::string_view(first->payload).substr(0, 5)));
  EXPECT_FALSE(ttrpc.Next());  // a header cut in two waits for the rest
  ASSERT_TRUE(ttrpc.Feed(std::string_view(first->payload).substr(5)));
  auto message = ttrpc.Next();
  ASSERT_TRUE(message);
  EXPECT_EQ(message->stream, 1u);
  EXPECT_EQ(message->type, TtrpcType::kRequest);
  auto request = DecodeTtrpcRequest(message->payload);
  ASSERT_TRUE(request) << request.error().message;
  EXPECT_EQ(request->service, "nri.pkg.api.v1alpha1.Runtime");
  EXPECT_EQ(request->method, "RegisterPlugin");
  EXPECT_EQ(request->payload, kRegisterPayload);
}

TEST(NriFrames, AResponseWithAStatus) {
  // Response{status: Status{code: 5 (NOT_FOUND), message: "no"}}.
  const std::string golden = Bytes({0x0a, 0x06, 0x08, 0x05, 0x12, 0x02}) + "no";
  TtrpcResponse response;
  response.status_code = 5;
  response.status_message = "no";
  EXPECT_EQ(EncodeTtrpcResponse(response), golden);
  auto decoded = DecodeTtrpcResponse(golden);
  ASSERT_TRUE(decoded) << decoded.error().message;
  EXPECT_EQ(*decoded, response);
  // OK with a payload: no status at all, then field 2.
  EXPECT_EQ(EncodeTtrpcResponse({0, "", "ab"}), Bytes({0x12, 0x02}) + "ab");
}

TEST(NriFrames, EnvelopesRoundTripWithMetadataTimeoutsAndNegativeCodes) {
  TtrpcRequest request{"nri.pkg.api.v1alpha1.Plugin",
                       "CreateContainer",
                       std::string("\0\1", 2),
                       2'000'000'000,
                       {{"k", "v"}, {"", "empty key"}}};
  auto decoded = DecodeTtrpcRequest(EncodeTtrpcRequest(request));
  ASSERT_TRUE(decoded) << decoded.error().message;
  EXPECT_EQ(*decoded, request);
  TtrpcResponse response{-3, "negative", ""};
  EXPECT_EQ(DecodeTtrpcResponse(EncodeTtrpcResponse(response)).value(), response);
  // Unknown fields (here 9 and 15) are skipped.
  ProtoWriter extra;
  extra.Bytes(1, "s");
  extra.Bytes(2, "m");
  extra.Varint(9, 7);
  extra.Bytes(15, "later");
  EXPECT_EQ(DecodeTtrpcRequest(extra.data())->method, "m");
}

TEST(NriFrames, MalformedInputIsRefusedWithAReason) {
  MuxReader small(16);
  auto big = small.Feed(Bytes({0, 0, 0, 1, 0, 0, 0, 17}));
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("exceeds the limit of 16"), std::string::npos);
  MuxReader zero;
  EXPECT_FALSE(zero.Feed(Bytes({0, 0, 0, 0, 0, 0, 0, 0})));

  TtrpcReader oversize;
  auto huge = oversize.Feed(Bytes({0, 0x40, 0, 1, 0, 0, 0, 1, 1, 0}));  // 4 MiB + 1
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.error().message.find("exceeds the 4 MiB limit"), std::string::npos);
  TtrpcReader bad_type;
  auto type = bad_type.Feed(Bytes({0, 0, 0, 0, 0, 0, 0, 1, 7, 0}));
  ASSERT_FALSE(type);
  EXPECT_NE(type.error().message.find("message type 7"), std::string::npos);
  EXPECT_FALSE(EncodeTtrpcFrame({1, TtrpcType::kData, 0, std::string(kTtrpcMaxPayload + 1, 'x')}));

  for (const std::string& garbage :
       {Bytes({0x0a, 0x05, 'a'}),                 // length beyond the end
        Bytes({0x08, 0x80}),                      // varint cut short
        Bytes({0x0b}),                            // wire type 3 (group)
        Bytes({0x00, 0x01}),                      // field number 0
        Bytes({0x12, 0x01, 'm'}),                 // no service
        Bytes({0x08, 0x01, 0x12, 0x01, 'm'})}) {  // service as a varint
    EXPECT_FALSE(DecodeTtrpcRequest(garbage)) << ::testing::PrintToString(garbage);
  }
  EXPECT_FALSE(DecodeTtrpcResponse(Bytes({0x0a, 0x03, 0x08})));
}

}  // namespace
}  // namespace linkfit::node
