// Encoders of the extender wire format (codec.h): the bytes Go's encoding/json Marshal would
// produce for the same k8s.io/kube-scheduler/extender/v1 values.

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/kube/codec.h"

namespace linkfit::kube {
namespace {

// Bytes that cannot be copied as they are: control characters, `"`, `\`, `<`, `>`, `&` and every
// non-ASCII byte (checked as UTF-8).
constexpr std::array<bool, 256> MakeSpecialTable() {
  std::array<bool, 256> table{};
  for (std::size_t i = 0; i < 256; ++i) {
    table[i] = i < 0x20 || i >= 0x80 || i == '"' || i == '\\' || i == '<' || i == '>' || i == '&';
  }
  return table;
}
constexpr std::array<bool, 256> kSpecial = MakeSpecialTable();

constexpr char kHex[] = "0123456789abcdef";

unsigned char Byte(std::string_view s, std::size_t i) { return static_cast<unsigned char>(s[i]); }

bool InRange(std::string_view s, std::size_t i, unsigned char lo, unsigned char hi) {
  return i < s.size() && Byte(s, i) >= lo && Byte(s, i) <= hi;
}

// Returns the length of the valid UTF-8 sequence at s[i] (a non-ASCII lead byte), or 0 when it
// is invalid, with the same rules as Go's utf8.DecodeRuneInString (no overlong forms, no
// surrogates, nothing above U+10FFFF).
std::size_t Utf8Length(std::string_view s, std::size_t i) {
  const unsigned char lead = Byte(s, i);
  if (lead >= 0xC2 && lead <= 0xDF) return InRange(s, i + 1, 0x80, 0xBF) ? 2 : 0;
  if (lead >= 0xE0 && lead <= 0xEF) {
    const unsigned char lo = lead == 0xE0 ? 0xA0 : 0x80;
    const unsigned char hi = lead == 0xED ? 0x9F : 0xBF;
    return InRange(s, i + 1, lo, hi) && InRange(s, i + 2, 0x80, 0xBF) ? 3 : 0;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    const unsigned char lo = lead == 0xF0 ? 0x90 : 0x80;
    const unsigned char hi = lead == 0xF4 ? 0x8F : 0xBF;
    return InRange(s, i + 1, lo, hi) && InRange(s, i + 2, 0x80, 0xBF) &&
                   InRange(s, i + 3, 0x80, 0xBF)
               ? 4
               : 0;
  }
  return 0;
}

void AppendInt(std::string& out, std::int64_t value) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out.append(buffer, result.ptr);
}

// Writes a Go map[string]string: sorted by key bytes, the last entry winning for a repeated key.
void AppendFailures(std::string& out, const std::vector<NodeFailure>& failures) {
  out += '{';
  std::vector<const NodeFailure*> sorted;
  sorted.reserve(failures.size());
  for (const NodeFailure& failure : failures) sorted.push_back(&failure);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const NodeFailure* a, const NodeFailure* b) { return a->node < b->node; });
  bool first = true;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (i + 1 < sorted.size() && sorted[i + 1]->node == sorted[i]->node) continue;
    if (!first) out += ',';
    first = false;
    AppendJsonString(out, sorted[i]->node);
    out += ':';
    AppendJsonString(out, sorted[i]->reason);
  }
  out += '}';
}

}  // namespace

void AppendJsonString(std::string& out, std::string_view text) {
  out += '"';
  std::size_t run = 0;  // start of the pending run of bytes copied as they are
  std::size_t i = 0;
  while (i < text.size()) {
    const unsigned char ch = Byte(text, i);
    if (!kSpecial[ch]) {
      ++i;
      continue;
    }
    std::size_t length = 1;
    if (ch >= 0x80) {
      length = Utf8Length(text, i);
      // Valid UTF-8 is copied, except U+2028 and U+2029 (E2 80 A8 / E2 80 A9).
      if (length > 0 && !(length == 3 && ch == 0xE2 && Byte(text, i + 1) == 0x80 &&
                          (Byte(text, i + 2) == 0xA8 || Byte(text, i + 2) == 0xA9))) {
        i += length;
        continue;
      }
    }
    out.append(text.data() + run, i - run);
    if (length == 0) {
      out += "\\ufffd";
      length = 1;
    } else if (length == 3) {
      out += Byte(text, i + 2) == 0xA8 ? "\\u2028" : "\\u2029";
    } else if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '\t') {
      out += "\\t";
    } else {
      out += "\\u00";
      out += kHex[ch >> 4];
      out += kHex[ch & 0xF];
    }
    i += length;
    run = i;
  }
  out.append(text.data() + run, text.size() - run);
  out += '"';
}

std::string EncodeErrorBody(std::string_view message) {
  std::string out;
  out.reserve(message.size() + 16);
  out += "{\"Error\":";
  AppendJsonString(out, message);
  out += '}';
  return out;
}

NodeListKind ReplyListFor(const ExtenderArgs& args) {
  if (args.node_names_given) return NodeListKind::kNames;
  if (args.nodes_given) return NodeListKind::kObjects;
  return NodeListKind::kNone;
}

std::string EncodeFilterResult(const FilterResult& result) {
  std::size_t estimate = 128 + result.error.size();
  for (std::string_view name : result.node_names) estimate += name.size() + 3;
  for (std::string_view node : result.nodes_json) estimate += node.size() + 1;
  for (const NodeFailure& f : result.failed_nodes) estimate += f.node.size() + f.reason.size() + 6;
  for (const NodeFailure& f : result.failed_and_unresolvable_nodes) {
    estimate += f.node.size() + f.reason.size() + 6;
  }
  std::string out;
  out.reserve(estimate);
  out += "{\"Nodes\":";
  if (result.list == NodeListKind::kObjects) {
    out += "{\"metadata\":{},\"items\":[";
    for (std::size_t i = 0; i < result.nodes_json.size(); ++i) {
      if (i > 0) out += ',';
      out += result.nodes_json[i];
    }
    out += "]}";
  } else {
    out += "null";
  }
  out += ",\"NodeNames\":";
  if (result.list == NodeListKind::kNames) {
    out += '[';
    for (std::size_t i = 0; i < result.node_names.size(); ++i) {
      if (i > 0) out += ',';
      AppendJsonString(out, result.node_names[i]);
    }
    out += ']';
  } else {
    out += "null";
  }
  out += ",\"FailedNodes\":";
  AppendFailures(out, result.failed_nodes);
  out += ",\"FailedAndUnresolvableNodes\":";
  AppendFailures(out, result.failed_and_unresolvable_nodes);
  out += ",\"Error\":";
  AppendJsonString(out, result.error);
  out += '}';
  return out;
}

std::string EncodeFilterError(std::string_view message) {
  FilterResult result;
  result.list = NodeListKind::kNone;
  result.error.assign(message);
  return EncodeFilterResult(result);
}

std::string EncodeHostPriorityList(const std::vector<HostPriority>& priorities) {
  std::string out;
  out.reserve(2 + priorities.size() * 40);
  out += '[';
  for (std::size_t i = 0; i < priorities.size(); ++i) {
    if (i > 0) out += ',';
    out += "{\"Host\":";
    AppendJsonString(out, priorities[i].host);
    out += ",\"Score\":";
    AppendInt(out, priorities[i].score);
    out += '}';
  }
  out += ']';
  return out;
}

std::string EncodeBindingResult(std::string_view error) { return EncodeErrorBody(error); }

std::string EncodePreemptionResult(const std::vector<NodeVictims>& nodes) {
  std::vector<const NodeVictims*> sorted;
  sorted.reserve(nodes.size());
  for (const NodeVictims& node : nodes) sorted.push_back(&node);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const NodeVictims* a, const NodeVictims* b) { return a->node < b->node; });
  std::string out = "{\"NodeNameToMetaVictims\":{";
  bool first = true;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (i + 1 < sorted.size() && sorted[i + 1]->node == sorted[i]->node) continue;
    if (!first) out += ',';
    first = false;
    AppendJsonString(out, sorted[i]->node);
    out += ":{\"Pods\":[";
    for (std::size_t j = 0; j < sorted[i]->pods.size(); ++j) {
      if (j > 0) out += ',';
      out += "{\"UID\":";
      AppendJsonString(out, sorted[i]->pods[j].uid);
      out += '}';
    }
    out += "],\"NumPDBViolations\":";
    AppendInt(out, sorted[i]->num_pdb_violations);
    out += '}';
  }
  out += "}}";
  return out;
}

}  // namespace linkfit::kube
