// `linkfit topo`: prints what linkfit derived from a topology document or nvidia-smi text.

#include <iomanip>
#include <ostream>

#include <nlohmann/json.hpp>

#include "linkfit/alloc/placement_table.h"
#include "linkfit/app/cli.h"
#include "linkfit/common/flags.h"
#include "linkfit/common/strings.h"
#include "linkfit/topology/topology.h"

namespace linkfit::app {
namespace {

nlohmann::json MaskList(const std::vector<topology::GpuMask>& masks) {
  nlohmann::json out = nlohmann::json::array();
  for (topology::GpuMask mask : masks) out.push_back(alloc::MaskToIndexes(mask));
  return out;
}

std::string MaskText(const std::vector<topology::GpuMask>& masks) {
  std::string out;
  for (topology::GpuMask mask : masks) {
    if (!out.empty()) out += ' ';
    out += '{';
    out += JoinInts(alloc::MaskToIndexes(mask));
    out += '}';
  }
  return out.empty() ? "-" : out;
}

// One line per NIC: name, rail, NUMA node, port, PCI function(s), then its relation to each GPU.
void PrintNics(const topology::Topology& topo, std::ostream& out) {
  if (topo.nic_count() == 0) return;
  out << "\nNICs (relation to GPU0.." << topo.gpu_count() - 1 << "):\n";
  for (const topology::NicSpec& nic : topo.nics()) {
    out << "  " << nic.name << "  rail " << nic.rail << "  NUMA "
        << (nic.numa_node >= 0 ? std::to_string(nic.numa_node) : "?");
    if (nic.link_layer != topology::NicLinkLayer::kUnknown) out << "  " << ToString(nic.link_layer);
    if (nic.rate_gbps > 0) out << " " << nic.rate_gbps << " Gb/s";
    if (!nic.state.empty()) out << " " << nic.state;
    if (nic.port != 1) out << " (port " << nic.port << ")";  // port 1 is the common case
    if (!nic.pci_bus_id.empty()) out << "  " << nic.pci_bus_id;
    if (!nic.data_path_pci_bus_id.empty()) out << " (data path " << nic.data_path_pci_bus_id << ")";
    out << " ";
    for (topology::PcieRelation relation : nic.gpu_relations) out << " " << ToString(relation);
    out << "\n";
  }
}

void PrintText(const topology::Topology& topo, std::ostream& out) {
  const int n = topo.gpu_count();
  const topology::TopologySpec& spec = topo.spec();
  out << (spec.name.empty() ? spec.id : spec.name) << "\n";
  out << n << " GPUs, NVLink fabric: " << ToString(spec.fabric.kind) << ", fingerprint "
      << topo.fingerprint() << "\n\n";
  for (int i = 0; i < n; ++i) {
    const topology::GpuSpec& gpu = topo.gpu(i);
    out << "  GPU" << i << "  " << gpu.model << "  NUMA " << gpu.numa_node << "  socket "
        << gpu.socket;
    if (!gpu.mig_profile_set.empty()) out << "  MIG " << gpu.mig_profile_set;
    out << "\n";
  }
  out << "\nNVLink islands:     " << MaskText(topo.nvlink_islands()) << "\n";
  out << "NUMA nodes:         " << MaskText(topo.numa_groups()) << "\n";
  out << "sockets:            " << MaskText(topo.socket_groups()) << "\n";
  out << "PCIe switch groups: " << MaskText(topo.pcie_switch_groups()) << "\n";
  PrintNics(topo, out);
  out << "\npair bandwidth (GB/s per direction):\n      ";
  for (int b = 0; b < n; ++b) out << std::setw(6) << ("GPU" + std::to_string(b));
  out << "\n";
  for (int a = 0; a < n; ++a) {
    out << std::setw(6) << ("GPU" + std::to_string(a));
    for (int b = 0; b < n; ++b) {
      if (a == b) {
        out << std::setw(6) << "X";
      } else {
        out << std::setw(6) << std::setprecision(4) << topo.bandwidth_gbps(a, b);
      }
    }
    out << "\n";
  }
  for (const std::string& warning : topo.warnings()) out << "warning: " << warning << "\n";
}

nlohmann::json ToJson(const topology::Topology& topo) {
  const int n = topo.gpu_count();
  nlohmann::json matrix = nlohmann::json::array();
  nlohmann::json numa = nlohmann::json::array();
  nlohmann::json sockets = nlohmann::json::array();
  nlohmann::json models = nlohmann::json::array();
  for (int a = 0; a < n; ++a) {
    nlohmann::json row = nlohmann::json::array();
    for (int b = 0; b < n; ++b) row.push_back(topo.bandwidth_gbps(a, b));
    matrix.push_back(std::move(row));
    numa.push_back(topo.numa_node(a));
    sockets.push_back(topo.socket(a));
    models.push_back(topo.gpu(a).model);
  }
  nlohmann::json doc = {{"id", topo.spec().id},
                        {"gpus", n},
                        {"models", models},
                        {"bandwidth_gbps", matrix},
                        {"numa", numa},
                        {"sockets", sockets},
                        {"islands", MaskList(topo.nvlink_islands())},
                        {"numa_groups", MaskList(topo.numa_groups())},
                        {"pcie_switch_groups", MaskList(topo.pcie_switch_groups())},
                        {"fingerprint", topo.fingerprint()},
                        {"warnings", topo.warnings()}};
  if (topo.nic_count() > 0) {
    // The NICs as the topology document writes them (rails resolved).
    topology::TopologySpec nics_only;
    nics_only.nics = topo.nics();
    doc["nics"] = nlohmann::json::parse(topology::ToTopologyDocument(nics_only))["nics"];
  }
  return doc;
}

}  // namespace

int RunTopo(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto flags = Flags::Parse(args, {{"topology"}, {"json", false}});
  if (!flags) {
    err << "linkfit topo: " << flags.error().message << "\n";
    return 2;
  }
  auto path = flags->Require("topology");
  if (!path) {
    err << "linkfit topo: " << path.error().message << "\n";
    return 2;
  }
  auto spec = topology::LoadTopologyFile(*path);
  auto topo = spec ? topology::BuildTopology(std::move(*spec)) : tl::unexpected(spec.error());
  if (!topo) {
    if (flags->Has("json")) {
      out << nlohmann::json{{"error", topo.error().message}}.dump() << "\n";
    } else {
      err << "linkfit topo: " << topo.error().message << "\n";
    }
    return 1;
  }
  if (flags->Has("json")) {
    out << ToJson(**topo).dump() << "\n";
  } else {
    PrintText(**topo, out);
  }
  return 0;
}

}  // namespace linkfit::app
