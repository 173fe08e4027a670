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
// What is not an error: the table's "No GPU instances found" and "not in MIG mode" messages
// (no instances), and in the mode CSV a field nvidia-smi could not read ("ERR!",
// "[GPU requires reset]", ...), which becomes that GPU's `problem`. "Insufficient Permissions"
// is an error: the instances that exist would be unknown.
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
  // "[N/A]" (no MIG support) and unreadable fields are kUnknown; the discovery reads a current
  // "[N/A]" as "not MIG-capable".
  topology::MigMode current = topology::MigMode::kUnknown;
  topology::MigMode pending = topology::MigMode::kUnknown;
  bool supported = false;  // current mode is Enabled or Disabled: the GPU is MIG-capable
  std::string problem;     // a field nvidia-smi could not read ("reports ERR! for its MIG mode")
};
// GPU index -> its MIG modes.
Result<std::map<int, SmiMigModes>> ParseMigModeCsv(std::string_view text);

// The marker nvidia-smi prints in a field it could not read ("ERR!", "[GPU requires reset]",
// "[Unknown Error]", "[GPU is lost]", ...) found in `text`, or empty.
std::string_view FindSmiErrorMarker(std::string_view text);

// Whether `line` is nvidia-smi's message for a GPU it cannot open at all, printed instead of that
// GPU's row ("Unable to determine the device handle for GPU0000:3E:00.0: Unknown Error").
bool IsSmiDeviceHandleError(std::string_view line);

}  // namespace linkfit::agent
