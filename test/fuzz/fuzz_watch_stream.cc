// libFuzzer target: a watch stream as the API server (or anything that answers in its place)
// writes it, line by line: each line is decoded as the reflector decodes it (kube/watch_event.h),
// an ERROR's Status is read for 410 and its message, and every other object is decoded as a pod
// and as a node, as the stores do, with its resourceVersion.
//
// Invariants: nothing crashes; a line that decodes names a type and an object that is itself a
// JSON object (it starts with '{').

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kube/watch_event.h"
#include "linkfit/kube/api_client.h"
#include "linkfit/kube/object_json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace linkfit::kube;
  std::string_view stream(reinterpret_cast<const char*>(data), size);
  json::Scratch line_scratch;
  json::Scratch rv_scratch;
  while (!stream.empty()) {
    const std::size_t newline = stream.find('\n');
    const std::string_view line = stream.substr(0, newline);
    stream.remove_prefix(newline == std::string_view::npos ? stream.size() : newline + 1);
    const auto event = DecodeWatchLine(line, line_scratch);
    if (!event) continue;
    if (event->object_json.empty() || event->object_json.front() != '{') std::abort();
    if (event->type == "ERROR") {
      (void)StatusIsGone(event->object_json);
      if (StatusMessage(event->object_json).empty()) std::abort();
      continue;
    }
    (void)ResourceVersionIn(event->object_json, rv_scratch);
    (void)DecodePod(event->object_json);
    (void)DecodeNode(event->object_json);
  }
  return 0;
}
