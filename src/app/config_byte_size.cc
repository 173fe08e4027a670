// ParseByteSize (config.h): the config's sizes, in bytes or with a binary (Ki..Ti) or decimal
// (k..T) suffix as Kubernetes quantities write them; no fractions, no exponents.

#include <charconv>
#include <limits>

#include "linkfit/app/config.h"
#include "linkfit/common/strings.h"

namespace linkfit::app {

Result<std::uint64_t> ParseByteSize(std::string_view text) {
  const std::string_view trimmed = Trim(text);
  std::size_t digits = 0;
  while (digits < trimmed.size() && trimmed[digits] >= '0' && trimmed[digits] <= '9') ++digits;
  const std::string_view number = trimmed.substr(0, digits);
  const std::string_view suffix = trimmed.substr(digits);
  const std::string message =
      "expected a size such as 65536, 64Mi or 1G, got " + QuoteForMessage(text);
  if (number.empty()) return MakeError(message);
  std::uint64_t value = 0;
  const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || ptr != number.data() + number.size()) return MakeError(message);
  struct Unit {
    std::string_view suffix;
    std::uint64_t factor;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},
      {"Ki", std::uint64_t{1} << 10},
      {"Mi", std::uint64_t{1} << 20},
      {"Gi", std::uint64_t{1} << 30},
      {"Ti", std::uint64_t{1} << 40},
      {"k", 1000},
      {"M", 1000 * 1000},
      {"G", 1000 * 1000 * 1000},
      {"T", std::uint64_t{1000} * 1000 * 1000 * 1000},
  };
  for (const Unit& unit : kUnits) {
    if (suffix != unit.suffix) continue;
    if (value > std::numeric_limits<std::uint64_t>::max() / unit.factor) {
      return MakeError("size " + QuoteForMessage(text) + " is too large");
    }
    return value * unit.factor;
  }
  return MakeError(message);
}

}  // namespace linkfit::app
