#include "linkfit/common/json_string.h"

#include <cstddef>
#include <cstdint>

namespace linkfit::json {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

// The length of the valid UTF-8 sequence at text[i] (text[i] >= 0x80), or 0 when it is not the
// shortest encoding of a scalar value (what Go's utf8.DecodeRuneInString calls RuneError).
std::size_t ValidSequenceAt(std::string_view text, std::size_t i, std::uint32_t* rune) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
  std::size_t size = 0;
  std::uint32_t value = 0;
  if ((byte(0) & 0xE0) == 0xC0) {
    size = 2;
    value = byte(0) & 0x1Fu;
  } else if ((byte(0) & 0xF0) == 0xE0) {
    size = 3;
    value = byte(0) & 0x0Fu;
  } else if ((byte(0) & 0xF8) == 0xF0) {
    size = 4;
    value = byte(0) & 0x07u;
  } else {
    return 0;
  }
  if (text.size() - i < size) return 0;
  for (std::size_t k = 1; k < size; ++k) {
    if ((byte(k) & 0xC0) != 0x80) return 0;
    value = value << 6 | (byte(k) & 0x3Fu);
  }
  const std::uint32_t shortest = size == 2 ? 0x80 : size == 3 ? 0x800 : 0x10000;
  if (value < shortest || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return 0;
  *rune = value;
  return size;
}

void AppendUnicodeEscape(std::string& out, std::uint32_t code) {
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out += kHexDigits[(code >> shift) & 0xF];
}

}  // namespace

void AppendString(std::string& out, std::string_view text) {
  out.reserve(out.size() + text.size() + 2);
  out += '"';
  std::size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b >= 0x80) {
      std::uint32_t rune = 0;
      const std::size_t size = ValidSequenceAt(text, i, &rune);
      if (size == 0) {
        out += "\\ufffd";
        ++i;
      } else if (rune == 0x2028 || rune == 0x2029) {
        AppendUnicodeEscape(out, rune);
        i += size;
      } else {
        out.append(text, i, size);
        i += size;
      }
      continue;
    }
    ++i;
    switch (b) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '<':
      case '>':
      case '&':
        AppendUnicodeEscape(out, b);
        break;
      default:
        if (b < 0x20) {
          AppendUnicodeEscape(out, b);
        } else {
          out += static_cast<char>(b);
        }
    }
  }
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
