#include "common/flags.h"

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

const Flags::Flag* Flags::Find(const std::string& name) const {
  for (const Flag& flag : flags_) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

Result<void> Flags::Parse(int argc, char** argv, int first) const {
  for (int i = first; i < argc; ++i) {
    const std::string name = argv[i];
    const Flag* flag = Find(name);
    if (flag != nullptr && flag->is_switch) {
      flag->parse("");
      continue;
    }
    if (i + 1 >= argc) {
      return MakeError(flag == nullptr ? "unknown option " + name : name + " needs a value");
    }
    const std::string value = argv[++i];
    if (flag == nullptr || !flag->parse(value)) {
      return MakeError("bad option " + name + " " + value);
    }
  }
  return {};
}

}  // namespace linkfit::bench
