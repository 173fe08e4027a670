#pragma once

// The step filter and prioritize share (extender.cc, extender_prioritize.cc): computing the fits a
// cache does not keep yet.
//
// Thread-safety: each works on the caller's tables alone (a leased VerbCache's).

#include <cstddef>
#include <cstdint>

#include "extender/verb_cache.h"
#include "linkfit/extender/gpu_request.h"
#include "linkfit/state/cluster_cache.h"

namespace linkfit::extender {

// Computes the fit of every node of `positions` (a request's names, looked up: kNoPosition where
// linkfit does not know one) that `table` keeps none for yet, in the request's order: none in
// steady state; the first call for a request, or the nodes that changed since the last call.
void ComputeMissingFits(FitTable& table, const GpuRequest& request, const state::Snapshot& snapshot,
                        const std::uint32_t* positions, std::size_t n, const FitOptions& options);

}  // namespace linkfit::extender
