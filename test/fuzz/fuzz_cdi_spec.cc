// libFuzzer target: CDI spec files (the node agent reads every one in /etc/cdi and /var/run/cdi
// when the NICs change, with --nic-cdi-kind), parsed as ReadCdiSpecDirs parses each file.
//
// Invariants: an error message is never empty and names the file; a parsed spec has a kind with a
// '/' and devices with names.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "linkfit/handoff/cdi_specs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string source = "/etc/cdi/fuzz.yaml";
  const auto spec = linkfit::handoff::ParseCdiSpec(text, source);
  if (!spec) {
    if (spec.error().message.find(source) == std::string::npos) std::abort();
    return 0;
  }
  if (spec->kind.find('/') == std::string::npos) std::abort();
  for (const auto& [name, rdma_cm] : spec->devices) {
    if (name.empty()) std::abort();
  }
  return 0;
}
