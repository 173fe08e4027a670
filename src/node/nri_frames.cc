#include "linkfit/node/nri_frames.h"

#include "linkfit/node/proto_wire.h"

namespace linkfit::node {
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
  ProtoWriter out;
  out.BytesIfSet(1, request.service);
  out.BytesIfSet(2, request.method);
  out.BytesIfSet(3, request.payload);
  out.VarintIfSet(4, static_cast<std::uint64_t>(request.timeout_nano));
  for (const auto& [key, value] : request.metadata) {
    ProtoWriter pair;
    pair.BytesIfSet(1, key);
    pair.BytesIfSet(2, value);
    out.Bytes(5, pair.data());
  }
  return out.Take();
}

namespace {

Result<std::string> StringField(const ProtoField& field, const char* what) {
  if (field.wire_type != 2) {
    return MakeError(std::string("ttrpc: ") + what + " is not length-delimited");
  }
  return std::string(field.bytes);
}

}  // namespace

Result<TtrpcRequest> DecodeTtrpcRequest(std::string_view bytes) {
  TtrpcRequest request;
  ProtoReader reader(bytes);
  for (;;) {
    std::optional<ProtoField> field;
    LINKFIT_ASSIGN_OR_RETURN(field, reader.Next());
    if (!field) break;
    switch (field->number) {
      case 1:
        LINKFIT_ASSIGN_OR_RETURN(request.service, StringField(*field, "Request.service"));
        break;
      case 2:
        LINKFIT_ASSIGN_OR_RETURN(request.method, StringField(*field, "Request.method"));
        break;
      case 3:
        LINKFIT_ASSIGN_OR_RETURN(request.payload, StringField(*field, "Request.payload"));
        break;
      case 4:
        if (field->wire_type != 0) return MakeError("ttrpc: Request.timeout_nano is not a varint");
        request.timeout_nano = static_cast<std::int64_t>(field->varint);
        break;
      case 5: {
        if (field->wire_type != 2) return MakeError("ttrpc: Request.metadata is not a message");
        std::pair<std::string, std::string> pair;
        ProtoReader entry(field->bytes);
        for (;;) {
          std::optional<ProtoField> part;
          LINKFIT_ASSIGN_OR_RETURN(part, entry.Next());
          if (!part) break;
          if (part->number == 1) LINKFIT_ASSIGN_OR_RETURN(pair.first, StringField(*part, "key"));
          if (part->number == 2) LINKFIT_ASSIGN_OR_RETURN(pair.second, StringField(*part, "value"));
        }
        request.metadata.push_back(std::move(pair));
        break;
      }
      default:
        break;  // unknown fields are skipped, as protobuf does
    }
  }
  if (request.service.empty() || request.method.empty()) {
    return MakeError("ttrpc: a request without service or method");
  }
  return request;
}

std::string EncodeTtrpcResponse(const TtrpcResponse& response) {
  ProtoWriter out;
  if (response.status_code != 0 || !response.status_message.empty()) {
    ProtoWriter status;
    status.VarintIfSet(1,
                       static_cast<std::uint64_t>(static_cast<std::int64_t>(response.status_code)));
    status.BytesIfSet(2, response.status_message);
    out.Bytes(1, status.data());
  }
  out.BytesIfSet(2, response.payload);
  return out.Take();
}

Result<TtrpcResponse> DecodeTtrpcResponse(std::string_view bytes) {
  TtrpcResponse response;
  ProtoReader reader(bytes);
  for (;;) {
    std::optional<ProtoField> field;
    LINKFIT_ASSIGN_OR_RETURN(field, reader.Next());
    if (!field) break;
    if (field->number == 1) {
      if (field->wire_type != 2) return MakeError("ttrpc: Response.status is not a message");
      ProtoReader status(field->bytes);
      for (;;) {
        std::optional<ProtoField> part;
        LINKFIT_ASSIGN_OR_RETURN(part, status.Next());
        if (!part) break;
        if (part->number == 1 && part->wire_type == 0) {
          response.status_code = static_cast<std::int32_t>(static_cast<std::int64_t>(part->varint));
        } else if (part->number == 2) {
          LINKFIT_ASSIGN_OR_RETURN(response.status_message, StringField(*part, "Status.message"));
        }
      }
    } else if (field->number == 2) {
      LINKFIT_ASSIGN_OR_RETURN(response.payload, StringField(*field, "Response.payload"));
    }
  }
  return response;
}

}  // namespace linkfit::node
