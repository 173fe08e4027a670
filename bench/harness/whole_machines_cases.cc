#include "harness/whole_machines_cases.h"

#include <algorithm>
#include <bit>

#include "harness/experiment.h"
#include "harness/topology_catalog.h"
#include "harness/whole_machines_oracle.h"

namespace linkfit::bench {
namespace {

constexpr std::int64_t kNodeCpuMilli = 128000;
constexpr std::int64_t kNodeMemoryMib = 1024 * 1024;
constexpr std::int64_t kCpuPerGpu = 4000;
constexpr std::int64_t kMemoryPerGpu = 32768;
constexpr std::int64_t kCpuPerInstance = 2000;
constexpr std::int64_t kMemoryPerInstance = 16384;
constexpr const char* kSmallMig[] = {"1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb"};
constexpr const char* kBigMig = "7g.40gb";

struct KindFile {
  const char* name;
  const char* file;
  const char* model;
};
constexpr KindFile kKindFiles[] = {
    {"a100", "dgx-a100.json", "A100-SXM4-40GB"},
    {"h100", "dgx-h100.json", "H100-80GB-HBM3"},
    {"v100", "dgx1-v100.json", "Tesla-V100-SXM2-32GB"},
    {"ws", "ws-4x-rtxa6000-nvlink-pairs.json", "RTX-A6000"},
    {"l40s", "pcie-8x-l40s-2socket.json", "L40S"},
    {"a100-pcie", "pcie-8x-a100-nvlink-bridge-pairs.json", "A100-PCIE-80GB"},
    {"rtx4090", "pcie-8x-rtx4090-all-sys.json", "RTX-4090"},
};

int Draw(std::mt19937_64& rng, int low, int high) {  // uniform in [low, high]
  return std::uniform_int_distribution<int>(low, high)(rng);
}

template <typename T>
const T& Pick(std::mt19937_64& rng, const std::vector<T>& from) {
  return from[static_cast<std::size_t>(Draw(rng, 0, static_cast<int>(from.size()) - 1))];
}

PodSpec WholePod(const std::string& name, int gpus) {
  PodSpec pod;
  pod.name = name;
  pod.uid = name;
  pod.demand = GpuDemand::kWhole;
  pod.gpu_count = gpus;
  pod.gpu_milli = kWholeGpuMilli;
  pod.cpu_milli = kCpuPerGpu * gpus;
  pod.memory_mib = kMemoryPerGpu * gpus;
  return pod;
}

PodSpec MigPod(const std::string& name, const std::string& profile) {
  PodSpec pod;
  pod.name = name;
  pod.uid = name;
  pod.demand = GpuDemand::kMig;
  pod.gpu_count = 1;
  pod.mig_profile = profile;
  pod.cpu_milli = kCpuPerInstance;
  pod.memory_mib = kMemoryPerInstance;
  return pod;
}

class CaseBuilder {
 public:
  CaseBuilder(const MachineCatalog& catalog, std::mt19937_64& rng) : catalog_(catalog), rng_(rng) {
    case_.cluster.AddMigProfiles("a100-40gb", catalog.a100_profiles);
  }

  // A machine of `kind`, GPUs `mig` in MIG mode; `used` says whether it is a partly used one.
  void AddMachine(const std::string& kind, GpuMask mig, bool used) {
    const MachineCatalog::Kind& k = catalog_.kinds.at(kind);
    SimNode node;
    node.name = (used ? "used-" : "idle-") + kind + "-" + std::to_string(machines_++);
    node.gpu_model = k.model;
    node.cpu_capacity = kNodeCpuMilli;
    node.memory_capacity = kNodeMemoryMib;
    node.gpu_count = k.topology->gpu_count();
    node.topology = k.topology;
    node.topology_file = k.topology_file;
    node.mig_gpus = mig;
    pending_nodes_.push_back({std::move(node), used});
  }

  // Adds the machines in random order, then the pods already running on the partly used ones:
  // `held` whole GPUs drawn in [held_low, held_high] (1-GPU pods) and 0-2 MIG instances a MIG GPU.
  Result<void> Populate(int held_low, int held_high) {
    std::shuffle(pending_nodes_.begin(), pending_nodes_.end(), rng_);
    for (auto& [node, used] : pending_nodes_) {
      if (used) used_.push_back(static_cast<int>(case_.cluster.nodes().size()));
      case_.cluster.AddNode(std::move(node));
    }
    int serial = 0;
    for (const int n : used_) {
      const SimNode& node = case_.cluster.node(n);
      std::vector<int> whole;
      for (int g = 0; g < node.gpu_count; ++g) {
        if (((node.mig_gpus >> g) & 1) == 0) whole.push_back(g);
      }
      std::shuffle(whole.begin(), whole.end(), rng_);
      const int held = std::min(Draw(rng_, held_low, held_high), static_cast<int>(whole.size()));
      for (int i = 0; i < held; ++i) {
        const PodSpec pod = WholePod("running-" + std::to_string(serial++), 1);
        Placement at;
        at.node = n;
        at.gpus = static_cast<GpuMask>(1u << whole[static_cast<std::size_t>(i)]);
        at.gpu_milli = kWholeGpuMilli;
        case_.cluster.Preload(pod, at);
      }
      for (int g = 0; g < node.gpu_count; ++g) {
        if (((node.mig_gpus >> g) & 1) == 0) continue;
        for (int i = Draw(rng_, 0, 2); i > 0; --i) {
          const PodSpec pod = MigPod("running-" + std::to_string(serial++),
                                     kSmallMig[Draw(rng_, 0, std::size(kSmallMig) - 1)]);
          const MigProfile* profile = case_.cluster.FindMigProfile(n, pod.mig_profile);
          if (profile == nullptr) return MakeError("no MIG profile " + pod.mig_profile);
          std::vector<int> starts;
          const SimNode& now = case_.cluster.node(n);
          for (const int start : profile->starts) {
            const unsigned range = ((1u << profile->memory_slices) - 1u) << start;
            if ((now.mig_slices_used[static_cast<std::size_t>(g)] & range) == 0 &&
                now.mig_compute_used[static_cast<std::size_t>(g)] + profile->compute_slices <=
                    kMigComputeSlices) {
              starts.push_back(start);
            }
          }
          if (starts.empty()) continue;
          Placement at;
          at.node = n;
          at.mig_gpu = g;
          at.mig_start = Pick(rng_, starts);
          at.mig_size = profile->memory_slices;
          at.mig_compute = profile->compute_slices;
          case_.cluster.Preload(pod, at);
        }
      }
    }
    return {};
  }

  // The small pods: whole 1- and 2-GPU pods filling the partly used machines' free GPUs but for
  // 0 to one a machine, plus `extra` GPUs more; `mig` small MIG instances.
  void SmallPods(int extra, int mig) {
    int budget = extra - Draw(rng_, 0, static_cast<int>(used_.size()));
    int pairs = 0;
    for (const int n : used_) {
      const int free = case_.cluster.node(n).IdleGpuCount();
      budget += free;
      pairs += free / 2;
    }
    int twos = 0;
    int serial = 0;
    while (budget > 0) {
      const bool two = budget >= 2 && (twos < pairs || extra > 0) && Draw(rng_, 0, 1) == 1;
      PodSpec pod = WholePod("small-" + std::to_string(serial++), two ? 2 : 1);
      if (two) {
        ++twos;
        if (Draw(rng_, 0, 1) == 1) pod.closeness = "nvlink";  // preferred
      }
      budget -= pod.gpu_count;
      case_.small.push_back(std::move(pod));
    }
    for (int i = 0; i < mig; ++i) {
      case_.small.push_back(MigPod("small-" + std::to_string(serial++),
                                   kSmallMig[Draw(rng_, 0, std::size(kSmallMig) - 1)]));
    }
    std::shuffle(case_.small.begin(), case_.small.end(), rng_);
  }

  void BigPods(int eight, bool four, bool seven_g) {
    int serial = 0;
    auto nvlink = [&](int gpus) {
      PodSpec pod = WholePod("big-" + std::to_string(serial++), gpus);
      pod.closeness = "nvlink";
      pod.closeness_required = true;
      case_.big.push_back(std::move(pod));
    };
    for (int i = 0; i < eight; ++i) nvlink(8);
    if (four) nvlink(4);
    if (seven_g) case_.big.push_back(MigPod("big-" + std::to_string(serial++), kBigMig));
    std::shuffle(case_.big.begin(), case_.big.end(), rng_);
  }

  Result<WholeMachinesCase> Finish() {
    std::vector<PodSpec> all = case_.small;
    all.insert(all.end(), case_.big.begin(), case_.big.end());
    AssignShapes(all);
    for (std::size_t i = 0; i < case_.small.size(); ++i) case_.small[i].shape = all[i].shape;
    for (std::size_t i = 0; i < case_.big.size(); ++i) {
      case_.big[i].shape = all[case_.small.size() + i].shape;
    }
    auto oracle = MostBigPodsPlaceable(case_.cluster, case_.small, case_.big);
    if (!oracle) return tl::unexpected(oracle.error());
    case_.oracle_big = *oracle;
    return std::move(case_);
  }

 private:
  const MachineCatalog& catalog_;
  std::mt19937_64& rng_;
  WholeMachinesCase case_;
  std::vector<std::pair<SimNode, bool>> pending_nodes_;
  std::vector<int> used_;
  int machines_ = 0;
};

}  // namespace

const char* FamilyName(WholeMachinesFamily family) {
  switch (family) {
    case WholeMachinesFamily::kMigA100:
      return "mig-a100";
    case WholeMachinesFamily::kUsedNvswitch:
      return "used-nvswitch";
    case WholeMachinesFamily::kWorkstations:
      return "workstations";
    case WholeMachinesFamily::kOtherKinds:
      return "other-kinds";
    case WholeMachinesFamily::kMigA100H100:
      return "mig-a100-h100";
  }
  return "?";
}

bool ServesAsWell(WholeMachinesFamily family) {
  return family == WholeMachinesFamily::kMigA100 || family == WholeMachinesFamily::kUsedNvswitch;
}

Result<MachineCatalog> LoadMachineCatalog(const std::string& repo_root) {
  MachineCatalog catalog;
  for (const KindFile& kind : kKindFiles) {
    const std::string path = ShippedTopologyPath(repo_root, kind.file);
    auto topology = LoadNodeTopology(path);
    if (!topology) return tl::unexpected(topology.error());
    catalog.kinds[kind.name] = {kind.name, path, kind.model, *topology};
  }
  auto set = alloc::LoadMigProfileSetFile(repo_root + "/config/mig/a100-40gb.json");
  if (!set) return tl::unexpected(set.error());
  catalog.a100_profiles = std::move(set->profiles);
  return catalog;
}

namespace {

Result<WholeMachinesCase> DrawOnce(WholeMachinesFamily family, const MachineCatalog& catalog,
                                   std::mt19937_64& rng) {
  CaseBuilder builder(catalog, rng);
  const int used = Draw(rng, 1, 3);
  const int idle = Draw(rng, 1, 2);
  const bool mig =
      family == WholeMachinesFamily::kMigA100 || family == WholeMachinesFamily::kMigA100H100;
  const std::string same = Draw(rng, 0, 1) == 0 ? "a100" : "h100";
  const std::vector<std::string> fast = {"a100", "h100"};
  const std::vector<std::string> other = {"l40s", "a100-pcie", "v100", "rtx4090"};
  const std::vector<std::string> idle_other = {"a100", "h100", "v100"};
  for (int m = 0; m < used; ++m) {
    switch (family) {
      case WholeMachinesFamily::kMigA100:
      case WholeMachinesFamily::kMigA100H100:
        builder.AddMachine("a100", 0x0f, true);
        break;
      case WholeMachinesFamily::kUsedNvswitch:
        builder.AddMachine(same, 0, true);
        break;
      case WholeMachinesFamily::kWorkstations:
        builder.AddMachine("ws", 0, true);
        break;
      case WholeMachinesFamily::kOtherKinds:
        builder.AddMachine(Pick(rng, other), 0, true);
        break;
    }
  }
  for (int m = 0; m < idle; ++m) {
    switch (family) {
      case WholeMachinesFamily::kMigA100:
        builder.AddMachine("a100", 0, false);
        break;
      case WholeMachinesFamily::kUsedNvswitch:
        builder.AddMachine(same, 0, false);
        break;
      case WholeMachinesFamily::kWorkstations:
        builder.AddMachine(Pick(rng, fast), 0, false);
        break;
      case WholeMachinesFamily::kOtherKinds:
        builder.AddMachine(Pick(rng, idle_other), 0, false);
        break;
      case WholeMachinesFamily::kMigA100H100:
        builder.AddMachine("h100", 0, false);
        break;
    }
  }
  const bool nvswitch = family == WholeMachinesFamily::kUsedNvswitch;
  const bool other_kinds = family == WholeMachinesFamily::kOtherKinds;
  auto populated =
      builder.Populate(nvswitch || other_kinds ? 1 : 0, nvswitch || other_kinds ? 3 : 1);
  if (!populated) return tl::unexpected(populated.error());
  // Sometimes one idle machine is spare: a few small pods more must open one.
  const bool spare = idle == 2 && Draw(rng, 0, 3) == 0;
  builder.SmallPods(spare ? Draw(rng, 2, 4) : 0, mig ? Draw(rng, 0, 3) : 0);
  builder.BigPods(spare ? idle - 1 : idle, Draw(rng, 0, 4) < 2, mig && Draw(rng, 0, 1) == 1);
  return builder.Finish();
}

}  // namespace

Result<WholeMachinesCase> DrawCase(WholeMachinesFamily family, const MachineCatalog& catalog,
                                   std::mt19937_64& rng) {
  // A draw whose small pods cannot all be placed (small MIG instances beside the running ones
  // on too few MIG GPUs) is drawn again: the experiment asks what small pods cost big ones.
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto drawn = DrawOnce(family, catalog, rng);
    if (!drawn || drawn->oracle_big >= 0) return drawn;
  }
  return MakeError(std::string(FamilyName(family)) + ": 100 draws without placeable small pods");
}

}  // namespace linkfit::bench
