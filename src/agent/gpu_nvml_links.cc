#include "agent/gpu_nvml_links.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>

#include "linkfit/common/strings.h"

namespace linkfit::agent::nvml {
namespace {

// The lower of two generations, 0 (unknown) counting as "not yet seen".
int Lowest(int current, int generation) {
  if (generation == 0) return current;
  return current == 0 ? generation : std::min(current, generation);
}

}  // namespace

std::optional<int> SocketFromSysfs(const std::string& sysfs_root, int numa) {
  std::ifstream cpus(sysfs_root + "/devices/system/node/node" + std::to_string(numa) + "/cpulist");
  std::string list;
  if (!(cpus >> list)) return std::nullopt;
  const auto first = ParseInt(list.substr(0, list.find_first_of(",-")));
  if (!first) return std::nullopt;
  std::ifstream package(sysfs_root + "/devices/system/cpu/cpu" + std::to_string(*first) +
                        "/topology/physical_package_id");
  int socket = -1;
  if (!(package >> socket) || socket < 0) return std::nullopt;
  return socket;
}

std::string CanonicalBusId(std::string_view bus_id) {
  const std::string lower = ToLower(Trim(bus_id));
  const std::size_t colon = lower.find(':');
  if (colon == std::string::npos) return lower;
  unsigned long domain = std::strtoul(lower.substr(0, colon).c_str(), nullptr, 16);
  char text[16];
  std::snprintf(text, sizeof(text), "%04lx", domain);
  return std::string(text) + lower.substr(colon);
}

int NvlinkGenerationOfVersion(unsigned version) {
  switch (version) {
    case NVML_NVLINK_VERSION_1_0:
      return 1;
    case NVML_NVLINK_VERSION_2_0:
    case NVML_NVLINK_VERSION_2_2:
      return 2;
    case NVML_NVLINK_VERSION_3_0:
    case NVML_NVLINK_VERSION_3_1:
      return 3;
    case NVML_NVLINK_VERSION_4_0:
      return 4;
    case NVML_NVLINK_VERSION_5_0:
      return 5;
    default:
      return 0;
  }
}

double PerLinkGbps(int generation) {
  switch (generation) {
    case 1:
      return 20;
    case 2:
    case 3:
    case 4:
      return 25;
    case 5:
      return 50;
    default:
      return 0;
  }
}

LinkCounts CountNvlinks(const NvmlLibrary& nvml, const std::vector<nvmlDevice_t>& devices,
                        const std::vector<topology::GpuSpec>& gpus,
                        std::vector<std::string>& warnings) {
  const Functions& f = nvml.f();
  const std::size_t n = devices.size();
  LinkCounts counts;
  counts.to_gpu.assign(n, std::vector<int>(n, 0));
  counts.gpu_generation.assign(n, std::vector<int>(n, 0));
  counts.to_switch.assign(n, 0);
  counts.switch_generation.assign(n, 0);
  if (f.nvlink_state == nullptr || f.nvlink_remote_pci == nullptr) return counts;
  std::map<std::string, std::size_t> gpu_of_bus;
  for (std::size_t g = 0; g < n; ++g) gpu_of_bus[CanonicalBusId(gpus[g].pci_bus_id)] = g;
  std::set<unsigned> unknown_versions;
  for (std::size_t g = 0; g < n; ++g) {
    if (devices[g] == nullptr) continue;
    // NVML_NVLINK_MAX_LINKS is the API's own bound on link indices (18 since NVLink 4).
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      nvmlEnableState_t active = NVML_FEATURE_DISABLED;
      if (f.nvlink_state(devices[g], link, &active) != NVML_SUCCESS) continue;
      if (active != NVML_FEATURE_ENABLED) continue;
      nvmlPciInfo_t remote{};
      if (f.nvlink_remote_pci(devices[g], link, &remote) != NVML_SUCCESS) continue;
      const std::string bus = CanonicalBusId(remote.busId);
      nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
      if (f.nvlink_remote_type != nullptr) f.nvlink_remote_type(devices[g], link, &type);
      // The version of this link; any failure (NOT_SUPPORTED, FUNCTION_NOT_FOUND on drivers
      // that export the symbol without implementing it) leaves it unknown.
      unsigned version = NVML_NVLINK_VERSION_INVALID;
      int generation = 0;
      if (f.nvlink_version != nullptr &&
          f.nvlink_version(devices[g], link, &version) == NVML_SUCCESS) {
        generation = NvlinkGenerationOfVersion(version);
        if (generation == 0) unknown_versions.insert(version);
      }
      if (generation == 0) {
        ++counts.links_without_version;
      } else {
        counts.generations.insert(generation);
      }
      const auto peer = gpu_of_bus.find(bus);
      if (type == NVML_NVLINK_DEVICE_TYPE_SWITCH ||
          (type == NVML_NVLINK_DEVICE_TYPE_UNKNOWN && peer == gpu_of_bus.end())) {
        ++counts.to_switch[g];
        counts.switch_generation[g] = Lowest(counts.switch_generation[g], generation);
        counts.switches.insert(bus);
      } else if (peer != gpu_of_bus.end() && peer->second != g) {
        ++counts.to_gpu[g][peer->second];
        counts.gpu_generation[g][peer->second] =
            Lowest(counts.gpu_generation[g][peer->second], generation);
      }
    }
  }
  for (const unsigned version : unknown_versions) {
    warnings.push_back("NVML reports NVLink version " + std::to_string(version) +
                       ", newer than linkfit knows; those links' generation is unknown");
  }
  return counts;
}

void AssignSockets(topology::TopologySpec& spec, const std::string& sysfs_root,
                   std::vector<std::string>& warnings) {
  std::map<int, int> from_sysfs;
  bool complete = true;
  for (const auto& gpu : spec.gpus) {
    const auto socket = SocketFromSysfs(sysfs_root, gpu.numa_node);
    if (!socket) {
      complete = false;
      break;
    }
    from_sysfs[gpu.numa_node] = *socket;
  }
  if (complete) {
    for (auto& gpu : spec.gpus) gpu.socket = from_sysfs[gpu.numa_node];
    return;
  }
  std::map<int, int> parent;
  for (const auto& gpu : spec.gpus) parent[gpu.numa_node] = gpu.numa_node;
  const auto find = [&](int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (const topology::LinkSpec& link : spec.links) {
    if (link.pcie == topology::PcieRelation::kSys) continue;
    const int a = find(spec.gpus[static_cast<std::size_t>(link.a)].numa_node);
    const int b = find(spec.gpus[static_cast<std::size_t>(link.b)].numa_node);
    parent[std::max(a, b)] = std::min(a, b);
  }
  std::map<int, int> socket_of_root;
  for (const auto& [numa, ignored] : parent) {
    const int root = find(numa);
    if (socket_of_root.count(root) == 0) {
      const int next = static_cast<int>(socket_of_root.size());
      socket_of_root[root] = next;
    }
  }
  for (auto& gpu : spec.gpus) gpu.socket = socket_of_root[find(gpu.numa_node)];
  if (socket_of_root.size() > 1) {
    warnings.push_back("CPU sockets inferred from PCIe relations (sysfs says nothing): " +
                       std::to_string(socket_of_root.size()) + " sockets");
  }
}

namespace {

void MarkUnhealthy(topology::GpuSpec& gpu, const std::string& problem) {
  if (gpu.healthy) gpu.health_problem = problem;
  gpu.healthy = false;
}

topology::PcieRelation RelationOf(nvmlGpuTopologyLevel_t level) {
  switch (level) {
    case NVML_TOPOLOGY_INTERNAL:
    case NVML_TOPOLOGY_SINGLE:
      return topology::PcieRelation::kPix;
    case NVML_TOPOLOGY_MULTIPLE:
      return topology::PcieRelation::kPxb;
    case NVML_TOPOLOGY_HOSTBRIDGE:
      return topology::PcieRelation::kPhb;
    case NVML_TOPOLOGY_NODE:
      return topology::PcieRelation::kNode;
    case NVML_TOPOLOGY_SYSTEM:
      return topology::PcieRelation::kSys;
  }
  return topology::PcieRelation::kSys;
}

}  // namespace

// Each GPU pair's PCIe relation (NVML's common ancestor) and NVLinks; a pair whose two ends count
// different links marks both GPUs unhealthy.
void ReadPairs(const NvmlLibrary& nvml, const std::vector<nvmlDevice_t>& devices,
               const LinkCounts& links, topology::TopologySpec& spec,
               std::vector<std::string>& warnings) {
  const Functions& f = nvml.f();
  const auto count = static_cast<unsigned>(devices.size());
  const bool nvswitch = !links.switches.empty();
  for (unsigned a = 0; a < count; ++a) {
    spec.gpus[a].nvlink_physical_links = links.to_switch[a];
    for (unsigned b = 0; b < count; ++b) spec.gpus[a].nvlink_physical_links += links.to_gpu[a][b];
    for (unsigned b = a + 1; b < count; ++b) {
      topology::LinkSpec link;
      link.a = static_cast<int>(a);
      link.b = static_cast<int>(b);
      nvmlGpuTopologyLevel_t level = NVML_TOPOLOGY_SYSTEM;
      if (devices[a] != nullptr && devices[b] != nullptr) {
        const nvmlReturn_t rc = f.common_ancestor(devices[a], devices[b], &level);
        if (rc != NVML_SUCCESS) {
          warnings.push_back("GPU" + std::to_string(a) + "-GPU" + std::to_string(b) +
                             ": PCIe relation unknown (" + nvml.ErrorText(rc) +
                             "); treated as SYS");
          level = NVML_TOPOLOGY_SYSTEM;
        }
      }
      link.pcie = RelationOf(level);
      const int ab = links.to_gpu[a][b];
      const int ba = links.to_gpu[b][a];
      if (ab != ba) {
        const std::string problem = "asymmetric NVLinks: GPU" + std::to_string(a) + " sees " +
                                    std::to_string(ab) + " to GPU" + std::to_string(b) +
                                    ", which sees " + std::to_string(ba) + " back";
        MarkUnhealthy(spec.gpus[a], problem);
        MarkUnhealthy(spec.gpus[b], problem);
      }
      link.nvlink_count = std::min(ab, ba);
      if (nvswitch && links.to_switch[a] > 0 && links.to_switch[b] > 0) {
        link.nvlink_count = std::min(links.to_switch[a], links.to_switch[b]);
        link.via_nvswitch = true;
      }
      spec.links.push_back(link);
    }
  }
}

// The NVLink fabric: NVSwitches, bridges (each GPU bonded to at most one peer), direct links or
// none.
void SetFabricKind(const LinkCounts& links, topology::TopologySpec& spec) {
  const bool nvswitch = !links.switches.empty();
  spec.fabric.kind = topology::NvlinkFabricKind::kNone;
  if (nvswitch) {
    spec.fabric.kind = topology::NvlinkFabricKind::kNvswitch;
    spec.fabric.nvswitch_count = static_cast<int>(links.switches.size());
  } else if (std::any_of(spec.links.begin(), spec.links.end(),
                         [](const auto& link) { return link.nvlink_count > 0; })) {
    // Pairs only (each GPU bonded to at most one peer): NVLink bridges; else direct links.
    bool pairs = true;
    for (const topology::GpuSpec& gpu : spec.gpus) {
      int peers = 0;
      for (const topology::LinkSpec& link : spec.links) {
        if ((link.a == gpu.index || link.b == gpu.index) && link.nvlink_count > 0) ++peers;
      }
      pairs = pairs && peers <= 1;
    }
    spec.fabric.kind =
        pairs ? topology::NvlinkFabricKind::kBridge : topology::NvlinkFabricKind::kDirect;
  }
}

}  // namespace linkfit::agent::nvml
