// The `nics` entries of the gpu-topology-fixture/v1 schema (../shared/topologies/README.md):
//
//   {"name": "mlx5_0", "numa_node": 3, "pcie_parent": "sw_n3_nic", "pxb_gpus": [0, 1]}
//
// Each GPU's relation to the NIC: the list that names it (pix_gpus, pxb_gpus, phb_gpus) when one
// does; otherwise from the PCIe tree, when the NIC's parent and the GPU's path meet in it (under
// one switch that is the parent of both: PIX; another switch: PXB; a host bridge: PHB);
// otherwise NODE on the NIC's NUMA node and SYS elsewhere, as NVML defines them (NODE: across
// host bridges within one NUMA node; SYS: across the interconnect between NUMA nodes).

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "linkfit/common/strings.h"
#include "topology/document_nics.h"

namespace linkfit::topology::internal {
namespace {

using nlohmann::json;

// The PCIe nodes from `id` up to its host bridge, `id` first; empty when `id` is not in the tree.
std::vector<std::string> Ancestry(const std::vector<PcieNode>& tree, const std::string& id) {
  std::vector<std::string> chain;
  std::string at = id;
  while (!at.empty() && chain.size() <= tree.size()) {
    const auto node =
        std::find_if(tree.begin(), tree.end(), [&](const PcieNode& n) { return n.id == at; });
    if (node == tree.end()) return {};
    chain.push_back(at);
    at = node->parent;
  }
  return chain;
}

// The relation of a NIC below `nic_chain` (its parent first) to `gpu`, from the tree; nullopt
// when they do not meet in it.
std::optional<PcieRelation> FromTree(const std::vector<PcieNode>& tree,
                                     const std::vector<std::string>& nic_chain,
                                     const GpuSpec& gpu) {
  if (nic_chain.empty() || gpu.pcie_path.empty()) return std::nullopt;
  for (auto hop = gpu.pcie_path.rbegin(); hop != gpu.pcie_path.rend(); ++hop) {
    if (std::find(nic_chain.begin(), nic_chain.end(), *hop) == nic_chain.end()) continue;
    const auto node =
        std::find_if(tree.begin(), tree.end(), [&](const PcieNode& n) { return n.id == *hop; });
    if (!node->is_switch) return PcieRelation::kPhb;
    const bool both_below = *hop == nic_chain.front() && hop == gpu.pcie_path.rbegin();
    return both_below ? PcieRelation::kPix : PcieRelation::kPxb;
  }
  return std::nullopt;
}

Result<std::vector<int>> GpuList(const json& item, const char* key, const std::string& path,
                                 int gpu_count) {
  std::vector<int> gpus;
  const auto field = item.find(key);
  if (field == item.end() || field->is_null()) return gpus;
  if (!field->is_array()) return MakeError(path + "." + key + ": expected an array of GPU indexes");
  for (const json& value : *field) {
    if (!value.is_number_integer() || value.get<int>() < 0 || value.get<int>() >= gpu_count) {
      return MakeError(path + "." + key + ": " + QuoteForMessage(value.dump()) +
                       " is not a GPU index 0.." + std::to_string(gpu_count - 1));
    }
    gpus.push_back(value.get<int>());
  }
  return gpus;
}

Result<NicSpec> ParseFixtureNic(const json& item, const std::string& path,
                                const TopologySpec& spec) {
  if (!item.is_object()) return MakeError(path + ": expected an object");
  NicSpec nic;
  const std::string* name = nullptr;
  if (const auto it = item.find("name"); it != item.end()) {
    name = it->get_ptr<const std::string*>();
  }
  if (name == nullptr || name->empty())
    return MakeError(path + ".name: expected a non-empty string");
  nic.name = *name;
  const auto numa = item.find("numa_node");
  if (numa != item.end() && !numa->is_null()) {
    if (!numa->is_number_integer() || numa->get<int>() < 0) {
      return MakeError(path + ".numa_node: expected a NUMA node number");
    }
    nic.numa_node = numa->get<int>();
  }
  std::vector<std::string> chain;
  if (const auto parent = item.find("pcie_parent"); parent != item.end() && !parent->is_null()) {
    const std::string* id = parent->get_ptr<const std::string*>();
    if (id == nullptr) return MakeError(path + ".pcie_parent: expected a PCIe node id");
    chain = Ancestry(spec.pcie_tree, *id);
    if (chain.empty() && !spec.pcie_tree.empty()) {
      return MakeError(path + ".pcie_parent: unknown PCIe node " + QuoteForMessage(*id));
    }
  }
  const int gpu_count = static_cast<int>(spec.gpus.size());
  std::map<int, PcieRelation> listed;
  const std::pair<const char*, PcieRelation> lists[] = {{"phb_gpus", PcieRelation::kPhb},
                                                        {"pxb_gpus", PcieRelation::kPxb},
                                                        {"pix_gpus", PcieRelation::kPix}};
  for (const auto& [key, relation] : lists) {
    auto gpus = GpuList(item, key, path, gpu_count);
    if (!gpus) return tl::unexpected(gpus.error());
    for (int g : *gpus) listed[g] = relation;  // the closest list naming a GPU wins
  }
  for (const GpuSpec& gpu : spec.gpus) {
    if (const auto it = listed.find(gpu.index); it != listed.end()) {
      nic.gpu_relations.push_back(it->second);
    } else if (const auto relation = FromTree(spec.pcie_tree, chain, gpu)) {
      nic.gpu_relations.push_back(*relation);
    } else {
      nic.gpu_relations.push_back(nic.numa_node >= 0 && gpu.numa_node == nic.numa_node
                                      ? PcieRelation::kNode
                                      : PcieRelation::kSys);
    }
  }
  return nic;
}

}  // namespace

Result<std::vector<NicSpec>> ParseFixtureNics(const json& root, const TopologySpec& spec) {
  return ParseNicArray(root, [&spec](const json& item, const std::string& path) {
    return ParseFixtureNic(item, path, spec);
  });
}

}  // namespace linkfit::topology::internal
