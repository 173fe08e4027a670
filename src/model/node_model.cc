#include "linkfit/model/node_model.h"

#include <algorithm>
#include <array>
#include <vector>

#include "linkfit/common/log.h"
#include "linkfit/common/strings.h"

namespace linkfit::model {

NodeModelFactory::NodeModelFactory(alloc::PlacementTableCache& tables,
                                   const alloc::MigCatalog& catalog,
                                   topology::BandwidthModel bandwidth)
    : tables_(tables), catalog_(catalog), bandwidth_(std::move(bandwidth)) {}

Result<topology::TopologyPtr> NodeModelFactory::TopologyFromText(std::string_view text,
                                                                 const std::string& source_name) {
  {
    MutexLock lock(mutex_);
    const auto it = by_text_.find(std::string(text));
    if (it != by_text_.end()) return it->second;
  }
  auto spec = topology::ParseTopologyText(text);
  if (!spec) return tl::unexpected(spec.error());
  auto built = topology::BuildTopology(std::move(*spec), bandwidth_);
  if (!built) return tl::unexpected(built.error());
  for (const std::string& warning : (*built)->warnings()) {
    log::Warning(source_name + ": " + warning);
  }
  MutexLock lock(mutex_);
  return by_text_.emplace(std::string(text), *built).first->second;
}

Result<state::NodeInfoPtr> NodeModelFactory::Build(NodeFacts facts) const {
  const topology::Topology& topo = *facts.topology;
  // A node agent's document states each GPU's MIG mode and health; where it states a MIG mode it
  // is the truth (linkfit.io/mig-mode is for documents typed by hand).
  bool document_states_mig = false;
  unsigned document_mig = 0;
  unsigned unhealthy = 0;
  for (const topology::GpuSpec& gpu : topo.spec().gpus) {
    if (gpu.mig_mode != topology::MigMode::kUnknown) document_states_mig = true;
    if (gpu.mig_mode == topology::MigMode::kEnabled) document_mig |= 1u << gpu.index;
    if (!gpu.healthy) unhealthy |= 1u << gpu.index;
  }
  if (document_states_mig) facts.mig_enabled = static_cast<topology::GpuMask>(document_mig);
  if ((facts.mig_enabled & ~topo.all_gpus()) != 0) {
    return MakeError("MIG mode names GPUs beyond the node's " + std::to_string(topo.gpu_count()));
  }
  // Each GPU plans with its own model's profile set: a node mixing models (A100 40GB and 80GB,
  // H100) has one planner per set. A GPU lost at the query level (no set) or of a model linkfit
  // has no set for is never a MIG GPU; the others keep theirs.
  auto info = std::make_shared<state::NodeInfo>();
  for (int g = 0; g < topo.gpu_count(); ++g) {
    const std::string& set = topo.gpu(g).mig_profile_set;
    info->SetMigPlanner(g, set.empty() ? nullptr : catalog_.FindPlanner(set));
  }
  if (facts.mig_enabled != 0 && info->mig_planners.empty()) {
    const topology::GpuSpec& first = topo.gpu(__builtin_ctz(facts.mig_enabled));
    return MakeError("GPUs of " + topo.summary_model() +
                     " are not MIG-capable (no MIG profile set " +
                     QuoteForMessage(first.mig_profile_set) + " is known)");
  }
  info->name = std::move(facts.name);
  info->labels = std::move(facts.labels);
  info->table = tables_.Get(facts.topology);
  info->reported = facts.topology;
  info->unhealthy = static_cast<topology::GpuMask>(unhealthy);
  // A NIC's port is up where its state is "ACTIVE" or not known (documents typed by hand, the
  // nvidia-smi fallback); "DOWN", "INIT", "ARMED" and the like are down.
  const std::vector<topology::NicSpec>& nics = topo.nics();
  for (std::size_t i = 0; i < nics.size(); ++i) {
    info->nic_down[i] = !nics[i].state.empty() && nics[i].state != "ACTIVE";
  }
  info->mig_layout_reported = document_states_mig;
  info->mig_enabled = facts.mig_enabled;
  info->cpu_milli = facts.cpu_milli;
  info->memory_bytes = facts.memory_bytes;
  return state::NodeInfoPtr(std::move(info));
}

std::size_t NodeModelFactory::topologies() const {
  MutexLock lock(mutex_);
  return by_text_.size();
}

Result<topology::GpuMask> ParseMigMode(std::string_view text, int gpu_count) {
  const std::string_view trimmed = Trim(text);
  const auto all = static_cast<topology::GpuMask>((1u << gpu_count) - 1u);
  if (trimmed == "all") return all;
  if (trimmed == "none" || trimmed.empty()) return topology::GpuMask{0};
  unsigned mask = 0;
  for (std::string_view field : Split(trimmed, ',')) {
    const auto gpu = ParseInt(field);
    if (!gpu || *gpu < 0 || *gpu >= gpu_count) {
      return MakeError("MIG mode " + QuoteForMessage(text) +
                       ": expected all, none or GPU indexes 0.." + std::to_string(gpu_count - 1) +
                       " separated by commas");
    }
    mask |= 1u << *gpu;
  }
  return static_cast<topology::GpuMask>(mask);
}

}  // namespace linkfit::model
