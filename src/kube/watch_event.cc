#include "kube/watch_event.h"

namespace linkfit::kube {

namespace od = simdjson::ondemand;

Result<WatchLine> DecodeWatchLine(std::string_view line, json::Scratch& scratch) {
  json::Ctx c;
  od::document doc;
  od::object event;
  WatchLine decoded;
  od::object object;
  if (!json::Open(c, line, &doc, scratch, "watch event") ||
      doc.get_object().get(event) != simdjson::SUCCESS ||
      event.find_field_unordered("type").get_string().get(decoded.type) != simdjson::SUCCESS ||
      event.find_field_unordered("object").get_object().get(object) != simdjson::SUCCESS ||
      object.raw_json().get(decoded.object_json) != simdjson::SUCCESS) {
    return MakeError("watch event is not {type, object}: " + std::string(line.substr(0, 200)));
  }
  return decoded;
}

// metadata.resourceVersion of an object value (consumed up to its metadata).
std::string ResourceVersionOf(od::object& object) {
  od::value metadata;
  if (object.find_field_unordered("metadata").get(metadata) != simdjson::SUCCESS) return "";
  std::string_view rv;
  if (metadata.find_field_unordered("resourceVersion").get_string().get(rv) != simdjson::SUCCESS) {
    return "";
  }
  return std::string(rv);
}

// Whether a watch ERROR event's Status says the resourceVersion is too old: code 410, or reason
// Expired or Gone (client-go's apierrors.IsResourceExpired / IsGone).
bool StatusIsGone(std::string_view status_json) {
  json::Scratch scratch;
  json::Ctx c;
  od::document doc;
  od::object status;
  if (!json::Open(c, status_json, &doc, scratch, "Status") ||
      doc.get_object().get(status) != simdjson::SUCCESS) {
    return false;
  }
  std::int64_t code = 0;
  std::string_view reason;
  for (auto field : status) {
    std::string_view key;
    od::value value;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS ||
        field.value().get(value) != simdjson::SUCCESS) {
      return false;
    }
    if (key == "code") {
      if (value.get_int64().get(code) != simdjson::SUCCESS) code = 0;
    } else if (key == "reason") {
      if (value.get_string().get(reason) != simdjson::SUCCESS) reason = {};
      if (reason == "Expired" || reason == "Gone") return true;
    }
  }
  return code == 410;
}

// metadata.resourceVersion of an object's JSON, parsed in `scratch` ("" when absent).
std::string ResourceVersionIn(std::string_view object_json, json::Scratch& scratch) {
  json::Ctx c;
  od::document doc;
  od::object object;
  if (!json::Open(c, object_json, &doc, scratch, "object") ||
      doc.get_object().get(object) != simdjson::SUCCESS) {
    return "";
  }
  return ResourceVersionOf(object);
}

}  // namespace linkfit::kube
