#pragma once

// The parts of NVML discovery (gpu_nvml_discovery.cc) that concern links between GPUs: NVLinks
// counted per peer and per NVSwitch with the NVLink version of every link, the version table, each
// pair's PCIe relation, the fabric kind, and CPU sockets from sysfs or from PCIe relations.
//
// Thread-safety: free functions over values the caller owns; NVML itself is thread-safe.

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agent/gpu_nvml_library.h"
#include "linkfit/topology/spec.h"

namespace linkfit::agent::nvml {

// "00000000:07:00.0" and "0000:07:00.0" -> "0000:07:00.0" (lower case, 4-digit domain), the form
// of sysfs and of the NVLink remote PCI info.
std::string CanonicalBusId(std::string_view bus_id);

// The NVLink generation of an nvmlNvlinkVersion_t (NVML_NVLINK_VERSION_3_1 -> 3); 0 for
// NVML_NVLINK_VERSION_INVALID and for versions newer than this table.
int NvlinkGenerationOfVersion(unsigned version);

// Line rate of one link of an NVLink generation, GB/s per direction (NVIDIA's figures: NVLink 1
// 20, NVLink 2-4 25, NVLink 5 50); 0 for a generation the table lacks.
double PerLinkGbps(int generation);

// Active NVLinks, per GPU: to each peer GPU and to NVSwitches, with the lowest NVLink generation
// of each group (0 where no link of it said its version).
struct LinkCounts {
  std::vector<std::vector<int>> to_gpu;          // [a][b]: active links of a whose remote end is b
  std::vector<std::vector<int>> gpu_generation;  // [a][b]: lowest generation of those links
  std::vector<int> to_switch;
  std::vector<int> switch_generation;  // [a]: lowest generation of a's links to NVSwitches
  std::set<std::string> switches;
  std::set<int> generations;  // every generation a link reported
  int links_without_version = 0;
};

LinkCounts CountNvlinks(const NvmlLibrary& nvml, const std::vector<nvmlDevice_t>& devices,
                        const std::vector<topology::GpuSpec>& gpus,
                        std::vector<std::string>& warnings);

// The CPU socket of a NUMA node from sysfs: the physical package of its first CPU; nullopt when
// sysfs does not say.
std::optional<int> SocketFromSysfs(const std::string& sysfs_root, int numa);

// Sockets: from sysfs where it says; otherwise a PCIe relation closer than SYS (which cannot
// cross the inter-socket link) puts both GPUs' NUMA nodes on one socket, numbered by their
// lowest NUMA node.
void AssignSockets(topology::TopologySpec& spec, const std::string& sysfs_root,
                   std::vector<std::string>& warnings);

// Each GPU pair's PCIe relation (NVML's common ancestor, SYS where it fails) and NVLink count
// into spec.links, and each GPU's physical NVLinks; a pair whose two ends count different links
// marks both GPUs unhealthy. `devices` is by GPU index, null for a GPU NVML cannot open.
void ReadPairs(const NvmlLibrary& nvml, const std::vector<nvmlDevice_t>& devices,
               const LinkCounts& links, topology::TopologySpec& spec,
               std::vector<std::string>& warnings);

// The NVLink fabric of spec.links: NVSwitches, bridges (each GPU bonded to at most one peer),
// direct links, or none.
void SetFabricKind(const LinkCounts& links, topology::TopologySpec& spec);

}  // namespace linkfit::agent::nvml
