// The NRI transport's framing, against golden bytes written by hand from the protocol
// descriptions (nri pkg/net/multiplex, containerd/ttrpc PROTOCOL.md and request.proto), not from
// the encoder: a registration request as the plugin sends it, a response with a status, readers
// fed one byte at a time, and every malformed input refused with a message. Messages above
// ttrpc's 4096-byte channel buffer are framed as a Go peer frames them, checked against a model of
// Go's reader (go_ttrpc_reader.h), and read back from any split.

#include <gtest/gtest.h>

#include "handoff/go_ttrpc_reader.h"
#include "handoff/node_testing.h"
#include "linkfit/handoff/nri_frames.h"

namespace linkfit::handoff {
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
  // OK with a payload: an empty status (ttrpc's Go server sets Status for OK too), then field 2.
  EXPECT_EQ(EncodeTtrpcResponse({0, "", "ab"}), Bytes({0x0a, 0x00, 0x12, 0x02}) + "ab");
  EXPECT_EQ(DecodeTtrpcResponse(Bytes({0x12, 0x02}) + "ab").value(), (TtrpcResponse{0, "", "ab"}));
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
  const std::string extra = Bytes({0x0a, 0x01}) + "s" + Bytes({0x12, 0x01}) + "m" +
                            Bytes({0x48, 0x07, 0x7a, 0x05}) + "later";
  EXPECT_EQ(DecodeTtrpcRequest(extra)->method, "m");
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

// The frames of `bytes`, in order, checking each is for `conn`.
std::vector<std::string> Frames(std::uint32_t conn, const std::string& bytes) {
  MuxReader mux;
  EXPECT_TRUE(mux.Feed(bytes));
  std::vector<std::string> frames;
  while (auto frame = mux.Next()) {
    EXPECT_EQ(frame->conn, conn);
    frames.push_back(std::move(frame->payload));
  }
  return frames;
}

std::vector<std::size_t> Sizes(const std::vector<std::string>& frames) {
  std::vector<std::size_t> sizes;
  for (const std::string& frame : frames) sizes.push_back(frame.size());
  return sizes;
}

// A ttrpc message (header included) of `total` bytes with a recognisable payload.
std::string Message(std::size_t total) {
  std::string payload(total - kTtrpcHeaderBytes, '\0');
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>('a' + i % 26);
  return EncodeTtrpcFrame({3, TtrpcType::kResponse, 0, payload}).value();
}

// What the Go reader model makes of `frames`: the message, or why a Go peer would fail.
Result<std::string> GoRead(std::vector<std::string> frames) {
  std::size_t next = 0;
  linkfit::testing::GoTtrpcReader reader([&]() -> std::optional<std::string> {
    if (next == frames.size()) return std::nullopt;
    return frames[next++];
  });
  auto message = reader.Recv();
  if (!message) return tl::unexpected(message.error());
  if (next != frames.size()) return MakeError("frames left over");
  return EncodeTtrpcFrame(*message).value();
}

TEST(NriFrames, MuxWritesSplitAtTheMuxPayloadLimit) {
  EXPECT_EQ(kMuxMaxPayload, 4194314u);  // mux.go: ttrpcMessageHeaderLength + ttrpcMessageLengthMax
  EXPECT_EQ(EncodeMuxWrite(kPluginConn, ""), Bytes({0, 0, 0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(EncodeMuxWrite(kRuntimeConn, "abc"), Bytes({0, 0, 0, 2, 0, 0, 0, 3}) + "abc");
  const std::string long_write(kMuxMaxPayload + 3, 'w');
  const std::string wire = EncodeMuxWrite(kPluginConn, long_write);
  EXPECT_EQ(wire.substr(0, 8), Bytes({0, 0, 0, 1, 0, 0x40, 0, 0x0a}));
  EXPECT_EQ(wire.substr(8 + kMuxMaxPayload, 8), Bytes({0, 0, 0, 1, 0, 0, 0, 3}));
  EXPECT_EQ(Sizes(Frames(kPluginConn, wire)), (std::vector<std::size_t>{kMuxMaxPayload, 3}));
}

// A ttrpc message is framed as Go's ttrpc channel writes it through its 4096-byte bufio.Writer:
// whole up to 4096 bytes, else 4096 bytes and then the rest in one frame.
TEST(NriFrames, MessagesAreFramedAsAGoPeerFramesThem) {
  EXPECT_EQ(kTtrpcChannelBuffer, 4096u);
  const std::vector<std::pair<std::size_t, std::vector<std::size_t>>> cases = {
      {10, {10}},
      {4095, {4095}},
      {4096, {4096}},
      {4097, {4096, 1}},
      {8192, {4096, 4096}},
      {8193, {4096, 4097}},
      {20000, {4096, 15904}},
      {kTtrpcHeaderBytes + kTtrpcMaxPayload, {4096, kTtrpcHeaderBytes + kTtrpcMaxPayload - 4096}}};
  for (const auto& [total, sizes] : cases) {
    SCOPED_TRACE(total);
    const std::string message = Message(total);
    ASSERT_EQ(message.size(), total);
    const std::vector<std::string> frames =
        Frames(kPluginConn, EncodeMuxMessage(kPluginConn, message));
    EXPECT_EQ(Sizes(frames), sizes);
    auto read = GoRead(frames);
    ASSERT_TRUE(read) << read.error().message;
    EXPECT_EQ(*read, message);
  }
  // The bytes of a 4097-byte message: two headers around the split.
  const std::string message = Message(4097);
  EXPECT_EQ(EncodeMuxMessage(kRuntimeConn, message),
            Bytes({0, 0, 0, 2, 0, 0, 0x10, 0x00}) + message.substr(0, 4096) +
                Bytes({0, 0, 0, 2, 0, 0, 0, 1}) + message.substr(4096));
}

// The Go reader model fails where a Go peer fails: a frame longer than the 4096-byte buffer it is
// read into (the plugin's old single frame per reply), or a frame read straight into a message
// buffer it overflows.
TEST(NriFrames, AGoPeerCannotReadOneFrameAbove4KiB) {
  const std::string message = Message(5000);
  auto one_frame = GoRead({message});
  ASSERT_FALSE(one_frame);
  EXPECT_NE(one_frame.error().message.find("ENOMEM: a mux frame of 5000 bytes read into 4096"),
            std::string::npos)
      << one_frame.error().message;
  // 10000 bytes and the next message's 40 in the frame after the first 4096 bytes: the rest of
  // the first message (5904 bytes) is read straight into its buffer, which the frame overflows.
  const std::string long_message = Message(10000);
  const std::string next_message = Message(40);
  auto straddling =
      GoRead({long_message.substr(0, 4096), long_message.substr(4096) + next_message});
  ASSERT_FALSE(straddling);
  EXPECT_NE(straddling.error().message.find("5944 bytes read into 5904"), std::string::npos)
      << straddling.error().message;
  EXPECT_TRUE(GoRead({long_message.substr(0, 4096), long_message.substr(4096)}));
}

// linkfit reads a message however it is cut into frames: as a Go peer writes it, a byte per
// frame, or frames that end inside one message and start the next.
TEST(NriFrames, AMessageSplitOverSeveralFramesIsReassembled) {
  const std::string big = Message(9000);
  const std::string small = Message(40);
  const std::string both = big + small;
  std::vector<std::string> wires = {EncodeMuxMessage(kPluginConn, big) +
                                    EncodeMuxMessage(kPluginConn, small)};
  std::string bytewise;
  for (char byte : both) bytewise += EncodeMuxFrame(kPluginConn, std::string(1, byte));
  wires.push_back(bytewise);
  wires.push_back(EncodeMuxFrame(kPluginConn, both.substr(0, 8990)) +
                  EncodeMuxFrame(kPluginConn, both.substr(8990, 30)) +
                  EncodeMuxFrame(kPluginConn, both.substr(9020)));
  for (const std::string& wire : wires) {
    MuxReader mux;
    TtrpcReader ttrpc;
    for (std::size_t at = 0; at < wire.size(); at += 1000) {
      ASSERT_TRUE(mux.Feed(std::string_view(wire).substr(at, 1000)));
      while (auto frame = mux.Next()) ASSERT_TRUE(ttrpc.Feed(frame->payload));
    }
    auto first = ttrpc.Next();
    auto second = ttrpc.Next();
    ASSERT_TRUE(first && second);
    EXPECT_EQ(EncodeTtrpcFrame(*first).value(), big);
    EXPECT_EQ(EncodeTtrpcFrame(*second).value(), small);
    EXPECT_FALSE(ttrpc.Next());
  }
}

}  // namespace
}  // namespace linkfit::handoff
