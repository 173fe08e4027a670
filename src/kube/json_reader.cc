#include "kube/json_reader.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "linkfit/kube/quantity.h"

namespace linkfit::kube::json {

bool ReadStringMap(Ctx& c, od::value& v, std::string_view where, StringMap* out) {
  return ForEachField(c, v, where, true, [&](std::string_view key, od::value& child) {
    std::string value;
    if (!ReadString(c, child, where, &value)) return false;
    (*out)[std::string(key)] = std::move(value);
    return true;
  });
}

// Reads a Kubernetes quantity into *milli: a JSON string (trimmed, as Quantity.UnmarshalJSON
// does), a bare number, or null (zero). Returns an Error for a value that is not a quantity.
bool ReadQuantity(Ctx& c, od::value& v, std::string_view where, Result<std::int64_t>* milli) {
  od::json_type type;
  if (!GetType(c, v, &type, where)) return false;
  if (type == od::json_type::string) {
    std::string_view text;
    if (auto code = v.get_string().get(text)) return JsonFail(c, where, code);
    *milli = ParseQuantityMilli(TrimSpace(text));
    return true;
  }
  if (type == od::json_type::object || type == od::json_type::array) {
    if (!Skip(c, v, 0, where)) return false;
  } else if (!CheckScalar(c, v, type, where)) {
    return false;
  }
  if (type == od::json_type::null) {
    *milli = std::int64_t{0};
  } else if (type == od::json_type::number) {
    *milli = ParseQuantityMilli(TrimRight(v.raw_json_token()));
  } else {
    *milli = MakeError(std::string("expected a quantity, got ") + TypeName(type));
  }
  return true;
}

// Reads a ResourceList (resource name -> quantity). A value that is not a quantity becomes a
// problem naming it, and that resource is left out.
bool ReadResources(Ctx& c, od::value& v, std::string_view where, ResourceMap* out,
                   std::vector<std::string>* problems) {
  return ForEachField(c, v, where, true, [&](std::string_view key, od::value& child) {
    Result<std::int64_t> milli = std::int64_t{0};
    if (!ReadQuantity(c, child, where, &milli)) return false;
    if (milli) {
      (*out)[std::string(key)] = *milli;
    } else {
      problems->push_back(Keyed(where, key) + ": " + milli.error().message);
    }
    return true;
  });
}

}  // namespace linkfit::kube::json
