#pragma once

// GpuModelTable: what a GPU's model name tells (NVLink and PCIe generations, the MIG profile set,
// peer-to-peer support), read from a data file, config/gpus.json. It is used only where the
// machine cannot tell: the nvidia-smi fallback, and NVML calls that answer NOT_SUPPORTED or are
// missing. The repository's file is compiled into the binaries (Builtin()); an operator can give
// another (the agent's --gpu-models FILE).
//
// File format (schema "linkfit-gpu-models/v1"):
//
//   {"schema": "linkfit-gpu-models/v1",
//    "models": [
//      {"name": "NVIDIA A100 80GB",          what the entry describes (for messages)
//       "match": ["A100 80GB"],              alternatives; each a list of words that must all be
//                                            among the model name's words (split at space - _,
//                                            case-insensitive); '#' is one digit, '*' any digits
//       "memory_mib_min": 60001,             optional bounds on the GPU's memory
//       "memory_mib_max": 90000,
//       "nvlink_generation": 3,              figures, each optional (at least one)
//       "nvlink_link_GBps": 14.0625,         line rate of one NVLink, GB/s per direction, where
//                                            the model's links are narrower than their
//                                            generation's (GA102 boards: 4 links of NVLink 3 at
//                                            112.5 GB/s both ways together); NVML cannot tell it
//       "pcie_generation": 4,
//       "mig_profile_set": "a100-80gb",      a set of config/mig/
//       "p2p": false,
//       "source": "NVIDIA A100 datasheet"}]} where the figures come from (required)
//
// Each figure is taken from the first entry, in file order, that matches the GPU and states it:
// specific entries (a memory variant's MIG set) come before a family's general figures.
//
// Thread-safety: immutable after construction; Builtin() is safe to call concurrently.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/result.h"

namespace linkfit::topology {

// One figure as the table gives it: the value, and the entry's source ("" when no entry states
// it: the figure is unknown to the table).
template <typename T>
struct TableFigure {
  T value{};
  std::string source;
  bool known() const { return !source.empty(); }
};

struct GpuModelFacts {
  TableFigure<int> nvlink_generation;
  TableFigure<double> nvlink_link_gbps;  // unknown: the NVLink generation's standard rate
  TableFigure<int> pcie_generation;
  TableFigure<std::string> mig_profile_set;  // known with an empty value: not MIG-capable
  TableFigure<bool> p2p;                     // unknown: taken as true
};

class GpuModelTable {
 public:
  struct Entry {
    std::string name;
    std::vector<std::vector<std::string>> match;  // alternatives of upper-cased pattern words
    std::uint64_t memory_mib_min = 0;
    std::uint64_t memory_mib_max = UINT64_MAX;
    int nvlink_generation = 0;    // 0 = not stated
    double nvlink_link_gbps = 0;  // 0 = not stated
    int pcie_generation = 0;      // 0 = not stated
    bool states_mig = false;
    std::string mig_profile_set;
    bool states_p2p = false;
    bool p2p = true;
    std::string source;
  };

  GpuModelTable() = default;

  // Parses a table; `file_name` starts every error, which names the entry and field
  // ("gpus.json: models[3] (NVIDIA A100 80GB): pcie_generation: expected an integer 1..7").
  static Result<GpuModelTable> Parse(std::string_view json_text, std::string_view file_name);
  // Reads and parses a file (at most 1 MiB).
  static Result<GpuModelTable> LoadFile(const std::string& path);
  // The repository's config/gpus.json as compiled into the binary.
  static const GpuModelTable& Builtin();

  // What the table says of a GPU named `model` with `memory_mib` MiB (0 = unknown).
  GpuModelFacts Lookup(std::string_view model, std::uint64_t memory_mib) const;

  const std::vector<Entry>& entries() const { return entries_; }

 private:
  std::vector<Entry> entries_;
};

}  // namespace linkfit::topology
