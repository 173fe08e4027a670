#pragma once

// Parsers of the nvidia-smi outputs the node agent's fallback reads besides `topo -m` and the
// query-gpu CSV (which src/topology parses):
//
//   `nvidia-smi mig -lgi`: the GPU instances that exist, one table row each:
//       |   0  MIG 3g.20gb          9        1          4:4     |
//        GPU  Name (profile)   Profile ID  Instance ID  Placement start:size
//   `nvidia-smi --query-gpu=index,mig.mode.current,mig.mode.pending --format=csv,noheader`:
//       0, Enabled, Enabled        ("[N/A]" for GPUs without MIG support)
//
// Strict: a line that is neither table decoration nor a well-formed row is an error naming it.
//
// Thread-safety: pure functions.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/result.h"
#include "linkfit/topology/spec.h"

namespace linkfit::agent {

struct SmiGpuInstance {
  int gpu = -1;
  std::string profile;  // "3g.20gb" (without nvidia-smi's "MIG " prefix)
  int profile_id = -1;
  int instance_id = -1;
  int start = 0;
  int size = 0;
};

Result<std::vector<SmiGpuInstance>> ParseMigInstanceTable(std::string_view text);

struct SmiMigModes {
  topology::MigMode current = topology::MigMode::kUnknown;  // kUnknown: "[N/A]", no MIG support
  topology::MigMode pending = topology::MigMode::kUnknown;
};
// GPU index -> its MIG modes.
Result<std::map<int, SmiMigModes>> ParseMigModeCsv(std::string_view text);

}  // namespace linkfit::agent
