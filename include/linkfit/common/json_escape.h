#pragma once

// The bytes a JSON reply escapes, as Go's encoding/json does (control bytes, '"', '\\', '<', '>',
// '&', and every non-ASCII byte, so that U+2028, U+2029 and invalid UTF-8 take the careful path).
// The decoder asks it of the node names it reads, so that a reply can write names that need no
// escape without looking at them again.
//
// Thread-safety: pure function.

#include <string_view>

namespace linkfit::json {

// Whether any byte of `text` would be escaped (or checked) when written as a JSON string.
bool NeedsJsonEscape(std::string_view text);

}  // namespace linkfit::json
