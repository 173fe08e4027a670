#include "harness/cluster_file.h"

#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <map>

#include "linkfit/standalone/cluster_file.h"
#include "linkfit/topology/spec.h"

namespace linkfit::bench {

Result<std::string> MakeTempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/" + prefix + "XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) return MakeError("mkdtemp(" + pattern + ") failed");
  return pattern;
}

Result<std::string> SynthesizedPcieDocument(int gpu_count, const std::string& model) {
  topology::TopologySpec spec;
  spec.id = "openb-pcie-" + std::to_string(gpu_count) + "x";
  spec.name = "synthesised single-socket PCIe node, " + std::to_string(gpu_count) + "x " + model;
  spec.fabric.kind = topology::NvlinkFabricKind::kNone;
  topology::PcieNode host_bridge;
  host_bridge.id = "hb0";
  host_bridge.numa_node = 0;
  host_bridge.gen = 3;
  spec.pcie_tree.push_back(host_bridge);
  for (int i = 0; i < gpu_count; ++i) {
    topology::GpuSpec gpu;
    gpu.index = i;
    gpu.model = model;
    gpu.numa_node = 0;
    gpu.socket = 0;
    gpu.pcie_path = {"hb0"};
    gpu.pcie_gen = 3;
    spec.gpus.push_back(gpu);
  }
  for (int a = 0; a < gpu_count; ++a) {
    for (int b = a + 1; b < gpu_count; ++b) {
      topology::LinkSpec link;
      link.a = a;
      link.b = b;
      link.pcie = topology::PcieRelation::kPhb;
      spec.links.push_back(link);
    }
  }
  return topology::ToTopologyDocument(spec);
}

namespace {

// The simulator's node as a cluster-file entry, its topology at `topology_path`.
standalone::ClusterFileNode NodeEntry(const SimNode& node, const std::string& topology_path) {
  standalone::ClusterFileNode entry;
  entry.name = node.name;
  entry.topology = topology_path;
  if (!node.gpu_model.empty()) entry.labels["nvidia.com/gpu.product"] = node.gpu_model;
  entry.mig_all = node.mig_mode;
  for (int g = 0; !node.mig_mode && g < node.gpu_count; ++g) {
    if ((node.mig_gpus >> g) & 1) entry.mig_gpus.push_back(g);
  }
  // Allocatable CPU and memory: linkfit scores GPUs stranded by them (it never filters on them).
  if (node.cpu_capacity > 0) entry.cpu = std::to_string(node.cpu_capacity) + "m";
  if (node.memory_capacity > 0) entry.memory = std::to_string(node.memory_capacity) + "Mi";
  return entry;
}

// A preloaded pod as a cluster-file allocation.
standalone::ClusterFileAllocation AllocationEntry(const Cluster& cluster,
                                                  const Cluster::Preloaded& item) {
  const PodSpec& pod = item.pod;
  const Placement& at = item.placement;
  standalone::ClusterFileAllocation entry;
  entry.pod = "bench/" + pod.name;
  entry.uid = pod.uid;
  entry.node = cluster.node(at.node).name;
  if (at.mig_gpu >= 0) {
    entry.mig.push_back({at.mig_gpu, pod.mig_profile, at.mig_start});
  } else {
    for (int g = 0; at.gpus != 0 && g < cluster.node(at.node).gpu_count; ++g) {
      if (((at.gpus >> g) & 1) == 0) continue;
      if (at.gpu_milli < kWholeGpuMilli) {
        entry.shares.push_back({g, at.gpu_milli});
      } else {
        entry.gpus.push_back(g);
      }
    }
  }
  entry.cpu = std::to_string(pod.cpu_milli) + "m";
  entry.memory = std::to_string(pod.memory_mib) + "Mi";
  return entry;
}

// `node`'s topology document with every NIC at `node.nic_rate_gbps`, written once per (document,
// rate) into `dir`; its path.
Result<std::string> WithNicRate(const SimNode& node, const std::string& dir,
                                std::map<std::pair<std::string, double>, std::string>& written) {
  const auto key = std::make_pair(node.topology_file, node.nic_rate_gbps);
  if (const auto it = written.find(key); it != written.end()) return it->second;
  auto spec = topology::LoadTopologyFile(node.topology_file);
  if (!spec) return tl::unexpected(spec.error());
  for (topology::NicSpec& nic : spec->nics) nic.rate_gbps = node.nic_rate_gbps;
  const std::string path = dir + "/nic-rate-" + std::to_string(written.size()) + ".json";
  std::ofstream out(path);
  out << topology::ToTopologyDocument(*spec);
  if (!out) return MakeError(path + ": cannot write");
  written.emplace(key, path);
  return path;
}

}  // namespace

Result<std::string> WriteClusterFile(const Cluster& cluster, const std::string& dir) {
  std::map<std::pair<int, std::string>, std::string> synthesized;
  std::map<std::pair<std::string, double>, std::string> with_rates;
  standalone::ClusterFile file;
  file.comment = "written by linkfit-bench";
  for (const SimNode& node : cluster.nodes()) {
    std::string topology_path = node.topology_file;
    if (topology_path.empty()) {
      auto key = std::make_pair(node.gpu_count, node.gpu_model);
      auto it = synthesized.find(key);
      if (it == synthesized.end()) {
        auto document = SynthesizedPcieDocument(node.gpu_count, node.gpu_model);
        if (!document) return tl::unexpected(document.error());
        const std::string path = dir + "/pcie-" + std::to_string(node.gpu_count) + "x-" +
                                 std::to_string(synthesized.size()) + ".json";
        std::ofstream out(path);
        out << *document;
        if (!out) return MakeError(path + ": cannot write");
        it = synthesized.emplace(key, path).first;
      }
      topology_path = it->second;
    } else if (node.nic_rate_gbps > 0) {
      auto rated = WithNicRate(node, dir, with_rates);
      if (!rated) return tl::unexpected(rated.error());
      topology_path = *rated;
    }
    file.nodes.push_back(NodeEntry(node, topology_path));
  }
  for (const Cluster::Preloaded& item : cluster.preloaded()) {
    file.allocations.push_back(AllocationEntry(cluster, item));
  }
  const std::string path = dir + "/cluster.yaml";
  if (auto written = standalone::WriteClusterFile(path, file); !written) {
    return tl::unexpected(written.error());
  }
  return path;
}

}  // namespace linkfit::bench
