#pragma once

// The bytes a JSON reply escapes, as Go's encoding/json does (control bytes, '"', '\\', '<', '>',
// '&', and every non-ASCII byte, so that U+2028, U+2029 and invalid UTF-8 take the careful path).
// The decoder asks it of the node names it reads, so that a reply can write names that need no
// escape without looking at them again; the handler asks it of the bytes of every name linkfit
// knows (state::NameIndex::name_bytes), to trust the names it recognises by their bytes.
//
// Thread-safety: pure functions and constants.

#include <string_view>

#include "linkfit/common/byte_set.h"

namespace linkfit::json {

// Whether a JSON string written the way Go's encoding/json writes it needs a look at `byte`:
// control bytes, '"', '\\', '<', '>' and '&' are escaped, and every non-ASCII byte is checked as
// UTF-8 (U+2028 and U+2029 are escaped, invalid bytes replaced). The one definition of the set:
// the writer's tables (json_write.h) and kBytesTheWriterLooksAt are made from it.
constexpr bool JsonWriterLooksAt(unsigned char byte) {
  return byte < 0x20 || byte >= 0x80 || byte == '"' || byte == '\\' || byte == '<' || byte == '>' ||
         byte == '&';
}

// JsonWriterLooksAt as a set.
inline constexpr ByteSet kBytesTheWriterLooksAt = ByteSetOf(JsonWriterLooksAt);

// Whether any byte of `text` would be escaped (or checked) when written as a JSON string.
bool NeedsJsonEscape(std::string_view text);

}  // namespace linkfit::json
