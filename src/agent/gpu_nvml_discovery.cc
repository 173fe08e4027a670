// DiscoverWithNvml (discovery.h): the node's GPUs, their PCIe relations, NVLinks, MIG layout and
// health, from NVML.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/gpu_nvml_library.h"
#include "agent/gpu_nvml_links.h"
#include "agent/sysfs_nics.h"
#include "agent/sysfs_pcie.h"
#include "linkfit/agent/discovery.h"
#include "linkfit/common/strings.h"

namespace linkfit::agent {
namespace {

using nvml::CanonicalBusId;
using nvml::NvmlLibrary;

// The profile name nvidia-smi prints ("3g.20gb", "1g.10gb+me", "1g.24gb+gfx"): compute slices,
// the memory rounded up to whole GB, and the suffix NVML's profile index stands for.
std::string ProfileName(unsigned profile, const nvmlGpuInstanceProfileInfo_t& info) {
  const auto gb =
      static_cast<unsigned long long>(std::ceil(static_cast<double>(info.memorySizeMB) / 1024.0));
  std::string name = std::to_string(info.sliceCount) + "g." + std::to_string(gb) + "gb";
  switch (profile) {
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1:
      return name + "+me";
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX:
    case NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX:
      return name + "+gfx";
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME:
      return name + "-me";
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME:
      return name + "+me.all";
    default:
      return name;
  }
}

// Which of a GPU's facts the machine itself stated (the rest is guessed from the model table).
struct Stated {
  bool pcie_generation = false;
  bool pcie_from_sysfs = false;  // NVML did not say; sysfs did
  bool mig_capability = false;
};

struct Probe {
  const NvmlLibrary& nvml;
  const NvmlOptions& options;
  Discovery& found;
  std::vector<Stated> stated;
  std::vector<unsigned> pci_device_id;  // per GPU; 0 where NVML did not say
  std::vector<bool> identified;         // per GPU: NVML answered its name and memory

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

  // Whether sysfs says NUMA node `node` has no CPUs (a node of GPU or other device memory).
  bool NodeWithoutCpus(int node) {
    std::ifstream in(options.sysfs_root + "/devices/system/node/node" + std::to_string(node) +
                     "/cpulist");
    std::string cpus;
    return in && !(in >> cpus);
  }

  // The CPU-side NUMA node of the GPU: the node whose CPUs and memory are nearest, which is what
  // placement's NUMA closeness means. nvmlDeviceGetNumaNodeId is not that on platforms whose GPU
  // memory is itself a NUMA node (Grace: GB200's GPUs report nodes 2, 10, 18, 26, nodes without
  // CPUs), so it comes last, in order:
  //   1. nvmlDeviceGetMemoryAffinity(NVML_AFFINITY_SCOPE_NODE): the nodes of the CPU memory
  //      nearest the GPU; the GPU's own memory node is skipped should it be listed;
  //   2. sysfs numa_node of the GPU's PCI function: the node of its PCIe root port, a CPU node;
  //   3. nvmlDeviceGetNumaNodeId, unless sysfs shows that node has no CPUs.
  int CpuSideNumaNode(nvmlDevice_t device, const topology::GpuSpec& gpu) {
    const nvml::Functions& f = nvml.f();
    int own_node = -1;
    unsigned node = 0;
    if (f.numa_node != nullptr && f.numa_node(device, &node) == NVML_SUCCESS) {
      own_node = static_cast<int>(node);
    }
    if (f.memory_affinity != nullptr) {
      constexpr unsigned kWords = 16;  // NUMA nodes 0..1023
      constexpr unsigned kBits = sizeof(unsigned long) * 8;
      unsigned long nodes[kWords] = {};
      if (f.memory_affinity(device, kWords, nodes, NVML_AFFINITY_SCOPE_NODE) == NVML_SUCCESS) {
        for (unsigned bit = 0; bit < kWords * kBits; ++bit) {
          if ((nodes[bit / kBits] >> (bit % kBits) & 1ul) == 0) continue;
          if (static_cast<int>(bit) != own_node) return static_cast<int>(bit);
        }
      }
    }
    if (!gpu.pci_bus_id.empty()) {
      if (const int from_sysfs = NumaFromSysfs(gpu.pci_bus_id); from_sysfs >= 0) {
        return from_sysfs;
      }
    }
    if (own_node >= 0 && NodeWithoutCpus(own_node)) {
      found.warnings.push_back("GPU " + std::to_string(gpu.index) + ": NVML's NUMA node " +
                               std::to_string(own_node) +
                               " has no CPUs (the GPU's own memory); not a CPU-side node");
      return -1;
    }
    return own_node;
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
    if (check(f.pci(device, &pci), "nvmlDeviceGetPciInfo_v3")) {
      gpu.pci_bus_id = pci.busId;
      pci_device_id[static_cast<std::size_t>(gpu.index)] = pci.pciDeviceId;
    }
    identified[static_cast<std::size_t>(gpu.index)] = gpu.model != "unknown" && gpu.memory_mib > 0;
    int numa = CpuSideNumaNode(device, gpu);
    if (numa < 0) {
      found.warnings.push_back("GPU " + std::to_string(gpu.index) +
                               ": NUMA node unknown (neither NVML nor sysfs say); taken as 0");
      numa = 0;
    }
    gpu.numa_node = numa;
    ReadPcieLink(device, gpu);
  }

  // The PCIe generation and width the GPU and its slot can both run at (NVML's "max" answers are
  // limited by the system, not only by the GPU). Any failure leaves them to the model table.
  void ReadPcieLink(nvmlDevice_t device, topology::GpuSpec& gpu) {
    const nvml::Functions& f = nvml.f();
    unsigned value = 0;
    if (f.max_pcie_generation != nullptr) {
      const nvmlReturn_t rc = f.max_pcie_generation(device, &value);
      if (rc == NVML_SUCCESS && value > 0) {
        gpu.pcie_gen = static_cast<int>(value);
        stated[static_cast<std::size_t>(gpu.index)].pcie_generation = true;
      } else if (rc == NVML_ERROR_GPU_IS_LOST) {
        Unhealthy(gpu, "nvmlDeviceGetMaxPcieLinkGeneration: " + nvml.ErrorText(rc));
      }
    }
    if (f.max_pcie_width != nullptr && f.max_pcie_width(device, &value) == NVML_SUCCESS) {
      gpu.pcie_width = static_cast<int>(value);
    }
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
      gpu.mig_capable = false;
      stated[static_cast<std::size_t>(gpu.index)].mig_capability = true;
      return;
    }
    if (rc != NVML_SUCCESS) {
      found.warnings.push_back("GPU " + std::to_string(gpu.index) +
                               ": MIG mode unknown: " + nvml.ErrorText(rc));
      return;
    }
    // A GPU that answers its MIG mode is MIG-capable, whatever linkfit's table says of its name.
    gpu.mig_capable = true;
    stated[static_cast<std::size_t>(gpu.index)].mig_capability = true;
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
      // The suffix ("+me", "-me", "+gfx", "+me.all") follows the memory's "gb".
      const std::size_t unit = instance.profile.find("gb", g);
      const std::string suffix = unit == std::string::npos ? "" : instance.profile.substr(unit + 2);
      const long gb = std::lround(static_cast<double>(instance.size * *nominal) / 8.0);
      instance.profile = instance.profile.substr(0, g + 2) + std::to_string(gb) + "gb" + suffix;
    }
  }
}

// A GPU whose name or memory NVML could not give (lost, at the handle or at its queries) keeps
// what is known of it: the model and memory of a GPU with the same PCI device id where NVML gave
// that id, else those of the node's healthy majority, so that one lost GPU never changes what
// the node is. It stays unhealthy (set by the caller).
void DescribeUnidentified(topology::TopologySpec& spec, const std::vector<unsigned>& device_id,
                          const std::vector<bool>& identified, std::vector<std::string>& warnings) {
  std::map<std::pair<std::string, std::uint64_t>, int> healthy_shapes;
  for (const topology::GpuSpec& gpu : spec.gpus) {
    if (identified[static_cast<std::size_t>(gpu.index)] && gpu.healthy) {
      ++healthy_shapes[{gpu.model, gpu.memory_mib}];
    }
  }
  for (topology::GpuSpec& gpu : spec.gpus) {
    const auto g = static_cast<std::size_t>(gpu.index);
    if (identified[g]) continue;
    const topology::GpuSpec* sibling = nullptr;
    for (const topology::GpuSpec& other : spec.gpus) {
      const auto o = static_cast<std::size_t>(other.index);
      if (identified[o] && device_id[g] != 0 && device_id[o] == device_id[g]) {
        sibling = &other;
        break;
      }
    }
    std::string from =
        "GPU " + std::to_string(sibling != nullptr ? sibling->index : 0) + " (same PCI device id)";
    if (sibling != nullptr) {
      gpu.model = sibling->model;
      gpu.memory_mib = sibling->memory_mib;
    } else if (!healthy_shapes.empty()) {
      const auto majority =
          std::max_element(healthy_shapes.begin(), healthy_shapes.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; });
      gpu.model = majority->first.first;
      gpu.memory_mib = majority->first.second;
      from = "the node's healthy majority";
    } else {
      continue;  // nothing is known: "unknown", 0 MiB
    }
    warnings.push_back("GPU " + std::to_string(gpu.index) + ": model and memory unknown to NVML; " +
                       gpu.model + " taken from " + from);
  }
}

std::string FormatGbps(double gbps) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", gbps);
  return text;
}

// Figures the GPU model table had to give: each a warning and a GuessedFigure, once per figure and
// model.
struct Guesses {
  Discovery& found;
  std::set<std::string> said;

  // Whether `key` is said for the first time (then it counts as said).
  bool First(const std::string& key) { return said.insert(key).second; }
  void Guessed(const std::string& figure, const std::string& model, const std::string& warning) {
    if (!First(figure + "\n" + model)) return;
    found.warnings.push_back(warning);
    found.guessed.push_back({figure, model, warning});
  }
};

topology::FigureSource TableSource(bool known) {
  return known ? topology::FigureSource::kTable : topology::FigureSource::kAssumed;
}

// One GPU's PCIe generation, MIG capability and peer-to-peer support: NVML's where it stated
// them (`known`), else the table's (`facts`).
void ApplyGpuFacts(topology::GpuSpec& gpu, const Stated& known,
                   const topology::GpuModelFacts& facts, Guesses& guesses) {
  gpu.sources.pcie =
      known.pcie_from_sysfs ? topology::FigureSource::kSysfs : topology::FigureSource::kNvml;
  if (!known.pcie_generation) {
    gpu.pcie_gen = facts.pcie_generation.value;
    gpu.sources.pcie = TableSource(facts.pcie_generation.known());
    guesses.Guessed(
        "pcie", gpu.model,
        "PCIe generation of " + gpu.model + " not stated by NVML; " +
            (facts.pcie_generation.known()
                 ? "gen " + std::to_string(facts.pcie_generation.value) +
                       " from linkfit's GPU model table (" + facts.pcie_generation.source + ")"
                 : "gen 4 assumed, unknown to linkfit's GPU model table"));
  }
  gpu.sources.mig = topology::FigureSource::kNvml;
  if (known.mig_capability) {
    // The profile set is the catalogue of the model's MIG placements (config/mig/): looked up
    // by name, but only for a GPU the machine says is MIG-capable.
    gpu.mig_profile_set = gpu.mig_capable ? facts.mig_profile_set.value : "";
    if (gpu.mig_capable && gpu.mig_profile_set.empty() &&
        guesses.First("no MIG profile set\n" + gpu.model)) {
      guesses.found.warnings.push_back(
          gpu.model +
          " is MIG-capable but linkfit has no MIG profile set for it: its MIG instances are "
          "published with NVML's profile names, MIG placement is refused");
    }
  } else {
    gpu.mig_profile_set = facts.mig_profile_set.value;
    gpu.mig_capable = !gpu.mig_profile_set.empty();
    gpu.sources.mig = TableSource(facts.mig_profile_set.known());
    guesses.Guessed(
        "mig", gpu.model,
        "MIG capability of " + gpu.model + " not stated by NVML; " +
            (facts.mig_profile_set.known()
                 ? "taken from linkfit's GPU model table (" + facts.mig_profile_set.source + ")"
                 : "not MIG-capable assumed, unknown to linkfit's GPU model table"));
  }
  // NVML's peer-to-peer status is not read: GeForce boards are known by name.
  gpu.p2p_supported = facts.p2p.value;
}

// The first GPU model whose NVLink generation the table knows, for the fabric's figures.
struct NvlinkedModel {
  topology::TableFigure<int> generation;
  std::string model;
  std::uint64_t memory_mib = 0;
};

// The fabric's NVLink generation, per-link rate and NVSwitch generation: NVML's versions where
// the links stated them, else the table's; pairs whose links differ in version carry the lowest.
void ApplyNvlinkFacts(topology::TopologySpec& spec, const nvml::LinkCounts& links,
                      const topology::GpuModelTable& table, const NvlinkedModel& first,
                      Guesses& guesses) {
  int generation = links.generations.empty() ? 0 : *links.generations.begin();  // the lowest
  const std::string& nvlinked_model = first.model.empty() ? spec.gpus.front().model : first.model;
  if (generation == 0) {
    generation = first.generation.value;
    guesses.Guessed("nvlink", nvlinked_model,
                    "NVLink version not stated by NVML; " +
                        (generation > 0 ? "NVLink " + std::to_string(generation) +
                                              " from linkfit's GPU model table (" +
                                              first.generation.source + ")"
                                        : std::string("unknown to linkfit's GPU model table")));
  } else if (links.links_without_version > 0) {
    guesses.found.warnings.push_back(std::to_string(links.links_without_version) +
                                     " NVLinks did not state their version; taken as NVLink " +
                                     std::to_string(generation));
  }
  spec.fabric.nvlink_generation = generation;
  spec.fabric.per_link_gbps = nvml::PerLinkGbps(generation);
  // NVML tells a link's version, not its width: GA102 boards (RTX A6000, A40) run 4 narrow links
  // of NVLink 3. Where the table gives the model's narrower rate, it is the published one.
  const topology::GpuModelFacts nvlinked = table.Lookup(
      nvlinked_model, first.model.empty() ? spec.gpus.front().memory_mib : first.memory_mib);
  if (nvlinked.nvlink_link_gbps.known()) {
    spec.fabric.per_link_gbps = nvlinked.nvlink_link_gbps.value;
    guesses.Guessed("nvlink_rate", nvlinked_model,
                    "NVLink per-link rate of " + nvlinked_model + " not stated by NVML; " +
                        FormatGbps(nvlinked.nvlink_link_gbps.value) +
                        " GB/s from linkfit's GPU model table (" +
                        nvlinked.nvlink_link_gbps.source + ")");
  }
  if (spec.fabric.kind == topology::NvlinkFabricKind::kNvswitch && generation >= 2) {
    spec.fabric.nvswitch_generation = generation - 1;  // NVSwitch gen N came with NVLink N+1
  }
  if (links.generations.size() < 2) return;
  // Links of different versions: each NVLinked pair carries the lowest of its own links.
  for (topology::LinkSpec& link : spec.links) {
    if (link.nvlink_count == 0) continue;
    const auto a = static_cast<std::size_t>(link.a);
    const auto b = static_cast<std::size_t>(link.b);
    const std::set<int> ends =
        link.via_nvswitch ? std::set<int>{links.switch_generation[a], links.switch_generation[b]}
                          : std::set<int>{links.gpu_generation[a][b], links.gpu_generation[b][a]};
    for (const int end : ends) {
      if (end > 0) {
        link.nvlink_generation = end;
        break;
      }
    }
  }
  std::string list;
  for (const int g : links.generations) list += (list.empty() ? "" : ", ") + std::to_string(g);
  guesses.found.warnings.push_back("NVLink versions differ between links (NVLink " + list +
                                   "): each NVLinked pair carries the lowest of its links");
}

// Each figure from the machine where NVML stated it, else from the GPU model table
// (config/gpus.json, or the operator's --gpu-models file), each GPU's `sources` saying which; a
// figure the table had to give is a warning and a GuessedFigure, once per figure and model.
void ApplyFacts(topology::TopologySpec& spec, const std::vector<Stated>& stated,
                const nvml::LinkCounts& links, const topology::GpuModelTable& table,
                Discovery& found) {
  Guesses guesses{found, {}};
  NvlinkedModel first;
  for (topology::GpuSpec& gpu : spec.gpus) {
    const topology::GpuModelFacts facts = table.Lookup(gpu.model, gpu.memory_mib);
    ApplyGpuFacts(gpu, stated[static_cast<std::size_t>(gpu.index)], facts, guesses);
    if (!first.generation.known() && facts.nvlink_generation.known()) {
      first = NvlinkedModel{facts.nvlink_generation, gpu.model, gpu.memory_mib};
    }
  }
  // No NVLink, or NVLink versions from NVML: the machine told; else the table, else assumed.
  topology::FigureSource nvlink_source = topology::FigureSource::kNvml;
  if (spec.fabric.kind != topology::NvlinkFabricKind::kNone && links.generations.empty()) {
    nvlink_source = TableSource(first.generation.known());
  }
  for (topology::GpuSpec& gpu : spec.gpus) gpu.sources.nvlink = nvlink_source;
  if (spec.fabric.kind == topology::NvlinkFabricKind::kNone) return;
  ApplyNvlinkFacts(spec, links, table, first, guesses);
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
  Probe probe{*nvml,
              options,
              found,
              std::vector<Stated>(count),
              std::vector<unsigned>(count, 0),
              std::vector<bool>(count, false)};
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
  DescribeUnidentified(spec, probe.pci_device_id, probe.identified, found.warnings);
  const nvml::LinkCounts links = nvml::CountNvlinks(*nvml, devices, spec.gpus, found.warnings);
  nvml::ReadPairs(*nvml, devices, links, spec, found.warnings);
  nvml::SetFabricKind(links, spec);
  nvml::AssignSockets(spec, options.sysfs_root, found.warnings);
  // The PCIe switches above the GPUs, and each GPU's own link where NVML did not state it.
  const std::vector<PcieLinkFigures> sysfs_links =
      ReadPcieTree(options.sysfs_root, spec, found.warnings);
  for (std::size_t g = 0; g < sysfs_links.size(); ++g) {
    Stated& known = probe.stated[g];
    if (known.pcie_generation || sysfs_links[g].gen == 0) continue;
    spec.gpus[g].pcie_gen = sysfs_links[g].gen;
    if (spec.gpus[g].pcie_width == 0) spec.gpus[g].pcie_width = sysfs_links[g].width;
    known.pcie_generation = true;
    known.pcie_from_sysfs = true;
  }
  // RDMA NICs and their PCIe relation to each GPU (none where sysfs shows no class/infiniband).
  spec.nics = ReadNics(options.sysfs_root, spec, found.warnings);
  ApplyFacts(
      spec, probe.stated, links,
      options.gpu_models != nullptr ? *options.gpu_models : topology::GpuModelTable::Builtin(),
      found);
  NameMigProfilesByNominalMemory(spec);
  for (const std::string& warning : found.warnings) spec.warnings.push_back(warning);
  return found;
}

}  // namespace linkfit::agent
