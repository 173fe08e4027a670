// `linkfit place --mig-profile`: where one MIG instance goes on a node, by exact best fit.

#include <map>
#include <ostream>

#include <nlohmann/json.hpp>

#include "linkfit/alloc/mig.h"
#include "linkfit/alloc/placement_table.h"
#include "linkfit/common/flags.h"
#include "linkfit/common/strings.h"
#include "linkfit/topology/topology.h"

namespace linkfit::app {
namespace {

int Fail(bool json, const std::string& message, const std::vector<int>& reconfigurable,
         std::ostream& out, std::ostream& err, int code) {
  if (json) {
    nlohmann::json reply = {{"error", message}};
    if (!reconfigurable.empty()) reply["reconfigurable_gpus"] = reconfigurable;
    out << reply.dump() << "\n";
  } else {
    err << "linkfit place: " << message << "\n";
  }
  return code;
}

// "GPU:PROFILE@START" entries, e.g. "0:3g.40gb@4,1:1g.10gb@0".
Result<std::map<int, std::vector<alloc::MigInstance>>> ParseMigUsed(
    const std::string& text, const topology::Topology& topo, const alloc::MigCatalog& catalog) {
  std::map<int, std::vector<alloc::MigInstance>> used;
  if (Trim(text).empty()) return used;
  for (std::string_view entry : Split(text, ',')) {
    entry = Trim(entry);
    const auto colon = entry.find(':');
    const auto at = entry.find('@');
    if (colon == std::string_view::npos || at == std::string_view::npos || at < colon) {
      return MakeError("--mig-used: " + QuoteForMessage(entry) + " is not GPU:PROFILE@START");
    }
    const auto gpu = ParseInt(entry.substr(0, colon));
    const auto start = ParseInt(entry.substr(at + 1));
    const std::string profile_name(entry.substr(colon + 1, at - colon - 1));
    if (!gpu || *gpu < 0 || *gpu >= topo.gpu_count()) {
      return MakeError("--mig-used: " + QuoteForMessage(entry) + " names no GPU of this node");
    }
    const topology::GpuSpec& spec = topo.gpu(static_cast<int>(*gpu));
    const alloc::MigProfileSet* set = catalog.FindSet(spec.mig_profile_set);
    if (set == nullptr) {
      return MakeError("--mig-used: GPU " + std::to_string(*gpu) + " (" + spec.model +
                       ") is not MIG-capable");
    }
    const int profile = set->FindProfile(profile_name);
    if (profile < 0) {
      return MakeError("--mig-used: " + QuoteForMessage(profile_name) +
                       " is not a MIG profile of " + spec.model);
    }
    if (!start || *start < 0 || *start >= alloc::kMigMemorySlices) {
      return MakeError("--mig-used: " + QuoteForMessage(entry) + " has no valid start slice");
    }
    used[static_cast<int>(*gpu)].push_back({profile, static_cast<int>(*start)});
  }
  return used;
}

}  // namespace

int PlaceMig(const Flags& flags, const topology::TopologyPtr& topo, bool json, std::ostream& out,
             std::ostream& err) {
  const std::string dir = flags.Get("mig-profiles-dir").value_or("config/mig");
  auto catalog = alloc::MigCatalog::LoadDirectory(dir);
  if (!catalog) {
    return Fail(json, catalog.error().message + " (set --mig-profiles-dir)", {}, out, err, 2);
  }
  const std::string profile_name = *flags.Get("mig-profile");
  // Each model plans with its own profile set: the first set (by its first GPU) that has the
  // profile, and only its GPUs.
  std::string set_id;
  std::string models;
  const alloc::MigPlanner* planner = nullptr;
  for (int i = 0; i < topo->gpu_count() && planner == nullptr; ++i) {
    const topology::GpuSpec& gpu = topo->gpu(i);
    if (!gpu.mig_capable || gpu.mig_profile_set.empty()) continue;
    const alloc::MigPlanner* candidate = catalog->FindPlanner(gpu.mig_profile_set);
    if (candidate == nullptr) continue;
    if (candidate->set().FindProfile(profile_name) >= 0) {
      planner = candidate;
      set_id = gpu.mig_profile_set;
    } else if (models.find(gpu.model) == std::string::npos) {
      models += (models.empty() ? "" : " or ") + gpu.model;
    }
  }
  if (planner == nullptr && models.empty()) {
    return Fail(json, "node has no MIG-capable GPUs", {}, out, err, 1);
  }
  if (planner == nullptr) {
    return Fail(json,
                "MIG profile " + QuoteForMessage(profile_name) + " does not exist on " + models, {},
                out, err, 1);
  }
  const int profile = planner->set().FindProfile(profile_name);
  auto used = ParseMigUsed(flags.Get("mig-used").value_or(""), *topo, *catalog);
  if (!used) return Fail(json, used.error().message, {}, out, err, 2);
  std::vector<alloc::MigGpuView> views;
  for (int i = 0; i < topo->gpu_count(); ++i) {
    if (topo->gpu(i).mig_profile_set != set_id) continue;
    alloc::MigGpuView view;
    view.index = i;
    view.mig_enabled = true;
    const auto it = used->find(i);
    if (it != used->end()) {
      auto state = alloc::MigGpuState::FromInstances(planner->set(), it->second);
      if (!state)
        return Fail(json, "GPU " + std::to_string(i) + ": " + state.error().message, {}, out, err,
                    2);
      view.state = *state;
      view.pods = static_cast<int>(it->second.size());
    }
    views.push_back(view);
  }
  auto decision = planner->Choose(views, profile);
  if (!decision) return Fail(json, decision.error().message, {}, out, err, 2);
  if (!decision->fits) {
    return Fail(json, decision->reason, decision->reconfigurable_gpus, out, err, 1);
  }
  const alloc::MigProfile& chosen = planner->set().profiles[static_cast<std::size_t>(profile)];
  if (json) {
    out << nlohmann::json{{"gpu", decision->gpu},
                          {"start", decision->start},
                          {"profile", chosen.name},
                          {"slices", {decision->start, decision->start + chosen.size}},
                          {"profile_set", set_id}}
               .dump()
        << "\n";
  } else {
    out << chosen.name << " on GPU " << decision->gpu << " at memory slices " << decision->start
        << "-" << decision->start + chosen.size - 1 << "\n";
  }
  return 0;
}

}  // namespace linkfit::app
