#include "linkfit/source/node_model.h"

#include "linkfit/common/log.h"
#include "linkfit/common/strings.h"

namespace linkfit::source {
namespace {

// The MIG profile set that most healthy GPUs name (ties: the first GPU's), else the one most
// GPUs name, else empty: a GPU lost at the query level (no set) or a few GPUs of another model
// do not take MIG away from the rest. A node has one planner; GPUs of another set are skipped.
const std::string& MigProfileSetOf(const topology::Topology& topo) {
  static const std::string kNone;
  const std::string* best = &kNone;
  int best_weight = 0;
  for (int g = 0; g < topo.gpu_count(); ++g) {
    const std::string& set = topo.gpu(g).mig_profile_set;
    if (set.empty()) continue;
    int weight = 0;
    for (int h = 0; h < topo.gpu_count(); ++h) {
      if (topo.gpu(h).mig_profile_set == set)
        weight += topo.gpu(h).healthy ? 1 + topology::kMaxGpus : 1;
    }
    if (weight > best_weight) {
      best = &set;
      best_weight = weight;
    }
  }
  return *best;
}

}  // namespace

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
  const std::string& profile_set = MigProfileSetOf(topo);
  const alloc::MigPlanner* planner = catalog_.FindPlanner(profile_set);
  if (facts.mig_enabled != 0 && planner == nullptr) {
    return MakeError("GPUs of " + topo.summary_model() +
                     " are not MIG-capable (no MIG profile set " + QuoteForMessage(profile_set) +
                     " is known)");
  }
  auto info = std::make_shared<state::NodeInfo>();
  info->name = std::move(facts.name);
  info->labels = std::move(facts.labels);
  info->table = tables_.Get(facts.topology);
  info->reported = facts.topology;
  info->unhealthy = static_cast<topology::GpuMask>(unhealthy);
  info->mig_layout_reported = document_states_mig;
  info->mig = planner;
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

}  // namespace linkfit::source
