#include "topology/topology_graph.h"

#include <algorithm>
#include <map>
#include <set>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/connected_components.hpp>
#include <boost/graph/filtered_graph.hpp>

namespace linkfit::topology::internal {
namespace {

enum class VertexKind { kGpu, kPcieSwitch, kHostBridge, kNuma, kSocket, kNvswitch };
enum class EdgeKind { kNvlink, kPcie, kNumaLink, kInterSocket };

struct VertexProps {
  VertexKind kind = VertexKind::kGpu;
  int gpu = -1;  // GPU index for kGpu vertices
  std::string id;
};

struct EdgeProps {
  EdgeKind kind = EdgeKind::kPcie;
  int nvlinks = 0;
};

using Graph =
    boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, VertexProps, EdgeProps>;
using Vertex = boost::graph_traits<Graph>::vertex_descriptor;

struct NvlinkOnly {
  const Graph* graph = nullptr;
  bool operator()(const boost::graph_traits<Graph>::edge_descriptor& e) const {
    return (*graph)[e].kind == EdgeKind::kNvlink;
  }
};

GpuMask Bit(int gpu) { return static_cast<GpuMask>(1u << gpu); }

bool AllGpusHavePaths(const TopologySpec& spec) {
  if (spec.pcie_tree.empty()) return false;
  return std::all_of(spec.gpus.begin(), spec.gpus.end(),
                     [](const GpuSpec& gpu) { return !gpu.pcie_path.empty(); });
}

// Groups of GPUs joined pairwise by PIX or PXB (one or more switches, no host bridge): the
// connected components of that relation, kept when they are cliques (a consistent tree); an
// inconsistent component falls back to its individual switch pairs.
std::vector<GpuMask> SwitchGroupsFromRelations(const TopologySpec& spec) {
  const int n = static_cast<int>(spec.gpus.size());
  Graph graph(static_cast<std::size_t>(n));
  std::vector<std::vector<bool>> joined(static_cast<std::size_t>(n),
                                        std::vector<bool>(static_cast<std::size_t>(n), false));
  for (const LinkSpec& link : spec.links) {
    if (link.pcie >= PcieRelation::kPxb) {
      boost::add_edge(static_cast<Vertex>(link.a), static_cast<Vertex>(link.b),
                      EdgeProps{EdgeKind::kPcie, 0}, graph);
      joined[static_cast<std::size_t>(link.a)][static_cast<std::size_t>(link.b)] = true;
      joined[static_cast<std::size_t>(link.b)][static_cast<std::size_t>(link.a)] = true;
    }
  }
  std::vector<int> component(static_cast<std::size_t>(n));
  const int count = boost::connected_components(graph, component.data());
  std::vector<GpuMask> groups;
  for (int c = 0; c < count; ++c) {
    std::vector<int> members;
    for (int i = 0; i < n; ++i) {
      if (component[static_cast<std::size_t>(i)] == c) members.push_back(i);
    }
    if (members.size() < 2) continue;
    bool clique = true;
    for (std::size_t x = 0; x < members.size() && clique; ++x) {
      for (std::size_t y = x + 1; y < members.size(); ++y) {
        if (!joined[static_cast<std::size_t>(members[x])][static_cast<std::size_t>(members[y])]) {
          clique = false;
          break;
        }
      }
    }
    if (clique) {
      GpuMask mask = 0;
      for (int m : members) mask = static_cast<GpuMask>(mask | Bit(m));
      groups.push_back(mask);
    } else {
      for (const LinkSpec& link : spec.links) {
        if (link.pcie >= PcieRelation::kPxb && component[static_cast<std::size_t>(link.a)] == c) {
          groups.push_back(static_cast<GpuMask>(Bit(link.a) | Bit(link.b)));
        }
      }
    }
  }
  return groups;
}

// The machine as a graph: GPUs, PCIe switches and host bridges, NUMA nodes and sockets, NVLink
// bundles and NVSwitches.
struct MachineGraph {
  Graph graph;
  std::vector<Vertex> gpu_vertex;  // by GPU index
};

// The PCIe tree, NUMA nodes and sockets, and each GPU's attachment to them.
void AddPcieAndNuma(const TopologySpec& spec, MachineGraph& machine) {
  Graph& graph = machine.graph;
  const std::vector<Vertex>& gpu_vertex = machine.gpu_vertex;
  std::map<std::string, Vertex> pcie_vertex;
  for (const PcieNode& node : spec.pcie_tree) {
    pcie_vertex[node.id] = boost::add_vertex(
        VertexProps{node.is_switch ? VertexKind::kPcieSwitch : VertexKind::kHostBridge, -1,
                    node.id},
        graph);
  }
  std::map<int, Vertex> numa_vertex;
  std::map<int, Vertex> socket_vertex;
  auto numa_of = [&](int numa, int socket) {
    auto it = numa_vertex.find(numa);
    if (it != numa_vertex.end()) return it->second;
    const Vertex v =
        boost::add_vertex(VertexProps{VertexKind::kNuma, -1, "numa" + std::to_string(numa)}, graph);
    numa_vertex[numa] = v;
    auto s = socket_vertex.find(socket);
    if (s == socket_vertex.end()) {
      s = socket_vertex
              .emplace(socket, boost::add_vertex(VertexProps{VertexKind::kSocket, -1,
                                                             "socket" + std::to_string(socket)},
                                                 graph))
              .first;
    }
    boost::add_edge(v, s->second, EdgeProps{EdgeKind::kNumaLink, 0}, graph);
    return v;
  };
  std::map<int, int> socket_of_numa;
  for (const GpuSpec& gpu : spec.gpus) socket_of_numa.emplace(gpu.numa_node, gpu.socket);
  for (const PcieNode& node : spec.pcie_tree) {
    if (!node.parent.empty()) {
      boost::add_edge(pcie_vertex[node.id], pcie_vertex[node.parent], EdgeProps{EdgeKind::kPcie, 0},
                      graph);
    } else if (node.numa_node >= 0) {
      const auto socket = socket_of_numa.find(node.numa_node);
      boost::add_edge(pcie_vertex[node.id],
                      numa_of(node.numa_node, socket == socket_of_numa.end() ? 0 : socket->second),
                      EdgeProps{EdgeKind::kNumaLink, 0}, graph);
    }
  }
  for (const GpuSpec& gpu : spec.gpus) {
    const Vertex g = gpu_vertex[static_cast<std::size_t>(gpu.index)];
    if (!gpu.pcie_path.empty() && pcie_vertex.count(gpu.pcie_path.back()) != 0) {
      boost::add_edge(g, pcie_vertex[gpu.pcie_path.back()], EdgeProps{EdgeKind::kPcie, 0}, graph);
    } else {
      boost::add_edge(g, numa_of(gpu.numa_node, gpu.socket), EdgeProps{EdgeKind::kNumaLink, 0},
                      graph);
    }
  }
  for (auto a = socket_vertex.begin(); a != socket_vertex.end(); ++a) {
    for (auto b = std::next(a); b != socket_vertex.end(); ++b) {
      boost::add_edge(a->second, b->second, EdgeProps{EdgeKind::kInterSocket, 0}, graph);
    }
  }
}

// NVLink: direct bundles between GPUs, or GPU-to-NVSwitch edges for switched pairs.
void AddNvlinks(const TopologySpec& spec, MachineGraph& machine) {
  Graph& graph = machine.graph;
  const std::vector<Vertex>& gpu_vertex = machine.gpu_vertex;
  bool any_switched = false;
  Vertex nvswitch = 0;
  for (const LinkSpec& link : spec.links) {
    if (link.nvlink_count <= 0) continue;
    if (link.via_nvswitch) {
      if (!any_switched) {
        nvswitch = boost::add_vertex(VertexProps{VertexKind::kNvswitch, -1, "nvswitch"}, graph);
        any_switched = true;
      }
      for (int end : {link.a, link.b}) {
        const Vertex g = gpu_vertex[static_cast<std::size_t>(end)];
        if (!boost::edge(g, nvswitch, graph).second) {
          boost::add_edge(g, nvswitch, EdgeProps{EdgeKind::kNvlink, link.nvlink_count}, graph);
        }
      }
    } else {
      boost::add_edge(gpu_vertex[static_cast<std::size_t>(link.a)],
                      gpu_vertex[static_cast<std::size_t>(link.b)],
                      EdgeProps{EdgeKind::kNvlink, link.nvlink_count}, graph);
    }
  }
}

// Islands: connected components of the NVLink-only subgraph, restricted to GPUs, in order of
// their lowest GPU.
std::vector<GpuMask> NvlinkIslands(const MachineGraph& machine, int n) {
  const Graph& graph = machine.graph;
  std::vector<GpuMask> found;
  boost::filtered_graph<Graph, NvlinkOnly> nvlink_graph(graph, NvlinkOnly{&graph});
  std::vector<int> component(boost::num_vertices(graph));
  boost::connected_components(nvlink_graph, component.data());
  std::map<int, GpuMask> islands;
  for (int i = 0; i < n; ++i) {
    const int c = component[machine.gpu_vertex[static_cast<std::size_t>(i)]];
    islands[c] = static_cast<GpuMask>(islands[c] | Bit(i));
  }
  for (const auto& entry : islands) found.push_back(entry.second);
  std::sort(found.begin(), found.end(), [](GpuMask a, GpuMask b) { return (a & -a) < (b & -b); });
  return found;
}

// Switch groups: for each PCIe switch, the GPUs whose path runs through it (from the pair
// relations where the tree is incomplete).
std::vector<GpuMask> SwitchGroups(const TopologySpec& spec, std::vector<std::string>& warnings) {
  std::set<GpuMask> groups;
  if (AllGpusHavePaths(spec)) {
    for (const PcieNode& node : spec.pcie_tree) {
      if (!node.is_switch) continue;
      GpuMask mask = 0;
      for (const GpuSpec& gpu : spec.gpus) {
        if (std::find(gpu.pcie_path.begin(), gpu.pcie_path.end(), node.id) != gpu.pcie_path.end()) {
          mask = static_cast<GpuMask>(mask | Bit(gpu.index));
        }
      }
      if (__builtin_popcount(mask) >= 2) groups.insert(mask);
    }
    // The tree and the pair relations should agree; say so when they do not.
    for (const LinkSpec& link : spec.links) {
      const GpuMask pair = static_cast<GpuMask>(Bit(link.a) | Bit(link.b));
      const bool shares_switch =
          std::any_of(groups.begin(), groups.end(), [&](GpuMask g) { return (g & pair) == pair; });
      if (shares_switch != (link.pcie >= PcieRelation::kPxb)) {
        warnings.push_back("GPU pair " + std::to_string(link.a) + "-" + std::to_string(link.b) +
                           ": PCIe tree and pcie_relation " + std::string(ToString(link.pcie)) +
                           " disagree about a shared switch; the tree is used");
      }
    }
  } else {
    for (GpuMask g : SwitchGroupsFromRelations(spec)) groups.insert(g);
  }
  return {groups.begin(), groups.end()};
}

}  // namespace

GraphDerivations DeriveFromGraph(const TopologySpec& spec, std::vector<std::string>& warnings) {
  MachineGraph machine;
  for (const GpuSpec& gpu : spec.gpus) {
    machine.gpu_vertex.push_back(boost::add_vertex(
        VertexProps{VertexKind::kGpu, gpu.index, "GPU" + std::to_string(gpu.index)},
        machine.graph));
  }
  AddPcieAndNuma(spec, machine);
  AddNvlinks(spec, machine);
  GraphDerivations out;
  out.vertex_count = static_cast<int>(boost::num_vertices(machine.graph));
  out.edge_count = static_cast<int>(boost::num_edges(machine.graph));
  out.nvlink_islands = NvlinkIslands(machine, static_cast<int>(spec.gpus.size()));
  out.pcie_switch_groups = SwitchGroups(spec, warnings);
  return out;
}

}  // namespace linkfit::topology::internal
