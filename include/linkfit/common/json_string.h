#pragma once

// JSON string literals written as Go's encoding/json Marshal writes them (Go 1.19/1.20, as in
// Kubernetes v1.26), for every JSON linkfit writes off the request hot path: error bodies,
// allocation records, annotations, preemption replies. `"` and `\` as `\"` `\\`; \n \r \t as
// such; other control bytes as \u00xx (lower-case hex, so \b is \u0008); `<` `>` `&` as \u003c
// \u003e \u0026; U+2028/U+2029 as \u2028 \u2029; each byte of invalid UTF-8 as \ufffd;
// everything else, other non-ASCII text included, as it is.
//
// One writer: the word-at-a-time escaper of json_write.h, which the filter and prioritize replies
// use for node names too; a property test holds it to a plain reference of Go's rules.
//
// Thread-safety: pure functions.

#include <string>
#include <string_view>

namespace linkfit::json {

// Appends `text` as a JSON string literal, quotes included.
void AppendString(std::string& out, std::string_view text);

// `text` as a JSON string literal, quotes included.
std::string Quote(std::string_view text);

// {"Error":"<message>"}: the body linkfit sends with a 4xx/5xx reply and a failed bind (the
// extender protocol's shape, also used by the server for its own errors).
std::string ErrorBody(std::string_view message);

}  // namespace linkfit::json
