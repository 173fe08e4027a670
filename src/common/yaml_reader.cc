#include "linkfit/common/yaml_reader.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <utility>

#include "linkfit/common/strings.h"

namespace linkfit::yaml {
namespace {

// A quoted scalar carries the non-specific tag "!", a plain one "?".
bool IsQuoted(const YAML::Node& node) { return node.Tag() == "!"; }

}  // namespace

std::string Join(std::string_view path, std::string_view key) {
  std::string joined(path);
  if (!joined.empty()) joined += '.';
  joined += key;
  return joined;
}

std::string Describe(const YAML::Node& node) {
  if (!node.IsDefined()) return "nothing";
  if (node.IsNull()) return "null";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  if (node.IsScalar()) return (IsQuoted(node) ? "string " : "") + QuoteForMessage(node.Scalar());
  return "nothing";
}

std::string ResolvePath(std::string_view base_dir, std::string_view path) {
  if (path.empty() || path.front() == '/') return std::string(path);
  return (std::filesystem::path(base_dir) / path).lexically_normal().string();
}

YAML::Mark MarkOf(const YAML::Node& node) {
  // An absent node (a key looked up and not found) has no position; Mark() would throw.
  return node.IsDefined() ? node.Mark() : YAML::Mark::null_mark();
}

std::string ScalarOr(const YAML::Node& map, std::string_view key, std::string fallback) {
  if (!map.IsDefined() || !map.IsMap()) return fallback;
  const YAML::Node value = map[std::string(key)];
  return value.IsDefined() && value.IsScalar() ? value.Scalar() : fallback;
}

Reader::Reader(std::string source, std::string base_dir, ReaderOptions options)
    : source_(std::move(source)), base_dir_(std::move(base_dir)), options_(std::move(options)) {}

Result<YAML::Node> Reader::Load(std::string_view text) const {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return MakeError(Where(e.mark) + ": " + options_.syntax_error + ": " + e.msg);
  } catch (const std::exception& e) {
    return MakeError(source_ + ": " + options_.syntax_error + ": " + e.what());
  }
}

std::string Reader::Where(const YAML::Mark& mark) const {
  if (mark.line < 0) return source_;
  return source_ + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

tl::unexpected<Error> Reader::Fail(const YAML::Node& node, std::string_view path,
                                   std::string_view message) const {
  std::string text = Where(node) + ": ";
  if (!path.empty()) (text += path) += ": ";
  text += message;
  return MakeError(std::move(text));
}

Result<void> Reader::EachKey(const YAML::Node& node, const std::string& path, bool non_empty,
                             const KeyReader& read) const {
  if (!node.IsDefined() || node.IsNull()) return {};
  if (!node.IsMap()) return Fail(node, path, "expected a mapping, got " + Describe(node));
  std::set<std::string> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key = it->first;  // a copy: it-> yields a temporary proxy
    if (!key.IsScalar() || (non_empty && Trim(key.Scalar()).empty())) {
      return Fail(key, path, non_empty ? "keys must be non-empty strings" : "keys must be strings");
    }
    const std::string key_path = Join(path, key.Scalar());
    if (!seen.insert(key.Scalar()).second) return Fail(key, key_path, "duplicate key");
    if (auto done = read(key, it->second, key_path); !done) return done;
  }
  return {};
}

Result<void> Reader::CheckMapping(const YAML::Node& node, const std::string& path,
                                  std::initializer_list<std::string_view> keys) const {
  if (!node.IsDefined() || !node.IsMap()) {
    return Fail(node, path, "expected a mapping, got " + Describe(node));
  }
  std::vector<Key> names;
  for (const std::string_view key : keys) names.push_back({std::string(key), nullptr});
  return ReadMapping(node, path, names);
}

Result<void> Reader::ReadMapping(const YAML::Node& node, const std::string& path,
                                 const std::vector<Key>& keys) const {
  return EachKey(node, path, /*non_empty=*/false,
                 [&](const YAML::Node& key, const YAML::Node& value,
                     const std::string& key_path) -> Result<void> {
                   for (const Key& candidate : keys) {
                     if (candidate.name != key.Scalar()) continue;
                     return candidate.read ? candidate.read(value, key_path) : Result<void>();
                   }
                   std::vector<std::string> names;
                   for (const Key& candidate : keys) names.push_back(candidate.name);
                   return Fail(key, key_path,
                               "unknown key; known keys: " + JoinStrings(names, ", "));
                 });
}

Result<void> Reader::ReadEntries(const YAML::Node& node, const std::string& path,
                                 const EntryReader& read) const {
  return EachKey(
      node, path, /*non_empty=*/true,
      [&read](const YAML::Node& key, const YAML::Node& value, const std::string& key_path) {
        return read(key.Scalar(), value, key_path);
      });
}

Result<YAML::Node> Reader::Require(const YAML::Node& map, std::string_view key,
                                   const std::string& path) const {
  if (!map.IsDefined() || !map.IsMap()) {
    return Fail(map, path, "expected a mapping, got " + Describe(map));
  }
  const YAML::Node value = map[std::string(key)];
  if (!value.IsDefined()) return Fail(map, Join(path, key), "missing key");
  return value;
}

Result<std::string> Reader::String(const YAML::Node& node, const std::string& path,
                                   Empty empty) const {
  const bool non_empty = empty == Empty::kRefused;
  if (!node.IsDefined() || !node.IsScalar() || (non_empty && node.Scalar().empty())) {
    return Fail(node, path,
                std::string("expected a ") + (non_empty ? "non-empty " : "") + "string, got " +
                    Describe(node));
  }
  return node.Scalar();
}

Result<std::string> Reader::String(const YAML::Node& map, std::string_view key,
                                   const std::string& path, Empty empty) const {
  YAML::Node node;
  LINKFIT_ASSIGN_OR_RETURN(node, Require(map, key, path));
  return String(node, Join(path, key), empty);
}

Result<bool> Reader::Bool(const YAML::Node& node, const std::string& path) const {
  if (node.IsDefined() && node.IsScalar() && !(options_.quoted_is_string && IsQuoted(node))) {
    const std::string& text = node.Scalar();
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
    bool value = false;
    if (options_.yaml11_booleans && YAML::convert<bool>::decode(node, value)) return value;
  }
  return Fail(node, path, "expected true or false, got " + Describe(node));
}

Result<std::int64_t> Reader::Integer(const YAML::Node& node, const std::string& path,
                                     std::int64_t min, std::int64_t max) const {
  const std::string range = std::to_string(min) + ".." + std::to_string(max);
  std::optional<std::int64_t> value;
  if (node.IsDefined() && node.IsScalar() && !(options_.quoted_is_string && IsQuoted(node))) {
    value = ParseInt(node.Scalar());
  }
  if (!value) {
    return Fail(node, path, "expected an integer in " + range + ", got " + Describe(node));
  }
  if (*value < min || *value > max) {
    return Fail(node, path, std::to_string(*value) + " is out of range " + range);
  }
  return *value;
}

Result<std::int64_t> Reader::Integer(const YAML::Node& map, std::string_view key,
                                     const std::string& path, std::int64_t min,
                                     std::int64_t max) const {
  YAML::Node node;
  LINKFIT_ASSIGN_OR_RETURN(node, Require(map, key, path));
  return Integer(node, Join(path, key), min, max);
}

Result<double> Reader::Number(const YAML::Node& node, const std::string& path, Sign sign) const {
  const bool positive = sign == Sign::kPositive;
  const auto refuse = [&] {
    return Fail(node, path,
                std::string("expected a ") + (positive ? "positive" : "non-negative") +
                    " number, got " + Describe(node));
  };
  if (!node.IsDefined() || !node.IsScalar() || (options_.quoted_is_string && IsQuoted(node))) {
    return refuse();
  }
  const std::string_view text = Trim(node.Scalar());
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (begin != end && *begin == '+') ++begin;
  double value = 0;
  const auto [stop, error] = std::from_chars(begin, end, value);
  if (text.empty() || error != std::errc() || stop != end || !std::isfinite(value) || value < 0 ||
      (positive && value == 0)) {
    return refuse();
  }
  return value;
}

Result<std::string> Reader::OneOf(const YAML::Node& node, const std::string& path,
                                  const std::vector<std::string>& allowed) const {
  if (node.IsDefined() && node.IsScalar()) {
    for (const std::string& choice : allowed) {
      if (node.Scalar() == choice) return choice;
    }
  }
  return Fail(node, path,
              "expected one of " + JoinStrings(allowed, "|") + ", got " + Describe(node));
}

Key Reader::StringKey(std::string name, std::string& out) const {
  return StoreKey(std::move(name), out, [this](const YAML::Node& node, const std::string& path) {
    return String(node, path);
  });
}

Key Reader::BoolKey(std::string name, bool& out) const {
  return StoreKey(std::move(name), out, [this](const YAML::Node& node, const std::string& path) {
    return Bool(node, path);
  });
}

Key Reader::NumberKey(std::string name, double& out, Sign sign) const {
  return StoreKey(std::move(name), out,
                  [this, sign](const YAML::Node& node, const std::string& path) {
                    return Number(node, path, sign);
                  });
}

Key Reader::OneOfKey(std::string name, std::string& out, std::vector<std::string> allowed) const {
  return StoreKey(
      std::move(name), out,
      [this, allowed = std::move(allowed)](const YAML::Node& node, const std::string& path) {
        return OneOf(node, path, allowed);
      });
}

Key Reader::PathKey(std::string name, std::string& out, Empty empty) const {
  return {std::move(name),
          [this, &out, empty](const YAML::Node& node, const std::string& path) -> Result<void> {
            if (node.IsNull()) return {};
            std::string text;
            LINKFIT_ASSIGN_OR_RETURN(text, String(node, path));
            if (text.empty() && empty == Empty::kRefused) {
              return Fail(node, path, "expected a path, got an empty string");
            }
            out = Resolve(text);
            return {};
          }};
}

Key Reader::OptionalPathKey(std::string name, std::optional<std::string>& out) const {
  return {std::move(name),
          [this, &out](const YAML::Node& node, const std::string& path) -> Result<void> {
            out.reset();
            if (node.IsNull()) return {};
            std::string text;
            LINKFIT_ASSIGN_OR_RETURN(text, String(node, path));
            if (!text.empty()) out = Resolve(text);
            return {};
          }};
}

Key Reader::SectionKey(std::string name, std::vector<Key> keys) const {
  return {std::move(name),
          [this, keys = std::move(keys)](const YAML::Node& node, const std::string& path) {
            return ReadMapping(node, path, keys);
          }};
}

}  // namespace linkfit::yaml
