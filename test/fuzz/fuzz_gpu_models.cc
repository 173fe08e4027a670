// libFuzzer target: GPU model tables (config/gpus.json, an operator's --gpu-models file) through
// GpuModelTable::Parse().
//
// An accepted table must answer lookups of any name without crashing, and every figure it gives
// must name its source.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "linkfit/topology/gpu_models.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto table = linkfit::topology::GpuModelTable::Parse(text, "fuzz.json");
  if (!table) return 0;
  for (const std::string_view model :
       {std::string_view("NVIDIA A100-SXM4-80GB"), std::string_view("NVIDIA GeForce RTX 4090"),
        std::string_view(""), text.substr(0, 64)}) {
    const auto facts = table->Lookup(model, 81920);
    if (facts.pcie_generation.value != 0 && !facts.pcie_generation.known()) std::abort();
    if (facts.nvlink_generation.value != 0 && !facts.nvlink_generation.known()) std::abort();
    if (facts.nvlink_link_gbps.known() &&
        !(facts.nvlink_link_gbps.value > 0 && facts.nvlink_link_gbps.value <= 1000)) {
      std::abort();
    }
  }
  return 0;
}
