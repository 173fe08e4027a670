#pragma once

// Internal helpers of the nvidia-smi loader, shared by nvidia_smi.cc, load.cc and the tests.
// They are not part of the public surface (include/linkfit/topology/spec.h): ParseTopologyText()
// is the public entry point; these exist so that the nvidia-smi path can be tested and fuzzed
// without linking the JSON document parser.
//
// Thread-safety: pure functions.

#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/result.h"
#include "linkfit/topology/spec.h"

namespace linkfit::topology::internal {

// A single text holding `nvidia-smi topo -m` output, optionally followed by the query-gpu CSV.
struct NvidiaSmiParts {
  std::string_view topo_matrix;
  std::string_view query_gpu_csv;  // empty when the text has no CSV part
};

// Splits `text` at the first line that starts the query-gpu CSV: a line beginning with "index,"
// (the CSV header) or of the form "0, GPU-..." (a headerless row). Never fails.
NvidiaSmiParts SplitNvidiaSmiText(std::string_view text);

// Removes ANSI escape sequences (ESC [ params final-byte): nvidia-smi underlines the header.
std::string StripAnsi(std::string_view line);

// Reads `nvidia-smi --query-gpu=index,uuid,name,memory.total,pci.bus_id --format=csv` (header
// optional, columns by header name) into `gpus` (already sized to the matrix's `gpu_count`); an
// error names the line and what is wrong.
Result<void> ParseQueryGpuCsv(std::string_view csv, int gpu_count, std::vector<GpuSpec>& gpus);

// SplitNvidiaSmiText() followed by ParseNvidiaSmi(): what ParseTopologyText() does for text that
// is not JSON.
Result<TopologySpec> ParseNvidiaSmiText(std::string_view text);

}  // namespace linkfit::topology::internal
