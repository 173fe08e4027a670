#include "linkfit/node/proto_wire.h"

#include <optional>

namespace linkfit::node {

void ProtoWriter::RawVarint(std::uint64_t value) {
  while (value >= 0x80) {
    out_.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out_.push_back(static_cast<char>(value));
}

void ProtoWriter::Varint(int field, std::uint64_t value) {
  RawVarint(static_cast<std::uint64_t>(field) << 3);
  RawVarint(value);
}

void ProtoWriter::Bytes(int field, std::string_view bytes) {
  RawVarint((static_cast<std::uint64_t>(field) << 3) | 2u);
  RawVarint(bytes.size());
  out_.append(bytes);
}

Result<std::uint64_t> ProtoReader::ReadVarint() {
  std::uint64_t value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (offset_ >= data_.size()) {
      return MakeError("protobuf: varint cut short at byte " + std::to_string(offset_));
    }
    const auto byte = static_cast<unsigned char>(data_[offset_++]);
    value |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) return value;
  }
  return MakeError("protobuf: varint longer than 10 bytes at byte " + std::to_string(offset_));
}

Result<std::optional<ProtoField>> ProtoReader::Next() {
  if (offset_ >= data_.size()) return std::optional<ProtoField>();
  const std::size_t at = offset_;
  std::uint64_t tag = 0;
  LINKFIT_ASSIGN_OR_RETURN(tag, ReadVarint());
  ProtoField field;
  field.wire_type = static_cast<int>(tag & 7u);
  const std::uint64_t number = tag >> 3;
  if (number == 0 || number > 0x1FFFFFFF) {
    return MakeError("protobuf: field number " + std::to_string(number) + " at byte " +
                     std::to_string(at) + " is not valid");
  }
  field.number = static_cast<int>(number);
  const auto fixed = [&](std::size_t width) -> Result<void> {
    if (data_.size() - offset_ < width) {
      return MakeError("protobuf: fixed field cut short at byte " + std::to_string(at));
    }
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < width; ++i) {
      value |= static_cast<std::uint64_t>(static_cast<unsigned char>(data_[offset_ + i]))
               << (8 * i);
    }
    offset_ += width;
    field.varint = value;
    return {};
  };
  switch (field.wire_type) {
    case 0:
      LINKFIT_ASSIGN_OR_RETURN(field.varint, ReadVarint());
      break;
    case 1:
      if (auto ok = fixed(8); !ok) return tl::unexpected(ok.error());
      break;
    case 5:
      if (auto ok = fixed(4); !ok) return tl::unexpected(ok.error());
      break;
    case 2: {
      std::uint64_t length = 0;
      LINKFIT_ASSIGN_OR_RETURN(length, ReadVarint());
      if (length > data_.size() - offset_) {
        return MakeError("protobuf: field " + std::to_string(field.number) + " at byte " +
                         std::to_string(at) + " claims " + std::to_string(length) + " bytes, " +
                         std::to_string(data_.size() - offset_) + " remain");
      }
      field.bytes = data_.substr(offset_, static_cast<std::size_t>(length));
      offset_ += static_cast<std::size_t>(length);
      break;
    }
    default:
      return MakeError("protobuf: wire type " + std::to_string(field.wire_type) + " at byte " +
                       std::to_string(at) + " is not supported");
  }
  return std::optional<ProtoField>(field);
}

}  // namespace linkfit::node
