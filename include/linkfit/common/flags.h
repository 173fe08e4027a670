#pragma once

// Flags: the command line of one linkfit subcommand (`--name value`, `--name=value`, `--switch`).
// Unknown flags, missing values and repeated flags are errors that name the flag.
//
// Thread-safety: plain value.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "linkfit/common/result.h"

namespace linkfit {

struct FlagSpec {
  std::string name;  // without the leading "--"
  bool takes_value = true;
  bool repeatable = false;  // may be given more than once (GetAll); else twice is an error
};

class Flags {
 public:
  static Result<Flags> Parse(const std::vector<std::string>& args,
                             const std::vector<FlagSpec>& known);

  bool Has(const std::string& name) const { return values_.count(name) != 0; }
  // The value given (the last one of a repeatable flag).
  std::optional<std::string> Get(const std::string& name) const;
  // Every value of a repeatable flag, in the order given; empty when absent.
  std::vector<std::string> GetAll(const std::string& name) const;
  // The value of a flag that must be present.
  Result<std::string> Require(const std::string& name) const;
  // An optional integer flag within [min, max].
  Result<std::optional<long>> GetInt(const std::string& name, long min, long max) const;

 private:
  std::map<std::string, std::vector<std::string>> values_;
};

}  // namespace linkfit
