#pragma once

// Reading JSON with simdjson's On-Demand API while validating everything (On-Demand alone
// validates only what is read): the one reader of the extender's requests (wire/) and the API
// server's objects (kube/). Each function returns
// false after recording the first error, as a message naming the place, in the Ctx.
//
// Thread-safety: a Ctx belongs to one decode call on one thread.

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/result.h"

namespace linkfit::json {

namespace od = simdjson::ondemand;

// Kubernetes objects nest a dozen levels at most (managedFields included); Go allows 10,000.
constexpr int kMaxDepth = 512;

// Decoding context: where the padded copy lives (to map views back into the caller's body),
// where escaped names are kept, and the first error.
struct Ctx {
  const char* padded = nullptr;
  const char* body = nullptr;
  std::deque<std::string>* owned = nullptr;
  std::string error;
};

bool Fail(Ctx& c, std::string message);
bool JsonFail(Ctx& c, std::string_view where, simdjson::error_code code);
const char* TypeName(od::json_type type);
bool WrongType(Ctx& c, std::string_view where, std::string_view expected, od::json_type got);
// Returns the text in double quotes, shortened to 128 bytes.
std::string Quoted(std::string_view text);
bool IsSpace(char ch);
std::string_view TrimRight(std::string_view s);
// Trims ASCII white space at both ends, as Go's strings.TrimSpace does for ASCII (linkfit::Trim).
std::string_view TrimSpace(std::string_view s);
// Returns whether `s` matches the JSON number grammar.
bool IsJsonNumber(std::string_view s);
// Parses a JSON integer token as Go decodes into an int64: no fraction, no exponent, in range.
bool ParseJsonInt(std::string_view s, std::int64_t* out);
// Case-insensitive key match as Go's encoding/json does it for struct fields; `want` is lower
// case ASCII. Besides ASCII case, Go folds U+212A (Kelvin) to 'k' and U+017F to 's'.
bool KeyIs(std::string_view key, std::string_view want);
bool GetType(Ctx& c, od::value& v, od::json_type* type, std::string_view where);
// Validates a scalar token that is not a string (numbers, true, false, null).
bool CheckScalar(Ctx& c, od::value& v, od::json_type type, std::string_view where);
// Visits, and so validates, a value that is not read.
bool Skip(Ctx& c, od::value v, int depth, std::string_view where);
std::string Indexed(std::string_view where, std::size_t index);
std::string Keyed(std::string_view where, std::string_view key);
// Reads a string (null reads as ""), copying it.
bool ReadString(Ctx& c, od::value& v, std::string_view where, std::string* out);
// Reads a string without copying: a view into the caller's body when the JSON string has no
// escapes (the common case), otherwise the unescaped text kept in c.owned.
// `where` names the place in messages, followed by "[index]" unless index is kNoIndex (the
// message is only built on failure: this runs once per node name).
inline constexpr std::size_t kNoIndex = static_cast<std::size_t>(-1);
// With `escape_free`, *escape_free is set false unless the string has no byte a JSON reply
// escapes (NeedsJsonEscape), which is then found by the same look that finds it plain.
bool ReadStringView(Ctx& c, od::value& v, std::string_view where, std::size_t index,
                    std::string_view* out, bool* escape_free = nullptr);
// Whether the bytes between a JSON string's quotes hold an escape or a control byte (which JSON
// forbids there): what makes them differ from the string they stand for, or be refused.
bool NeedsUnescaping(std::string_view inner);
// Reads a string as the bytes between its quotes, without looking at them (an escape stays as
// it is): a view into the caller's body (NameCheck::kByCaller). Inline: it runs once per node
// name, and is a few instructions besides the call.
inline bool ReadStringAsSent(Ctx& c, od::value& v, std::string_view where, std::size_t index,
                             std::string_view* out) {
  std::string_view token = v.raw_json_token();  // up to the next comma or bracket
  if (!token.empty() && token.back() != '"') token = TrimRight(token);
  if (token.size() < 2 || token.front() != '"' || token.back() != '"') {
    return ReadStringView(c, v, where, index, out);  // not a string: its message
  }
  *out = std::string_view(c.body + (token.data() + 1 - c.padded), token.size() - 2);
  return true;
}
// Reads an integer in [min, max] (null reads as 0). Anything else is an error when `problems` is
// null, otherwise a problem (for advisory fields such as a pod's priority).
bool ReadInt(Ctx& c, od::value& v, std::string_view where, std::int64_t min, std::int64_t max,
             std::int64_t* out, std::vector<std::string>* problems);

// Iterates an object's fields, calling on_field(key, value) for each; null is accepted as an
// empty object when `null_ok`.
template <typename OnField>
bool ForEachField(Ctx& c, od::value& v, std::string_view where, bool null_ok, OnField&& on_field) {
  od::json_type type;
  if (!GetType(c, v, &type, where)) return false;
  if (type == od::json_type::null && null_ok) return CheckScalar(c, v, type, where);
  if (type != od::json_type::object) return WrongType(c, where, "an object", type);
  od::object object;
  if (auto code = v.get_object().get(object)) return JsonFail(c, where, code);
  for (auto field : object) {
    std::string_view key;
    if (auto code = field.unescaped_key().get(key)) return JsonFail(c, where, code);
    od::value child;
    if (auto code = field.value().get(child)) return JsonFail(c, where, code);
    if (!on_field(key, child)) return false;
  }
  return true;
}

template <typename OnElement>
bool ForEachElement(Ctx& c, od::value& v, std::string_view where, OnElement&& on_element) {
  od::json_type type;
  if (!GetType(c, v, &type, where)) return false;
  if (type == od::json_type::null) return CheckScalar(c, v, type, where);
  if (type != od::json_type::array) return WrongType(c, where, "an array", type);
  od::array array;
  if (auto code = v.get_array().get(array)) return JsonFail(c, where, code);
  std::size_t index = 0;
  for (auto element : array) {
    od::value child;
    if (auto code = element.get(child)) return JsonFail(c, where, code);
    if (!on_element(index, child)) return false;
    ++index;
  }
  return true;
}

// A parser and its padded input buffer (reused across documents; one per thread and purpose, so
// that decoding one document never clobbers another being read on the same thread).
struct Scratch {
  od::parser parser;
  std::vector<char> buffer;
};

// A scratch grown past this (by a body of full Node objects in non-cache mode: tens of MB, and a
// parser several times that) is given back when a body a quarter of this size or smaller comes
// next (ShrinkFor): a scheduler in non-cache mode, whose every body is large, keeps reusing it,
// while a one-off large body does not pin its size in the thread that decoded it. Cache-mode
// bodies (5,000 names: ~150 KB) stay well below it.
inline constexpr std::size_t kKeepScratchBytes = std::size_t{4} << 20;

// Frees `scratch`'s buffer and parser if either holds more than kKeepScratchBytes while `next`
// (the body about to be decoded) is at most a quarter of that; returns whether it did. Open calls
// it. REQUIRES: no document of the parser is in use.
bool ShrinkFor(Scratch& scratch, std::string_view next);

// Starts decoding `text`: gives back what a larger body grew (ShrinkFor, then the freed memory to
// the system), copies `text` into `scratch`'s padded buffer and opens the document. Errors name
// the input as `what` ("request body is not valid JSON: ...").
bool Open(Ctx& c, std::string_view text, od::document* doc, Scratch& scratch,
          std::string_view what = "request body");
// The same for a `text` followed in its buffer by `readable_after` readable bytes (whatever
// they hold): with at least simdjson::SIMDJSON_PADDING of them the document is read where it
// lies, without the copy (a server's request body, ~100 KB at 5,000 names); with fewer, as above.
bool OpenPadded(Ctx& c, std::string_view text, std::size_t readable_after, od::document* doc,
                Scratch& scratch, std::string_view what = "request body");

// Iterates the top-level object's fields, then insists nothing follows it.
template <typename OnField>
bool ReadEnvelope(Ctx& c, od::document& doc, OnField&& on_field,
                  std::string_view what = "request body") {
  od::json_type type;
  if (auto code = doc.type().get(type)) {
    return Fail(c, std::string(what) + " is not valid JSON: " + simdjson::error_message(code));
  }
  if (type != od::json_type::object) {
    return Fail(c, std::string(what) + " must be a JSON object, got " + TypeName(type));
  }
  od::object object;
  if (auto code = doc.get_object().get(object)) return JsonFail(c, "the top level", code);
  for (auto field : object) {
    std::string_view key;
    if (auto code = field.unescaped_key().get(key)) return JsonFail(c, "the top level", code);
    od::value child;
    if (auto code = field.value().get(child)) return JsonFail(c, "the top level", code);
    if (!on_field(key, child)) return false;
  }
  // current_location() is OUT_OF_BOUNDS exactly when no token follows the object.
  if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS) {
    return Fail(c, std::string(what) + " has trailing data after the JSON object");
  }
  return true;
}

}  // namespace linkfit::json
