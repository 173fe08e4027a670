#pragma once

// Flags: the command-line parser of the bench tools (linkfit-bench, linkfit-load, the cluster
// benches, the parse-only server). Flags are `--name value` pairs, or `--name` switches that take
// no value; each is registered with what to do with its value. Parse walks argv in order, so a
// flag given twice keeps the last value.
//
// Errors (as values): "--name needs a value" (the last argument, not a switch), "bad option
// --name value" (an unknown flag, or a value its parser refused), "unknown option --name" (only
// when the unknown flag is the last argument).
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

  // Parses argv[first] .. argv[argc - 1].
  Result<void> Parse(int argc, char** argv, int first = 1) const;

 private:
  struct Flag {
    std::string name;
    bool is_switch = false;
    std::function<bool(const std::string&)> parse;
  };
  const Flag* Find(const std::string& name) const;

  std::vector<Flag> flags_;
};

}  // namespace linkfit::bench
