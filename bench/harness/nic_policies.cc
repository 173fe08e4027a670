#include "harness/nic_policies.h"

#include <algorithm>
#include <bit>

#include "harness/nic_placement.h"

namespace linkfit::bench {
namespace {

std::size_t U(int value) { return static_cast<std::size_t>(value); }

// The first `count` members of `mask`, lowest first (all of them when fewer).
unsigned FirstBits(unsigned mask, int count) {
  unsigned chosen = 0;
  for (int taken = 0; taken < count && mask != 0; ++taken) {
    chosen |= mask & (~mask + 1u);
    mask &= mask - 1u;
  }
  return chosen;
}

Placement WholeGpusWithNics(int node, unsigned gpus, unsigned nics, const PodSpec& pod) {
  Placement placement;
  placement.node = node;
  placement.gpus = static_cast<GpuMask>(gpus);
  placement.gpu_milli = kWholeGpuMilli;
  placement.nics = static_cast<SimNicMask>(nics);
  placement.nic_milli = pod.nic_milli;
  return placement;
}

// The node's GPUs and NICs grouped by NUMA node (domain d: the d-th NUMA id, ascending).
struct NumaDomains {
  std::vector<unsigned> gpus;
  std::vector<unsigned> nics;
};

NumaDomains DomainsOf(const SimNode& node) {
  const NodeTopology& topology = *node.topology;
  const auto& nic_specs = topology.model().nics();
  std::vector<int> ids;
  for (int g = 0; g < node.gpu_count; ++g) ids.push_back(topology.numa_node(g));
  for (int n = 0; n < node.nic_count; ++n) ids.push_back(nic_specs[U(n)].numa_node);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  auto domain = [&](int numa) {
    return static_cast<std::size_t>(std::lower_bound(ids.begin(), ids.end(), numa) - ids.begin());
  };
  NumaDomains domains{std::vector<unsigned>(ids.size(), 0), std::vector<unsigned>(ids.size(), 0)};
  for (int g = 0; g < node.gpu_count; ++g) domains.gpus[domain(topology.numa_node(g))] |= 1u << g;
  for (int n = 0; n < node.nic_count; ++n) {
    domains.nics[domain(nic_specs[U(n)].numa_node)] |= 1u << n;
  }
  return domains;
}

// TopologyManager single-numa-node (restricted's narrowest hint for wider pods).
Placement NumaOnlyChoice(const SimNode& node, int index, const PodSpec& pod) {
  if (node.topology == nullptr || pod.demand != GpuDemand::kWhole) return {};
  const NumaDomains domains = DomainsOf(node);
  const auto count = static_cast<unsigned>(domains.gpus.size());
  if (count > 16) return {};
  auto within = [&](unsigned set, unsigned gpus, unsigned nics, unsigned* got_gpus,
                    unsigned* got_nics) {
    unsigned set_gpus = 0;
    unsigned set_nics = 0;
    for (unsigned d = 0; d < count; ++d) {
      if ((set >> d) & 1) {
        set_gpus |= domains.gpus[d];
        set_nics |= domains.nics[d];
      }
    }
    *got_gpus = FirstBits(gpus & set_gpus, pod.gpu_count);
    *got_nics = FirstBits(nics & set_nics, pod.nic_count);
    return std::popcount(*got_gpus) == pod.gpu_count && std::popcount(*got_nics) == pod.nic_count;
  };
  const unsigned all_gpus = (1u << node.gpu_count) - 1u;
  const unsigned all_nics = (1u << node.nic_count) - 1u;
  unsigned gpus = 0;
  unsigned nics = 0;
  int width = 0;  // the fewest NUMA nodes that hold the pod on an idle machine
  for (unsigned set = 1; set < (1u << count); ++set) {
    const int size = std::popcount(set);
    if ((width == 0 || size < width) && within(set, all_gpus, all_nics, &gpus, &nics)) {
      width = size;
    }
  }
  if (width == 0) return {};
  const unsigned free_nics = node.NicsWithFree(pod.nic_milli);
  for (unsigned set = 1; set < (1u << count); ++set) {
    if (std::popcount(set) == width && within(set, node.IdleGpus(), free_nics, &gpus, &nics)) {
      return WholeGpusWithNics(index, gpus, nics, pod);
    }
  }
  return {};
}

// Same PCIe root complex: the path between the two does not leave one host bridge.
bool SameRoot(const NodeTopology& topology, int gpu, int nic) {
  return topology.model().nic_relation(nic, gpu) >= topology::PcieRelation::kPhb;
}

// The first assignment, in device order, of `left` more GPU-NIC pairs under one root each, GPUs
// from `next_gpu` on.
bool AssignPairs(const SimNode& node, unsigned free_gpus, unsigned free_nics, int left,
                 int next_gpu, unsigned* gpus, unsigned* nics) {
  if (left == 0) return true;
  for (int g = next_gpu; g < node.gpu_count; ++g) {
    if (((free_gpus >> g) & 1) == 0) continue;
    for (int n = 0; n < node.nic_count; ++n) {
      if (((free_nics >> n) & 1) == 0 || ((*nics >> n) & 1) != 0) continue;
      if (!SameRoot(*node.topology, g, n)) continue;
      *gpus |= 1u << g;
      *nics |= 1u << n;
      if (AssignPairs(node, free_gpus, free_nics, left - 1, g + 1, gpus, nics)) return true;
      *gpus &= ~(1u << g);
      *nics &= ~(1u << n);
    }
  }
  return false;
}

Placement PcieRootChoice(const SimNode& node, int index, const PodSpec& pod) {
  if (node.topology == nullptr || pod.demand != GpuDemand::kWhole) return {};
  if (pod.nic_count != pod.gpu_count) return {};  // pairs: one NIC per GPU
  unsigned gpus = 0;
  unsigned nics = 0;
  if (!AssignPairs(node, node.IdleGpus(), node.NicsWithFree(pod.nic_milli), pod.gpu_count, 0, &gpus,
                   &nics)) {
    return {};
  }
  return WholeGpusWithNics(index, gpus, nics, pod);
}

Placement RandomNodeChoice(const Cluster& cluster, int index, const PodSpec& pod) {
  Placement placement = cluster.DevicePluginGpus(index, pod);
  if (placement.node < 0 || pod.nic_count == 0) return placement;
  placement.nics = KubeletNics(cluster.node(index), placement.gpus, pod);
  placement.nic_milli = pod.nic_milli;
  if (std::popcount(placement.nics) != pod.nic_count) return {};
  return placement;
}

class NumaOnlyPolicy : public Policy {
 public:
  std::string name() const override { return "numa-only"; }
  NodeChoice Evaluate(const Cluster& cluster, int node, const PodSpec& pod) const override {
    return Feasible(LeastAllocatedScore(cluster.node(node), pod),
                    NumaOnlyChoice(cluster.node(node), node, pod));
  }
};

class PcieRootPolicy : public Policy {
 public:
  std::string name() const override { return "pcie-root"; }
  NodeChoice Evaluate(const Cluster& cluster, int node, const PodSpec& pod) const override {
    return Feasible(LeastAllocatedScore(cluster.node(node), pod),
                    PcieRootChoice(cluster.node(node), node, pod));
  }
};

class RandomNicPolicy : public Policy {
 public:
  std::string name() const override { return "random"; }
  NodeChoice Evaluate(const Cluster& cluster, int node, const PodSpec& pod) const override {
    return Feasible(0.0, RandomNodeChoice(cluster, node, pod));
  }
};

}  // namespace

const std::vector<std::string>& NicBaselineNames() {
  static const std::vector<std::string> names = {"numa-only", "pcie-root", "random"};
  return names;
}

Result<PolicyPtr> MakeNicBaseline(const std::string& name) {
  if (name == "numa-only") return PolicyPtr(std::make_unique<NumaOnlyPolicy>());
  if (name == "pcie-root") return PolicyPtr(std::make_unique<PcieRootPolicy>());
  if (name == "random") return PolicyPtr(std::make_unique<RandomNicPolicy>());
  return MakeError("unknown nic baseline '" + name + "' (numa-only, pcie-root, random)");
}

}  // namespace linkfit::bench
