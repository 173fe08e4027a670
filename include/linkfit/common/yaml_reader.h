#pragma once

// yaml::Reader: how linkfit reads the YAML it is given (its config, cluster files, kubeconfigs).
// Every message says where the problem is and what was found there:
//
//   <source>:<line>:<column>: <path>: <message>     e.g.
//   /etc/linkfit.yaml:3:14: policy.weights.packing: expected a non-negative number, got "-1"
//
// the path in dots and brackets (`nodes[2].mig[].gpu`). Scalars are typed: a quoted scalar is a
// string, not a number or a boolean (`threads: "8"` is refused), unless the Reader's options say
// otherwise. A strict mapping refuses a key it does not know, naming the keys it does, and a key
// given twice. Relative paths are resolved against a base directory, the directory of the file
// that names them, as kubectl resolves the files a kubeconfig names.
//
// Its own library (linkfit_common_yaml), not part of linkfit_common: its interface is yaml-cpp's
// YAML::Node, and linkfit_common is linked by every module (the extender's hot path and the node
// agent among them), of which only the config, the standalone cluster file and the kube client
// read YAML.
//
// Thread-safety: a Reader is immutable once constructed; its functions may be called from any
// thread. A YAML::Node tree is read by one thread at a time (yaml-cpp does not share it safely).
// No function here throws: yaml-cpp's exceptions become errors.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "linkfit/common/files.h"
#include "linkfit/common/result.h"

namespace linkfit::yaml {

// The file reader every YAML source goes through (common/files.h).
using ::linkfit::kNoSizeLimit;
using ::linkfit::ReadFile;

// Returns "<path>.<key>", or `key` for the root (an empty path).
std::string Join(std::string_view path, std::string_view key);

// Describes a node for a message: null, a list, a mapping, nothing (absent), or the scalar in
// quotes, `string "8"` when it was quoted in the text.
std::string Describe(const YAML::Node& node);

// Returns `path` resolved against `base_dir`: an empty or absolute path as it is, a relative one
// joined to `base_dir` and lexically normalised (`a/./b/../c` is `a/c`).
std::string ResolvePath(std::string_view base_dir, std::string_view path);

// Returns the position of `node` (a null mark for an absent node), to keep for a message written
// after the tree is gone.
YAML::Mark MarkOf(const YAML::Node& node);

// Returns the scalar under `key`, or `fallback` when `map` is no mapping or the value is absent or
// no scalar: for formats read leniently (kubeconfigs, which kubectl reads so).
std::string ScalarOr(const YAML::Node& map, std::string_view key, std::string fallback = {});

// What a Reader accepts beyond the strict default, for formats whose other readers accept more.
struct ReaderOptions {
  // A quoted scalar is a string only: `"8"` is not an integer and `"true"` not a boolean.
  bool quoted_is_string = true;
  // Booleans in YAML 1.1's spellings too (y, yes, on, n, no, off), as client-go reads kubeconfigs;
  // otherwise true and false only (in lower, Title or UPPER case).
  bool yaml11_booleans = false;
  // Says what a syntax error is: "<source>:<line>:<column>: <syntax_error>: <yaml-cpp's words>".
  std::string syntax_error = "invalid YAML";
};

// The string a scalar must hold.
enum class Empty { kAllowed, kRefused };
// The numbers Number accepts.
enum class Sign { kNonNegative, kPositive };

// One key of a strict mapping: its name and how to read its value; `path` names the value.
struct Key {
  std::string name;
  std::function<Result<void>(const YAML::Node& value, const std::string& path)> read;
};

class Reader {
 public:
  // `source` begins every message (a file's path, or "config" for text from nowhere); relative
  // paths are resolved against `base_dir` ("" leaves them relative).
  explicit Reader(std::string source, std::string base_dir = {}, ReaderOptions options = {});

  const std::string& source() const { return source_; }
  const std::string& base_dir() const { return base_dir_; }

  // Parses one YAML document (empty text is a null node).
  Result<YAML::Node> Load(std::string_view text) const;

  // "<source>:<line>:<column>" (1-based) of the node or mark; "<source>" when it has none.
  std::string Where(const YAML::Node& node) const { return Where(MarkOf(node)); }
  std::string Where(const YAML::Mark& mark) const;

  // An error "<Where(node)>: <path>: <message>" (without "<path>: " for an empty path).
  tl::unexpected<Error> Fail(const YAML::Node& node, std::string_view path,
                             std::string_view message) const;

  // Mappings. CheckMapping checks that `node` is a mapping whose keys are strings, each given
  // once and each one of `keys`; the caller then looks the values up. ReadMapping does the same
  // and reads each value as its Key says, in the text's order; a null or absent node is an empty
  // mapping (a section left empty keeps its defaults). ReadEntries reads a mapping of any
  // non-empty string keys, each once; a null or absent node is an empty mapping.
  Result<void> CheckMapping(const YAML::Node& node, const std::string& path,
                            std::initializer_list<std::string_view> keys) const;
  Result<void> ReadMapping(const YAML::Node& node, const std::string& path,
                           const std::vector<Key>& keys) const;
  using EntryReader = std::function<Result<void>(const std::string& key, const YAML::Node& value,
                                                 const std::string& path)>;
  Result<void> ReadEntries(const YAML::Node& node, const std::string& path,
                           const EntryReader& read) const;

  // Returns the value of `key` in the mapping `map` (at `path`); its absence is reported at the
  // mapping's position, the value having none.
  Result<YAML::Node> Require(const YAML::Node& map, std::string_view key,
                             const std::string& path) const;

  // Scalars. Integer and Number accept what the text spells in decimal (`+3`, `1e3` for Number);
  // the messages give the range.
  Result<std::string> String(const YAML::Node& node, const std::string& path,
                             Empty empty = Empty::kAllowed) const;
  Result<bool> Bool(const YAML::Node& node, const std::string& path) const;
  Result<std::int64_t> Integer(const YAML::Node& node, const std::string& path, std::int64_t min,
                               std::int64_t max) const;
  Result<double> Number(const YAML::Node& node, const std::string& path, Sign sign) const;
  Result<std::string> OneOf(const YAML::Node& node, const std::string& path,
                            const std::vector<std::string>& allowed) const;
  // The same for the value of a key that must be there (as Require).
  Result<std::string> String(const YAML::Node& map, std::string_view key, const std::string& path,
                             Empty empty) const;
  Result<std::int64_t> Integer(const YAML::Node& map, std::string_view key, const std::string& path,
                               std::int64_t min, std::int64_t max) const;

  // Returns `path` resolved against base_dir() (ResolvePath).
  std::string Resolve(std::string_view path) const { return ResolvePath(base_dir_, path); }

  // Keys that store what they read. They refer to this Reader: it must outlive them.
  //
  // StoreKey stores in `out` what `read(value, path)` returns, a Result (converted to T).
  template <typename T, typename Read>
  static Key StoreKey(std::string name, T& out, Read read) {
    return {std::move(name),
            [&out, read = std::move(read)](const YAML::Node& node,
                                           const std::string& path) -> Result<void> {
              auto value = read(node, path);
              if (!value) return tl::unexpected(std::move(value).error());
              out = static_cast<T>(std::move(*value));
              return {};
            }};
  }
  Key StringKey(std::string name, std::string& out) const;
  Key BoolKey(std::string name, bool& out) const;
  template <typename Int>
  Key IntegerKey(std::string name, Int& out, std::int64_t min, std::int64_t max) const {
    return StoreKey(std::move(name), out,
                    [this, min, max](const YAML::Node& node, const std::string& path) {
                      return Integer(node, path, min, max);
                    });
  }
  Key NumberKey(std::string name, double& out, Sign sign) const;
  Key OneOfKey(std::string name, std::string& out, std::vector<std::string> allowed) const;
  // A path, resolved: null keeps `out`; "" clears it, or is refused with Empty::kRefused.
  Key PathKey(std::string name, std::string& out, Empty empty) const;
  // An optional path, resolved: null and "" reset `out`.
  Key OptionalPathKey(std::string name, std::optional<std::string>& out) const;
  // A nested strict mapping (ReadMapping).
  Key SectionKey(std::string name, std::vector<Key> keys) const;

 private:
  // Calls `read` for each key of a mapping (none for a null or absent node), each key a string,
  // non-empty when `non_empty`, given once.
  using KeyReader = std::function<Result<void>(const YAML::Node& key, const YAML::Node& value,
                                               const std::string& path)>;
  Result<void> EachKey(const YAML::Node& node, const std::string& path, bool non_empty,
                       const KeyReader& read) const;

  std::string source_;
  std::string base_dir_;
  ReaderOptions options_;
};

}  // namespace linkfit::yaml
