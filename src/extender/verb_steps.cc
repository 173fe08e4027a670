#include "extender/verb_steps.h"

#include <cstdint>

#include "extender/gpu_state_memo.h"

namespace linkfit::extender {
namespace {

// A fit depends on nothing but the request and the node's GPU state: kept by node position
// across calls until the node changes (verb_cache.h), and within a call shared by nodes alike
// (gpu_state_memo.h) and of the same machine kind (the fit records the kind, which prioritize
// counts by fit instead of reading every candidate's). A shared fit's assignment names no node.
// Out of line: in steady state nearly every fit is kept, and the loop in ComputeMissingFits stays
// small.
[[gnu::noinline]] FitRef ComputeFit(FitTable& table, GpuStateMemo<FitRef>& alike,
                                    const GpuRequest& request, const state::Snapshot& snapshot,
                                    const state::NodeRef& ref, const FitOptions& options) {
  const state::NodeState& node = *snapshot.NodeAt(ref.position);
  const std::uint32_t kind = snapshot.KindAt(ref.position);
  const FitRef fit = alike.Of(node, {kind, 0, nullptr}, [&] {
    NodeFit& computed = table.full_fits.emplace_back(FitOnNode(request, node, options));
    computed.assignment.node.clear();
    return table.Add(computed, computed.fits ? nullptr : table.Intern(computed.reason), kind);
  });
  table.by_position.Insert(ref.position, fit);
  return fit;
}

}  // namespace

void ComputeMissingFits(FitTable& table, const GpuRequest& request, const state::Snapshot& snapshot,
                        const std::uint32_t* positions, std::size_t n, const FitOptions& options) {
  GpuStateMemo<FitRef> alike;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t position = positions[i];
    if (position == state::NameIndex::kNoPosition) continue;
    if (table.by_position.Find(position).known()) continue;
    ComputeFit(table, alike, request, snapshot, state::NodeRef{position}, options);
  }
}

}  // namespace linkfit::extender
