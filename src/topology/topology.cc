#include "linkfit/topology/topology.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <initializer_list>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>

#include "linkfit/common/strings.h"
#include "topology/topology_graph.h"

namespace linkfit::topology {
namespace {

GpuMask Bit(int gpu) { return static_cast<GpuMask>(1u << gpu); }

std::string Pair(int a, int b) { return std::to_string(a) + "-" + std::to_string(b); }

// What the document does not state of a pair's NVLinks, the GPU model table (config/gpus.json,
// the table the node agent consults too) tells by the GPU's model: one source of model facts.
// The document's own figures come first.
struct ModelNvlink {
  int generation = 0;    // 0: the table does not know
  double link_gbps = 0;  // 0: the generation's standard rate
};

// The pair's own generation where the document gives one (links of different versions on one
// machine), else the fabric's, else the model table's, else NVLink 3 (the A100 era's).
int NvlinkGeneration(const TopologySpec& spec, const LinkSpec& link, const ModelNvlink& model) {
  if (link.nvlink_generation > 0) return link.nvlink_generation;
  if (spec.fabric.nvlink_generation > 0) return spec.fabric.nvlink_generation;
  return model.generation > 0 ? model.generation : 3;
}

// Links narrower than their generation's (GA102 boards: RTX A6000, A40, RTX 3090 bridges carry
// 4 links of about 14 GB/s): the document's per-link rate where it states one, else the table's.
bool NarrowLinks(const TopologySpec& spec, const ModelNvlink& model) {
  const double gbps = spec.fabric.per_link_gbps > 0 ? spec.fabric.per_link_gbps : model.link_gbps;
  return gbps > 0 && gbps < 20;
}

std::string NvswitchKey(const TopologySpec& spec, const LinkSpec& link, const ModelNvlink& model) {
  // NVSwitch gen N came with NVLink gen N+1 (DGX-2: 1 with NVLink 2).
  int generation =
      link.nvlink_generation > 0 ? link.nvlink_generation - 1 : spec.fabric.nvswitch_generation;
  if (generation == 0) generation = NvlinkGeneration(spec, link, model) - 1;
  if (generation <= 1) return "NVSWITCH_V100_DGX2";
  if (generation == 2) return "NVSWITCH_A100";
  return "NVSWITCH_H100";
}

std::string DirectNvlinkKey(const TopologySpec& spec, const LinkSpec& link,
                            const ModelNvlink& model) {
  switch (NvlinkGeneration(spec, link, model)) {
    case 2:
      return "NVLINK_DIRECT_per_link_gen2";
    case 4:
      return "NVLINK_DIRECT_per_link_gen4";
    default:
      return NarrowLinks(spec, model) ? "NVLINK_DIRECT_per_link_ga102"
                                      : "NVLINK_DIRECT_per_link_gen3_sxm";
  }
}

std::uint32_t ToMbps(double gbps) { return static_cast<std::uint32_t>(gbps * 1000.0 + 0.5); }

// PCIe pair rate for a relation and generation, made monotone in the relation so that operator
// overrides cannot break SYS <= NODE <= PHB <= PXB <= PIX.
std::uint32_t PcieMbps(const BandwidthModel& model, PcieRelation relation, int gen) {
  static constexpr const char* kNames[] = {"SYS", "NODE", "PHB", "PXB", "PIX"};
  const int clamped_gen = std::clamp(gen, 3, 5);
  std::uint32_t best = 0;
  for (int r = 0; r <= static_cast<int>(relation); ++r) {
    const auto value = model.Get(std::string(kNames[r]) + "_gen" + std::to_string(clamped_gen));
    if (value) best = std::max(best, ToMbps(*value));
  }
  return best;
}

// The PCIe generation and lanes a PCIe-only pair runs at: the slowest link of its path. That is
// each GPU's own link (unknown: gen 4, x16) and the upstream link of every switch the path runs
// through without turning at it: the switches on one GPU's path and not on the other's. The
// switch where the two paths meet, and those above it, carry none of the pair's traffic on
// their upstream links.
struct PcieRate {
  int gen = 4;
  int lanes = 16;
};

PcieRate PairPcieRate(const std::map<std::string, const PcieNode*>& tree, const GpuSpec& ga,
                      const GpuSpec& gb) {
  PcieRate rate;
  rate.gen = std::min(ga.pcie_gen == 0 ? 4 : ga.pcie_gen, gb.pcie_gen == 0 ? 4 : gb.pcie_gen);
  rate.lanes =
      std::min(ga.pcie_width > 0 ? ga.pcie_width : 16, gb.pcie_width > 0 ? gb.pcie_width : 16);
  const auto limit_by = [&](const std::vector<std::string>& path,
                            const std::vector<std::string>& other) {
    for (const std::string& id : path) {
      if (std::find(other.begin(), other.end(), id) != other.end()) continue;
      const auto node = tree.find(id);
      if (node == tree.end() || !node->second->is_switch) continue;
      if (node->second->gen > 0) rate.gen = std::min(rate.gen, node->second->gen);
      if (node->second->width > 0) rate.lanes = std::min(rate.lanes, node->second->width);
    }
  };
  limit_by(ga.pcie_path, gb.pcie_path);
  limit_by(gb.pcie_path, ga.pcie_path);
  return rate;
}

// NICs: unique non-empty names, unique bus ids (a Data Direct function is not the NIC's own),
// one relation per GPU, rails in range; an unstated rail becomes the NIC's position.
Result<void> ValidateNics(TopologySpec& spec) {
  const std::size_t gpus = spec.gpus.size();
  if (spec.nics.size() > static_cast<std::size_t>(kMaxNics)) {
    return MakeError("topology has " + std::to_string(spec.nics.size()) + " NICs; at most " +
                     std::to_string(kMaxNics) + " are supported");
  }
  std::set<std::string> names;
  std::set<std::string> bus_ids;
  for (std::size_t i = 0; i < spec.nics.size(); ++i) {
    NicSpec& nic = spec.nics[i];
    const std::string where = "NIC " + std::to_string(i);
    if (nic.name.empty()) return MakeError(where + " has no name");
    if (!names.insert(nic.name).second) return MakeError("duplicate NIC name " + nic.name);
    const std::string what = "NIC " + nic.name;
    for (const std::string* bus : {&nic.pci_bus_id, &nic.data_path_pci_bus_id}) {
      if (!bus->empty() && !bus_ids.insert(*bus).second) {
        return MakeError(what + ": PCI function " + *bus + " is listed for another NIC too");
      }
    }
    if (nic.gpu_relations.size() != gpus) {
      return MakeError(what + " has " + std::to_string(nic.gpu_relations.size()) +
                       " GPU relations; the node has " + std::to_string(gpus) + " GPUs");
    }
    if (nic.rail < -1 || nic.rail >= kMaxNics) {
      return MakeError(what + ": rail " + std::to_string(nic.rail) + " is outside 0.." +
                       std::to_string(kMaxNics - 1));
    }
    if (nic.rail == -1) nic.rail = static_cast<int>(i);
    if (nic.numa_node < -1 || nic.rate_gbps < 0 || nic.sriov_num_vfs < 0) {
      return MakeError(what + ": negative NUMA node, rate or VF count");
    }
  }
  return {};
}

Result<void> Validate(TopologySpec& spec) {
  const int n = static_cast<int>(spec.gpus.size());
  if (n == 0) return MakeError("topology has no GPUs");
  if (n > kMaxGpus) {
    return MakeError("topology has " + std::to_string(n) + " GPUs; at most " +
                     std::to_string(kMaxGpus) + " are supported");
  }
  std::sort(spec.gpus.begin(), spec.gpus.end(),
            [](const GpuSpec& a, const GpuSpec& b) { return a.index < b.index; });
  for (int i = 0; i < n; ++i) {
    const int index = spec.gpus[static_cast<std::size_t>(i)].index;
    if (index != i) {
      if (i > 0 && spec.gpus[static_cast<std::size_t>(i - 1)].index == index) {
        return MakeError("duplicate GPU index " + std::to_string(index));
      }
      return MakeError("GPU indexes must be 0.." + std::to_string(n - 1) + "; found " +
                       std::to_string(index));
    }
  }
  std::map<std::pair<int, int>, LinkSpec> links;
  for (LinkSpec link : spec.links) {
    if (link.a > link.b) std::swap(link.a, link.b);
    if (link.a < 0 || link.b >= n || link.a == link.b) {
      return MakeError("link " + Pair(link.a, link.b) + " names a GPU that does not exist");
    }
    if (!links.emplace(std::make_pair(link.a, link.b), link).second) {
      return MakeError("link " + Pair(link.a, link.b) + " is listed twice");
    }
  }
  spec.links.clear();
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      const auto it = links.find({a, b});
      if (it == links.end()) return MakeError("no link given for GPU pair " + Pair(a, b));
      spec.links.push_back(it->second);
    }
  }
  return ValidateNics(spec);
}

std::uint64_t Fnv1a(std::string_view text) {
  std::uint64_t hash = 1469598103934665603ull;
  for (char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

std::vector<GpuMask> GroupBy(const TopologySpec& spec, bool by_socket) {
  std::map<int, GpuMask> groups;
  for (const GpuSpec& gpu : spec.gpus) {
    const int key = by_socket ? gpu.socket : gpu.numa_node;
    groups[key] = static_cast<GpuMask>(groups[key] | Bit(gpu.index));
  }
  std::vector<GpuMask> out;
  for (const auto& entry : groups) out.push_back(entry.second);
  return out;
}

// The distinct models by their lowest GPU, and the one of most healthy GPUs (most GPUs when none
// is healthy; ties: the earliest group).
void GroupByModel(const TopologySpec& spec, Topology::Derived& derived) {
  std::vector<int> healthy;
  for (const GpuSpec& gpu : spec.gpus) {
    auto group = std::find_if(derived.model_groups.begin(), derived.model_groups.end(),
                              [&](const Topology::ModelGroup& g) { return g.model == gpu.model; });
    if (group == derived.model_groups.end()) {
      derived.model_groups.push_back({gpu.model, ToLower(gpu.model), 0});
      healthy.push_back(0);
      group = std::prev(derived.model_groups.end());
    }
    group->gpus = static_cast<GpuMask>(group->gpus | Bit(gpu.index));
    if (gpu.healthy) ++healthy[static_cast<std::size_t>(group - derived.model_groups.begin())];
  }
  const bool any_healthy = std::any_of(healthy.begin(), healthy.end(), [](int h) { return h > 0; });
  auto weight = [&](std::size_t i) {
    return any_healthy ? healthy[i] : std::popcount(derived.model_groups[i].gpus);
  };
  for (std::size_t i = 1; i < derived.model_groups.size(); ++i) {
    if (weight(i) > weight(derived.summary_group)) derived.summary_group = i;
  }
}

}  // namespace

Topology::Topology(TopologySpec spec, Derived derived)
    : spec_(std::move(spec)),
      gpu_count_(static_cast<int>(spec_.gpus.size())),
      d_(std::move(derived)) {}

GpuMask Topology::GpusOfModels(const std::vector<std::string>& lowered_substrings) const {
  if (lowered_substrings.empty()) return all_gpus();
  GpuMask gpus = 0;
  for (const ModelGroup& group : d_.model_groups) {
    for (const std::string& substring : lowered_substrings) {
      if (group.lower.find(substring) != std::string::npos) {
        gpus = static_cast<GpuMask>(gpus | group.gpus);
        break;
      }
    }
  }
  return gpus;
}

int Topology::NumaSpan(GpuMask mask) const {
  int span = 0;
  for (GpuMask group : d_.numa_groups) {
    if ((group & mask) != 0) ++span;
  }
  return span;
}

namespace {

// What the model table says of each GPU's NVLinks, by GPU index (one lookup per distinct model).
std::vector<ModelNvlink> ModelNvlinks(const TopologySpec& spec, const GpuModelTable& models) {
  std::vector<ModelNvlink> model_nvlink(spec.gpus.size());
  std::map<std::pair<std::string, std::uint64_t>, ModelNvlink> looked_up;
  for (const GpuSpec& gpu : spec.gpus) {
    const auto key = std::make_pair(gpu.model, gpu.memory_mib);
    auto it = looked_up.find(key);
    if (it == looked_up.end()) {
      const GpuModelFacts facts = models.Lookup(gpu.model, gpu.memory_mib);
      it = looked_up
               .emplace(key,
                        ModelNvlink{facts.nvlink_generation.value, facts.nvlink_link_gbps.value})
               .first;
    }
    model_nvlink[static_cast<std::size_t>(gpu.index)] = it->second;
  }
  return model_nvlink;
}

// Each pair's bandwidth, the NVLink neighbours and the PCIe and NVLink bounds into `derived`;
// warnings into spec.warnings.
void DerivePairBandwidths(TopologySpec& spec, const BandwidthModel& bandwidth,
                          const std::vector<ModelNvlink>& model_nvlink,
                          Topology::Derived& derived) {
  const int n = static_cast<int>(spec.gpus.size());
  derived.bandwidth.assign(static_cast<std::size_t>(n * n), 0);
  derived.nvlink_neighbors.assign(static_cast<std::size_t>(n), 0);
  auto at = [&](int a, int b) -> std::uint32_t& {
    return derived.bandwidth[static_cast<std::size_t>(a * n + b)];
  };
  std::map<std::string, const PcieNode*> tree;
  for (const PcieNode& node : spec.pcie_tree) tree.emplace(node.id, &node);
  for (const LinkSpec& link : spec.links) {
    const GpuSpec& ga = spec.gpus[static_cast<std::size_t>(link.a)];
    const GpuSpec& gb = spec.gpus[static_cast<std::size_t>(link.b)];
    std::uint32_t mbps = 0;
    if (link.nvlink_count > 0) {
      const ModelNvlink& model = model_nvlink[static_cast<std::size_t>(link.a)];
      if (link.via_nvswitch) {
        mbps = ToMbps(bandwidth.Get(NvswitchKey(spec, link, model)).value_or(230.0));
      } else {
        mbps = ToMbps(bandwidth.Get(DirectNvlinkKey(spec, link, model)).value_or(20.0) *
                      link.nvlink_count);
      }
      derived.nvlink_neighbors[static_cast<std::size_t>(link.a)] |= Bit(link.b);
      derived.nvlink_neighbors[static_cast<std::size_t>(link.b)] |= Bit(link.a);
    } else {
      // Without P2P (GeForce), traffic is staged through host memory: the SYS rate.
      const PcieRelation relation =
          (ga.p2p_supported && gb.p2p_supported) ? link.pcie : PcieRelation::kSys;
      const PcieRate rate = PairPcieRate(tree, ga, gb);
      mbps = PcieMbps(bandwidth, relation, rate.gen);
      // The model's rates are for x16 links; a narrower link on the path carries its share.
      if (rate.lanes < 16) mbps = mbps / 16 * static_cast<std::uint32_t>(rate.lanes);
      derived.max_pcie_only_mbps = std::max(derived.max_pcie_only_mbps, mbps);
    }
    at(link.a, link.b) = mbps;
    at(link.b, link.a) = mbps;
  }
  // An NVLink pair must beat every PCIe-only pair of the node (e.g. NV1 at 20 GB/s next to a
  // gen5 PIX pair at 48 GB/s would otherwise rank below it).
  std::uint32_t min_nvlink = 0;
  for (const LinkSpec& link : spec.links) {
    if (link.nvlink_count == 0) continue;
    std::uint32_t& mbps = at(link.a, link.b);
    if (mbps <= derived.max_pcie_only_mbps) {
      spec.warnings.push_back("NVLink pair " + Pair(link.a, link.b) + " (" +
                              std::to_string(mbps / 1000) + " GB/s) raised above the fastest " +
                              "PCIe-only pair of the node");
      mbps = derived.max_pcie_only_mbps + 1000;
      at(link.b, link.a) = mbps;
    }
    min_nvlink = min_nvlink == 0 ? mbps : std::min(min_nvlink, mbps);
  }
  derived.min_nvlink_mbps = min_nvlink;
}

// The fingerprint: equal for topologies that place alike (their tables are shared).
std::string FingerprintOf(const TopologySpec& spec, const Topology::Derived& derived) {
  // Appended piece by piece: GCC 12 at -O3 warns falsely (-Wrestrict) on `"literal" + string`.
  std::string canonical = std::to_string(spec.gpus.size());
  const auto add = [&canonical](std::string_view separator, const auto& value) {
    canonical += separator;
    if constexpr (std::is_arithmetic_v<std::decay_t<decltype(value)>>) {
      canonical += std::to_string(value);
    } else {
      canonical += value;
    }
  };
  for (const GpuSpec& gpu : spec.gpus) {
    add("|", gpu.model);
    add("/", gpu.memory_mib);
    add("/", gpu.numa_node);
    add("/", gpu.socket);
    add("/", gpu.mig_profile_set);
    add("/", std::string_view(gpu.mig_capable ? "m" : "-"));
  }
  for (std::uint32_t value : derived.bandwidth) add(",", value);
  for (GpuMask g : derived.switch_groups) add(";s", g);
  for (GpuMask g : derived.islands) add(";i", g);
  // NICs only where there are some, so that NIC-less nodes keep their fingerprints.
  for (const NicSpec& nic : spec.nics) {
    add(";n", nic.rail);
    add("/", ToString(nic.link_layer));
    add("/", nic.rate_gbps);
    canonical += '/';
    for (PcieRelation relation : nic.gpu_relations) {
      canonical += static_cast<char>('0' + static_cast<int>(relation));
    }
  }
  for (std::uint32_t mbps : derived.staged_mbps) add(";h", mbps);
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(Fnv1a(canonical)));
  return hex;
}

}  // namespace

Result<TopologyPtr> BuildTopology(TopologySpec spec, const BandwidthModel& bandwidth,
                                  const GpuModelTable& models) {
  if (auto valid = Validate(spec); !valid) return tl::unexpected(valid.error());
  bool unknown_gen = false;
  for (const GpuSpec& gpu : spec.gpus) unknown_gen = unknown_gen || gpu.pcie_gen == 0;
  if (unknown_gen) spec.warnings.push_back("PCIe generation unknown for some GPUs; assuming gen 4");

  Topology::Derived derived;
  DerivePairBandwidths(spec, bandwidth, ModelNvlinks(spec, models), derived);
  internal::GraphDerivations graph = internal::DeriveFromGraph(spec, spec.warnings);
  derived.islands = std::move(graph.nvlink_islands);
  derived.switch_groups = std::move(graph.pcie_switch_groups);
  derived.numa_groups = GroupBy(spec, /*by_socket=*/false);
  derived.socket_groups = GroupBy(spec, /*by_socket=*/true);
  GroupByModel(spec, derived);
  if (!spec.nics.empty()) {
    for (const GpuSpec& gpu : spec.gpus) {
      const std::uint32_t mbps =
          PcieMbps(bandwidth, PcieRelation::kSys, gpu.pcie_gen == 0 ? 4 : gpu.pcie_gen);
      const int lanes = gpu.pcie_width > 0 ? std::min(gpu.pcie_width, 16) : 16;
      derived.staged_mbps.push_back(mbps / 16 * static_cast<std::uint32_t>(lanes));
    }
  }
  derived.fingerprint = FingerprintOf(spec, derived);
  return std::make_shared<const Topology>(std::move(spec), std::move(derived));
}

}  // namespace linkfit::topology
