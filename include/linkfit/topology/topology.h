#pragma once

// Topology: the immutable model of one node's GPU interconnect, derived once from a TopologySpec.
// Internally a Boost.Graph of GPUs, PCIe switches, host bridges, NUMA nodes, sockets and
// NVSwitches is built (see topology_graph.cc); this header exposes only what placement needs:
//
//   - the pair bandwidth matrix b(i,j) in MB/s (integers, so comparisons are exact);
//   - NVLink islands (GPUs connected by NVLink, directly or through NVSwitches);
//   - the NUMA node and socket of each GPU, and the GPU groups that share a PCIe switch, a NUMA
//     node or a socket (bit masks, bit i = GPU i);
//   - a fingerprint: identical nodes share one Topology and one placement table.
//
// Invariants established by BuildTopology (tests check them on every fixture):
//   b is symmetric and positive off the diagonal; an NVLink (or NVSwitch) pair is faster than
//   every PCIe-only pair; PCIe-only pairs of one PCIe generation order SYS <= NODE <= PHB <= PXB
//   <= PIX; b(i,i) = 0.
//
// Thread-safety: immutable after construction; share it as TopologyPtr across threads.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "linkfit/common/result.h"
#include "linkfit/topology/bandwidth.h"
#include "linkfit/topology/spec.h"

namespace linkfit::topology {

using GpuMask = std::uint16_t;  // bit i = GPU i; nodes have at most kMaxGpus GPUs

class Topology;
using TopologyPtr = std::shared_ptr<const Topology>;

// Validates `spec` (GPU indexes 0..n-1 without duplicates, 1..16 GPUs, one link per pair, links
// naming existing GPUs; NICs with unique non-empty names and bus ids, one relation per GPU, at
// most kMaxNics) and derives the model. Asymmetric or unknown links were already turned
// into SYS with a warning by the parsers; a missing pair here is an error.
// What the document leaves unsaid of a GPU's NVLinks (their generation, narrow GA102 links) comes
// from `models` by the GPU's model name: the table the node agent uses (config/gpus.json).
Result<TopologyPtr> BuildTopology(TopologySpec spec,
                                  const BandwidthModel& bandwidth = BandwidthModel::Defaults(),
                                  const GpuModelTable& models = GpuModelTable::Builtin());

class Topology {
 public:
  int gpu_count() const { return gpu_count_; }
  GpuMask all_gpus() const { return static_cast<GpuMask>((1u << gpu_count_) - 1u); }
  const TopologySpec& spec() const { return spec_; }
  const GpuSpec& gpu(int index) const { return spec_.gpus[static_cast<std::size_t>(index)]; }

  // Pair bandwidth in MB/s per direction (GB/s x 1000); 0 on the diagonal.
  std::uint32_t bandwidth_mbps(int a, int b) const {
    return d_.bandwidth[static_cast<std::size_t>(a * gpu_count_ + b)];
  }
  double bandwidth_gbps(int a, int b) const { return bandwidth_mbps(a, b) / 1000.0; }

  bool has_nvlink(int a, int b) const {
    return ((static_cast<unsigned>(d_.nvlink_neighbors[Idx(a)]) >> b) & 1) != 0;
  }
  GpuMask nvlink_neighbors(int gpu) const { return d_.nvlink_neighbors[Idx(gpu)]; }
  // The fastest PCIe-only pair bandwidth in this node (0 if every pair has NVLink).
  std::uint32_t max_pcie_only_mbps() const { return d_.max_pcie_only_mbps; }
  // The slowest NVLink pair bandwidth (0 if there is no NVLink).
  std::uint32_t min_nvlink_mbps() const { return d_.min_nvlink_mbps; }

  // Connected components of the NVLink graph (NVSwitches included), as GPU masks, in order of
  // their lowest GPU. GPUs without NVLink form singleton islands.
  const std::vector<GpuMask>& nvlink_islands() const { return d_.islands; }

  // The node's RDMA NICs in document order (empty when none is known: a NIC-less node pays
  // only the empty vector). Each NIC's rail is resolved (its position where the spec said none)
  // and its gpu_relations has one entry per GPU.
  int nic_count() const { return static_cast<int>(spec_.nics.size()); }
  const std::vector<NicSpec>& nics() const { return spec_.nics; }
  PcieRelation nic_relation(int nic, int gpu) const {
    return spec_.nics[Idx(nic)].gpu_relations[Idx(gpu)];
  }
  // A NIC's port rate in MB/s per direction (400 Gb/s -> 50,000); 0 when the rate is unknown.
  std::uint32_t nic_mbps(int nic) const {
    return static_cast<std::uint32_t>(spec_.nics[Idx(nic)].rate_gbps * 125.0 + 0.5);
  }
  // What a GPU moves to or from a NIC that is not at GPUDirect distance, staged through host
  // memory: the bandwidth model's SYS rate for the GPU's PCIe generation (unknown: gen 4), scaled
  // by its lanes (unknown: x16). Empty (0) on a node without NICs.
  std::uint32_t staged_mbps(int gpu) const {
    return d_.staged_mbps.empty() ? 0 : d_.staged_mbps[Idx(gpu)];
  }

  int numa_node(int gpu) const { return spec_.gpus[Idx(gpu)].numa_node; }
  int socket(int gpu) const { return spec_.gpus[Idx(gpu)].socket; }

  // GPU groups (each a mask), used by closeness levels. A set is "under one PCIe switch" iff it is
  // a subset of one switch group, "on one NUMA node" iff a subset of one NUMA group, and so on.
  const std::vector<GpuMask>& pcie_switch_groups() const { return d_.switch_groups; }
  const std::vector<GpuMask>& numa_groups() const { return d_.numa_groups; }
  const std::vector<GpuMask>& socket_groups() const { return d_.socket_groups; }

  // The number of distinct NUMA nodes the GPUs of `mask` touch.
  int NumaSpan(GpuMask mask) const;

  // The GPUs of one model name (a node may mix models; a GPU lost at the query level reads
  // "unknown"): the distinct models in order of their lowest GPU, with their lower-cased name.
  struct ModelGroup {
    std::string model;
    std::string lower;
    GpuMask gpus = 0;
  };
  const std::vector<ModelGroup>& model_groups() const { return d_.model_groups; }
  // The GPUs whose lower-cased model contains one of `lowered_substrings`; every GPU when the
  // list is empty. One substring test per (distinct model, substring): nodes of one model pay
  // what a single model name costs.
  GpuMask GpusOfModels(const std::vector<std::string>& lowered_substrings) const;
  // The node's model for display and metrics, not for decisions (those use GpusOfModels): the
  // model of most healthy GPUs (ties: the one whose first GPU comes first), or of most GPUs
  // when none is healthy.
  const std::string& summary_model() const { return d_.model_groups[d_.summary_group].model; }

  // A stable hash of everything placement depends on (GPU count, models, NUMA/socket layout,
  // groups and the bandwidth matrix); equal fingerprints mean interchangeable topologies.
  const std::string& fingerprint() const { return d_.fingerprint; }

  // Warnings from parsing and from deriving the model (e.g. "NVLink pair 0-1 raised above the
  // fastest PCIe pair"). Logged once at load.
  const std::vector<std::string>& warnings() const { return spec_.warnings; }

  // What BuildTopology derives from the spec (internal: use BuildTopology()).
  struct Derived {
    std::vector<std::uint32_t> bandwidth;  // n x n, MB/s
    std::vector<GpuMask> nvlink_neighbors;
    std::uint32_t max_pcie_only_mbps = 0;
    std::uint32_t min_nvlink_mbps = 0;
    std::vector<std::uint32_t> staged_mbps;  // per GPU; empty without NICs
    std::vector<GpuMask> islands;
    std::vector<GpuMask> switch_groups;
    std::vector<GpuMask> numa_groups;
    std::vector<GpuMask> socket_groups;
    std::vector<ModelGroup> model_groups;
    std::size_t summary_group = 0;  // index into model_groups
    std::string fingerprint;
  };
  Topology(TopologySpec spec, Derived derived);

 private:
  static std::size_t Idx(int i) { return static_cast<std::size_t>(i); }

  TopologySpec spec_;
  int gpu_count_ = 0;
  Derived d_;
};

}  // namespace linkfit::topology
