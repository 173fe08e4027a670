#pragma once

// The multi-instance MIG request's exact distribution over a node's GPUs (MigPlanner::Choose's
// search, in mig.cc): a dynamic programme over the GPUs with, per GPU, every way to add a count
// vector of instances (AdditionEnumerator), bounded in entries and work.
//
// Thread-safety: pure functions.

#include <cstdint>
#include <optional>
#include <vector>

#include "linkfit/alloc/mig.h"
#include "linkfit/common/result.h"

namespace linkfit::alloc {

// A multi-instance request as a count per profile, 7 bits each (a request has at most 64
// instances, so no count overflows).
using CountKey = std::uint64_t;

inline int CountOf(CountKey key, std::size_t profile) {
  return static_cast<int>((key >> (7U * profile)) & 0x7FU);
}

inline CountKey AddCount(CountKey key, std::size_t profile, int delta) {
  return static_cast<CountKey>(static_cast<std::int64_t>(key) +
                               static_cast<std::int64_t>(delta) *
                                   static_cast<std::int64_t>(CountKey{1} << (7U * profile)));
}

// Decides exactly whether `request` can be distributed over GPUs in `states`, minimising the
// empty GPUs touched, then the slices stranded, then the headroom lost. Returns per GPU the
// instances to add, an empty optional if the request does not fit, or an error if the search
// would exceed its budget.
Result<std::optional<std::vector<std::vector<MigInstance>>>> Distribute(
    const MigPlanner& planner, const std::vector<MigGpuState>& states, CountKey request);

}  // namespace linkfit::alloc
