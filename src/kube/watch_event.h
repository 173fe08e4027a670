#pragma once

// Internal to module `kube`: one line of a watch stream as kube-apiserver writes it,
//   {"type":"ADDED"|"MODIFIED"|"DELETED"|"BOOKMARK"|"ERROR","object":{...}}
// and the Status object an ERROR event carries. Pure functions over the line's bytes, so that the
// reflector's loop (reflector_loop.cc) and the fuzzer (test/fuzz/fuzz_watch_stream.cc) decode
// alike.
//
// Thread-safety: pure functions; a Scratch belongs to one thread.

#include <string>
#include <string_view>

#include "kube/json_reader.h"
#include "linkfit/common/result.h"

namespace linkfit::kube {

struct WatchLine {
  std::string_view type;         // as sent; the caller judges unknown types
  std::string_view object_json;  // the object's bytes
};

// Decodes one line; an error names what is wrong (not JSON, no type, no object).
// The views point into `scratch` (or `line`): both must outlive the result.
Result<WatchLine> DecodeWatchLine(std::string_view line, json::Scratch& scratch);

// Whether a watch ERROR event's Status says the resourceVersion is too old: code 410, or reason
// Expired or Gone (client-go's apierrors.IsResourceExpired / IsGone).
bool StatusIsGone(std::string_view status_json);

// metadata.resourceVersion of an object value (consumed up to its metadata); "" when absent.
std::string ResourceVersionOf(simdjson::ondemand::object& object);
// The same of an object's JSON, parsed in `scratch`.
std::string ResourceVersionIn(std::string_view object_json, json::Scratch& scratch);

}  // namespace linkfit::kube
