#include "linkfit/common/json_reader.h"
#include "linkfit/common/strings.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "linkfit/common/json_escape.h"
#include "linkfit/common/malloc_settings.h"

namespace linkfit::json {

bool Fail(Ctx& c, std::string message) {
  if (c.error.empty()) c.error = std::move(message);
  return false;
}

bool JsonFail(Ctx& c, std::string_view where, simdjson::error_code code) {
  return Fail(c, "invalid JSON at " + std::string(where) + ": " + simdjson::error_message(code));
}

const char* TypeName(od::json_type type) {
  switch (type) {
    case od::json_type::array:
      return "an array";
    case od::json_type::object:
      return "an object";
    case od::json_type::number:
      return "a number";
    case od::json_type::string:
      return "a string";
    case od::json_type::boolean:
      return "a boolean";
    case od::json_type::null:
      return "null";
  }
  return "an unknown value";
}

bool WrongType(Ctx& c, std::string_view where, std::string_view expected, od::json_type got) {
  return Fail(
      c, std::string(where) + ": expected " + std::string(expected) + ", got " + TypeName(got));
}

std::string Quoted(std::string_view text) {
  std::string out = "\"";
  out.append(text.substr(0, 128));
  if (text.size() > 128) out += "...";
  out += "\"";
  return out;
}

bool IsSpace(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; }

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view TrimSpace(std::string_view s) { return Trim(s); }

// JSON number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
bool IsJsonNumber(std::string_view s) {
  std::size_t i = 0;
  if (i < s.size() && s[i] == '-') ++i;
  if (i >= s.size()) return false;
  if (s[i] == '0') {
    ++i;
  } else if (IsDigit(s[i])) {
    while (i < s.size() && IsDigit(s[i])) ++i;
  } else {
    return false;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    const std::size_t start = i;
    while (i < s.size() && IsDigit(s[i])) ++i;
    if (i == start) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    const std::size_t start = i;
    while (i < s.size() && IsDigit(s[i])) ++i;
    if (i == start) return false;
  }
  return i == s.size();
}

// Parses a JSON integer token as Go's strconv.ParseInt(token, 10, 64) after the decoder's syntax
// check: no fraction, no exponent, in int64 range.
bool ParseJsonInt(std::string_view s, std::int64_t* out) {
  if (!IsJsonNumber(s)) return false;
  bool negative = false;
  std::size_t i = 0;
  if (s[0] == '-') {
    negative = true;
    i = 1;
  }
  std::uint64_t magnitude = 0;
  for (; i < s.size(); ++i) {
    if (!IsDigit(s[i])) return false;
    const auto digit = static_cast<std::uint64_t>(s[i] - '0');
    if (magnitude > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) return false;
    magnitude = magnitude * 10 + digit;
  }
  const auto max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (negative) {
    if (magnitude > max + 1) return false;
    *out = magnitude == max + 1 ? std::numeric_limits<std::int64_t>::min()
                                : -static_cast<std::int64_t>(magnitude);
  } else {
    if (magnitude > max) return false;
    *out = static_cast<std::int64_t>(magnitude);
  }
  return true;
}

// Case-insensitive key match as Go's encoding/json does it for struct fields. `want` is lower
// case ASCII. Besides ASCII case, Go's folding maps U+212A (Kelvin) to 'k' and U+017F to 's'.
bool KeyIs(std::string_view key, std::string_view want) {
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < key.size() && j < want.size()) {
    const auto ch = static_cast<unsigned char>(key[i]);
    if (ch < 0x80) {
      const char lower =
          (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch + ('a' - 'A')) : static_cast<char>(ch);
      if (lower != want[j]) return false;
      ++i;
      ++j;
    } else if (want[j] == 'k' && key.substr(i, 3) == "\xE2\x84\xAA") {
      i += 3;
      ++j;
    } else if (want[j] == 's' && key.substr(i, 2) == "\xC5\xBF") {
      i += 2;
      ++j;
    } else {
      return false;
    }
  }
  return i == key.size() && j == want.size();
}

bool GetType(Ctx& c, od::value& v, od::json_type* type, std::string_view where) {
  if (auto code = v.type().get(*type)) return JsonFail(c, where, code);
  return true;
}

// Validates a scalar token that is not a string (numbers, true, false, null).
bool CheckScalar(Ctx& c, od::value& v, od::json_type type, std::string_view where) {
  const std::string_view token = TrimRight(v.raw_json_token());
  bool ok = false;
  switch (type) {
    case od::json_type::number:
      ok = IsJsonNumber(token);
      break;
    case od::json_type::boolean:
      ok = token == "true" || token == "false";
      break;
    case od::json_type::null:
      ok = token == "null";
      break;
    default:
      break;
  }
  if (!ok) return Fail(c, "invalid JSON at " + std::string(where) + ": bad token " + Quoted(token));
  return true;
}

// Visits (and so validates) a value linkfit does not read.
bool Skip(Ctx& c, od::value v, int depth, std::string_view where) {
  od::json_type type;
  if (!GetType(c, v, &type, where)) return false;
  switch (type) {
    case od::json_type::object: {
      if (depth > kMaxDepth) return Fail(c, std::string(where) + ": nesting too deep");
      od::object object;
      if (auto code = v.get_object().get(object)) return JsonFail(c, where, code);
      for (auto field : object) {
        std::string_view key;
        if (auto code = field.unescaped_key().get(key)) return JsonFail(c, where, code);
        od::value child;
        if (auto code = field.value().get(child)) return JsonFail(c, where, code);
        if (!Skip(c, child, depth + 1, where)) return false;
      }
      return true;
    }
    case od::json_type::array: {
      if (depth > kMaxDepth) return Fail(c, std::string(where) + ": nesting too deep");
      od::array array;
      if (auto code = v.get_array().get(array)) return JsonFail(c, where, code);
      for (auto element : array) {
        od::value child;
        if (auto code = element.get(child)) return JsonFail(c, where, code);
        if (!Skip(c, child, depth + 1, where)) return false;
      }
      return true;
    }
    case od::json_type::string: {
      std::string_view ignored;
      if (auto code = v.get_string().get(ignored)) return JsonFail(c, where, code);
      return true;
    }
    default:
      return CheckScalar(c, v, type, where);
  }
}

std::string Indexed(std::string_view where, std::size_t index) {
  return std::string(where) + "[" + std::to_string(index) + "]";
}

std::string Keyed(std::string_view where, std::string_view key) {
  return std::string(where) + "[" + Quoted(key) + "]";
}

// Reads a string (null reads as ""), copying it.
bool ReadString(Ctx& c, od::value& v, std::string_view where, std::string* out) {
  od::json_type type;
  if (!GetType(c, v, &type, where)) return false;
  if (type == od::json_type::null) {
    out->clear();
    return CheckScalar(c, v, type, where);
  }
  if (type != od::json_type::string) return WrongType(c, where, "a string", type);
  std::string_view text;
  if (auto code = v.get_string().get(text)) return JsonFail(c, where, code);
  out->assign(text);
  return true;
}

// Reads a string without copying: a view into the caller's body when the JSON string has no
// escapes (the common case), otherwise the unescaped text kept in c.owned.
bool ReadStringView(Ctx& c, od::value& v, std::string_view where, std::size_t index,
                    std::string_view* out, bool* escape_free) {
  const std::string_view token = TrimRight(v.raw_json_token());
  auto place = [&]() { return index == kNoIndex ? std::string(where) : Indexed(where, index); };
  if (token.size() < 2 || token.front() != '"' || token.back() != '"') {
    od::json_type type = od::json_type::null;
    if (!GetType(c, v, &type, place())) return false;
    return WrongType(c, place(), "a string", type);
  }
  const std::string_view inner = token.substr(1, token.size() - 2);
  bool plain = true;
  // A string with no byte a reply escapes has no escape and no control byte either: one look
  // answers both. Otherwise (rare for names) the bytes that make it need unescaping.
  if (escape_free == nullptr || NeedsJsonEscape(inner)) {
    if (escape_free != nullptr) *escape_free = false;
    plain = !NeedsUnescaping(inner);
  }
  if (plain) {
    *out = std::string_view(c.body + (inner.data() - c.padded), inner.size());
    return true;
  }
  std::string_view text;
  if (auto code = v.get_string().get(text)) return JsonFail(c, place(), code);
  *out = c.owned->emplace_back(text);
  return true;
}

bool NeedsUnescaping(std::string_view inner) {
  for (const char ch : inner) {
    if (ch == '\\' || static_cast<unsigned char>(ch) < 0x20) return true;
  }
  return false;
}

// Reads an optional integer field (int32 or int64 in Go). A non-integer is a problem, not an
// error, for fields that are only advisory (a pod's priority).
bool ReadInt(Ctx& c, od::value& v, std::string_view where, std::int64_t min, std::int64_t max,
             std::int64_t* out, std::vector<std::string>* problems) {
  od::json_type type;
  if (!GetType(c, v, &type, where)) return false;
  if (type == od::json_type::object || type == od::json_type::array ||
      type == od::json_type::string) {
    if (!Skip(c, v, 0, where)) return false;
  } else if (!CheckScalar(c, v, type, where)) {
    return false;
  }
  if (type == od::json_type::null) {
    *out = 0;
    return true;
  }
  std::int64_t value = 0;
  if (type == od::json_type::number && ParseJsonInt(TrimRight(v.raw_json_token()), &value) &&
      value >= min && value <= max) {
    *out = value;
    return true;
  }
  std::string message = std::string(where) + ": expected an integer in [" + std::to_string(min) +
                        ", " + std::to_string(max) + "], got ";
  message += type == od::json_type::number ? Quoted(TrimRight(v.raw_json_token()))
                                           : std::string(TypeName(type));
  if (problems == nullptr) return Fail(c, std::move(message));
  problems->push_back(std::move(message));
  return true;
}

bool ShrinkFor(Scratch& scratch, std::string_view next) {
  if (next.size() > kKeepScratchBytes / 4) return false;
  if (scratch.buffer.capacity() <= kKeepScratchBytes &&
      scratch.parser.capacity() <= kKeepScratchBytes) {
    return false;
  }
  std::vector<char>().swap(scratch.buffer);
  scratch.parser = od::parser();
  return true;
}

bool OpenPadded(Ctx& c, std::string_view text, std::size_t readable_after, od::document* doc,
                Scratch& scratch, std::string_view what) {
  if (TrimSpace(text).empty()) return Fail(c, "empty " + std::string(what));
  // What a large body grew goes back before a small one is decoded, and the freed memory to the
  // system (the serving malloc thresholds would keep it resident).
  if (ShrinkFor(scratch, text)) ReturnFreeMemory();
  const char* padded = text.data();
  std::size_t capacity = text.size() + readable_after;
  if (readable_after < simdjson::SIMDJSON_PADDING) {  // read from a padded copy
    capacity = text.size() + simdjson::SIMDJSON_PADDING;
    if (scratch.buffer.size() < capacity) scratch.buffer.resize(capacity);
    std::memcpy(scratch.buffer.data(), text.data(), text.size());
    padded = scratch.buffer.data();
    capacity = scratch.buffer.size();
  }
  c.padded = padded;
  c.body = text.data();
  if (auto code = scratch.parser.iterate(padded, text.size(), capacity).get(*doc)) {
    return Fail(c, std::string(what) + " is not valid JSON: " + simdjson::error_message(code));
  }
  return true;
}

bool Open(Ctx& c, std::string_view text, od::document* doc, Scratch& scratch,
          std::string_view what) {
  return OpenPadded(c, text, 0, doc, scratch, what);
}

}  // namespace linkfit::json
