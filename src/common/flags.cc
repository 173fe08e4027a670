#include "linkfit/common/flags.h"

#include "linkfit/common/strings.h"

namespace linkfit {

Result<Flags> Flags::Parse(const std::vector<std::string>& args,
                           const std::vector<FlagSpec>& known) {
  Flags flags;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!StartsWith(arg, "--") || arg.size() == 2) {
      return MakeError("unexpected argument " + QuoteForMessage(arg));
    }
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& candidate : known) {
      if (candidate.name == name) spec = &candidate;
    }
    if (spec == nullptr) {
      std::string names;
      for (const FlagSpec& candidate : known)
        names += (names.empty() ? "--" : ", --") + candidate.name;
      return MakeError("unknown flag --" + name + " (known: " + names + ")");
    }
    if (flags.values_.count(name) != 0 && !spec->repeatable) {
      return MakeError("flag --" + name + " given twice");
    }
    std::vector<std::string>& values = flags.values_[name];
    if (!spec->takes_value) {
      if (inline_value) return MakeError("flag --" + name + " takes no value");
      values.push_back("true");
      continue;
    }
    if (inline_value) {
      values.push_back(*inline_value);
    } else if (i + 1 < args.size()) {
      values.push_back(args[++i]);
    } else {
      return MakeError("flag --" + name + " needs a value");
    }
  }
  return flags;
}

std::optional<std::string> Flags::Get(const std::string& name) const {
  const auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Flags::GetAll(const std::string& name) const {
  const auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>() : it->second;
}

Result<std::string> Flags::Require(const std::string& name) const {
  auto value = Get(name);
  if (!value) return MakeError("missing required flag --" + name);
  return *value;
}

Result<std::optional<long>> Flags::GetInt(const std::string& name, long min, long max) const {
  auto value = Get(name);
  if (!value) return std::optional<long>();
  const auto parsed = ParseInt(*value);
  if (!parsed || *parsed < min || *parsed > max) {
    return MakeError("--" + name + " must be an integer from " + std::to_string(min) + " to " +
                     std::to_string(max) + ", got " + QuoteForMessage(*value));
  }
  return std::optional<long>(static_cast<long>(*parsed));
}

}  // namespace linkfit
