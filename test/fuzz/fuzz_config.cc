// libFuzzer target: linkfit's configuration file (config/linkfit.yaml), parsed as `linkfit serve
// --config` parses it. Operators write it by hand and tools template it; any text must give a
// config or an error naming the problem, never a crash or an exception.
//
// Invariant: an error message is never empty.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "linkfit/app/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view yaml(reinterpret_cast<const char*>(data), size);
  const auto config = linkfit::app::ParseConfig(yaml, "/nonexistent/linkfit-fuzz", "fuzz.yaml");
  if (!config && config.error().message.empty()) std::abort();
  return 0;
}
