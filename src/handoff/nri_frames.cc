#include "linkfit/handoff/nri_frames.h"

#include "handoff/proto_message.h"
#include "ttrpc.pb.h"

namespace linkfit::handoff {
namespace {

void PutU32(std::string& out, std::uint32_t value) {
  out.push_back(static_cast<char>((value >> 24) & 0xFF));
  out.push_back(static_cast<char>((value >> 16) & 0xFF));
  out.push_back(static_cast<char>((value >> 8) & 0xFF));
  out.push_back(static_cast<char>(value & 0xFF));
}

std::uint32_t GetU32(std::string_view bytes, std::size_t at) {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at])) << 24 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + 1])) << 16 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + 2])) << 8 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[at + 3]));
}

}  // namespace

std::string EncodeMuxFrame(std::uint32_t conn, std::string_view payload) {
  std::string out;
  out.reserve(kMuxHeaderBytes + payload.size());
  PutU32(out, conn);
  PutU32(out, static_cast<std::uint32_t>(payload.size()));
  out.append(payload);
  return out;
}

std::string EncodeMuxWrite(std::uint32_t conn, std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + kMuxHeaderBytes * (1 + bytes.size() / kMuxMaxPayload));
  do {
    const std::string_view frame = bytes.substr(0, kMuxMaxPayload);
    out += EncodeMuxFrame(conn, frame);
    bytes.remove_prefix(frame.size());
  } while (!bytes.empty());
  return out;
}

std::string EncodeMuxMessage(std::uint32_t conn, std::string_view ttrpc_message) {
  if (ttrpc_message.size() <= kTtrpcChannelBuffer) return EncodeMuxWrite(conn, ttrpc_message);
  return EncodeMuxWrite(conn, ttrpc_message.substr(0, kTtrpcChannelBuffer)) +
         EncodeMuxWrite(conn, ttrpc_message.substr(kTtrpcChannelBuffer));
}

Result<void> MuxReader::Feed(std::string_view bytes) {
  buffer_.append(bytes);
  std::size_t at = 0;
  while (buffer_.size() - at >= kMuxHeaderBytes) {
    const std::uint32_t conn = GetU32(buffer_, at);
    const std::uint32_t length = GetU32(buffer_, at + 4);
    if (conn == 0) return MakeError("NRI mux: frame for connection 0");
    if (length > max_payload_) {
      return MakeError("NRI mux: frame of " + std::to_string(length) + " bytes on connection " +
                       std::to_string(conn) + " exceeds the limit of " +
                       std::to_string(max_payload_));
    }
    if (buffer_.size() - at - kMuxHeaderBytes < length) break;
    ready_.push_back({conn, buffer_.substr(at + kMuxHeaderBytes, length)});
    at += kMuxHeaderBytes + length;
  }
  buffer_.erase(0, at);
  return {};
}

std::optional<MuxFrame> MuxReader::Next() {
  if (ready_.empty()) return std::nullopt;
  MuxFrame frame = std::move(ready_.front());
  ready_.pop_front();
  return frame;
}

Result<std::string> EncodeTtrpcFrame(const TtrpcFrame& frame) {
  if (frame.payload.size() > kTtrpcMaxPayload) {
    return MakeError("ttrpc: a message of " + std::to_string(frame.payload.size()) +
                     " bytes exceeds the 4 MiB limit");
  }
  std::string out;
  out.reserve(kTtrpcHeaderBytes + frame.payload.size());
  PutU32(out, static_cast<std::uint32_t>(frame.payload.size()));
  PutU32(out, frame.stream);
  out.push_back(static_cast<char>(frame.type));
  out.push_back(static_cast<char>(frame.flags));
  out.append(frame.payload);
  return out;
}

Result<void> TtrpcReader::Feed(std::string_view bytes) {
  buffer_.append(bytes);
  std::size_t at = 0;
  while (buffer_.size() - at >= kTtrpcHeaderBytes) {
    const std::uint32_t length = GetU32(buffer_, at);
    const std::uint32_t stream = GetU32(buffer_, at + 4);
    const auto type = static_cast<std::uint8_t>(buffer_[at + 8]);
    if (length > kTtrpcMaxPayload) {
      return MakeError("ttrpc: message of " + std::to_string(length) + " bytes on stream " +
                       std::to_string(stream) + " exceeds the 4 MiB limit");
    }
    if (type < 1 || type > 3) {
      return MakeError("ttrpc: message type " + std::to_string(type) + " on stream " +
                       std::to_string(stream) + " is not request (1), response (2) or data (3)");
    }
    if (buffer_.size() - at - kTtrpcHeaderBytes < length) break;
    TtrpcFrame frame;
    frame.stream = stream;
    frame.type = static_cast<TtrpcType>(type);
    frame.flags = static_cast<std::uint8_t>(buffer_[at + 9]);
    frame.payload = buffer_.substr(at + kTtrpcHeaderBytes, length);
    ready_.push_back(std::move(frame));
    at += kTtrpcHeaderBytes + length;
  }
  buffer_.erase(0, at);
  return {};
}

std::optional<TtrpcFrame> TtrpcReader::Next() {
  if (ready_.empty()) return std::nullopt;
  TtrpcFrame frame = std::move(ready_.front());
  ready_.pop_front();
  return frame;
}

std::string EncodeTtrpcRequest(const TtrpcRequest& request) {
  ttrpc::Request out;
  out.set_service(request.service);
  out.set_method(request.method);
  out.set_payload(request.payload);
  out.set_timeout_nano(request.timeout_nano);
  for (const auto& [key, value] : request.metadata) {
    ttrpc::KeyValue& pair = *out.add_metadata();
    pair.set_key(key);
    pair.set_value(value);
  }
  return Serialize(out);
}

Result<TtrpcRequest> DecodeTtrpcRequest(std::string_view bytes) {
  ttrpc::Request in;
  LINKFIT_ASSIGN_OR_RETURN(in, Parse<ttrpc::Request>(bytes, "ttrpc: Request"));
  if (in.service().empty() || in.method().empty()) {
    return MakeError("ttrpc: a request without service or method");
  }
  TtrpcRequest request{in.service(), in.method(), in.payload(), in.timeout_nano(), {}};
  for (const ttrpc::KeyValue& pair : in.metadata()) {
    request.metadata.emplace_back(pair.key(), pair.value());
  }
  return request;
}

std::string EncodeTtrpcResponse(const TtrpcResponse& response) {
  // The status is always there, also for OK (an empty message), as ttrpc's Go server writes it.
  ttrpc::Response out;
  out.mutable_status()->set_code(response.status_code);
  out.mutable_status()->set_message(response.status_message);
  out.set_payload(response.payload);
  return Serialize(out);
}

Result<TtrpcResponse> DecodeTtrpcResponse(std::string_view bytes) {
  ttrpc::Response in;
  LINKFIT_ASSIGN_OR_RETURN(in, Parse<ttrpc::Response>(bytes, "ttrpc: Response"));
  return TtrpcResponse{in.status().code(), in.status().message(), in.payload()};
}

}  // namespace linkfit::handoff
