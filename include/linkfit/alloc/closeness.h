#pragma once

// Closeness: how tightly a pod's GPUs must (or should) be connected. A pod asks for one level and
// says whether it is required (no placement without it) or preferred (the best set meeting it if
// one exists, the best set overall otherwise).
//
//   nvlink       every hop of the set's best ring is NVLink or NVSwitch
//   pcie-switch  all GPUs below one PCIe switch
//   numa         all GPUs on one NUMA node
//   socket       all GPUs on one CPU socket
//   node         anywhere on the node (no constraint)
//
// Thread-safety: plain values.

#include <cstdint>
#include <string_view>

#include "linkfit/common/result.h"

namespace linkfit::alloc {

enum class Closeness : std::uint8_t {
  kNvlink = 0,
  kPcieSwitch = 1,
  kNuma = 2,
  kSocket = 3,
  kNode = 4
};
inline constexpr int kClosenessLevels = 5;

enum class ClosenessPolicy : std::uint8_t { kPreferred, kRequired };

// Parses "nvlink", "pcie-switch", "numa", "socket", "node" (exact, lower case).
Result<Closeness> ParseCloseness(std::string_view text);
std::string_view ToString(Closeness closeness);

// Parses "required" or "preferred".
Result<ClosenessPolicy> ParseClosenessPolicy(std::string_view text);
std::string_view ToString(ClosenessPolicy policy);

}  // namespace linkfit::alloc
