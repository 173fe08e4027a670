// libFuzzer target: the node agent's parsers of `nvidia-smi mig -lgi` and of the MIG-mode query
// CSV (src/agent/smi_mig_table.h). Whatever nvidia-smi prints must give a value or an error,
// never a crash, and every instance parsed must fit a GPU's eight memory slices.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/smi_mig_table.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (const auto table = linkfit::agent::ParseMigInstanceTable(text)) {
    for (const auto& instance : *table) {
      if (instance.size < 1 || instance.start < 0 || instance.start + instance.size > 8) {
        std::abort();
      }
    }
  }
  (void)linkfit::agent::ParseMigModeCsv(text);
  return 0;
}
