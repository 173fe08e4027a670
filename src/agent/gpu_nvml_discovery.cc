// DiscoverWithNvml (discovery.h): the node's GPUs, their PCIe relations, NVLinks, MIG layout and
// health, from NVML.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/gpu_nvml_library.h"
#include "linkfit/agent/discovery.h"
#include "linkfit/common/strings.h"

namespace linkfit::agent {
namespace {

using nvml::NvmlLibrary;

// "00000000:07:00.0" and "0000:07:00.0" -> "0000:07:00.0" (lower case, 4-digit domain), the form
// of sysfs and of the NVLink remote PCI info.
std::string CanonicalBusId(std::string_view bus_id) {
  const std::string lower = ToLower(Trim(bus_id));
  const std::size_t colon = lower.find(':');
  if (colon == std::string::npos) return lower;
  unsigned long domain = std::strtoul(lower.substr(0, colon).c_str(), nullptr, 16);
  char text[16];
  std::snprintf(text, sizeof(text), "%04lx", domain);
  return std::string(text) + lower.substr(colon);
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

// The profile name nvidia-smi prints ("3g.20gb", "1g.5gb+me"): compute slices, then the memory
// rounded up to whole GB.
std::string ProfileName(unsigned profile, const nvmlGpuInstanceProfileInfo_t& info) {
  const auto gb =
      static_cast<unsigned long long>(std::ceil(static_cast<double>(info.memorySizeMB) / 1024.0));
  std::string name = std::to_string(info.sliceCount) + "g." + std::to_string(gb) + "gb";
  if (profile == NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 ||
      profile == NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1) {
    name += "+me";
  }
  return name;
}

struct Probe {
  const NvmlLibrary& nvml;
  const NvmlOptions& options;
  Discovery& found;

  void Unhealthy(topology::GpuSpec& gpu, const std::string& problem) {
    if (gpu.healthy) gpu.health_problem = problem;
    gpu.healthy = false;
  }

  int NumaFromSysfs(const std::string& bus_id) {
    std::ifstream in(options.sysfs_root + "/bus/pci/devices/" + CanonicalBusId(bus_id) +
                     "/numa_node");
    int node = -1;
    if (in >> node) return node;
    return -1;
  }

  void ReadDevice(nvmlDevice_t device, topology::GpuSpec& gpu) {
    const nvml::Functions& f = nvml.f();
    char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    const auto check = [&](nvmlReturn_t rc, const char* what) {
      if (rc == NVML_SUCCESS) return true;
      Unhealthy(gpu, std::string(what) + ": " + nvml.ErrorText(rc));
      return false;
    };
    if (check(f.uuid(device, text, sizeof(text)), "nvmlDeviceGetUUID")) gpu.uuid = text;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if (check(f.name(device, name, sizeof(name)), "nvmlDeviceGetName")) gpu.model = name;
    nvmlMemory_t memory{};
    if (check(f.memory(device, &memory), "nvmlDeviceGetMemoryInfo")) {
      gpu.memory_mib = memory.total >> 20;
    }
    nvmlPciInfo_t pci{};
    if (check(f.pci(device, &pci), "nvmlDeviceGetPciInfo_v3")) gpu.pci_bus_id = pci.busId;
    int numa = -1;
    unsigned node = 0;
    if (f.numa_node != nullptr && f.numa_node(device, &node) == NVML_SUCCESS) {
      numa = static_cast<int>(node);
    } else if (!gpu.pci_bus_id.empty()) {
      numa = NumaFromSysfs(gpu.pci_bus_id);
    }
    if (numa < 0) {
      found.warnings.push_back("GPU " + std::to_string(gpu.index) +
                               ": NUMA node unknown (neither NVML nor sysfs say); taken as 0");
      numa = 0;
    }
    gpu.numa_node = numa;
  }

  void ReadMig(nvmlDevice_t device, topology::GpuSpec& gpu) {
    const nvml::Functions& f = nvml.f();
    if (f.mig_mode == nullptr || f.gi_profile_info == nullptr || f.gpu_instances == nullptr ||
        f.gi_info == nullptr) {
      return;  // MIG unknown: said once by the library's missing()
    }
    unsigned current = 0;
    unsigned pending = 0;
    const nvmlReturn_t rc = f.mig_mode(device, &current, &pending);
    if (rc == NVML_ERROR_NOT_SUPPORTED) {
      gpu.mig_mode = topology::MigMode::kDisabled;  // not MIG-capable
      return;
    }
    if (rc != NVML_SUCCESS) {
      found.warnings.push_back("GPU " + std::to_string(gpu.index) +
                               ": MIG mode unknown: " + nvml.ErrorText(rc));
      return;
    }
    const auto mode = [](unsigned value) {
      return value == NVML_DEVICE_MIG_ENABLE ? topology::MigMode::kEnabled
                                             : topology::MigMode::kDisabled;
    };
    gpu.mig_mode = mode(current);
    gpu.mig_mode_pending = mode(pending);
    if (gpu.mig_mode != topology::MigMode::kEnabled) return;
    // MIG UUIDs by GPU instance id, through the MIG device handles (optional functions).
    std::map<unsigned, std::string> uuid_of_instance;
    unsigned max_devices = 0;
    if (f.max_mig_devices != nullptr && f.mig_device != nullptr && f.gpu_instance_id != nullptr &&
        f.max_mig_devices(device, &max_devices) == NVML_SUCCESS) {
      for (unsigned i = 0; i < max_devices; ++i) {
        nvmlDevice_t mig = nullptr;
        unsigned id = 0;
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
        if (f.mig_device(device, i, &mig) != NVML_SUCCESS) continue;
        if (f.gpu_instance_id(mig, &id) != NVML_SUCCESS) continue;
        if (f.uuid(mig, uuid, sizeof(uuid)) == NVML_SUCCESS) uuid_of_instance.emplace(id, uuid);
      }
    }
    for (unsigned profile = 0; profile < NVML_GPU_INSTANCE_PROFILE_COUNT; ++profile) {
      nvmlGpuInstanceProfileInfo_t info{};
      if (f.gi_profile_info(device, profile, &info) != NVML_SUCCESS) continue;
      std::vector<nvmlGpuInstance_t> instances(std::max(1u, info.instanceCount));
      unsigned count = 0;
      if (f.gpu_instances(device, info.id, instances.data(), &count) != NVML_SUCCESS) continue;
      for (unsigned i = 0; i < count && i < instances.size(); ++i) {
        nvmlGpuInstanceInfo_t gi{};
        if (f.gi_info(instances[i], &gi) != NVML_SUCCESS) continue;
        topology::MigInstanceSpec spec;
        spec.profile = ProfileName(profile, info);
        spec.start = static_cast<int>(gi.placement.start);
        spec.size = static_cast<int>(gi.placement.size);
        spec.gpu_instance = static_cast<int>(gi.id);
        const auto uuid = uuid_of_instance.find(gi.id);
        if (uuid != uuid_of_instance.end()) spec.uuid = uuid->second;
        gpu.mig_instances.push_back(std::move(spec));
      }
    }
    std::sort(gpu.mig_instances.begin(), gpu.mig_instances.end(),
              [](const auto& a, const auto& b) { return a.start < b.start; });
  }
};

// NVLinks: per GPU, the links to each peer GPU and to NVSwitches.
struct LinkCounts {
  std::vector<std::vector<int>> to_gpu;  // [a][b]: active links of a whose remote end is b
  std::vector<int> to_switch;
  std::set<std::string> switches;
};

LinkCounts CountNvlinks(const NvmlLibrary& nvml, const std::vector<nvmlDevice_t>& devices,
                        const std::vector<topology::GpuSpec>& gpus) {
  const nvml::Functions& f = nvml.f();
  const std::size_t n = devices.size();
  LinkCounts counts;
  counts.to_gpu.assign(n, std::vector<int>(n, 0));
  counts.to_switch.assign(n, 0);
  if (f.nvlink_state == nullptr || f.nvlink_remote_pci == nullptr) return counts;
  std::map<std::string, std::size_t> gpu_of_bus;
  for (std::size_t g = 0; g < n; ++g) gpu_of_bus[CanonicalBusId(gpus[g].pci_bus_id)] = g;
  for (std::size_t g = 0; g < n; ++g) {
    if (devices[g] == nullptr) continue;
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      nvmlEnableState_t active = NVML_FEATURE_DISABLED;
      if (f.nvlink_state(devices[g], link, &active) != NVML_SUCCESS) continue;
      if (active != NVML_FEATURE_ENABLED) continue;
      nvmlPciInfo_t remote{};
      if (f.nvlink_remote_pci(devices[g], link, &remote) != NVML_SUCCESS) continue;
      const std::string bus = CanonicalBusId(remote.busId);
      nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
      if (f.nvlink_remote_type != nullptr) f.nvlink_remote_type(devices[g], link, &type);
      const auto peer = gpu_of_bus.find(bus);
      if (type == NVML_NVLINK_DEVICE_TYPE_SWITCH ||
          (type == NVML_NVLINK_DEVICE_TYPE_UNKNOWN && peer == gpu_of_bus.end())) {
        ++counts.to_switch[g];
        counts.switches.insert(bus);
      } else if (peer != gpu_of_bus.end() && peer->second != g) {
        ++counts.to_gpu[g][peer->second];
      }
    }
  }
  return counts;
}

// The CPU socket of a NUMA node from sysfs: the physical package of its first CPU.
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

// Sockets: from sysfs where it says; otherwise a PCIe relation closer than SYS (which cannot
// cross the inter-socket link) puts both GPUs' NUMA nodes on one socket, numbered by their
// lowest NUMA node.
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

// NVIDIA names a MIG profile by its share of the board's nominal memory ("3g.71gb" on a 141 GB
// H200, whose 3g instance has 70.5 GB), not by the instance's exact memory, which ProfileName
// rounds up (right for A100 and H100, wrong for H200). Where the GPU's MIG profile set says the
// nominal size ("h200-141gb"), the name is recomputed from the placement's memory slices.
void NameMigProfilesByNominalMemory(topology::TopologySpec& spec) {
  for (topology::GpuSpec& gpu : spec.gpus) {
    const std::string& set = gpu.mig_profile_set;
    const std::size_t dash = set.rfind('-');
    if (dash == std::string::npos || set.size() < dash + 4 || set.substr(set.size() - 2) != "gb") {
      continue;
    }
    const auto nominal = ParseInt(std::string_view(set).substr(dash + 1, set.size() - dash - 3));
    if (!nominal || *nominal <= 0) continue;
    for (topology::MigInstanceSpec& instance : gpu.mig_instances) {
      const std::size_t g = instance.profile.find("g.");
      if (g == std::string::npos || instance.size <= 0) continue;
      const std::size_t plus = instance.profile.find('+');
      const std::string suffix = plus == std::string::npos ? "" : instance.profile.substr(plus);
      const long gb = std::lround(static_cast<double>(instance.size * *nominal) / 8.0);
      instance.profile = instance.profile.substr(0, g + 2) + std::to_string(gb) + "gb" + suffix;
    }
  }
}

}  // namespace

Result<Discovery> DiscoverWithNvml(const NvmlOptions& options) {
  std::unique_ptr<NvmlLibrary> nvml;
  LINKFIT_ASSIGN_OR_RETURN(nvml, NvmlLibrary::Load(options.library));
  const nvml::Functions& f = nvml->f();
  unsigned count = 0;
  if (const nvmlReturn_t rc = f.device_count(&count); rc != NVML_SUCCESS) {
    return MakeError("nvmlDeviceGetCount_v2 failed: " + nvml->ErrorText(rc));
  }
  if (count == 0) return MakeError("NVML sees no GPU on this node");
  if (count > static_cast<unsigned>(topology::kMaxGpus)) {
    return MakeError("NVML sees " + std::to_string(count) + " GPUs; linkfit models up to " +
                     std::to_string(topology::kMaxGpus));
  }
  Discovery found;
  found.source = "nvml";
  found.driver_version = nvml->driver_version();
  for (const std::string& part : nvml->missing()) {
    found.warnings.push_back("this NVML lacks " + part);
  }
  Probe probe{*nvml, options, found};
  std::vector<nvmlDevice_t> devices(count, nullptr);
  topology::TopologySpec& spec = found.spec;
  spec.id = "nvml";
  spec.name = "discovered through NVML " + nvml->version();
  for (unsigned i = 0; i < count; ++i) {
    topology::GpuSpec& gpu = spec.gpus.emplace_back();
    gpu.index = static_cast<int>(i);
    gpu.model = "unknown";
    const nvmlReturn_t rc = f.handle_by_index(i, &devices[i]);
    if (rc != NVML_SUCCESS) {
      devices[i] = nullptr;
      probe.Unhealthy(gpu, rc == NVML_ERROR_GPU_IS_LOST
                               ? "GPU has fallen off the bus (NVML: " + nvml->ErrorText(rc) + ")"
                               : "NVML cannot open the GPU: " + nvml->ErrorText(rc));
      continue;
    }
    probe.ReadDevice(devices[i], gpu);
    probe.ReadMig(devices[i], gpu);
  }
  // A GPU NVML could not open is described like the node's other GPUs (same board), so that the
  // node's model stays one of the known shapes.
  for (topology::GpuSpec& gpu : spec.gpus) {
    if (devices[static_cast<std::size_t>(gpu.index)] != nullptr) continue;
    for (const topology::GpuSpec& other : spec.gpus) {
      if (devices[static_cast<std::size_t>(other.index)] == nullptr) continue;
      gpu.model = other.model;
      gpu.memory_mib = other.memory_mib;
      break;
    }
  }
  const LinkCounts links = CountNvlinks(*nvml, devices, spec.gpus);
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
          found.warnings.push_back("GPU" + std::to_string(a) + "-GPU" + std::to_string(b) +
                                   ": PCIe relation unknown (" + nvml->ErrorText(rc) +
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
        probe.Unhealthy(spec.gpus[a], problem);
        probe.Unhealthy(spec.gpus[b], problem);
      }
      link.nvlink_count = std::min(ab, ba);
      if (nvswitch && links.to_switch[a] > 0 && links.to_switch[b] > 0) {
        link.nvlink_count = std::min(links.to_switch[a], links.to_switch[b]);
        link.via_nvswitch = true;
      }
      spec.links.push_back(link);
    }
  }
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
  AssignSockets(spec, options.sysfs_root, found.warnings);
  topology::FillModelFacts(spec);
  NameMigProfilesByNominalMemory(spec);
  for (const std::string& warning : found.warnings) spec.warnings.push_back(warning);
  return found;
}

}  // namespace linkfit::agent
