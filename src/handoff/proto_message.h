#pragma once

// Between the generated NRI and ttrpc messages (proto/nri_api.proto, proto/ttrpc.proto) and
// linkfit's own values: serialisation that is the same bytes every time (map entries sorted by
// key, as NRI's Go side writes them), and parsing that names the message it failed on.
//
// Thread-safety: pure functions.

#include <string>
#include <string_view>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/message_lite.h>

#include "linkfit/common/result.h"

namespace linkfit::handoff {

inline std::string Serialize(const google::protobuf::MessageLite& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return bytes;
}

template <typename Message>
Result<Message> Parse(std::string_view bytes, const char* what) {
  Message message;
  if (!message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return MakeError(std::string(what) + ": not a valid protobuf message (" +
                     std::to_string(bytes.size()) + " bytes)");
  }
  return message;
}

}  // namespace linkfit::handoff
