#pragma once

// The NRI transport's two framing layers and the ttrpc envelope, byte for byte as containerd/nri
// and containerd/ttrpc put them on the wire (../shared/design/node-handoff.md §3.1, §6). No C++
// library exists for either; this is linkfit's own implementation.
//
//   mux (nri pkg/net/multiplex)  one unix socket carries several logical connections:
//       [conn id: u32 BE][length: u32 BE][payload: length bytes]
//       conn 1: the Plugin service (the runtime calls, linkfit serves)
//       conn 2: the Runtime service (linkfit calls RegisterPlugin, UpdateContainers)
//   ttrpc (containerd/ttrpc PROTOCOL.md)  on each logical connection:
//       [length: u32 BE][stream id: u32 BE][type: u8][flags: u8][payload: length bytes]
//       type 1 request, 2 response, 3 data; odd stream ids are the client's; length <= 4 MiB
//   envelope (ttrpc request.proto)  the payload of a request or response:
//       Request  {service = 1, method = 2, payload = 3, timeout_nano = 4, metadata = 5}
//       Response {status = 1 (google.rpc.Status {code = 1, message = 2}), payload = 2}
//
// Readers take bytes as they arrive (any split) and hand out whole frames; a header announcing
// more than the limit is an error, and the connection must then be dropped. A ttrpc message may
// arrive split over several mux frames: the ttrpc reader of a connection keeps what it was fed.
//
// Writing: a Go peer reads each connection through ttrpc's 4096-byte bufio.Reader, and a mux
// connection's Read fails (ENOMEM, the runtime drops the plugin) when one frame is longer than
// the buffer it reads into. EncodeMuxMessage therefore frames a ttrpc message exactly as a Go
// peer writes one (EncodeMuxMessage below says how), which every Go reader takes.
//
// Thread-safety: plain values; a reader belongs to one connection's reading thread.

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/result.h"

namespace linkfit::handoff {

inline constexpr std::uint32_t kPluginConn = 1;   // nri.pkg.api.v1alpha1.Plugin
inline constexpr std::uint32_t kRuntimeConn = 2;  // nri.pkg.api.v1alpha1.Runtime
inline constexpr std::size_t kMuxHeaderBytes = 8;
inline constexpr std::size_t kTtrpcHeaderBytes = 10;
inline constexpr std::size_t kTtrpcMaxPayload = 4u << 20;  // ttrpc's messageLengthMax
// mux.go's maxPayloadSize: mux.write splits a longer write into frames of this many bytes.
inline constexpr std::size_t kMuxMaxPayload = kTtrpcHeaderBytes + kTtrpcMaxPayload;
// The size of ttrpc's channel buffers (Go's bufio default): its reader and writer on each mux
// connection.
inline constexpr std::size_t kTtrpcChannelBuffer = 4096;

struct MuxFrame {
  std::uint32_t conn = 0;
  std::string payload;
  friend bool operator==(const MuxFrame&, const MuxFrame&) = default;
};

// One frame, whatever the payload's size: for golden bytes and tests. Writers use
// EncodeMuxMessage.
std::string EncodeMuxFrame(std::uint32_t conn, std::string_view payload);

// One write on a mux connection, framed as mux.write frames it: frames of kMuxMaxPayload bytes
// and a last one with the rest (a single empty frame for an empty write).
std::string EncodeMuxWrite(std::uint32_t conn, std::string_view bytes);

// One ttrpc message (EncodeTtrpcFrame's bytes) as Go's ttrpc channel.send writes it on a mux
// connection: header and payload go through a 4096-byte bufio.Writer, so a message of at most
// 4096 bytes is one frame; a longer one is a frame of its first 4096 bytes (the filled buffer,
// flushed) and then one write of the rest (bufio hands a write longer than its buffer straight
// through when empty; a rest of at most 4096 bytes goes through the buffer: one frame either
// way). A Go reader takes each: the first frame fills its 4096-byte buffer exactly, and the rest
// is read into the message buffer when longer than 4096 bytes, else into the 4096-byte buffer.
std::string EncodeMuxMessage(std::uint32_t conn, std::string_view ttrpc_message);

class MuxReader {
 public:
  explicit MuxReader(std::size_t max_payload = kMuxMaxPayload) : max_payload_(max_payload) {}
  // Appends received bytes; an error (a frame longer than the limit, conn id 0) is final.
  Result<void> Feed(std::string_view bytes);
  std::optional<MuxFrame> Next();

 private:
  std::size_t max_payload_;
  std::string buffer_;
  std::deque<MuxFrame> ready_;
};

enum class TtrpcType : std::uint8_t { kRequest = 1, kResponse = 2, kData = 3 };

struct TtrpcFrame {
  std::uint32_t stream = 0;
  TtrpcType type = TtrpcType::kRequest;
  std::uint8_t flags = 0;
  std::string payload;
  friend bool operator==(const TtrpcFrame&, const TtrpcFrame&) = default;
};

// An error when the payload is longer than ttrpc allows.
Result<std::string> EncodeTtrpcFrame(const TtrpcFrame& frame);

class TtrpcReader {
 public:
  // Appends bytes of one logical connection; an oversized length or an unknown type is final.
  Result<void> Feed(std::string_view bytes);
  std::optional<TtrpcFrame> Next();

 private:
  std::string buffer_;
  std::deque<TtrpcFrame> ready_;
};

struct TtrpcRequest {
  std::string service;  // "nri.pkg.api.v1alpha1.Plugin"
  std::string method;   // "CreateContainer"
  std::string payload;  // the method's request message
  std::int64_t timeout_nano = 0;
  std::vector<std::pair<std::string, std::string>> metadata;
  friend bool operator==(const TtrpcRequest&, const TtrpcRequest&) = default;
};

struct TtrpcResponse {
  std::int32_t status_code = 0;  // google.rpc.Code: 0 OK, 2 UNKNOWN, 3 INVALID_ARGUMENT, ...
  std::string status_message;
  std::string payload;  // the method's response message (when status_code == 0)
  friend bool operator==(const TtrpcResponse&, const TtrpcResponse&) = default;
};

std::string EncodeTtrpcRequest(const TtrpcRequest& request);
Result<TtrpcRequest> DecodeTtrpcRequest(std::string_view bytes);
std::string EncodeTtrpcResponse(const TtrpcResponse& response);
Result<TtrpcResponse> DecodeTtrpcResponse(std::string_view bytes);

}  // namespace linkfit::handoff
