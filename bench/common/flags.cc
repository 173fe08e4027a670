#include "common/flags.h"

#include <optional>

#include "linkfit/common/flags.h"
#include "linkfit/common/strings.h"

namespace linkfit::bench {

Flags& Flags::Switch(std::string name, bool* out) {
  flags_.push_back({std::move(name), true, [out](const std::string&) {
                      *out = true;
                      return true;
                    }});
  return *this;
}

Flags& Flags::Value(std::string name, std::function<bool(const std::string&)> parse) {
  flags_.push_back({std::move(name), false, std::move(parse)});
  return *this;
}

Flags& Flags::String(std::string name, std::string* out) {
  return Value(std::move(name), [out](const std::string& value) {
    *out = value;
    return true;
  });
}

Flags& Flags::Int64(std::string name, std::int64_t* out, std::int64_t min, std::int64_t max) {
  return Value(std::move(name), [out, min, max](const std::string& value) {
    const auto number = ParseInt(value);
    if (!number || *number < min || *number > max) return false;
    *out = *number;
    return true;
  });
}

Flags& Flags::Int(std::string name, int* out, std::int64_t min, std::int64_t max) {
  return Value(std::move(name), [out, min, max](const std::string& value) {
    const auto number = ParseInt(value);
    if (!number || *number < min || *number > max) return false;
    *out = static_cast<int>(*number);
    return true;
  });
}

Result<void> Flags::Parse(int argc, char** argv, int first) const {
  const std::vector<std::string> args(argv + first, argv + argc);
  std::vector<FlagSpec> known;
  for (const Flag& flag : flags_) known.push_back({flag.name.substr(2), !flag.is_switch});
  auto parsed = linkfit::Flags::Parse(args, known);
  if (!parsed) return tl::unexpected(parsed.error());
  for (const Flag& flag : flags_) {
    const std::optional<std::string> value = parsed->Get(flag.name.substr(2));
    if (value && !flag.parse(*value)) return MakeError("bad option " + flag.name + " " + *value);
  }
  return {};
}

}  // namespace linkfit::bench
