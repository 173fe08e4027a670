#include "extender/mig_layout.h"

#include <algorithm>
#include <string>
#include <vector>

namespace linkfit::extender {

NodeFit FitMigOnReportedLayout(const GpuRequest& request, const state::NodeState& node,
                               topology::GpuMask allowed) {
  const std::string& name = request.mig_profile;
  const topology::Topology& own = node.info().own_topology();
  struct Candidate {
    int gpu;
    int start;
    int pods;
    int profile;  // index in the set of the GPU's own planner
  };
  std::vector<Candidate> free;
  int existing = 0;
  for (int g = 0; g < node.info().gpu_count(); ++g) {
    if (((node.info().mig_enabled >> g) & 1) == 0 || ((node.info().unhealthy >> g) & 1) != 0 ||
        ((allowed >> g) & 1) == 0) {
      continue;
    }
    // Each GPU names the profile in its own model's set.
    const alloc::MigPlanner* planner = node.info().MigPlannerOf(g);
    const int profile = planner == nullptr ? -1 : planner->set().FindProfile(name);
    if (profile < 0) continue;
    const std::uint8_t used = node.mig_state(g).slice_mask();
    for (const topology::MigInstanceSpec& instance : own.gpu(g).mig_instances) {
      if (instance.profile != name) continue;
      ++existing;
      const unsigned slices = ((1u << instance.size) - 1u) << instance.start;
      if ((used & slices) == 0) free.push_back({g, instance.start, node.pods_on_gpu(g), profile});
    }
  }
  NodeFit fit;
  if (static_cast<int>(free.size()) < request.count) {
    fit.reason = "node has " + std::to_string(free.size()) + " free " + name +
                 " MIG instances of " + std::to_string(existing) + " (its MIG layout is fixed by " +
                 "the operator), " + std::to_string(request.count) + " requested";
    // Only evicting pods can help, and only if enough instances exist at all.
    fit.unresolvable = existing < request.count;
    return fit;
  }
  std::stable_sort(free.begin(), free.end(), [](const Candidate& a, const Candidate& b) {
    if ((a.pods > 0) != (b.pods > 0)) return a.pods > 0;
    if (a.gpu != b.gpu) return a.gpu < b.gpu;
    return a.start < b.start;
  });
  fit.fits = true;
  fit.assignment.kind = state::Assignment::Kind::kMig;
  fit.assignment.node = node.name();
  for (int i = 0; i < request.count; ++i) {
    const Candidate& chosen = free[static_cast<std::size_t>(i)];
    fit.assignment.mig.push_back({chosen.gpu, alloc::MigInstance{chosen.profile, chosen.start}});
    fit.assignment.gpus = static_cast<topology::GpuMask>(fit.assignment.gpus | (1u << chosen.gpu));
  }
  return fit;
}

}  // namespace linkfit::extender
