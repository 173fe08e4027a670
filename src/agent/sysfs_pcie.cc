// ReadPcieTree (sysfs_pcie.h): the PCIe switches above the GPUs and the figures of their links.

#include "agent/sysfs_pcie.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "agent/gpu_nvml_links.h"
#include "linkfit/common/strings.h"

namespace linkfit::agent {
namespace {

namespace fs = std::filesystem;

std::string ReadFirstLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return std::string(Trim(line));
}

struct PortFigures {
  PcieLinkFigures max;
  PcieLinkFigures current;
};

PortFigures ReadPort(const fs::path& function) {
  PortFigures port;
  port.max.gen = PcieGenerationOfSpeed(ReadFirstLine(function / "max_link_speed"));
  port.current.gen = PcieGenerationOfSpeed(ReadFirstLine(function / "current_link_speed"));
  const auto width = [&](const char* file) {
    const auto value = ParseInt(ReadFirstLine(function / file));
    return value && *value > 0 && *value <= 32 ? static_cast<int>(*value) : 0;
  };
  port.max.width = width("max_link_width");
  port.current.width = width("current_link_width");
  return port;
}

int LowerKnown(int a, int b) {
  if (a == 0) return b;
  if (b == 0) return a;
  return std::min(a, b);
}

// The link between `upper` (a port) and `lower` (the function below it): what both ends can run
// at; `trained`: also no more than what the lower end trained at (switch links, which do not
// change speed to save power as GPUs do).
PcieLinkFigures LinkBetween(const PortFigures& upper, const PortFigures& lower, bool trained) {
  PcieLinkFigures link;
  link.gen = LowerKnown(upper.max.gen, lower.max.gen);
  link.width = LowerKnown(upper.max.width, lower.max.width);
  if (trained) {
    link.gen = LowerKnown(link.gen, lower.current.gen);
    link.width = LowerKnown(link.width, lower.current.width);
  }
  return link;
}

bool IsFunctionName(std::string_view name) {
  // dddd:bb:dd.f
  return name.size() == 12 && name[4] == ':' && name[7] == ':' && name[10] == '.';
}

// Adds `node` unless a node of its id is there already (GPUs share their switches).
void AddNode(topology::TopologySpec& spec, std::map<std::string, std::size_t>& index,
             topology::PcieNode node) {
  if (index.count(node.id) != 0) return;
  index.emplace(node.id, spec.pcie_tree.size());
  spec.pcie_tree.push_back(std::move(node));
}

}  // namespace

int PcieGenerationOfSpeed(std::string_view text) {
  const std::string_view trimmed = Trim(text);
  const std::size_t end = trimmed.find_first_not_of("0123456789.");
  const std::string number(trimmed.substr(0, end));
  if (number.empty() || end == std::string_view::npos ||
      Trim(trimmed.substr(end)).substr(0, 4) != "GT/s") {
    return 0;
  }
  const double gts = std::strtod(number.c_str(), nullptr);
  static constexpr struct {
    double gts;
    int gen;
  } kSpeeds[] = {{2.5, 1}, {5, 2}, {8, 3}, {16, 4}, {32, 5}, {64, 6}};
  for (const auto& speed : kSpeeds) {
    if (gts > speed.gts - 0.01 && gts < speed.gts + 0.01) return speed.gen;
  }
  return 0;
}

std::vector<PcieLinkFigures> ReadPcieTree(const std::string& sysfs_root,
                                          topology::TopologySpec& spec,
                                          std::vector<std::string>& warnings) {
  std::vector<PcieLinkFigures> gpu_links(spec.gpus.size());
  std::error_code error;
  const fs::path devices = fs::canonical(fs::path(sysfs_root) / "devices", error);
  if (error) return gpu_links;
  topology::TopologySpec tree;  // the nodes found, moved into spec only if any GPU has a path
  std::map<std::string, std::size_t> index;
  std::vector<std::vector<std::string>> paths(spec.gpus.size());
  std::string unknown;
  for (std::size_t g = 0; g < spec.gpus.size(); ++g) {
    const topology::GpuSpec& gpu = spec.gpus[g];
    if (gpu.pci_bus_id.empty()) continue;
    const std::string bus = nvml::CanonicalBusId(gpu.pci_bus_id);
    const fs::path real =
        fs::canonical(fs::path(sysfs_root) / "bus" / "pci" / "devices" / bus, error);
    std::vector<std::string> parts;
    if (!error) {
      for (const fs::path& part : real.lexically_relative(devices)) parts.push_back(part.string());
    }
    // pci<domain>:<bus>, the functions between, the GPU's own function last.
    if (parts.size() < 2 || parts.front().rfind("pci", 0) != 0 || parts.back() != bus ||
        !std::all_of(parts.begin() + 1, parts.end(), IsFunctionName)) {
      unknown += (unknown.empty() ? "" : ", ") + std::to_string(gpu.index);
      continue;
    }
    fs::path dir = devices / parts.front();
    std::vector<PortFigures> ports;  // of parts[1..]
    for (std::size_t i = 1; i < parts.size(); ++i) {
      dir /= parts[i];
      ports.push_back(ReadPort(dir));
    }
    topology::PcieNode bridge;
    bridge.id = parts.front();
    bridge.source = topology::FigureSource::kSysfs;
    if (parts.size() > 2) {
      bridge.gen = ports.front().max.gen;  // the root port's
      const auto numa = ParseInt(ReadFirstLine(devices / parts.front() / parts[1] / "numa_node"));
      if (numa && *numa >= 0) bridge.numa_node = static_cast<int>(*numa);
    }
    AddNode(tree, index, bridge);
    std::vector<std::string>& path = paths[g];
    path.push_back(bridge.id);
    // Below the root port (parts[1]): switches as (upstream, downstream) port pairs.
    for (std::size_t up = 2; up + 1 <= parts.size() - 2; up += 2) {
      topology::PcieNode sw;
      sw.id = parts[up];
      sw.is_switch = true;
      sw.parent = path.back();
      const PcieLinkFigures link = LinkBetween(ports[up - 2], ports[up - 1], /*trained=*/true);
      sw.gen = link.gen;
      sw.width = link.width;
      sw.source = topology::FigureSource::kSysfs;
      path.push_back(sw.id);
      AddNode(tree, index, std::move(sw));
    }
    if (ports.size() >= 2) {
      gpu_links[g] = LinkBetween(ports[ports.size() - 2], ports.back(), /*trained=*/false);
    } else {
      gpu_links[g] = ports.back().max;
    }
  }
  if (tree.pcie_tree.empty()) return gpu_links;
  if (!unknown.empty()) {
    warnings.push_back("PCIe path of GPUs " + unknown +
                       " unknown to sysfs; their switches are not in the PCIe tree");
  }
  spec.pcie_tree = std::move(tree.pcie_tree);
  for (std::size_t g = 0; g < spec.gpus.size(); ++g) spec.gpus[g].pcie_path = std::move(paths[g]);
  return gpu_links;
}

}  // namespace linkfit::agent
