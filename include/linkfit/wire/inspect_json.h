#pragma once

// What GET /inspect shows of a node: its GPUs (mode, pods, MIG instances, shares), the pods it
// holds and how linkfit counts them, as JSON.
//
// Thread-safety: reads an immutable NodeState; safe to call concurrently.

#include <nlohmann/json.hpp>

#include "linkfit/state/node_state.h"

namespace linkfit::wire {

nlohmann::json InspectNodeJson(const state::NodeState& node);

}  // namespace linkfit::wire
