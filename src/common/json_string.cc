#include "linkfit/common/json_string.h"

#include "linkfit/common/json_escape.h"
#include "linkfit/common/json_write.h"

namespace linkfit::json {

bool NeedsJsonEscape(std::string_view text) { return json_write::HasSpecial(text); }

void AppendString(std::string& out, std::string_view text) {
  out.reserve(out.size() + text.size() + 2);
  out += '"';
  json_write::StringOutput sink{out};
  json_write::AppendEscaped(sink, text);
  out += '"';
}

std::string Quote(std::string_view text) {
  std::string out;
  AppendString(out, text);
  return out;
}

std::string ErrorBody(std::string_view message) {
  std::string out;
  out.reserve(message.size() + 12);
  out += "{\"Error\":";
  AppendString(out, message);
  out += '}';
  return out;
}

}  // namespace linkfit::json
