#pragma once

// Flags: the command line of the bench tools (linkfit-bench, linkfit-load, linkfit-parse-only,
// the cluster benches), each flag registered with what to do with its value. The parsing is
// linkfit's own (common/flags.h, as every `linkfit` subcommand parses): `--name value`,
// `--name=value`, `--switch`; unknown flags, flags given twice and missing values are errors that
// name the flag. A value its handler refuses is the error "bad option --name value".
//
// Thread-safety: one owner; Parse writes through the registered pointers.

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "linkfit/common/result.h"

namespace linkfit::bench {

class Flags {
 public:
  // A flag without a value: sets *out to true.
  Flags& Switch(std::string name, bool* out);
  // A flag whose value `parse` takes; it returns false for a value it refuses.
  Flags& Value(std::string name, std::function<bool(const std::string&)> parse);
  // The value as it is.
  Flags& String(std::string name, std::string* out);
  // A whole number within [min, max].
  Flags& Int(std::string name, int* out, std::int64_t min = std::numeric_limits<int>::min(),
             std::int64_t max = std::numeric_limits<int>::max());
  Flags& Int64(std::string name, std::int64_t* out,
               std::int64_t min = std::numeric_limits<std::int64_t>::min(),
               std::int64_t max = std::numeric_limits<std::int64_t>::max());

  // Parses argv[first] .. argv[argc - 1], then hands each flag given to its handler, in the order
  // they were registered.
  Result<void> Parse(int argc, char** argv, int first = 1) const;

 private:
  struct Flag {
    std::string name;  // with its leading "--"
    bool is_switch = false;
    std::function<bool(const std::string&)> parse;
  };
  std::vector<Flag> flags_;
};

}  // namespace linkfit::bench
