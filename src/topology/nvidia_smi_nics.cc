// The NIC columns of `nvidia-smi topo -m` and its NIC legend (nvidia_smi_text.h).
//
// Drivers since about 470 label NIC columns NIC0, NIC1, ... and print below the matrix
//
//   NIC Legend:
//
//     NIC0: mlx5_0
//     NIC1: mlx5_1
//
// while older drivers label the columns with the device names themselves (mlx5_0). The GPU rows'
// cells in a NIC column are the relation of that NIC to each GPU; the NIC rows repeat them and
// add NIC-to-NIC relations, which linkfit does not use.

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/strings.h"
#include "topology/nvidia_smi_text.h"

namespace linkfit::topology::internal {
namespace {

bool IsDeviceNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

bool PlausibleDeviceName(std::string_view name) {
  return !name.empty() && name.size() <= 64 &&
         std::all_of(name.begin(), name.end(), IsDeviceNameChar);
}

// Reads the legend: label -> device name. Lines after "NIC Legend:" up to the first line that is
// neither blank nor an entry.
Result<std::map<std::string, std::string, std::less<>>> ReadLegend(std::string_view text) {
  std::map<std::string, std::string, std::less<>> legend;
  std::set<std::string, std::less<>> names;
  bool in_legend = false;
  int number = 0;
  for (std::string_view raw : Split(text, '\n')) {
    ++number;
    const std::string line = StripAnsi(raw);
    const std::string_view trimmed = Trim(line);
    if (!in_legend) {
      in_legend = trimmed == "NIC Legend:";
      continue;
    }
    if (trimmed.empty()) continue;
    const std::string prefix = "line " + std::to_string(number) + ": ";
    const std::size_t colon = trimmed.find(':');
    if (!StartsWith(trimmed, "NIC") || colon == std::string_view::npos) {
      if (legend.empty()) {
        return MakeError(prefix + "expected a NIC legend entry (\"NIC0: mlx5_0\"), got " +
                         QuoteForMessage(trimmed));
      }
      break;  // whatever follows the legend (a prompt, another command's output)
    }
    const std::string_view label = Trim(trimmed.substr(0, colon));
    const std::string_view name = Trim(trimmed.substr(colon + 1));
    if (!PlausibleDeviceName(label) || !PlausibleDeviceName(name)) {
      return MakeError(prefix + "NIC legend entry " + QuoteForMessage(trimmed) +
                       " is not of the form NIC<n>: <device name>");
    }
    if (legend.count(label) != 0)
      return MakeError(prefix + "NIC legend repeats " + std::string(label));
    if (!names.insert(std::string(name)).second) {
      return MakeError(prefix + "NIC legend names device " + std::string(name) + " twice");
    }
    legend.emplace(std::string(label), std::string(name));
  }
  return legend;
}

// The NUMA node of the GPUs closest to `nic` when they share one; -1 otherwise.
int NicNumaNode(const NicSpec& nic, const std::vector<GpuSpec>& gpus) {
  std::optional<PcieRelation> closest;
  for (PcieRelation relation : nic.gpu_relations) {
    if (relation != PcieRelation::kSys && (!closest || relation > *closest)) closest = relation;
  }
  if (!closest) return -1;
  std::set<int> numa;
  for (std::size_t g = 0; g < gpus.size(); ++g) {
    if (nic.gpu_relations[g] == *closest) numa.insert(gpus[g].numa_node);
  }
  return numa.size() == 1 ? *numa.begin() : -1;
}

}  // namespace

Result<void> ReadNicColumns(std::string_view topo_text, const std::vector<NicColumn>& columns,
                            TopologySpec& spec) {
  if (columns.empty()) return {};
  auto legend = ReadLegend(topo_text);
  if (!legend) return tl::unexpected(legend.error());
  if (columns.size() > static_cast<std::size_t>(kMaxNics)) {
    return MakeError("topo -m shows " + std::to_string(columns.size()) + " NICs; at most " +
                     std::to_string(kMaxNics) + " are supported");
  }
  std::set<std::string> names;
  for (const NicColumn& column : columns) {
    NicSpec nic;
    const auto entry = legend->find(column.label);
    nic.name = entry != legend->end() ? entry->second : column.label;
    if (!PlausibleDeviceName(nic.name)) {
      return MakeError("topo -m NIC column " + QuoteForMessage(column.label) +
                       " is not a device name");
    }
    if (!names.insert(nic.name).second) {
      return MakeError("topo -m shows NIC " + nic.name + " twice");
    }
    for (std::size_t g = 0; g < column.cells.size(); ++g) {
      auto relation = ParsePcieRelation(column.cells[g]);
      if (!relation) {
        spec.warnings.push_back("GPU" + std::to_string(g) + "-" + nic.name +
                                ": unrecognised cell " + QuoteForMessage(column.cells[g]) +
                                "; treated as SYS");
      }
      nic.gpu_relations.push_back(relation.value_or(PcieRelation::kSys));
    }
    nic.numa_node = NicNumaNode(nic, spec.gpus);
    spec.nics.push_back(std::move(nic));
  }
  for (const auto& [label, name] : *legend) {
    if (names.count(name) == 0) {
      spec.warnings.push_back("NIC legend entry " + label + ": " + name +
                              " has no column in the matrix; ignored");
    }
  }
  return {};
}

}  // namespace linkfit::topology::internal
