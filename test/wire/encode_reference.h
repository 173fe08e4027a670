#pragma once

// Plain reference encoders of the extender replies, which follow Go's encoding/json one rune at
// a time (encodeState.string with escapeHTML, utf8.DecodeRuneInString, map keys sorted by bytes
// with the last assignment winning) and share no code with the fast ones in codec_encode.cc; and
// random text rich in the bytes that need care. For codec_encode_property_test.cc.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/wire/codec.h"

namespace linkfit::wire {
namespace {

// ---------------------------------------------------------------------------------------------
// Reference encoders

constexpr std::uint32_t kInvalidRune = 0xFFFFFFFF;

// Decodes the rune at the start of `s` (not empty, s[0] >= 0x80) as utf8.DecodeRuneInString
// does: returns {rune, size}, or {kInvalidRune, 1} for anything but the shortest encoding of a
// scalar value.
std::pair<std::uint32_t, std::size_t> DecodeRune(std::string_view s) {
  const auto byte = [s](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  std::size_t size = 0;
  std::uint32_t rune = 0;
  if ((byte(0) & 0xE0) == 0xC0) {
    size = 2;
    rune = byte(0) & 0x1F;
  } else if ((byte(0) & 0xF0) == 0xE0) {
    size = 3;
    rune = byte(0) & 0x0F;
  } else if ((byte(0) & 0xF8) == 0xF0) {
    size = 4;
    rune = byte(0) & 0x07;
  } else {
    return {kInvalidRune, 1};
  }
  if (s.size() < size) return {kInvalidRune, 1};
  for (std::size_t i = 1; i < size; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return {kInvalidRune, 1};
    rune = rune << 6 | (byte(i) & 0x3F);
  }
  const std::uint32_t shortest = size == 2 ? 0x80 : size == 3 ? 0x800 : 0x10000;
  if (rune < shortest || rune > 0x10FFFF || (rune >= 0xD800 && rune <= 0xDFFF)) {
    return {kInvalidRune, 1};
  }
  return {rune, size};
}

std::string ReferenceJsonString(std::string_view s) {
  static constexpr char kHexDigits[] = "0123456789abcdef";
  std::string out = "\"";
  std::size_t i = 0;
  while (i < s.size()) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      ++i;
      if (b == '"' || b == '\\') {
        out += '\\';
        out += static_cast<char>(b);
      } else if (b == '\n') {
        out += "\\n";
      } else if (b == '\r') {
        out += "\\r";
      } else if (b == '\t') {
        out += "\\t";
      } else if (b < 0x20 || b == '<' || b == '>' || b == '&') {
        out += "\\u00";
        out += kHexDigits[b >> 4];
        out += kHexDigits[b & 0xF];
      } else {
        out += static_cast<char>(b);
      }
      continue;
    }
    const auto decoded = DecodeRune(s.substr(i));
    if (decoded.first == kInvalidRune) {
      out += "\\ufffd";
    } else if (decoded.first == 0x2028) {
      out += "\\u2028";
    } else if (decoded.first == 0x2029) {
      out += "\\u2029";
    } else {
      out += s.substr(i, decoded.second);
    }
    i += decoded.second;
  }
  out += '"';
  return out;
}

// Go compares map keys as byte strings (unsigned).
struct ByteOrder {
  bool operator()(const std::string& a, const std::string& b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
      return static_cast<unsigned char>(x) < static_cast<unsigned char>(y);
    });
  }
};

std::string ReferenceMap(const std::vector<NodeFailure>& failures) {
  std::map<std::string, std::string, ByteOrder> map;
  for (const NodeFailure& failure : failures) {
    map[std::string(failure.node)] = std::string(failure.reason);
  }
  std::string out = "{";
  for (const auto& entry : map) {
    if (out.size() > 1) out += ',';
    out += ReferenceJsonString(entry.first) + ':' + ReferenceJsonString(entry.second);
  }
  return out + "}";
}

std::string ReferenceFilterResult(const FilterResult& result) {
  std::string out = "{\"Nodes\":";
  if (result.list == NodeListKind::kObjects) {
    out += "{\"metadata\":{},\"items\":[";
    for (std::size_t i = 0; i < result.nodes_json.size(); ++i) {
      out += (i > 0 ? "," : "") + std::string(result.nodes_json[i]);
    }
    out += "]}";
  } else {
    out += "null";
  }
  out += ",\"NodeNames\":";
  if (result.list == NodeListKind::kNames) {
    out += '[';
    for (std::size_t i = 0; i < result.node_names.size(); ++i) {
      out += (i > 0 ? "," : "") + ReferenceJsonString(result.node_names[i]);
    }
    out += ']';
  } else {
    out += "null";
  }
  out += ",\"FailedNodes\":" + ReferenceMap(result.failed_nodes);
  out += ",\"FailedAndUnresolvableNodes\":" + ReferenceMap(result.failed_and_unresolvable_nodes);
  return out + ",\"Error\":" + ReferenceJsonString(result.error) + "}";
}

std::string ReferenceHostPriorityList(const std::vector<HostPriority>& priorities) {
  std::string out = "[";
  for (std::size_t i = 0; i < priorities.size(); ++i) {
    out += (i > 0 ? ",{\"Host\":" : "{\"Host\":") + ReferenceJsonString(priorities[i].host) +
           ",\"Score\":" + std::to_string(priorities[i].score) + "}";
  }
  return out + "]";
}

// ---------------------------------------------------------------------------------------------
// Random inputs

// Pieces of text: plain name bytes (most of the time), every kind of byte that needs an escape,
// valid UTF-8 of each length (U+2028/U+2029 and their neighbour U+202A, a real U+FFFD), and
// invalid UTF-8 (bad lead, overlong, surrogate, above U+10FFFF, truncated, lone continuation).
const std::vector<std::string>& SpecialPieces() {
  static const std::vector<std::string> pieces = {"\"",
                                                  "\\",
                                                  "<",
                                                  ">",
                                                  "&",
                                                  "\n",
                                                  "\r",
                                                  "\t",
                                                  std::string(1, '\0'),
                                                  "\x01",
                                                  "\x08",
                                                  "\x1f",
                                                  "\x7f",
                                                  " ",
                                                  "/",
                                                  "'",
                                                  "\xC3\xA9",
                                                  "\xE4\xB8\xAD",
                                                  "\xF0\x9F\x98\x80",
                                                  "\xE2\x80\xA8",
                                                  "\xE2\x80\xA9",
                                                  "\xE2\x80\xAA",
                                                  "\xEF\xBF\xBD",
                                                  "\xFF",
                                                  "\xC0\xAF",
                                                  "\xC1\xBF",
                                                  "\xED\xA0\x80",
                                                  "\xE0\x9F\xBF",
                                                  "\xF4\x90\x80\x80",
                                                  "\xF0\x8F\xBF\xBF",
                                                  "\xF4\x8F\xBF\xBF",
                                                  "\xE2\x82",
                                                  "\xF0\x9F\x98",
                                                  "\xC3",
                                                  "\x80",
                                                  "\xBF"};
  return pieces;
}

class RandomText {
 public:
  explicit RandomText(std::uint32_t seed) : random_(seed) {}

  std::size_t Below(std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(random_);
  }
  bool OneIn(std::size_t n) { return Below(n) == 0; }
  std::mt19937& engine() { return random_; }

  // `length` pieces; a piece needs an escape with probability 1 / clean_odds.
  std::string Text(std::size_t length, std::size_t clean_odds) {
    static constexpr char kNameBytes[] = "abcdefghijklmnopqrstuvwxyz0123456789-.";
    std::string text;
    for (std::size_t i = 0; i < length; ++i) {
      if (Below(clean_odds) == 0) {
        text += SpecialPieces()[Below(SpecialPieces().size())];
      } else {
        text += kNameBytes[Below(sizeof(kNameBytes) - 1)];
      }
    }
    return text;
  }

  // A node name: empty, a copy of an earlier one, a prefix or an extension of one, or a shared
  // prefix plus random text (dense digits as in node-00001..node-04999, or special bytes).
  std::string Name(const std::vector<std::string>& earlier, std::size_t clean_odds) {
    static const std::vector<std::string> prefixes = {"",
                                                      "n",
                                                      "node-",
                                                      "gpu-node-1",
                                                      "ip-10-0-",
                                                      "a-long-common-prefix-of-all-the-nodes-",
                                                      "\xE2\x80\xA8-",
                                                      std::string("nul\0", 4)};
    const std::size_t kind = Below(20);
    if (kind == 0) return "";
    if (!earlier.empty() && kind <= 3) return earlier[Below(earlier.size())];
    if (!earlier.empty() && kind <= 5) {
      const std::string& base = earlier[Below(earlier.size())];
      if (OneIn(2)) return base.substr(0, Below(base.size() + 1));
      return base + (OneIn(3) ? std::string(1, '\0') : Text(1 + Below(3), clean_odds));
    }
    const std::string& prefix = prefixes[Below(prefixes.size())];
    if (kind <= 10) {
      std::string digits = std::to_string(Below(5000));
      return prefix + std::string(5 - std::min<std::size_t>(5, digits.size()), '0') + digits;
    }
    return prefix + Text(Below(25), clean_odds);
  }

 private:
  std::mt19937 random_;
};

}  // namespace
}  // namespace linkfit::wire
