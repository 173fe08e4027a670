// The fake API server's readers and writers of Go's formats, as kube-apiserver applies them:
// strconv.Quote, time.ParseDuration (?timeout=), strconv.ParseUint (resourceVersion
// preconditions) and metav1.MicroTime (a Lease's times). Declared in fake_api_server_internal.h.

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>

#include "kube/fake_api_server_internal.h"

namespace linkfit::testing::fake_internal {
namespace {

bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }

int DaysIn(int month, int year) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
  return month == 2 && leap ? 29 : kDays[month - 1];
}

constexpr char kMicroTimeLayout[] = "2006-01-02T15:04:05.000000Z07:00";  // metav1.RFC3339Micro

}  // namespace

std::string GoQuote(const std::string& text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (const char byte : text) {
    const auto c = static_cast<unsigned char>(byte);
    if (c >= 0x80 || c < 0x20) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += byte;
  }
  return out + "\"";
}

Result<std::chrono::nanoseconds> ParseGoDuration(const std::string& text) {
  // time.ParseDuration: [-+]?([0-9]*(\.[0-9]*)?[a-z]+)+, "0" alone needs no unit.
  static const std::map<std::string, uint64_t> kUnits = {
      {"ns", 1},       {"us", 1000},      {"\xc2\xb5s", 1000}, {"\xce\xbcs", 1000},
      {"ms", 1000000}, {"s", 1000000000}, {"m", 60000000000},  {"h", 3600000000000}};
  constexpr uint64_t kLimit = uint64_t{1} << 63;
  const std::string quoted = GoQuote(text);
  const auto invalid = [&] { return MakeError("time: invalid duration " + quoted); };
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  std::string_view rest = text;
  bool negative = false;
  if (!rest.empty() && (rest[0] == '-' || rest[0] == '+')) {
    negative = rest[0] == '-';
    rest.remove_prefix(1);
  }
  if (rest == "0") return std::chrono::nanoseconds(0);
  if (rest.empty()) return invalid();
  uint64_t total = 0;
  while (!rest.empty()) {
    if (rest[0] != '.' && !digit(rest[0])) return invalid();
    uint64_t whole = 0;
    size_t at = 0;
    for (; at < rest.size() && digit(rest[at]); ++at) {
      if (whole > kLimit / 10) return invalid();
      whole = whole * 10 + static_cast<uint64_t>(rest[at] - '0');
      if (whole > kLimit) return invalid();
    }
    const bool before_point = at > 0;
    rest.remove_prefix(at);
    uint64_t fraction = 0;
    double scale = 1;
    bool after_point = false;
    if (!rest.empty() && rest[0] == '.') {
      rest.remove_prefix(1);
      bool overflow = false;
      for (at = 0; at < rest.size() && digit(rest[at]); ++at) {
        if (overflow || fraction > (kLimit - 1) / 10) {
          overflow = true;
          continue;
        }
        const uint64_t next = fraction * 10 + static_cast<uint64_t>(rest[at] - '0');
        if (next > kLimit) {
          overflow = true;
          continue;
        }
        fraction = next;
        scale *= 10;
      }
      after_point = at > 0;
      rest.remove_prefix(at);
    }
    if (!before_point && !after_point) return invalid();
    at = 0;
    while (at < rest.size() && rest[at] != '.' && !digit(rest[at])) ++at;
    if (at == 0) return MakeError("time: missing unit in duration " + quoted);
    const std::string unit(rest.substr(0, at));
    rest.remove_prefix(at);
    const auto found = kUnits.find(unit);
    if (found == kUnits.end()) {
      return MakeError("time: unknown unit " + GoQuote(unit) + " in duration " + quoted);
    }
    if (whole > kLimit / found->second) return invalid();
    whole *= found->second;
    if (fraction > 0) {
      whole += static_cast<uint64_t>(static_cast<double>(fraction) *
                                     (static_cast<double>(found->second) / scale));
      if (whole > kLimit) return invalid();
    }
    total += whole;
    if (total > kLimit) return invalid();
  }
  if (negative) {
    return std::chrono::nanoseconds(total == kLimit ? std::numeric_limits<int64_t>::min()
                                                    : -static_cast<int64_t>(total));
  }
  if (total > kLimit - 1) return invalid();
  return std::chrono::nanoseconds(static_cast<int64_t>(total));
}

Result<uint64_t> ParseGoUint(const std::string& text) {
  const std::string prefix = "strconv.ParseUint: parsing " + GoQuote(text) + ": ";
  if (text.empty() || !std::all_of(text.begin(), text.end(), IsAsciiDigit)) {
    return MakeError(prefix + "invalid syntax");
  }
  uint64_t value = 0;
  for (char c : text) {
    const auto digit = static_cast<uint64_t>(c - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
      return MakeError(prefix + "value out of range");
    }
    value = value * 10 + digit;
  }
  return value;
}

Result<std::string> ParseMicroTime(const std::string& text) {
  const std::string parsing = "parsing time " + GoQuote(text);
  std::string_view value = text;
  const auto cannot = [&](std::string_view element) {
    return MakeError(parsing + " as \"" + kMicroTimeLayout + "\": cannot parse " +
                     GoQuote(std::string(value)) + " as " + GoQuote(std::string(element)));
  };
  const auto out_of_range = [&](const char* what) {
    return MakeError(parsing + ": " + what + " out of range");
  };
  // Reads `count` digits (Go's getnum with fixed, or atoi of a fixed width).
  const auto number = [&](size_t count, int* out) {
    if (value.size() < count || !std::all_of(value.begin(), value.begin() + count, IsAsciiDigit)) {
      return false;
    }
    *out = 0;
    for (size_t i = 0; i < count; ++i) *out = *out * 10 + (value[i] - '0');
    value.remove_prefix(count);
    return true;
  };
  const auto literal = [&](char c) {
    if (value.empty() || value[0] != c) return false;
    value.remove_prefix(1);
    return true;
  };
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0, micros = 0;
  if (!number(4, &year)) return cannot("2006");
  if (!literal('-')) return cannot("-");
  if (!number(2, &month)) return cannot("01");
  if (month < 1 || month > 12) return out_of_range("month");
  if (!literal('-')) return cannot("-");
  if (!number(2, &day)) return cannot("02");
  if (!literal('T')) return cannot("T");
  // "15" takes one or two digits.
  if (!number(value.size() >= 2 && IsAsciiDigit(value[1]) ? 2 : 1, &hour)) return cannot("15");
  if (hour >= 24) return out_of_range("hour");
  if (!literal(':')) return cannot(":");
  if (!number(2, &minute)) return cannot("04");
  if (minute >= 60) return out_of_range("minute");
  if (!literal(':')) return cannot(":");
  if (!number(2, &second)) return cannot("05");
  if (second >= 60) return out_of_range("second");
  if (value.size() < 7 || (value[0] != '.' && value[0] != ',') ||
      !std::all_of(value.begin() + 1, value.begin() + 7, IsAsciiDigit)) {
    return cannot(".000000");
  }
  value.remove_prefix(1);
  number(6, &micros);
  int offset_seconds = 0;
  if (!value.empty() && value[0] == 'Z') {
    value.remove_prefix(1);
  } else {
    if (value.size() < 6 || value[3] != ':' || (value[0] != '+' && value[0] != '-') ||
        !IsAsciiDigit(value[1]) || !IsAsciiDigit(value[2]) || !IsAsciiDigit(value[4]) ||
        !IsAsciiDigit(value[5])) {
      return cannot("Z07:00");
    }
    const int offset_hours = (value[1] - '0') * 10 + (value[2] - '0');
    const int offset_minutes = (value[4] - '0') * 10 + (value[5] - '0');
    if (offset_hours > 24) return out_of_range("time zone offset hour");
    if (offset_minutes > 60) return out_of_range("time zone offset minute");
    offset_seconds = (offset_hours * 60 + offset_minutes) * 60 * (value[0] == '-' ? -1 : 1);
    value.remove_prefix(6);
  }
  if (!value.empty()) return MakeError(parsing + ": extra text: " + GoQuote(std::string(value)));
  if (day < 1 || day > DaysIn(month, year)) return out_of_range("day");

  std::tm local{};
  local.tm_year = year - 1900;
  local.tm_mon = month - 1;
  local.tm_mday = day;
  local.tm_hour = hour;
  local.tm_min = minute;
  local.tm_sec = second;
  const std::time_t utc_seconds = timegm(&local) - offset_seconds;
  std::tm utc{};
  gmtime_r(&utc_seconds, &utc);
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, micros);
  return std::string(buffer);
}

}  // namespace linkfit::testing::fake_internal
