#pragma once

// TopologySpec: the plain-data description of one node's GPUs and interconnect, as read from a
// topology document (gpu-topology-fixture/v1, or linkfit's compact node annotation) or from
// `nvidia-smi topo -m` text plus `nvidia-smi --query-gpu=...` CSV. Both loaders produce this
// type; BuildTopology() (topology.h) validates it and derives the immutable model.
//
// Thread-safety: plain values.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/result.h"
#include "linkfit/topology/gpu_models.h"

namespace linkfit::topology {

// linkfit models nodes of up to 16 GPUs: placement tables are indexed by a 16-bit free mask.
inline constexpr int kMaxGpus = 16;

// The PCIe common ancestor of two GPUs, as NVML's GetTopologyCommonAncestor (and the PCIe cells
// of `nvidia-smi topo -m`) report it. Ordered from farthest to closest, so `a < b` means a is the
// worse relation.
enum class PcieRelation : std::uint8_t {
  kSys = 0,   // across the inter-socket (SMP) interconnect
  kNode = 1,  // between host bridges within one NUMA node
  kPhb = 2,   // through one PCIe host bridge
  kPxb = 3,   // through several PCIe switches, without a host bridge
  kPix = 4,   // through at most one PCIe switch
};

// Parses "SYS", "NODE", "PHB", "PXB", "PIX" (case-insensitive; "SOC" is the old name of SYS).
Result<PcieRelation> ParsePcieRelation(std::string_view text);
std::string_view ToString(PcieRelation relation);

enum class NvlinkFabricKind : std::uint8_t { kNone, kDirect, kBridge, kNvswitch };
Result<NvlinkFabricKind> ParseNvlinkFabricKind(std::string_view text);
std::string_view ToString(NvlinkFabricKind kind);

struct NvlinkFabric {
  NvlinkFabricKind kind = NvlinkFabricKind::kNone;
  int nvlink_generation = 0;    // 2 = V100, 3 = A100/GA102, 4 = H100/H200; 0 = unknown/none
  int nvswitch_generation = 0;  // 1 = DGX-2, 2 = DGX A100, 3 = DGX H100; 0 = none/unknown
  int nvswitch_count = 0;
  double per_link_gbps = 0;  // per direction, from the document; 0 = unknown
};

// A GPU's MIG mode, as NVML's nvmlDeviceGetMigMode reports it (current and pending).
enum class MigMode : std::uint8_t { kUnknown, kDisabled, kEnabled };
Result<MigMode> ParseMigMode(std::string_view text);  // "enabled" | "disabled"
std::string_view ToString(MigMode mode);

// Where a figure placement uses came from, as the node agent publishes it per GPU
// ("sources": {"nvlink": "nvml", "pcie": "table", "mig": "nvml"}):
//   nvml        the driver's NVML answered
//   nvidia-smi  nvidia-smi's output told it (the agent's fallback)
//   sysfs       the kernel's PCI device files (max_link_speed, max_link_width of both ends)
//   table       linkfit's GPU model table (config/gpus.json) by the model name: a guess
//   assumed     neither told it: a default (PCIe gen 4, NVLink of the model's era, no MIG)
// Fixtures and documents typed by hand state none (kUnstated).
enum class FigureSource : std::uint8_t { kUnstated, kNvml, kNvidiaSmi, kSysfs, kTable, kAssumed };
Result<FigureSource> ParseFigureSource(std::string_view text);
std::string_view ToString(FigureSource source);

struct FigureSources {
  FigureSource nvlink = FigureSource::kUnstated;  // NVLink generation of the GPU's links
  FigureSource pcie = FigureSource::kUnstated;    // PCIe generation
  FigureSource mig = FigureSource::kUnstated;     // MIG capability and profile set
  bool stated() const {
    return nvlink != FigureSource::kUnstated || pcie != FigureSource::kUnstated ||
           mig != FigureSource::kUnstated;
  }
  friend bool operator==(const FigureSources&, const FigureSources&) = default;
};

// One MIG GPU instance that exists on a GPU (nvmlDeviceGetGpuInstances + its placement).
struct MigInstanceSpec {
  std::string profile;    // e.g. "3g.40gb"
  int start = 0;          // first memory slice (nvmlGpuInstancePlacement_t.start), 0..7
  int size = 0;           // memory slices (placement.size), 1..8
  std::string uuid;       // "MIG-..." of its compute instance, when known
  int gpu_instance = -1;  // NVML's GPU instance id (the driver's capability files use it), or -1
  friend bool operator==(const MigInstanceSpec&, const MigInstanceSpec&) = default;
};

// One PCIe tree vertex above the GPUs (host bridge or switch). A switch's `gen` and `width` are
// those of its upstream link (to its parent), which every pair of GPUs whose path runs through
// it but does not turn at it crosses: the bandwidth model takes the slowest link of a pair's path.
struct PcieNode {
  std::string id;
  bool is_switch = false;                         // false: host bridge (root complex)
  std::string parent;                             // empty for host bridges
  int numa_node = -1;                             // for host bridges, when known
  int gen = 0;                                    // 0 = unknown
  int width = 0;                                  // lanes; 0 = unknown
  FigureSource source = FigureSource::kUnstated;  // where gen and width came from
};

struct GpuSpec {
  int index = -1;
  std::string uuid;   // "GPU-..." when known, else empty
  std::string model;  // e.g. "NVIDIA H100 80GB HBM3"
  std::uint64_t memory_mib = 0;
  int numa_node = 0;
  int socket = 0;
  std::vector<std::string> pcie_path;  // host bridge -> ... -> nearest switch (ids in pcie_tree)
  int pcie_gen = 0;                    // 0 = unknown (the bandwidth model then assumes gen 4)
  int pcie_width = 0;                  // lanes of the GPU's link; 0 = unknown (taken as x16)
  bool mig_capable = false;
  std::string mig_profile_set;  // id of a MIG profile set (e.g. "a100-40gb"), or empty
  bool p2p_supported = true;    // false: GeForce-style, traffic staged through host memory
  std::string pci_bus_id;
  int nvlink_physical_links = 0;

  // What a node agent adds (absent from fixtures and nvidia-smi text, which mean "healthy, MIG
  // mode not stated"). An unhealthy GPU is never placed on; the rest of the node stays usable.
  bool healthy = true;
  std::string health_problem;                    // why it is unhealthy ("Xid 79: ...")
  MigMode mig_mode = MigMode::kUnknown;          // current
  MigMode mig_mode_pending = MigMode::kUnknown;  // after the next GPU reset; kUnknown = same
  std::vector<MigInstanceSpec> mig_instances;    // GPU instances that exist now
  FigureSources sources;                         // where its figures came from
};

// One unordered GPU pair (a < b). Pairs missing from TopologySpec::links are an error.
struct LinkSpec {
  int a = -1;
  int b = -1;
  int nvlink_count = 0;       // 0 = no NVLink; on NVSwitch systems the per-pair class (NV12, ...)
  bool via_nvswitch = false;  // the NVLinks reach the peer through NVSwitches
  PcieRelation pcie = PcieRelation::kSys;
  // The NVLink generation of this pair's links where it differs from the fabric's (a machine
  // whose links trained at different versions); 0 = the fabric's.
  int nvlink_generation = 0;
};

// The link layer of an RDMA NIC's port, as sysfs (`ports/<n>/link_layer`) and ibv_devinfo name
// it: InfiniBand, or Ethernet (RoCE).
enum class NicLinkLayer : std::uint8_t { kUnknown, kInfiniband, kEthernet };
Result<NicLinkLayer> ParseNicLinkLayer(std::string_view text);  // "InfiniBand" | "Ethernet"
std::string_view ToString(NicLinkLayer layer);                  // "" for kUnknown

// linkfit models at most this many RDMA NICs per node (a DGX with two ports per card and VFs
// stays far below it).
inline constexpr int kMaxNics = 128;

// One RDMA NIC (an RDMA device: one PCI function, e.g. one port of a ConnectX card), as the node
// agent reads it from sysfs or `nvidia-smi topo -m` shows it. What the source does not tell stays
// at its "unknown" value; nvidia-smi text tells only the name and the relations.
struct NicSpec {
  std::string name;        // RDMA device name, e.g. "mlx5_3"
  std::string pci_bus_id;  // "0000:18:00.0"; empty when unknown
  // ConnectX-8 Data Direct: a separate PCI function the NIC's DMA goes through (the kernel's
  // mlx5 "data direct" device, 15b3:2100). When present, gpu_relations are those of this
  // function, since GPU memory traffic crosses it rather than the NIC's own function.
  std::string data_path_pci_bus_id;
  int numa_node = -1;  // -1 = unknown
  NicLinkLayer link_layer = NicLinkLayer::kUnknown;
  // The port the NIC is used through (NCCL_IB_HCA's mlx5_0:<port>): its lowest-numbered ACTIVE
  // port, else its lowest port; rate, state and link layer are that port's. Documents without
  // it mean port 1.
  int port = 1;
  double rate_gbps = 0;              // port rate (sysfs "400 Gb/sec (4X NDR)" -> 400); 0 = unknown
  std::string state;                 // port state: "ACTIVE", "DOWN", "INIT", ...; empty = unknown
  std::string uverbs;                // the verbs character device, e.g. "uverbs3"; empty = unknown
  std::vector<std::string> netdevs;  // network interfaces of the device, e.g. {"ibp24s0"}
  std::string sriov_physfn;          // a virtual function: its physical function's bus id
  int sriov_num_vfs = 0;             // a physical function: its enabled virtual functions
  int rail = -1;                     // rail index; -1 = the NIC's position in TopologySpec::nics
  // The PCIe common ancestor with each GPU, by GPU index, as `nvidia-smi topo -m` prints it in
  // the NIC's column: PIX, PXB, PHB, NODE or SYS.
  std::vector<PcieRelation> gpu_relations;
  friend bool operator==(const NicSpec&, const NicSpec&) = default;
};

// How a node hands devices to containers, as its agent reports it (design §4.5, handoff/handoff.h):
//   nri-cdi   linkfit's NRI plugin, on a runtime that injects CDI devices
//   nri-env   linkfit's NRI plugin, on a runtime that takes NVIDIA_VISIBLE_DEVICES only
//   verify    no NRI: linkfit's device plugin injects the kubelet's choice and refuses a start
//             whose devices are not the plan
//   report    neither: another device plugin decides; the agent reports what pods hold
inline constexpr const char* kHandoffModes[] = {"nri-cdi", "nri-env", "verify", "report"};

struct TopologySpec {
  std::string id;    // e.g. "dgx-h100"; may be empty
  std::string name;  // human-readable
  NvlinkFabric fabric;
  std::vector<PcieNode> pcie_tree;  // may be empty (nvidia-smi text has no tree)
  std::vector<GpuSpec> gpus;        // sorted by index, indexes 0..n-1
  std::vector<LinkSpec> links;      // one per unordered pair
  std::vector<NicSpec> nics;        // RDMA NICs; empty when none is known
  std::string handoff_mode;         // a kHandoffModes value from the node agent; "" = not said
  // How the node hands its RDMA NICs over (kHandoffModes: nri-cdi where NIC CDI names are sent,
  // nri-env for their device files and environment, verify, report); "" = not said (no NICs).
  std::string nic_handoff_mode;
  // Non-fatal findings of the loader (unknown cells treated as SYS, missing fields defaulted...).
  std::vector<std::string> warnings;
};

// Parses a topology document (JSON). Accepts the gpu-topology-fixture/v1 schema
// (../shared/topologies/README.md) and linkfit's compact annotation form (same keys, optional
// provenance/system/topo_matrix/nics). Errors name the offending field.
Result<TopologySpec> ParseTopologyDocument(std::string_view json_text);

// Parses `nvidia-smi topo -m` text and, optionally, the CSV printed by
// `nvidia-smi --query-gpu=index,uuid,name,memory.total,pci.bus_id --format=csv` (with or without
// the header, with or without units). An empty `query_gpu_csv` leaves models and UUIDs unknown.
// What topo -m cannot tell (generations, MIG capability) comes from `table` (FillModelFacts).
Result<TopologySpec> ParseNvidiaSmi(std::string_view topo_matrix_text,
                                    std::string_view query_gpu_csv,
                                    const GpuModelTable& table = GpuModelTable::Builtin());

// Fills what the GPU model names tell from `table` (config/gpus.json), as the nvidia-smi parser
// does: each GPU's PCIe generation, MIG profile set (mig_capable), peer-to-peer support, and the
// fabric's NVLink and NVSwitch generations; each GPU's `sources` says "table" where the table
// knew the figure and "assumed" where it did not.
void FillModelFacts(TopologySpec& spec, const GpuModelTable& table);

// Detects which of the above `text` is: a JSON document (first non-space character '{'), or
// nvidia-smi text, optionally followed by the query-gpu CSV in the same file (the CSV starts at
// the first line beginning with "index," or at a line of the form "0, GPU-...").
Result<TopologySpec> ParseTopologyText(std::string_view text);

// Reads a file and calls ParseTopologyText; errors start with the path.
Result<TopologySpec> LoadTopologyFile(const std::string& path);
// Reads a topology file's text (at most 16 MiB); errors start with the path.
Result<std::string> ReadTopologyFile(const std::string& path);

// Serialises a spec as a compact topology document (the node annotation form), parseable by
// ParseTopologyDocument.
std::string ToTopologyDocument(const TopologySpec& spec);

}  // namespace linkfit::topology
