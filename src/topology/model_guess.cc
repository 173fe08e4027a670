// FillModelFacts (spec.h): what the GPU model names tell, from the GPU model table
// (config/gpus.json, gpu_models.h). The node agent asks NVML first and comes to the table only
// for what the machine cannot tell; the nvidia-smi fallback has nothing else.

#include <set>
#include <string>

#include "linkfit/topology/gpu_models.h"
#include "linkfit/topology/spec.h"

namespace linkfit::topology {

void FillModelFacts(TopologySpec& spec, const GpuModelTable& table) {
  std::set<std::string> models;
  int nvlink_generation = 0;
  bool nvlink_known = false;
  for (GpuSpec& gpu : spec.gpus) {
    if (gpu.model.empty()) continue;
    models.insert(gpu.model);
    const GpuModelFacts facts = table.Lookup(gpu.model, gpu.memory_mib);
    const auto source = [](bool known) {
      return known ? FigureSource::kTable : FigureSource::kAssumed;
    };
    gpu.pcie_gen = facts.pcie_generation.value;
    gpu.sources.pcie = source(facts.pcie_generation.known());
    gpu.mig_profile_set = facts.mig_profile_set.value;
    gpu.mig_capable = !gpu.mig_profile_set.empty();
    gpu.sources.mig = source(facts.mig_profile_set.known());
    gpu.p2p_supported = facts.p2p.value;
    if (nvlink_generation == 0) {
      nvlink_generation = facts.nvlink_generation.value;
      nvlink_known = facts.nvlink_generation.known();
    }
  }
  if (models.size() > 1) {
    spec.warnings.push_back("the node mixes " + std::to_string(models.size()) +
                            " GPU models; NVLink generation taken from the first known one");
  }
  // topo -m tells which pairs have NVLinks; their version only the table can tell.
  const FigureSource nvlink_source =
      spec.fabric.kind == NvlinkFabricKind::kNone
          ? FigureSource::kNvidiaSmi
          : (nvlink_known ? FigureSource::kTable : FigureSource::kAssumed);
  for (GpuSpec& gpu : spec.gpus) gpu.sources.nvlink = nvlink_source;
  if (spec.fabric.kind == NvlinkFabricKind::kNone) return;
  spec.fabric.nvlink_generation = nvlink_generation;
  if (spec.fabric.kind == NvlinkFabricKind::kNvswitch && nvlink_generation >= 2) {
    // NVSwitch gen1 came with NVLink2 (DGX-2), gen2 with NVLink3, gen3 with NVLink4.
    spec.fabric.nvswitch_generation = nvlink_generation - 1;
  }
}

}  // namespace linkfit::topology
