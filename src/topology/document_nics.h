#pragma once

// The `nics` array of linkfit's topology document (document.cc), read and written here so that
// the GPU part of the document stays one file. A NIC entry:
//
//   {"name": "mlx5_0", "pci_bus_id": "0000:18:00.0", "numa_node": 0,
//    "port": 2, "link_layer": "InfiniBand", "rate_gbps": 400, "state": "ACTIVE", "uverbs":
//    "uverbs0", "netdevs": ["ibp24s0"], "rail": 0, "gpu_relations": ["PXB", "NODE", ...],
//    "data_path_pci_bus_id": "0000:1a:00.1", "sriov_physfn": "...", "sriov_num_vfs": 0}
//
// Only `name` and `gpu_relations` (one per GPU, by index) are required; `port` (1..255, the port
// the NIC is used through) is written only when it is not 1, which is what its absence means. The
// writer leaves out what is unknown, and leaves out `nics` altogether when there are none, so
// NIC-less documents read and write exactly as before NICs existed.
//
// Thread-safety: pure functions.

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "linkfit/common/result.h"
#include "linkfit/topology/spec.h"

namespace linkfit::topology::internal {

// Reads $.nics of `root` with `parse` for each entry (given the entry and its path, "$.nics[2]"):
// absent or null is no NICs; not an array, more than kMaxNics entries or a name twice is an error.
Result<std::vector<NicSpec>> ParseNicArray(
    const nlohmann::json& root,
    const std::function<Result<NicSpec>(const nlohmann::json& item, const std::string& path)>&
        parse);

// Reads $.nics of `root` for a node of `gpu_count` GPUs; an absent or null field is no NICs.
// Errors name the offending field ("$.nics[2].gpu_relations[7]: ...").
Result<std::vector<NicSpec>> ParseNics(const nlohmann::json& root, int gpu_count);

// Reads $.nics of a gpu-topology-fixture/v1 document (name, numa_node, pcie_parent and the
// pix_gpus/pxb_gpus/phb_gpus lists; document_fixture_nics.cc) for `spec`, whose GPUs and PCIe
// tree are read. Errors name the offending field.
Result<std::vector<NicSpec>> ParseFixtureNics(const nlohmann::json& root, const TopologySpec& spec);

// Adds "nics" to `doc` when `nics` is not empty.
void WriteNics(const std::vector<NicSpec>& nics, nlohmann::json& doc);

}  // namespace linkfit::topology::internal
