// InferFabric (nvidia_smi_text.h): what topo -m's NV# cells tell of the NVLink fabric.

#include <algorithm>
#include <cstddef>
#include <map>
#include <set>

#include "topology/nvidia_smi_text.h"

namespace linkfit::topology::internal {

void InferFabric(TopologySpec& spec) {
  const std::size_t n = spec.gpus.size();
  std::size_t nvlinked = 0;
  std::set<int> counts;
  DisjointSets islands(n);
  for (const LinkSpec& link : spec.links) {
    if (link.nvlink_count == 0) continue;
    ++nvlinked;
    counts.insert(link.nvlink_count);
    islands.Union(static_cast<std::size_t>(link.a), static_cast<std::size_t>(link.b));
  }
  NvlinkFabric& fabric = spec.fabric;
  if (nvlinked == 0) {
    fabric.kind = NvlinkFabricKind::kNone;
    return;
  }
  // topo -m cannot tell NVSwitch from a full mesh of direct links; a uniform all-to-all NVLink
  // class on 4+ GPUs is what HGX/DGX NVSwitch boards print (DGX-2, DGX A100, DGX H100), while no
  // direct-link board wires 4+ GPUs all-to-all with equal bonds.
  if (n >= 4 && nvlinked == spec.links.size() && counts.size() == 1) {
    fabric.kind = NvlinkFabricKind::kNvswitch;
    for (LinkSpec& link : spec.links) link.via_nvswitch = true;
  } else {
    std::map<std::size_t, int> island_size;
    for (std::size_t g = 0; g < n; ++g) ++island_size[islands.Find(g)];
    const bool all_pairs = std::all_of(island_size.begin(), island_size.end(),
                                       [](const auto& entry) { return entry.second <= 2; });
    fabric.kind = all_pairs ? NvlinkFabricKind::kBridge : NvlinkFabricKind::kDirect;
  }

  for (GpuSpec& gpu : spec.gpus) {
    int links = 0;
    for (const LinkSpec& link : spec.links) {
      if (link.a != gpu.index && link.b != gpu.index) continue;
      // Through NVSwitches every peer shares the same physical links: NV# is their number.
      links = fabric.kind == NvlinkFabricKind::kNvswitch ? std::max(links, link.nvlink_count)
                                                         : links + link.nvlink_count;
    }
    gpu.nvlink_physical_links = links;
  }
}

}  // namespace linkfit::topology::internal
