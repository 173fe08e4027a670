#include "linkfit/kube/quantity.h"
#include "linkfit/common/strings.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace linkfit::kube {
namespace {

__extension__ typedef unsigned __int128 U128;  // NOLINT: GCC extension, exact here

constexpr std::int64_t kMaxExponent = std::numeric_limits<std::int32_t>::max();
constexpr U128 kLimit = static_cast<U128>(std::numeric_limits<std::int64_t>::max());

// A quantity split into its parts: value = sign * (int_digits.frac_digits) * 10^exp10 * 2^exp2.
struct Parts {
  bool negative = false;
  std::string_view int_digits;
  std::string_view frac_digits;
  std::int64_t exp10 = 0;
  int exp2 = 0;
};

// Quotes the offending text for an error message, shortened so that a hostile value cannot make
// a reply huge.
std::string Describe(std::string_view text) {
  constexpr std::size_t kMaxShown = 64;
  std::string out = "invalid quantity \"";
  if (text.size() > kMaxShown) {
    out.append(text.substr(0, kMaxShown));
    out += "...";
  } else {
    out.append(text);
  }
  out += "\"";
  return out;
}

std::size_t DigitRun(std::string_view text, std::size_t pos) {
  std::size_t end = pos;
  while (end < text.size() && IsDigit(text[end])) ++end;
  return end;
}

// Interprets a suffix the way apimachinery's suffixer does: decimal SI, binary SI, or a decimal
// exponent ("e3", "E-2", "e+7").
Result<Parts> ApplySuffix(Parts parts, std::string_view text, std::string_view suffix) {
  struct Named {
    std::string_view name;
    int exp10;
    int exp2;
  };
  static constexpr Named kSuffixes[] = {
      {"", 0, 0},    {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},   {"M", 6, 0},
      {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},  {"Ki", 0, 10}, {"Mi", 0, 20},
      {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60},
  };
  for (const Named& named : kSuffixes) {
    if (suffix == named.name) {
      parts.exp10 = named.exp10;
      parts.exp2 = named.exp2;
      return parts;
    }
  }
  if (suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    std::size_t pos = 1;
    bool negative_exponent = false;
    if (suffix[pos] == '+' || suffix[pos] == '-') {
      negative_exponent = suffix[pos] == '-';
      ++pos;
    }
    const std::size_t end = DigitRun(suffix, pos);
    if (end == pos || end != suffix.size()) {
      return MakeError(Describe(text) + ": malformed exponent \"" + std::string(suffix) + "\"");
    }
    std::int64_t exponent = 0;
    for (std::size_t i = pos; i < end; ++i) {
      exponent = exponent * 10 + (suffix[i] - '0');
      if (exponent > kMaxExponent) {
        return MakeError(Describe(text) + ": exponent out of range");
      }
    }
    parts.exp10 = negative_exponent ? -exponent : exponent;
    return parts;
  }
  return MakeError(Describe(text) + ": unknown suffix \"" + std::string(suffix) +
                   "\" (expected one of n u m k M G T P E Ki Mi Gi Ti Pi Ei or an exponent)");
}

Result<Parts> Split(std::string_view text) {
  if (text.empty()) return MakeError("invalid quantity \"\": empty");
  Parts parts;
  std::size_t pos = 0;
  if (text[0] == '+' || text[0] == '-') {
    parts.negative = text[0] == '-';
    ++pos;
  }
  std::size_t end = DigitRun(text, pos);
  parts.int_digits = text.substr(pos, end - pos);
  pos = end;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    end = DigitRun(text, pos);
    parts.frac_digits = text.substr(pos, end - pos);
    pos = end;
  }
  if (parts.int_digits.empty() && parts.frac_digits.empty()) {
    return MakeError(Describe(text) + ": no digits");
  }
  return ApplySuffix(parts, text, text.substr(pos));
}

// Returns parts * 10^extra_exp10 as an int64, rounded away from zero.
Result<std::int64_t> Scale(const Parts& parts, int extra_exp10, std::string_view text) {
  // The significant digits, int_digits followed by frac_digits, without leading and trailing
  // zeros; each trailing zero dropped raises the exponent by one.
  const std::size_t int_size = parts.int_digits.size();
  const std::size_t total = int_size + parts.frac_digits.size();
  auto digit_at = [&](std::size_t i) -> unsigned {
    const char c = i < int_size ? parts.int_digits[i] : parts.frac_digits[i - int_size];
    return static_cast<unsigned>(c - '0');
  };
  std::size_t first = 0;
  while (first < total && digit_at(first) == 0) ++first;
  if (first == total) return std::int64_t{0};
  std::size_t last = total;  // one past the last non-zero digit
  while (digit_at(last - 1) == 0) --last;

  const auto n = static_cast<std::int64_t>(last - first);
  const std::int64_t exponent = parts.exp10 + extra_exp10 -
                                static_cast<std::int64_t>(parts.frac_digits.size()) +
                                static_cast<std::int64_t>(total - last);
  const U128 multiplier = static_cast<U128>(1) << parts.exp2;
  auto overflow = [&]() { return MakeError(Describe(text) + ": out of the int64 range"); };

  // The integer part: the first n + exponent digits (then exponent more zeros if positive).
  // It is at least 10^(n + exponent - 1), so 20 or more digits can never fit.
  if (n + exponent >= 20) return overflow();
  U128 integer = 0;
  const std::int64_t integer_digits = n + exponent;
  for (std::int64_t i = 0; i < integer_digits; ++i) {
    const unsigned digit = i < n ? digit_at(first + static_cast<std::size_t>(i)) : 0U;
    integer = integer * 10 + digit;
  }
  // The fraction, 0.f1f2...fk, times the multiplier: computed from the last digit up as
  // x = floor((f_i * multiplier + x) / 10), which is exact, remembering any remainder.
  U128 fraction = 0;
  bool inexact = false;
  if (exponent < 0) {
    const std::int64_t frac_len = -exponent;
    const std::int64_t from = integer_digits > 0 ? integer_digits : 0;
    for (std::int64_t i = n - 1; i >= from; --i) {
      const U128 v = digit_at(first + static_cast<std::size_t>(i)) * multiplier + fraction;
      inexact = inexact || v % 10 != 0;
      fraction = v / 10;
    }
    // Leading zeros of the fraction (when the number is below 1): each divides by ten again.
    for (std::int64_t zeros = frac_len - (n - from); zeros > 0 && fraction != 0; --zeros) {
      inexact = inexact || fraction % 10 != 0;
      fraction /= 10;
    }
  }
  const U128 magnitude = integer * multiplier + fraction + (inexact ? 1 : 0);
  if (magnitude > kLimit) return overflow();
  const auto value = static_cast<std::int64_t>(magnitude);
  return parts.negative ? -value : value;
}

}  // namespace

Result<std::int64_t> ParseQuantityMilli(std::string_view text) {
  Result<Parts> parts = Split(text);
  if (!parts) return tl::unexpected(parts.error());
  return Scale(*parts, 3, text);
}

Result<std::int64_t> ParseQuantityValue(std::string_view text) {
  Result<Parts> parts = Split(text);
  if (!parts) return tl::unexpected(parts.error());
  return Scale(*parts, 0, text);
}

}  // namespace linkfit::kube
