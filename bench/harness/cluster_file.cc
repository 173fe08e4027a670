#include "harness/cluster_file.h"

#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "linkfit/topology/spec.h"

namespace linkfit::bench {
namespace {

std::string YamlQuote(const std::string& text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

}  // namespace

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

Result<std::string> WriteClusterFile(const Cluster& cluster, const std::string& dir) {
  std::map<std::pair<int, std::string>, std::string> synthesized;
  std::ostringstream yaml;
  yaml << "# written by linkfit-bench\nnodes:\n";
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
    }
    yaml << "  - name: " << YamlQuote(node.name) << "\n"
         << "    topology: " << YamlQuote(topology_path) << "\n";
    if (!node.gpu_model.empty()) {
      yaml << "    labels: {nvidia.com/gpu.product: " << YamlQuote(node.gpu_model) << "}\n";
    }
    if (node.mig_mode) {
      yaml << "    mig: all\n";
    } else if (node.mig_gpus != 0) {
      yaml << "    mig: [";
      const char* separator = "";
      for (int g = 0; g < node.gpu_count; ++g) {
        if ((node.mig_gpus >> g) & 1) {
          yaml << separator << g;
          separator = ", ";
        }
      }
      yaml << "]\n";
    }
    // Allocatable CPU and memory: linkfit scores GPUs stranded by them (it never filters on them).
    if (node.cpu_capacity > 0) yaml << "    cpu: " << node.cpu_capacity << "m\n";
    if (node.memory_capacity > 0) yaml << "    memory: " << node.memory_capacity << "Mi\n";
  }
  yaml << "allocations:" << (cluster.preloaded().empty() ? " []\n" : "\n");
  for (const Cluster::Preloaded& item : cluster.preloaded()) {
    const PodSpec& pod = item.pod;
    const Placement& at = item.placement;
    yaml << "  - {pod: " << YamlQuote("bench/" + pod.name) << ", uid: " << YamlQuote(pod.uid)
         << ", node: " << YamlQuote(cluster.node(at.node).name);
    if (at.mig_gpu >= 0) {
      yaml << ", mig: [{gpu: " << at.mig_gpu << ", profile: " << YamlQuote(pod.mig_profile)
           << ", start: " << at.mig_start << "}]";
    } else if (at.gpus != 0) {
      yaml << (at.gpu_milli < kWholeGpuMilli ? ", shares: [" : ", gpus: [");
      const char* separator = "";
      for (int g = 0; g < cluster.node(at.node).gpu_count; ++g) {
        if (((at.gpus >> g) & 1) == 0) continue;
        if (at.gpu_milli < kWholeGpuMilli) {
          yaml << separator << "{gpu: " << g << ", milli: " << at.gpu_milli << "}";
        } else {
          yaml << separator << g;
        }
        separator = ", ";
      }
      yaml << "]";
    }
    yaml << ", cpu: " << pod.cpu_milli << "m, memory: " << pod.memory_mib << "Mi}\n";
  }
  const std::string path = dir + "/cluster.yaml";
  std::ofstream out(path);
  out << yaml.str();
  if (!out) return MakeError(path + ": cannot write");
  return path;
}

}  // namespace linkfit::bench
