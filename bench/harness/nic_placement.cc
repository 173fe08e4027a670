#include "harness/nic_placement.h"

#include <algorithm>
#include <bit>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "linkfit/alloc/nic_choice.h"
#include "linkfit/kube/annotations.h"

namespace linkfit::bench {
namespace {

std::size_t U(int value) { return static_cast<std::size_t>(value); }

std::vector<int> Bits(unsigned mask) {
  std::vector<int> bits;
  for (int i = 0; mask != 0; ++i, mask >>= 1) {
    if (mask & 1) bits.push_back(i);
  }
  return bits;
}

// Whether every GPU can be paired with a NIC through pairs `accept` takes: its own NIC when there
// are at least as many NICs as GPUs (a bipartite matching, Kuhn's augmenting paths), else any.
bool Pairable(const std::vector<int>& gpus, const std::vector<int>& nics,
              const std::function<bool(int gpu, int nic)>& accept) {
  if (nics.size() < gpus.size()) {
    return std::all_of(gpus.begin(), gpus.end(), [&](int gpu) {
      return std::any_of(nics.begin(), nics.end(), [&](int nic) { return accept(gpu, nic); });
    });
  }
  std::vector<int> owner(nics.size(), -1);  // NIC position -> GPU position
  std::function<bool(std::size_t, std::vector<bool>&)> augment = [&](std::size_t g,
                                                                     std::vector<bool>& seen) {
    for (std::size_t n = 0; n < nics.size(); ++n) {
      if (seen[n] || !accept(gpus[g], nics[n])) continue;
      seen[n] = true;
      if (owner[n] < 0 || augment(U(owner[n]), seen)) {
        owner[n] = static_cast<int>(g);
        return true;
      }
    }
    return false;
  };
  for (std::size_t g = 0; g < gpus.size(); ++g) {
    std::vector<bool> seen(nics.size(), false);
    if (!augment(g, seen)) return false;
  }
  return true;
}

std::string ReadWholeFile(const std::string& path, bool* ok) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  *ok = static_cast<bool>(in);
  return text.str();
}

}  // namespace

bool GpuDirectPair(const NodeTopology& topology, int gpu, int nic) {
  return alloc::Within(topology.model().nic_relation(nic, gpu), alloc::NicCloseness::kPxb);
}

bool PlacementAligned(const SimNode& node, const Placement& placement) {
  if (placement.nics == 0 || placement.gpus == 0) return true;
  const NodeTopology& topology = *node.topology;
  return Pairable(Bits(placement.gpus), Bits(placement.nics),
                  [&](int gpu, int nic) { return GpuDirectPair(topology, gpu, nic); });
}

bool AlignedChoiceExists(const SimNode& node, const PodSpec& pod) {
  if (node.topology == nullptr || pod.nic_count == 0) return false;
  const unsigned idle = node.IdleGpus();
  const unsigned usable = node.NicsWithFree(pod.nic_milli);
  if (std::popcount(idle) < pod.gpu_count || std::popcount(usable) < pod.nic_count) return false;
  const NodeTopology& topology = *node.topology;
  auto close = [&](int gpu, int nic) { return GpuDirectPair(topology, gpu, nic); };
  const std::vector<int> all_usable = Bits(usable);
  // Every GPU set of the pod's size among the idle GPUs; with at least as many NICs as GPUs, a
  // matching into the usable NICs settles it (the NICs beyond one per GPU may be any); with
  // fewer, every NIC set of the pod's size is tried.
  for (unsigned gpus = idle; gpus != 0; gpus = (gpus - 1) & idle) {
    if (std::popcount(gpus) != pod.gpu_count) continue;
    if (pod.nic_count >= pod.gpu_count) {
      if (Pairable(Bits(gpus), all_usable, close)) return true;
      continue;
    }
    for (unsigned nics = usable; nics != 0; nics = (nics - 1) & usable) {
      if (std::popcount(nics) == pod.nic_count && Pairable(Bits(gpus), Bits(nics), close)) {
        return true;
      }
    }
  }
  return false;
}

double PodNetworkGbps(const SimNode& node, const Placement& placement, const NetworkModel& model) {
  if (placement.nics == 0 || placement.gpus == 0) return 0;
  const NodeTopology& topology = *node.topology;
  const double held = model.nic_gbps * placement.nic_milli / kWholeNicMilli;
  auto rate = [&](int gpu, int nic) {
    if (GpuDirectPair(topology, gpu, nic)) return held;
    const int gen = topology.model().spec().gpus[U(gpu)].pcie_gen;
    const double staged = model.staged_gbps[gen >= 1 && gen <= 5 ? gen : 4];
    return std::min(held, staged);
  };
  const std::vector<int> gpus = Bits(placement.gpus);
  const std::vector<int> nics = Bits(placement.nics);
  std::set<double, std::greater<>> levels;
  for (int gpu : gpus) {
    for (int nic : nics) levels.insert(rate(gpu, nic));
  }
  for (double level : levels) {  // the largest level some pairing reaches on every GPU
    if (Pairable(gpus, nics, [&](int gpu, int nic) { return rate(gpu, nic) >= level; })) {
      return level;
    }
  }
  return 0;
}

SimNicMask KubeletNics(const SimNode& node, GpuMask gpus, const PodSpec& pod) {
  const unsigned candidates = node.NicsWithFree(pod.nic_milli);
  std::set<int> numa;
  for (int gpu : Bits(gpus)) numa.insert(node.topology->numa_node(gpu));
  const auto& nic_specs = node.topology->model().nics();
  unsigned chosen = 0;
  for (bool local : {true, false}) {
    for (int nic : Bits(candidates)) {
      if (std::popcount(chosen) == pod.nic_count) break;
      if (numa.contains(nic_specs[U(nic)].numa_node) == local) chosen |= 1u << nic;
    }
  }
  return std::popcount(chosen) == pod.nic_count ? static_cast<SimNicMask>(chosen) : 0;
}

Result<SimNicMask> RecordedNics(const std::string& state_file, const PodSpec& pod,
                                const SimNode& node) {
  bool read = false;
  const std::string text = ReadWholeFile(state_file, &read);
  if (!read) return MakeError(state_file + ": cannot read linkfit's state file");
  const nlohmann::json root = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.contains("allocations") || !root["allocations"].is_array()) {
    return MakeError(state_file + ": expected {\"allocations\": [...]}");
  }
  for (const nlohmann::json& entry : root["allocations"]) {
    const auto uid = entry.find("uid");
    if (uid == entry.end() || !uid->is_string() || uid->get_ref<const std::string&>() != pod.uid) {
      continue;
    }
    auto record = kube::DecodeAllocationRecord(entry.dump());
    if (!record) return WithContext(record.error(), state_file + ": pod " + pod.uid);
    if (record->node != node.name) {
      return MakeError(state_file + ": pod " + pod.uid + " is recorded on " + record->node +
                       ", not " + node.name);
    }
    const auto& nic_specs = node.topology->model().nics();
    unsigned nics = 0;
    for (const kube::AllocationRecord::Nic& nic : record->devices.nics) {
      const auto found = std::find_if(nic_specs.begin(), nic_specs.end(),
                                      [&](const auto& spec) { return spec.name == nic.name; });
      if (found == nic_specs.end() || found - nic_specs.begin() >= node.nic_count) {
        return MakeError(state_file + ": pod " + pod.uid + " holds NIC " + nic.name +
                         ", which node " + node.name + " does not have");
      }
      if (nic.milli != pod.nic_milli) {
        return MakeError(state_file + ": pod " + pod.uid + " holds " + std::to_string(nic.milli) +
                         " thousandths of " + nic.name + ", it asked " +
                         std::to_string(pod.nic_milli));
      }
      nics |= 1u << (found - nic_specs.begin());
    }
    if (std::popcount(nics) != pod.nic_count) {
      return MakeError(state_file + ": pod " + pod.uid + " holds " +
                       std::to_string(std::popcount(nics)) + " NICs, it asked " +
                       std::to_string(pod.nic_count));
    }
    return static_cast<SimNicMask>(nics);
  }
  return MakeError(state_file + ": no allocation record for pod " + pod.uid);
}

}  // namespace linkfit::bench
