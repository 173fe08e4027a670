// The `nics` array of linkfit's topology document (document_nics.h).

#include "topology/document_nics.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <utility>

#include "linkfit/common/strings.h"

namespace linkfit::topology::internal {
namespace {

using nlohmann::json;

// Names of devices, functions and interfaces: short, printable, no blanks or quotes.
bool PlausibleName(const std::string& text) {
  if (text.empty() || text.size() > 64) return false;
  for (const char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.' || c == ':' || c == '@';
    if (!ok) return false;
  }
  return true;
}

Result<std::string> ReadName(const json& item, const char* key, const std::string& path,
                             bool required) {
  const auto it = item.find(key);
  if (it == item.end() || it->is_null()) {
    if (required) return MakeError(path + "." + key + ": missing");
    return std::string();
  }
  if (!it->is_string()) return MakeError(path + "." + key + ": expected a string");
  std::string value = it->get<std::string>();
  if (!PlausibleName(value)) {
    return MakeError(path + "." + key + ": " + QuoteForMessage(value) +
                     " is not a device name (1..64 of A-Z a-z 0-9 _ - . : @)");
  }
  return value;
}

Result<double> ReadNonNegative(const json& item, const char* key, const std::string& path,
                               double fallback, double max_value) {
  const auto it = item.find(key);
  if (it == item.end() || it->is_null()) return fallback;
  if (!it->is_number()) return MakeError(path + "." + key + ": expected a number");
  const double value = it->get<double>();
  if (!std::isfinite(value) || value < 0 || value > max_value) {
    return MakeError(path + "." + key + ": outside 0.." + std::to_string(max_value));
  }
  return value;
}

Result<int> ReadWhole(const json& item, const char* key, const std::string& path, int fallback,
                      int min_value, int max_value) {
  const auto it = item.find(key);
  if (it == item.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) return MakeError(path + "." + key + ": expected an integer");
  const std::int64_t value = it->get<std::int64_t>();
  if (value < min_value || value > max_value) {
    return MakeError(path + "." + key + ": " + std::to_string(value) + " is outside " +
                     std::to_string(min_value) + ".." + std::to_string(max_value));
  }
  return static_cast<int>(value);
}

Result<std::vector<PcieRelation>> ReadRelations(const json& item, const std::string& path,
                                                int gpu_count) {
  const std::string where = path + ".gpu_relations";
  const auto field = item.find("gpu_relations");
  if (field == item.end() || !field->is_array()) {
    return MakeError(where + ": expected an array of PIX, PXB, PHB, NODE or SYS, one per GPU");
  }
  const json& cells = *field;
  if (cells.size() != static_cast<std::size_t>(gpu_count)) {
    return MakeError(where + ": " + std::to_string(cells.size()) + " entries for " +
                     std::to_string(gpu_count) + " GPUs");
  }
  std::vector<PcieRelation> relations;
  for (const json& cell : cells) {
    const std::string at = where + "[" + std::to_string(relations.size()) + "]";
    if (!cell.is_string()) return MakeError(at + ": not a string");
    auto relation = ParsePcieRelation(cell.get<std::string>());
    if (!relation) return WithContext(relation.error(), at);
    relations.push_back(*relation);
  }
  return relations;
}

Result<void> ReadPortFacts(const json& item, const std::string& path, NicSpec& nic) {
  if (const auto it = item.find("link_layer"); it != item.end() && !it->is_null()) {
    if (!it->is_string()) return MakeError(path + ".link_layer: expected a string");
    auto layer = ParseNicLinkLayer(it->get<std::string>());
    if (!layer) return WithContext(layer.error(), path + ".link_layer");
    nic.link_layer = *layer;
  }
  LINKFIT_ASSIGN_OR_RETURN(nic.port, ReadWhole(item, "port", path, 1, 1, 255));
  LINKFIT_ASSIGN_OR_RETURN(nic.rate_gbps, ReadNonNegative(item, "rate_gbps", path, 0, 100000));
  LINKFIT_ASSIGN_OR_RETURN(nic.state, ReadName(item, "state", path, false));
  LINKFIT_ASSIGN_OR_RETURN(nic.uverbs, ReadName(item, "uverbs", path, false));
  if (const auto field = item.find("netdevs"); field != item.end() && !field->is_null()) {
    const json& names = *field;
    if (!names.is_array() || names.size() > 64) {
      return MakeError(path + ".netdevs: expected an array of at most 64 names");
    }
    for (const json& entry : names) {
      const std::string where = path + ".netdevs[" + std::to_string(nic.netdevs.size()) + "]";
      if (!entry.is_string()) return MakeError(where + ": expected a string");
      std::string name = entry.get<std::string>();
      if (!PlausibleName(name)) return MakeError(where + ": not an interface name");
      nic.netdevs.push_back(std::move(name));
    }
  }
  return {};
}

Result<NicSpec> ParseNic(const json& item, const std::string& path, int gpu_count) {
  if (!item.is_object()) return MakeError(path + ": expected an object");
  NicSpec nic;
  LINKFIT_ASSIGN_OR_RETURN(nic.name, ReadName(item, "name", path, true));
  LINKFIT_ASSIGN_OR_RETURN(nic.pci_bus_id, ReadName(item, "pci_bus_id", path, false));
  LINKFIT_ASSIGN_OR_RETURN(nic.data_path_pci_bus_id,
                           ReadName(item, "data_path_pci_bus_id", path, false));
  LINKFIT_ASSIGN_OR_RETURN(nic.numa_node, ReadWhole(item, "numa_node", path, -1, -1, 1024));
  LINKFIT_ASSIGN_OR_RETURN(nic.rail, ReadWhole(item, "rail", path, -1, 0, kMaxNics - 1));
  LINKFIT_ASSIGN_OR_RETURN(nic.sriov_physfn, ReadName(item, "sriov_physfn", path, false));
  LINKFIT_ASSIGN_OR_RETURN(nic.sriov_num_vfs, ReadWhole(item, "sriov_num_vfs", path, 0, 0, 4096));
  if (Result<void> port = ReadPortFacts(item, path, nic); !port) {
    return tl::unexpected(port.error());
  }
  LINKFIT_ASSIGN_OR_RETURN(nic.gpu_relations, ReadRelations(item, path, gpu_count));
  return nic;
}

}  // namespace

Result<std::vector<NicSpec>> ParseNicArray(
    const json& root,
    const std::function<Result<NicSpec>(const json& item, const std::string& path)>& parse) {
  std::vector<NicSpec> nics;
  const auto field = root.find("nics");
  if (field == root.end() || field->is_null()) return nics;
  const json& items = *field;
  if (!items.is_array()) return MakeError("$.nics: expected an array");
  if (items.size() > static_cast<std::size_t>(kMaxNics)) {
    return MakeError("$.nics: " + std::to_string(items.size()) + " NICs; at most " +
                     std::to_string(kMaxNics) + " per node");
  }
  std::set<std::string> names;
  for (const json& item : items) {
    const std::string path = "$.nics[" + std::to_string(nics.size()) + "]";
    auto nic = parse(item, path);
    if (!nic) return tl::unexpected(nic.error());
    if (!names.insert(nic->name).second) return MakeError(path + ".name: duplicate " + nic->name);
    nics.push_back(std::move(*nic));
  }
  return nics;
}

Result<std::vector<NicSpec>> ParseNics(const json& root, int gpu_count) {
  return ParseNicArray(root, [gpu_count](const json& item, const std::string& path) {
    return ParseNic(item, path, gpu_count);
  });
}

void WriteNics(const std::vector<NicSpec>& nics, json& doc) {
  if (nics.empty()) return;
  json out = json::array();
  for (const NicSpec& nic : nics) {
    json item = {{"name", nic.name}};
    if (!nic.pci_bus_id.empty()) item["pci_bus_id"] = nic.pci_bus_id;
    if (!nic.data_path_pci_bus_id.empty()) item["data_path_pci_bus_id"] = nic.data_path_pci_bus_id;
    if (nic.numa_node >= 0) item["numa_node"] = nic.numa_node;
    if (nic.link_layer != NicLinkLayer::kUnknown) item["link_layer"] = ToString(nic.link_layer);
    if (nic.port != 1) item["port"] = nic.port;  // port 1 goes unsaid, as old documents mean it
    if (nic.rate_gbps > 0) item["rate_gbps"] = nic.rate_gbps;
    if (!nic.state.empty()) item["state"] = nic.state;
    if (!nic.uverbs.empty()) item["uverbs"] = nic.uverbs;
    if (!nic.netdevs.empty()) item["netdevs"] = nic.netdevs;
    if (!nic.sriov_physfn.empty()) item["sriov_physfn"] = nic.sriov_physfn;
    if (nic.sriov_num_vfs > 0) item["sriov_num_vfs"] = nic.sriov_num_vfs;
    if (nic.rail >= 0) item["rail"] = nic.rail;
    json relations = json::array();
    for (PcieRelation relation : nic.gpu_relations) relations.push_back(ToString(relation));
    item["gpu_relations"] = std::move(relations);
    out.push_back(std::move(item));
  }
  doc["nics"] = std::move(out);
}

}  // namespace linkfit::topology::internal
