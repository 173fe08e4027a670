#pragma once

// Internal helpers of the nvidia-smi loader, shared by nvidia_smi.cc, load.cc and the tests.
// They are not part of the public surface (include/linkfit/topology/spec.h): ParseTopologyText()
// is the public entry point; these exist so that the nvidia-smi path can be tested and fuzzed
// without linking the JSON document parser.
//
// Thread-safety: pure functions; a DisjointSets is used by one thread.

#include <cstddef>
#include <numeric>
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

// One NIC column of the topo -m matrix: its header label ("NIC3", or "mlx5_3" from drivers that
// name the column after the device) and each GPU row's cell in it, by GPU index.
struct NicColumn {
  std::string label;
  std::vector<std::string> cells;
};

// Fills spec.nics (spec.gpus already set) from the NIC columns and the "NIC Legend:" block of
// `topo_text` ("  NIC0: mlx5_0"): a NIC's name is its legend entry, else its label. A cell that is
// not a PCIe relation is SYS with a warning; a legend entry that is not `NIC<n>: <name>`, that
// repeats a label, or names a device twice is an error naming the line. A NIC's NUMA node is
// that of its closest GPUs (closer than SYS) when they share one, else unknown.
Result<void> ReadNicColumns(std::string_view topo_text, const std::vector<NicColumn>& columns,
                            TopologySpec& spec);

// A tiny union-find over small integer ids.
class DisjointSets {
 public:
  explicit DisjointSets(std::size_t size) : parent_(size) {
    std::iota(parent_.begin(), parent_.end(), std::size_t{0});
  }
  std::size_t Find(std::size_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void Union(std::size_t a, std::size_t b) { parent_[Find(a)] = Find(b); }

 private:
  std::vector<std::size_t> parent_;
};

// The NVLink fabric of a spec whose links are set (nvidia_smi_fabric.cc): none, bridge pairs,
// direct links or NVSwitch (a uniform all-to-all NV# on 4+ GPUs), and each GPU's physical links.
void InferFabric(TopologySpec& spec);

// SplitNvidiaSmiText() followed by ParseNvidiaSmi(): what ParseTopologyText() does for text that
// is not JSON.
Result<TopologySpec> ParseNvidiaSmiText(std::string_view text);

}  // namespace linkfit::topology::internal
