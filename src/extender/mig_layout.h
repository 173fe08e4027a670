#pragma once

// MIG placement on a layout the node agent reports (state::NodeInfo::mig_layout_reported): the
// GPU instances exist already (created by the operator, e.g. with mig-parted, and served by
// NVIDIA's device plugin as nvidia.com/mig-<profile>), so a MIG pod can only take a free existing
// instance of its profile. Among those it packs: GPUs that already serve pods first (keeping
// idle GPUs whole for reconfiguration), then the lowest GPU and start.
//
// Thread-safety: a pure function of its arguments.

#include "linkfit/extender/gpu_request.h"
#include "linkfit/extender/node_fit.h"
#include "linkfit/state/node_state.h"

namespace linkfit::extender {

// Only GPUs of `allowed` whose own model's profile set has the request's profile are
// considered (NodeInfo::MigPlannerOf).
NodeFit FitMigOnReportedLayout(const GpuRequest& request, const state::NodeState& node,
                               topology::GpuMask allowed);

}  // namespace linkfit::extender
