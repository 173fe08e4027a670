// Topology documents: the gpu-topology-fixture/v1 schema (../shared/topologies/README.md) and
// linkfit's compact annotation form (same keys, no provenance/system/topo_matrix; NICs in
// linkfit's own `nics` form, document_nics.h). The fixture schema's `nics` entries have another
// shape (name, numa_node, pcie_parent, pxb_gpus), read by ParseFixtureNics.

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "linkfit/common/strings.h"
#include "linkfit/topology/spec.h"
#include "topology/document_nics.h"

namespace linkfit::topology {
namespace {

using nlohmann::json;

constexpr std::string_view kFixtureSchema = "gpu-topology-fixture/v1";
constexpr std::string_view kCompactSchema = "linkfit-topology/v1";

// Field readers: each returns an error naming the path of the bad field.
Result<const json*> Field(const json& object, const char* key, const std::string& path,
                          bool required) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) {
    if (required) return MakeError(path + "." + key + ": missing");
    return static_cast<const json*>(nullptr);
  }
  return &*it;
}

Result<std::int64_t> ReadInt(const json& object, const char* key, const std::string& path,
                             std::optional<std::int64_t> fallback) {
  auto field = Field(object, key, path, !fallback.has_value());
  if (!field) return tl::unexpected(field.error());
  if (*field == nullptr) return *fallback;
  const json& value = **field;
  if (value.is_number_integer()) return value.get<std::int64_t>();
  if (value.is_number_float()) {
    const double d = value.get<double>();
    // Only a whole number within int64's range converts (casting any other double is undefined).
    if (d >= -9223372036854775808.0 && d < 9223372036854775808.0 && d == std::trunc(d)) {
      return static_cast<std::int64_t>(d);
    }
  }
  return MakeError(path + "." + key + ": expected an integer, got " + value.dump());
}

Result<double> ReadNumber(const json& object, const char* key, const std::string& path,
                          double fallback) {
  auto field = Field(object, key, path, false);
  if (!field) return tl::unexpected(field.error());
  if (*field == nullptr) return fallback;
  if (!(*field)->is_number()) {
    return MakeError(path + "." + key + ": expected a number, got " + (*field)->dump());
  }
  return (*field)->get<double>();
}

Result<std::string> ReadString(const json& object, const char* key, const std::string& path,
                               bool required) {
  auto field = Field(object, key, path, required);
  if (!field) return tl::unexpected(field.error());
  if (*field == nullptr) return std::string();
  if (!(*field)->is_string()) {
    return MakeError(path + "." + key + ": expected a string, got " + (*field)->dump());
  }
  return (*field)->get<std::string>();
}

Result<bool> ReadBool(const json& object, const char* key, const std::string& path, bool fallback) {
  auto field = Field(object, key, path, false);
  if (!field) return tl::unexpected(field.error());
  if (*field == nullptr) return fallback;
  if (!(*field)->is_boolean()) {
    return MakeError(path + "." + key + ": expected true or false, got " + (*field)->dump());
  }
  return (*field)->get<bool>();
}

Result<NvlinkFabric> ParseFabric(const json& root) {
  NvlinkFabric fabric;
  auto field = Field(root, "nvlink_fabric", "$", false);
  if (!field) return tl::unexpected(field.error());
  if (*field == nullptr) return fabric;
  const json& f = **field;
  const std::string path = "$.nvlink_fabric";
  if (!f.is_object()) return MakeError(path + ": expected an object");
  std::string kind;
  LINKFIT_ASSIGN_OR_RETURN(kind, ReadString(f, "kind", path, false));
  auto parsed_kind = ParseNvlinkFabricKind(kind);
  if (!parsed_kind) return WithContext(parsed_kind.error(), path + ".kind");
  fabric.kind = *parsed_kind;
  std::int64_t value = 0;
  LINKFIT_ASSIGN_OR_RETURN(value, ReadInt(f, "nvlink_generation", path, 0));
  fabric.nvlink_generation = static_cast<int>(value);
  LINKFIT_ASSIGN_OR_RETURN(value, ReadInt(f, "nvswitch_generation", path, 0));
  fabric.nvswitch_generation = static_cast<int>(value);
  LINKFIT_ASSIGN_OR_RETURN(value, ReadInt(f, "nvswitch_count", path, 0));
  fabric.nvswitch_count = static_cast<int>(value);
  LINKFIT_ASSIGN_OR_RETURN(fabric.per_link_gbps,
                           ReadNumber(f, "per_link_GBps_per_direction", path, 0.0));
  if (fabric.nvlink_generation < 0 || fabric.nvlink_generation > 10 ||
      fabric.nvswitch_generation < 0 || fabric.nvswitch_generation > 10 ||
      fabric.nvswitch_count < 0 || fabric.per_link_gbps < 0) {
    return MakeError(path + ": negative or implausible generation/count/bandwidth");
  }
  return fabric;
}

Result<std::vector<PcieNode>> ParsePcieTree(const json& root) {
  std::vector<PcieNode> tree;
  auto field = Field(root, "pcie_tree", "$", false);
  if (!field) return tl::unexpected(field.error());
  if (*field == nullptr) return tree;
  if (!(*field)->is_array()) return MakeError("$.pcie_tree: expected an array");
  std::set<std::string> ids;
  std::size_t i = 0;
  for (const json& item : **field) {
    const std::string path = "$.pcie_tree[" + std::to_string(i++) + "]";
    if (!item.is_object()) return MakeError(path + ": expected an object");
    PcieNode node;
    LINKFIT_ASSIGN_OR_RETURN(node.id, ReadString(item, "id", path, true));
    std::string kind;
    LINKFIT_ASSIGN_OR_RETURN(kind, ReadString(item, "kind", path, true));
    if (kind == "switch") {
      node.is_switch = true;
    } else if (kind != "host_bridge") {
      return MakeError(path + ".kind: expected host_bridge or switch, got " +
                       QuoteForMessage(kind));
    }
    LINKFIT_ASSIGN_OR_RETURN(node.parent, ReadString(item, "parent", path, false));
    std::int64_t value = 0;
    LINKFIT_ASSIGN_OR_RETURN(value, ReadInt(item, "numa_node", path, -1));
    node.numa_node = static_cast<int>(value);
    LINKFIT_ASSIGN_OR_RETURN(value, ReadInt(item, "gen", path, 0));
    node.gen = static_cast<int>(value);
    LINKFIT_ASSIGN_OR_RETURN(value, ReadInt(item, "width", path, 0));
    node.width = static_cast<int>(value);
    if (node.gen < 0 || node.gen > 10 || node.width < 0 || node.width > 32) {
      return MakeError(path + ": gen 0..10 and width 0..32 expected");
    }
    std::string source;
    LINKFIT_ASSIGN_OR_RETURN(source, ReadString(item, "source", path, false));
    if (!source.empty()) {
      auto parsed = ParseFigureSource(source);
      if (!parsed) return MakeError(path + ".source: " + parsed.error().message);
      node.source = *parsed;
    }
    if (!ids.insert(node.id).second) return MakeError(path + ".id: duplicate " + node.id);
    tree.push_back(std::move(node));
  }
  for (const PcieNode& node : tree) {
    if (!node.parent.empty() && ids.count(node.parent) == 0) {
      return MakeError("$.pcie_tree: " + node.id + " names unknown parent " + node.parent);
    }
  }
  return tree;
}

Result<MigMode> ReadMigMode(const json& item, const char* key, const std::string& path) {
  std::string text;
  LINKFIT_ASSIGN_OR_RETURN(text, ReadString(item, key, path, false));
  if (text.empty()) return MigMode::kUnknown;
  auto mode = ParseMigMode(text);
  if (!mode) return WithContext(mode.error(), path + "." + key);
  return *mode;
}

Result<MigInstanceSpec> ParseMigInstance(const json& item, const std::string& path) {
  if (!item.is_object()) return MakeError(path + ": expected an object");
  MigInstanceSpec instance;
  LINKFIT_ASSIGN_OR_RETURN(instance.profile, ReadString(item, "profile", path, true));
  std::int64_t value = 0;
  LINKFIT_ASSIGN_OR_RETURN(value, ReadInt(item, "start", path, std::nullopt));
  if (value < 0 || value > 7) return MakeError(path + ".start: outside 0..7");
  instance.start = static_cast<int>(value);
  LINKFIT_ASSIGN_OR_RETURN(value, ReadInt(item, "size", path, std::nullopt));
  if (value < 1 || value > 8 || instance.start + value > 8) {
    return MakeError(path + ".size: " + std::to_string(value) + " slices from start " +
                     std::to_string(instance.start) + " do not fit the GPU's 8 memory slices");
  }
  instance.size = static_cast<int>(value);
  LINKFIT_ASSIGN_OR_RETURN(instance.uuid, ReadString(item, "uuid", path, false));
  if (item.contains("gpu_instance")) {
    LINKFIT_ASSIGN_OR_RETURN(value, ReadInt(item, "gpu_instance", path, std::nullopt));
    if (value < 0 || value > 255) return MakeError(path + ".gpu_instance: outside 0..255");
    instance.gpu_instance = static_cast<int>(value);
  }
  return instance;
}

// The node agent's per-GPU facts (spec.h): health, MIG mode, the MIG instances that exist.
// "sources": {"nvlink": "nvml", "pcie": "table", "mig": "nvml"}: where the agent took each
// figure (FigureSource); every key optional, no other key, no other value.
Result<FigureSources> ReadSources(const json& item, const std::string& path) {
  auto field = Field(item, "sources", path, false);
  if (!field) return tl::unexpected(field.error());
  FigureSources sources;
  if (*field == nullptr) return sources;
  const std::string where = path + ".sources";
  if (!(*field)->is_object()) return MakeError(where + ": expected an object");
  for (const auto& [key, value] : (*field)->items()) {
    FigureSource* slot = key == "nvlink" ? &sources.nvlink
                         : key == "pcie" ? &sources.pcie
                         : key == "mig"  ? &sources.mig
                                         : nullptr;
    if (slot == nullptr)
      return MakeError(where + "." + key + ": unknown figure (nvlink, pcie, mig)");
    if (!value.is_string()) return MakeError(where + "." + key + ": expected a string");
    auto source = ParseFigureSource(value.get<std::string>());
    if (!source) return MakeError(where + "." + key + ": " + source.error().message);
    *slot = *source;
  }
  return sources;
}

Result<void> ParseAgentFacts(const json& item, const std::string& path, GpuSpec& gpu) {
  LINKFIT_ASSIGN_OR_RETURN(gpu.sources, ReadSources(item, path));
  LINKFIT_ASSIGN_OR_RETURN(gpu.healthy, ReadBool(item, "healthy", path, true));
  LINKFIT_ASSIGN_OR_RETURN(gpu.health_problem, ReadString(item, "health_problem", path, false));
  if (!gpu.healthy && gpu.health_problem.empty()) gpu.health_problem = "reported unhealthy";
  LINKFIT_ASSIGN_OR_RETURN(gpu.mig_mode, ReadMigMode(item, "mig_mode", path));
  LINKFIT_ASSIGN_OR_RETURN(gpu.mig_mode_pending, ReadMigMode(item, "mig_mode_pending", path));
  auto instances = Field(item, "mig_instances", path, false);
  if (!instances) return tl::unexpected(instances.error());
  if (*instances == nullptr) return {};
  if (!(*instances)->is_array()) return MakeError(path + ".mig_instances: expected an array");
  unsigned used = 0;
  for (std::size_t i = 0; i < (*instances)->size(); ++i) {
    const std::string where = path + ".mig_instances[" + std::to_string(i) + "]";
    auto instance = ParseMigInstance((**instances)[i], where);
    if (!instance) return tl::unexpected(instance.error());
    const unsigned slices = ((1u << instance->size) - 1u) << instance->start;
    if ((used & slices) != 0) return MakeError(where + ": overlaps another instance");
    used |= slices;
    gpu.mig_instances.push_back(std::move(*instance));
  }
  if (!gpu.mig_instances.empty() && gpu.mig_mode != MigMode::kEnabled) {
    return MakeError(path + ".mig_instances: listed on a GPU whose mig_mode is not \"enabled\"");
  }
  return {};
}

Result<GpuSpec> ParseGpu(const json& item, const std::string& path) {
  if (!item.is_object()) return MakeError(path + ": expected an object");
  GpuSpec gpu;
  std::int64_t value = 0;
  LINKFIT_ASSIGN_OR_RETURN(value, ReadInt(item, "index", path, std::nullopt));
  if (value < 0 || value >= kMaxGpus) {
    return MakeError(path + ".index: " + std::to_string(value) + " is outside 0.." +
                     std::to_string(kMaxGpus - 1));
  }
  gpu.index = static_cast<int>(value);
  LINKFIT_ASSIGN_OR_RETURN(gpu.uuid, ReadString(item, "uuid", path, false));
  LINKFIT_ASSIGN_OR_RETURN(gpu.model, ReadString(item, "model", path, false));
  if (gpu.model.empty()) gpu.model = "unknown";
  LINKFIT_ASSIGN_OR_RETURN(value, ReadInt(item, "memory_mib", path, 0));
  if (value < 0) return MakeError(path + ".memory_mib: negative");
  gpu.memory_mib = static_cast<std::uint64_t>(value);
  LINKFIT_ASSIGN_OR_RETURN(value, ReadInt(item, "numa_node", path, 0));
  if (value < 0 || value > 1024) return MakeError(path + ".numa_node: out of range");
  gpu.numa_node = static_cast<int>(value);
  LINKFIT_ASSIGN_OR_RETURN(value, ReadInt(item, "socket", path, 0));
  if (value < 0 || value > 64) return MakeError(path + ".socket: out of range");
  gpu.socket = static_cast<int>(value);
  LINKFIT_ASSIGN_OR_RETURN(value, ReadInt(item, "pcie_gen", path, 0));
  if (value < 0 || value > 7) return MakeError(path + ".pcie_gen: out of range");
  gpu.pcie_gen = static_cast<int>(value);
  LINKFIT_ASSIGN_OR_RETURN(value, ReadInt(item, "pcie_width", path, 0));
  if (value < 0 || value > 32) return MakeError(path + ".pcie_width: out of range (0..32 lanes)");
  gpu.pcie_width = static_cast<int>(value);
  LINKFIT_ASSIGN_OR_RETURN(gpu.mig_capable, ReadBool(item, "mig_capable", path, false));
  LINKFIT_ASSIGN_OR_RETURN(gpu.mig_profile_set, ReadString(item, "mig_profile_set", path, false));
  LINKFIT_ASSIGN_OR_RETURN(gpu.p2p_supported, ReadBool(item, "p2p_supported", path, true));
  LINKFIT_ASSIGN_OR_RETURN(gpu.pci_bus_id, ReadString(item, "pci_bus_id", path, false));
  LINKFIT_ASSIGN_OR_RETURN(value, ReadInt(item, "nvlink_physical_links", path, 0));
  gpu.nvlink_physical_links = static_cast<int>(value);
  auto pcie_path = Field(item, "pcie_path", path, false);
  if (!pcie_path) return tl::unexpected(pcie_path.error());
  if (*pcie_path != nullptr) {
    if (!(*pcie_path)->is_array()) return MakeError(path + ".pcie_path: expected an array");
    for (const json& hop : **pcie_path) {
      if (!hop.is_string()) return MakeError(path + ".pcie_path: expected strings");
      gpu.pcie_path.push_back(hop.get<std::string>());
    }
  }
  auto facts = ParseAgentFacts(item, path, gpu);
  if (!facts) return tl::unexpected(facts.error());
  return gpu;
}

std::string PairName(int a, int b) { return std::to_string(a) + "-" + std::to_string(b); }

// Reads links[]; a duplicate pair that disagrees, an unknown relation or NV cell is a warning and
// the pair is treated as SYS without NVLink (the safe fallback of DESIGN.md §4).
Result<std::vector<LinkSpec>> ParseLinks(const json& root, int gpu_count,
                                         std::vector<std::string>& warnings) {
  auto field = Field(root, "links", "$", gpu_count > 1);
  if (!field) return tl::unexpected(field.error());
  std::map<std::pair<int, int>, LinkSpec> by_pair;
  std::set<std::pair<int, int>> conflicting;
  if (*field != nullptr) {
    if (!(*field)->is_array()) return MakeError("$.links: expected an array");
    std::size_t i = 0;
    for (const json& item : **field) {
      const std::string path = "$.links[" + std::to_string(i++) + "]";
      if (!item.is_object()) return MakeError(path + ": expected an object");
      std::int64_t a = 0;
      std::int64_t b = 0;
      LINKFIT_ASSIGN_OR_RETURN(a, ReadInt(item, "a", path, std::nullopt));
      LINKFIT_ASSIGN_OR_RETURN(b, ReadInt(item, "b", path, std::nullopt));
      if (a < 0 || b < 0 || a >= gpu_count || b >= gpu_count) {
        return MakeError(path + ": pair " + std::to_string(a) + "-" + std::to_string(b) +
                         " names a GPU that is not in gpus[]");
      }
      if (a == b) return MakeError(path + ": a link from GPU " + std::to_string(a) + " to itself");
      LinkSpec link;
      link.a = static_cast<int>(std::min(a, b));
      link.b = static_cast<int>(std::max(a, b));
      std::int64_t count = 0;
      LINKFIT_ASSIGN_OR_RETURN(count, ReadInt(item, "nvlink_count", path, 0));
      if (count < 0 || count > 64) {
        warnings.push_back("link " + PairName(link.a, link.b) + ": nvlink_count " +
                           std::to_string(count) + " is implausible; treated as SYS");
        count = 0;
      }
      link.nvlink_count = static_cast<int>(count);
      std::string via;
      LINKFIT_ASSIGN_OR_RETURN(via, ReadString(item, "nvlink_via", path, false));
      link.via_nvswitch = via == "nvswitch";
      std::int64_t generation = 0;
      LINKFIT_ASSIGN_OR_RETURN(generation, ReadInt(item, "nvlink_generation", path, 0));
      if (generation < 0 || generation > 10) {
        return MakeError(path + ".nvlink_generation: out of range (0..10)");
      }
      link.nvlink_generation = static_cast<int>(generation);
      if (!via.empty() && via != "nvswitch" && via != "direct") {
        warnings.push_back("link " + PairName(link.a, link.b) + ": unknown nvlink_via " +
                           QuoteForMessage(via) + "; treated as direct");
      }
      std::string relation;
      LINKFIT_ASSIGN_OR_RETURN(relation, ReadString(item, "pcie_relation", path, false));
      if (relation.empty()) {
        // Compact documents may carry only the nvidia-smi cell.
        LINKFIT_ASSIGN_OR_RETURN(relation, ReadString(item, "topo_cell", path, false));
        if (StartsWith(relation, "NV")) relation.clear();
      }
      if (relation.empty()) {
        link.pcie = PcieRelation::kSys;
      } else if (auto parsed = ParsePcieRelation(relation)) {
        link.pcie = *parsed;
      } else {
        warnings.push_back("link " + PairName(link.a, link.b) + ": " + parsed.error().message +
                           "; treated as SYS");
        link.pcie = PcieRelation::kSys;
      }
      const auto key = std::make_pair(link.a, link.b);
      const auto existing = by_pair.find(key);
      if (existing != by_pair.end()) {
        const LinkSpec& old = existing->second;
        if (old.nvlink_count != link.nvlink_count || old.pcie != link.pcie ||
            old.via_nvswitch != link.via_nvswitch) {
          conflicting.insert(key);
        }
        continue;
      }
      by_pair.emplace(key, link);
    }
  }
  std::vector<LinkSpec> links;
  for (int a = 0; a < gpu_count; ++a) {
    for (int b = a + 1; b < gpu_count; ++b) {
      const auto it = by_pair.find({a, b});
      if (it == by_pair.end()) {
        return MakeError("$.links: no entry for GPU pair " + PairName(a, b) +
                         " (every unordered pair needs one)");
      }
      LinkSpec link = it->second;
      if (conflicting.count({a, b}) != 0) {
        warnings.push_back("link " + PairName(a, b) +
                           " is listed twice with different values (asymmetric); treated as SYS");
        link.nvlink_count = 0;
        link.via_nvswitch = false;
        link.pcie = PcieRelation::kSys;
      }
      links.push_back(link);
    }
  }
  return links;
}

}  // namespace

Result<TopologySpec> ParseTopologyDocument(std::string_view json_text) {
  const json root = json::parse(json_text.begin(), json_text.end(), nullptr,
                                /*allow_exceptions=*/false);
  if (root.is_discarded()) return MakeError("topology document is not valid JSON");
  if (!root.is_object()) return MakeError("topology document: expected a JSON object");
  TopologySpec spec;
  std::string schema;
  LINKFIT_ASSIGN_OR_RETURN(schema, ReadString(root, "schema", "$", false));
  if (!schema.empty() && schema != kFixtureSchema && schema != kCompactSchema) {
    return MakeError("$.schema: unsupported " + QuoteForMessage(schema) + " (expected " +
                     std::string(kFixtureSchema) + " or " + std::string(kCompactSchema) + ")");
  }
  LINKFIT_ASSIGN_OR_RETURN(spec.id, ReadString(root, "id", "$", false));
  LINKFIT_ASSIGN_OR_RETURN(spec.name, ReadString(root, "name", "$", false));
  LINKFIT_ASSIGN_OR_RETURN(spec.fabric, ParseFabric(root));
  LINKFIT_ASSIGN_OR_RETURN(spec.pcie_tree, ParsePcieTree(root));
  for (const auto& entry : {std::pair{"handoff_mode", &spec.handoff_mode},
                            std::pair{"nic_handoff_mode", &spec.nic_handoff_mode}}) {
    const char* const key = entry.first;
    std::string* const mode = entry.second;  // a variable, not a binding: lambdas capture it
    LINKFIT_ASSIGN_OR_RETURN(*mode, ReadString(root, key, "$", false));
    if (!mode->empty() && std::none_of(std::begin(kHandoffModes), std::end(kHandoffModes),
                                       [&](const char* known) { return *mode == known; })) {
      return MakeError(std::string("$.") + key + ": unsupported " + QuoteForMessage(*mode) +
                       " (expected nri-cdi, nri-env, verify or report)");
    }
  }

  auto gpus = Field(root, "gpus", "$", true);
  if (!gpus) return tl::unexpected(gpus.error());
  if (!(*gpus)->is_array()) return MakeError("$.gpus: expected an array");
  if ((*gpus)->empty()) return MakeError("$.gpus: a node needs at least one GPU");
  if ((*gpus)->size() > static_cast<std::size_t>(kMaxGpus)) {
    return MakeError("$.gpus: " + std::to_string((*gpus)->size()) + " GPUs; linkfit supports " +
                     "at most " + std::to_string(kMaxGpus) + " per node");
  }
  std::map<int, GpuSpec> by_index;
  std::size_t i = 0;
  for (const json& item : **gpus) {
    const std::string path = "$.gpus[" + std::to_string(i++) + "]";
    auto gpu = ParseGpu(item, path);
    if (!gpu) return tl::unexpected(gpu.error());
    const int index = gpu->index;
    if (!by_index.emplace(index, std::move(*gpu)).second) {
      return MakeError(path + ".index: duplicate GPU index " + std::to_string(index));
    }
  }
  const int count = static_cast<int>(by_index.size());
  for (int index = 0; index < count; ++index) {
    if (by_index.count(index) == 0) {
      return MakeError("$.gpus: GPU indexes must be 0.." + std::to_string(count - 1) + "; GPU " +
                       std::to_string(index) + " is missing");
    }
  }
  std::set<std::string> tree_ids;
  for (const PcieNode& node : spec.pcie_tree) tree_ids.insert(node.id);
  for (auto& [index, gpu] : by_index) {
    for (const std::string& hop : gpu.pcie_path) {
      if (!tree_ids.empty() && tree_ids.count(hop) == 0) {
        return MakeError("$.gpus: GPU " + std::to_string(index) + " pcie_path names unknown " +
                         "PCIe node " + QuoteForMessage(hop));
      }
    }
    spec.gpus.push_back(std::move(gpu));
  }
  LINKFIT_ASSIGN_OR_RETURN(spec.links, ParseLinks(root, count, spec.warnings));
  if (schema == kFixtureSchema) {
    LINKFIT_ASSIGN_OR_RETURN(spec.nics, internal::ParseFixtureNics(root, spec));
  } else {
    LINKFIT_ASSIGN_OR_RETURN(spec.nics, internal::ParseNics(root, count));
  }
  return spec;
}

namespace {

void AddAgentFacts(const GpuSpec& gpu, json& item) {
  if (gpu.sources.stated()) {
    json sources = json::object();
    const std::pair<const char*, FigureSource> figures[] = {
        {"nvlink", gpu.sources.nvlink}, {"pcie", gpu.sources.pcie}, {"mig", gpu.sources.mig}};
    for (const auto& [figure, source] : figures) {
      if (source != FigureSource::kUnstated) sources[figure] = ToString(source);
    }
    item["sources"] = std::move(sources);
  }
  if (!gpu.healthy) {
    item["healthy"] = false;
    item["health_problem"] = gpu.health_problem;
  }
  if (gpu.mig_mode != MigMode::kUnknown) item["mig_mode"] = ToString(gpu.mig_mode);
  if (gpu.mig_mode_pending != MigMode::kUnknown && gpu.mig_mode_pending != gpu.mig_mode) {
    item["mig_mode_pending"] = ToString(gpu.mig_mode_pending);
  }
  if (gpu.mig_instances.empty()) return;
  json instances = json::array();
  for (const MigInstanceSpec& instance : gpu.mig_instances) {
    json entry = {
        {"profile", instance.profile}, {"start", instance.start}, {"size", instance.size}};
    if (!instance.uuid.empty()) entry["uuid"] = instance.uuid;
    if (instance.gpu_instance >= 0) entry["gpu_instance"] = instance.gpu_instance;
    instances.push_back(std::move(entry));
  }
  item["mig_instances"] = std::move(instances);
}

}  // namespace

std::string ToTopologyDocument(const TopologySpec& spec) {
  json doc;
  doc["schema"] = kCompactSchema;
  doc["id"] = spec.id;
  doc["name"] = spec.name;
  doc["nvlink_fabric"] = {{"kind", ToString(spec.fabric.kind)},
                          {"nvlink_generation", spec.fabric.nvlink_generation},
                          {"nvswitch_generation", spec.fabric.nvswitch_generation},
                          {"nvswitch_count", spec.fabric.nvswitch_count},
                          {"per_link_GBps_per_direction", spec.fabric.per_link_gbps}};
  json tree = json::array();
  for (const PcieNode& node : spec.pcie_tree) {
    json item = {{"id", node.id},
                 {"kind", node.is_switch ? "switch" : "host_bridge"},
                 {"parent", node.parent.empty() ? json(nullptr) : json(node.parent)},
                 {"gen", node.gen}};
    if (node.numa_node >= 0) item["numa_node"] = node.numa_node;
    if (node.width > 0) item["width"] = node.width;
    if (node.source != FigureSource::kUnstated) item["source"] = ToString(node.source);
    tree.push_back(std::move(item));
  }
  doc["pcie_tree"] = std::move(tree);
  json gpus = json::array();
  for (const GpuSpec& gpu : spec.gpus) {
    json item = {{"index", gpu.index},
                 {"model", gpu.model},
                 {"memory_mib", gpu.memory_mib},
                 {"numa_node", gpu.numa_node},
                 {"socket", gpu.socket},
                 {"pcie_path", gpu.pcie_path},
                 {"pcie_gen", gpu.pcie_gen},
                 {"mig_capable", gpu.mig_capable},
                 {"p2p_supported", gpu.p2p_supported}};
    if (!gpu.uuid.empty()) item["uuid"] = gpu.uuid;
    if (!gpu.mig_profile_set.empty()) item["mig_profile_set"] = gpu.mig_profile_set;
    if (!gpu.pci_bus_id.empty()) item["pci_bus_id"] = gpu.pci_bus_id;
    if (gpu.pcie_width > 0) item["pcie_width"] = gpu.pcie_width;
    if (gpu.nvlink_physical_links > 0) item["nvlink_physical_links"] = gpu.nvlink_physical_links;
    AddAgentFacts(gpu, item);
    gpus.push_back(std::move(item));
  }
  doc["gpus"] = std::move(gpus);
  if (!spec.handoff_mode.empty()) doc["handoff_mode"] = spec.handoff_mode;
  if (!spec.nic_handoff_mode.empty()) doc["nic_handoff_mode"] = spec.nic_handoff_mode;
  json links = json::array();
  for (const LinkSpec& link : spec.links) {
    json item = {{"a", link.a}, {"b", link.b}, {"pcie_relation", ToString(link.pcie)}};
    if (link.nvlink_count > 0) {
      item["nvlink_count"] = link.nvlink_count;
      item["nvlink_via"] = link.via_nvswitch ? "nvswitch" : "direct";
      if (link.nvlink_generation > 0) item["nvlink_generation"] = link.nvlink_generation;
    }
    links.push_back(std::move(item));
  }
  doc["links"] = std::move(links);
  internal::WriteNics(spec.nics, doc);
  return doc.dump();
}

}  // namespace linkfit::topology
