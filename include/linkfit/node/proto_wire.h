#pragma once

// Protocol Buffers wire format, by hand: enough to write and read the few small envelopes of the
// NRI transport (ttrpc's Request and Response, their google.rpc.Status) without generated code.
// Field numbers come from the callers; unknown fields are skipped, as protobuf does.
//
//   ProtoWriter  appends tags, varints and length-delimited fields to a string
//   ProtoReader  walks the fields of one message: varint (wire type 0), 64-bit (1),
//                length-delimited (2) and 32-bit (5); groups (3, 4) and anything malformed are
//                errors naming the byte offset
//
// Thread-safety: plain values.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "linkfit/common/result.h"

namespace linkfit::node {

class ProtoWriter {
 public:
  void Varint(int field, std::uint64_t value);
  void Bytes(int field, std::string_view bytes);  // also strings and embedded messages
  // proto3 leaves default values out: these write nothing for 0 or "".
  void VarintIfSet(int field, std::uint64_t value) {
    if (value != 0) Varint(field, value);
  }
  void BytesIfSet(int field, std::string_view bytes) {
    if (!bytes.empty()) Bytes(field, bytes);
  }
  const std::string& data() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void RawVarint(std::uint64_t value);
  std::string out_;
};

struct ProtoField {
  int number = 0;
  int wire_type = 0;
  std::uint64_t varint = 0;  // wire types 0, 1, 5 (fixed values widened)
  std::string_view bytes;    // wire type 2: a view into the message being read
};

class ProtoReader {
 public:
  explicit ProtoReader(std::string_view message) : data_(message) {}
  // The next field, nullopt at the end, or an error naming the offset.
  Result<std::optional<ProtoField>> Next();

 private:
  Result<std::uint64_t> ReadVarint();
  std::string_view data_;
  std::size_t offset_ = 0;
};

}  // namespace linkfit::node
