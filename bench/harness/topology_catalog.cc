#include "harness/topology_catalog.h"

#include <filesystem>

#include "linkfit/topology/topology.h"

namespace linkfit::bench {
namespace {

// go-gpuallocator's PCIe term by common ancestor.
int PcieScore(topology::PcieRelation relation) {
  switch (relation) {
    case topology::PcieRelation::kSys:
      return 10;
    case topology::PcieRelation::kNode:
      return 20;
    case topology::PcieRelation::kPhb:
      return 30;
    case topology::PcieRelation::kPxb:
      return 40;
    case topology::PcieRelation::kPix:
      return 50;
  }
  return 10;
}

}  // namespace

std::string ShippedTopologyPath(const std::string& repo_root, const std::string& file) {
  return std::filesystem::absolute(repo_root + "/config/topologies/" + file)
      .lexically_normal()
      .string();
}

Result<NodeTopologyPtr> LoadNodeTopology(const std::string& path) {
  auto spec = topology::LoadTopologyFile(path);
  if (!spec) return tl::unexpected(spec.error());
  const topology::TopologySpec copy = *spec;
  auto model = topology::BuildTopology(std::move(*spec));
  if (!model) return WithContext(model.error(), path);
  const topology::Topology& t = **model;
  const int n = t.gpu_count();
  const auto cells = static_cast<std::size_t>(n * n);
  std::vector<int> allocator(cells, 0);
  std::vector<bool> nvlink(cells, false);
  std::vector<int> numa;
  for (int a = 0; a < n; ++a) {
    numa.push_back(t.numa_node(a));
    for (int b = 0; b < n; ++b) {
      nvlink[static_cast<std::size_t>(a * n + b)] = a != b && t.has_nvlink(a, b);
    }
  }
  for (const topology::LinkSpec& link : copy.links) {
    // NVSwitch links are invisible to go-gpuallocator (the remote end is the switch).
    const int score = PcieScore(link.pcie) + (link.via_nvswitch ? 0 : 100 * link.nvlink_count);
    allocator[static_cast<std::size_t>(link.a * n + link.b)] = score;
    allocator[static_cast<std::size_t>(link.b * n + link.a)] = score;
  }
  std::string mig_set = n > 0 ? copy.gpus.front().mig_profile_set : std::string();
  return std::make_shared<const NodeTopology>(copy.id, alloc::PlacementTable::Build(*model),
                                              std::move(allocator), std::move(numa),
                                              std::move(nvlink), std::move(mig_set));
}

}  // namespace linkfit::bench
