// `linkfit-bench mig`: MIG-profile demand on MIG-capable nodes with arrivals and departures
// (issue 4 §2).
//
// Cluster: --nodes-per-group N (default 8) DGX A100 40GB and N DGX H100 nodes, every GPU in MIG
// mode (`mig: all` in linkfit's cluster file), 256 cores and 2 TiB each (GPUs are the only scarce
// resource). MIG geometry from config/mig (the same as ../shared/mig): 8 memory slices, 7 compute
// slices, an instance occupies [start, start + size) at one of its profile's legal starts.
//
// Demand mix (per pod, by profile kind; the GPU model is drawn in proportion to each model's
// GPUs, the profile name is that model's, e.g. 3g.20gb on A100 40GB, 3g.40gb on H100):
//   1g (1 slice)            40 %  small inference services: BERT/ResNet-class models, embeddings
//   1g double memory (2)    10 %  the same with larger batches or KV caches
//   2g (2 slices)           20 %  mid-size models (up to ~13B in 8-bit on an 80 GB GPU)
//   3g (4 slices)           20 %  7B-class LLM serving in 16-bit (~20 / 40 GB)
//   4g (4 slices)            5 %  the same with more compute
//   7g (8 slices, whole)     5 %  a full GPU (fine-tuning, large-batch inference)
// The mix leans to small instances (what MIG is bought for: many small inference services on one
// GPU) with a minority of large ones, which are the ones fragmentation hurts. The +me profiles
// (one per GPU, for media engines) are not requested.
//
// Arrivals: Poisson, rate chosen so that offered slice-time is --load (default 90 %) of the
// cluster's memory slices; durations exponential, mean 1 h. A pod that fits nowhere when it
// arrives is rejected (counted as a failure; no queue), so success rate measures how well each
// policy keeps room for the next pod.
//
// Policies: `linkfit` (a real `linkfit serve` over HTTP, kube-scheduler pipeline), `first-fit`
// (first node in order, lowest GPU, lowest legal start), `best-fit` (the (node, GPU, start) that
// leaves the fewest free slices on its GPU, lowest first) and `random` (uniform over every legal
// (node, GPU, start)).
//
// Figures: success rate (all pods and per profile kind), stranded slices: free memory slices that
// no profile of the demand mix can use on their GPU (every legal start covering them overlaps an
// instance, or the GPU's compute slices are gone), sampled at every arrival (mean count and share
// of free slices), and slice utilisation.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <queue>
#include <random>

#include "harness/experiment.h"
#include "harness/report.h"
#include "harness/topology_catalog.h"

namespace linkfit::bench {
namespace {

struct MigGroup {
  const char* topology_file;
  const char* prefix;
  const char* model;
  const char* profile_set;
};

constexpr MigGroup kMigGroups[] = {
    {"dgx-a100.json", "dgx-a100-", "A100-SXM4-40GB", "a100-40gb"},
    {"dgx-h100.json", "dgx-h100-", "H100-80GB-HBM3", "h100-80gb"},
};

// Profile kinds of the demand mix, by (compute slices, memory slices), with their weights.
struct Kind {
  const char* label;
  int compute;
  int memory;
  double weight;
};
constexpr Kind kKinds[] = {
    {"1g", 1, 1, 0.40}, {"1g-2x-memory", 1, 2, 0.10}, {"2g", 2, 2, 0.20},
    {"3g", 3, 4, 0.20}, {"4g", 4, 4, 0.05},           {"7g", 7, 8, 0.05},
};
constexpr std::size_t kKindCount = std::size(kKinds);
constexpr double kMeanDurationS = 3600;

std::size_t Idx(int i) { return static_cast<std::size_t>(i); }

// The profile of a kind in a set (by geometry; +me profiles never match: they are 1g duplicates
// listed after 1g, and the first match wins).
const MigProfile* ProfileOfKind(const std::vector<MigProfile>& profiles, const Kind& kind) {
  for (const MigProfile& profile : profiles) {
    if (profile.compute_slices == kind.compute && profile.memory_slices == kind.memory &&
        profile.name.find("+me") == std::string::npos) {
      return &profile;
    }
  }
  return nullptr;
}

struct MigSetup {
  Cluster cluster;
  // Per group: the profile of each kind.
  std::vector<std::array<const MigProfile*, kKindCount>> kind_profiles;
};

Result<void> BuildMigCluster(const BenchOptions& options, MigSetup& setup) {
  setup.kind_profiles.clear();
  std::vector<std::array<std::string, kKindCount>> kind_names;
  for (const MigGroup& group : kMigGroups) {
    const std::string root = options.repo_root + "/config/";
    const std::string path = std::filesystem::absolute(root + "topologies/" + group.topology_file)
                                 .lexically_normal()
                                 .string();
    auto topology = LoadNodeTopology(path);
    if (!topology) return tl::unexpected(topology.error());
    if ((*topology)->mig_profile_set() != group.profile_set) {
      return MakeError(path + ": MIG profile set is " + (*topology)->mig_profile_set() +
                       ", expected " + group.profile_set);
    }
    // Every profile of the set, the +me ones included (the cluster model needs them all).
    auto set = alloc::LoadMigProfileSetFile(root + "mig/" + group.profile_set + ".json");
    if (!set) return tl::unexpected(set.error());
    std::vector<MigProfile>* profiles = &set->profiles;
    std::array<std::string, kKindCount> names;
    for (std::size_t k = 0; k < kKindCount; ++k) {
      const MigProfile* profile = ProfileOfKind(*profiles, kKinds[k]);
      if (profile == nullptr) {
        return MakeError(std::string("no MIG profile of kind ") + kKinds[k].label + " in " +
                         group.profile_set);
      }
      names[k] = profile->name;
    }
    kind_names.push_back(names);
    setup.cluster.AddMigProfiles(group.profile_set, std::move(*profiles));
    for (int i = 0; i < options.nodes_per_group; ++i) {
      SimNode node;
      node.name = group.prefix + std::to_string(i);
      node.gpu_model = group.model;
      node.cpu_capacity = 256000;
      node.memory_capacity = 2 * 1024 * 1024;
      node.gpu_count = (*topology)->gpu_count();
      node.topology = *topology;
      node.topology_file = path;
      node.mig_mode = true;
      setup.cluster.AddNode(std::move(node));
    }
  }
  if (options.nodes_per_group <= 0) return MakeError("--nodes-per-group must be positive");
  // Pointers into the cluster's profile lists, taken once every set is added.
  for (std::size_t g = 0; g < std::size(kMigGroups); ++g) {
    const int first = static_cast<int>(g) * options.nodes_per_group;
    std::array<const MigProfile*, kKindCount> by_kind{};
    for (std::size_t k = 0; k < kKindCount; ++k) {
      by_kind[k] = setup.cluster.FindMigProfile(first, kind_names[g][k]);
      if (by_kind[k] == nullptr) return MakeError("MIG profile " + kind_names[g][k] + " lost");
    }
    setup.kind_profiles.push_back(by_kind);
  }
  return {};
}

struct MigPod {
  PodSpec spec;
  std::size_t kind = 0;
};

std::vector<MigPod> DrawMigPods(const BenchOptions& options, std::uint64_t seed,
                                const MigSetup& setup, int total_gpus) {
  std::mt19937_64 rng(seed);
  std::discrete_distribution<std::size_t> kind_draw({kKinds[0].weight, kKinds[1].weight,
                                                     kKinds[2].weight, kKinds[3].weight,
                                                     kKinds[4].weight, kKinds[5].weight});
  // Every group has the same number of 8-GPU nodes: models are drawn uniformly.
  std::uniform_int_distribution<std::size_t> group_draw(0, std::size(kMigGroups) - 1);
  double mean_slices = 0;
  for (const Kind& kind : kKinds) mean_slices += kind.weight * kind.memory;
  const double capacity_slices = static_cast<double>(total_gpus) * kMigSlices;
  const double rate = options.load * capacity_slices / (mean_slices * kMeanDurationS);
  std::exponential_distribution<double> gap(rate);
  std::exponential_distribution<double> duration(1.0 / kMeanDurationS);
  std::vector<MigPod> pods(static_cast<std::size_t>(options.jobs));
  double now = 0;
  for (std::size_t i = 0; i < pods.size(); ++i) {
    MigPod& pod = pods[i];
    pod.kind = kind_draw(rng);
    const std::size_t group = group_draw(rng);
    now += gap(rng);
    pod.spec.name = "mig-" + std::to_string(i);
    pod.spec.uid = pod.spec.name;
    pod.spec.cpu_milli = 2000;
    pod.spec.memory_mib = 8192;
    pod.spec.demand = GpuDemand::kMig;
    pod.spec.gpu_count = 1;
    pod.spec.gpu_milli = 0;
    pod.spec.mig_profile = setup.kind_profiles[group][pod.kind]->name;
    pod.spec.arrival_s = now;
    pod.spec.duration_s = duration(rng);
    pod.spec.shape = static_cast<int>(group * kKindCount + pod.kind);
  }
  return pods;
}

// Every legal (GPU, start) of `profile` on `node`, in (GPU, start) order.
std::vector<Placement> LegalPlacements(const Cluster& cluster, int node, const PodSpec& pod) {
  std::vector<Placement> legal;
  const MigProfile* profile = cluster.FindMigProfile(node, pod.mig_profile);
  if (profile == nullptr || !cluster.InTreeFits(node, pod)) return legal;
  const SimNode& n = cluster.node(node);
  for (int g = 0; g < n.gpu_count; ++g) {
    if (n.gpu_free_milli[Idx(g)] != kWholeGpuMilli) continue;
    if (n.mig_compute_used[Idx(g)] + profile->compute_slices > kMigComputeSlices) continue;
    for (int start : profile->starts) {
      const unsigned range = ((1u << profile->memory_slices) - 1u) << start;
      if ((n.mig_slices_used[Idx(g)] & range) != 0) continue;
      Placement placement;
      placement.node = node;
      placement.mig_gpu = g;
      placement.mig_start = start;
      placement.mig_size = profile->memory_slices;
      placement.mig_compute = profile->compute_slices;
      legal.push_back(placement);
    }
  }
  return legal;
}

// In-process MIG baselines.
class MigBaseline : public Placer {
 public:
  MigBaseline(std::string name, std::uint64_t seed) : name_(std::move(name)), rng_(seed) {}
  std::string name() const override { return name_; }

  Result<std::optional<Placement>> Place(Cluster& cluster, const PodSpec& pod) override {
    std::optional<Placement> chosen;
    int best_left = kMigSlices + 1;
    std::uint64_t seen = 0;
    const int nodes = static_cast<int>(cluster.nodes().size());
    for (int node = 0; node < nodes; ++node) {
      for (const Placement& placement : LegalPlacements(cluster, node, pod)) {
        if (name_ == "first-fit") {
          chosen = placement;
          break;
        }
        if (name_ == "random") {
          // Reservoir sampling: uniform over every legal placement.
          ++seen;
          if (std::uniform_int_distribution<std::uint64_t>(1, seen)(rng_) == 1) chosen = placement;
          continue;
        }
        // best-fit
        const unsigned used = cluster.node(node).mig_slices_used[Idx(placement.mig_gpu)];
        const unsigned range = ((1u << placement.mig_size) - 1u) << placement.mig_start;
        const int left = kMigSlices - std::popcount(used | range);
        if (left < best_left) {
          best_left = left;
          chosen = placement;
        }
      }
      if (chosen && name_ == "first-fit") break;
    }
    if (chosen) cluster.Apply(pod, *chosen);
    return chosen;
  }

 private:
  std::string name_;
  std::mt19937_64 rng_;
};

// Free memory slices of the node that no profile of the demand mix can use.
int StrandedSlices(const Cluster& cluster, int node,
                   const std::array<const MigProfile*, kKindCount>& mix, int* free_slices) {
  const SimNode& n = cluster.node(node);
  int stranded = 0;
  for (int g = 0; g < n.gpu_count; ++g) {
    const unsigned used = n.mig_slices_used[Idx(g)];
    const unsigned free = ~used & 0xFFu;
    unsigned usable = 0;
    for (const MigProfile* profile : mix) {
      if (n.mig_compute_used[Idx(g)] + profile->compute_slices > kMigComputeSlices) continue;
      for (int start : profile->starts) {
        const unsigned range = ((1u << profile->memory_slices) - 1u) << start;
        if ((used & range) == 0) usable |= range;
      }
    }
    *free_slices += std::popcount(free);
    stranded += std::popcount(free & ~usable);
  }
  return stranded;
}

struct MigOutcome {
  std::array<int, kKindCount> arrived{};
  std::array<int, kKindCount> placed{};
  double stranded_sum = 0;        // stranded slices, summed over arrival samples
  double stranded_share_sum = 0;  // stranded / free slices
  double used_share_sum = 0;      // used slices / capacity
  int samples = 0;
  std::vector<double> stranded_series;  // per arrival
  double seconds = 0;
};

Result<MigOutcome> ReplayMig(const std::string& policy, std::uint64_t seed,
                             const BenchOptions& options) {
  MigSetup setup;
  if (auto built = BuildMigCluster(options, setup); !built) return tl::unexpected(built.error());
  Cluster& cluster = setup.cluster;
  const std::vector<MigPod> pods = DrawMigPods(options, seed, setup, cluster.total_gpus());
  PlacerPtr placer;
  if (policy == "first-fit" || policy == "best-fit" || policy == "random") {
    placer = std::make_unique<MigBaseline>(policy, seed);
  } else {
    std::vector<PodSpec> specs;
    for (const MigPod& pod : pods) specs.push_back(pod.spec);
    auto made = MakePlacer(policy, seed, specs, cluster, options);
    if (!made) return tl::unexpected(made.error());
    placer = std::move(*made);
  }
  MigOutcome outcome;
  const auto start = std::chrono::steady_clock::now();
  std::vector<Placement> placements(pods.size());
  DepartureQueue departures;
  const int nodes = static_cast<int>(cluster.nodes().size());
  const double capacity = static_cast<double>(cluster.total_gpus()) * kMigSlices;
  for (std::size_t i = 0; i < pods.size(); ++i) {
    const double now = pods[i].spec.arrival_s;
    while (!departures.empty() && departures.top().time <= now) {
      const std::size_t gone = departures.top().index;
      departures.pop();
      auto released = placer->Release(cluster, pods[gone].spec, placements[gone]);
      if (!released) return tl::unexpected(released.error());
    }
    // Sample the state the arriving pod sees.
    int stranded = 0;
    int free = 0;
    for (int node = 0; node < nodes; ++node) {
      const std::size_t group = static_cast<std::size_t>(node / options.nodes_per_group);
      stranded += StrandedSlices(cluster, node, setup.kind_profiles[group], &free);
    }
    outcome.stranded_sum += stranded;
    outcome.stranded_share_sum += free > 0 ? static_cast<double>(stranded) / free : 0.0;
    outcome.used_share_sum += (capacity - free) / capacity;
    ++outcome.samples;
    outcome.stranded_series.push_back(stranded);

    ++outcome.arrived[pods[i].kind];
    auto placed = placer->Place(cluster, pods[i].spec);
    if (!placed) return tl::unexpected(placed.error());
    if (!*placed) continue;
    ++outcome.placed[pods[i].kind];
    placements[i] = **placed;
    departures.push({now + pods[i].spec.duration_s, i});
  }
  outcome.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

// One policy's row of the results table, over all its seeds.
nlohmann::json MigRow(const std::string& policy, const MigOutcome& all) {
  int arrived = 0;
  int placed = 0;
  nlohmann::json by_kind = nlohmann::json::object();
  for (std::size_t k = 0; k < kKindCount; ++k) {
    arrived += all.arrived[k];
    placed += all.placed[k];
    by_kind[kKinds[k].label] =
        all.arrived[k] > 0 ? static_cast<double>(all.placed[k]) / all.arrived[k] : 1.0;
  }
  double slices_arrived = 0;
  double slices_placed = 0;
  for (std::size_t k = 0; k < kKindCount; ++k) {
    slices_arrived += static_cast<double>(all.arrived[k]) * kKinds[k].memory;
    slices_placed += static_cast<double>(all.placed[k]) * kKinds[k].memory;
  }
  const double samples = std::max(1, all.samples);
  nlohmann::json row = {
      {"policy", policy},
      {"pods", arrived},
      {"placed", placed},
      {"placement_success_rate", static_cast<double>(placed) / std::max(1, arrived)},
      {"success_rate_by_kind", by_kind},
      {"slice_success_rate", slices_arrived > 0 ? slices_placed / slices_arrived : 1.0},
      {"stranded_slices_mean", all.stranded_sum / samples},
      {"stranded_share_of_free_slices", all.stranded_share_sum / samples},
      {"slice_utilisation", all.used_share_sum / samples},
      {"seconds", all.seconds}};
  for (std::size_t k = 0; k < kKindCount; ++k) {
    row[std::string("success_") + kKinds[k].label] = by_kind[kKinds[k].label];
  }
  return row;
}

}  // namespace

Result<nlohmann::json> RunMigExperiment(const BenchOptions& given) {
  BenchOptions options = given;
  if (options.baseline_mode.empty()) options.baseline_mode = "kube";
  std::vector<std::string> policies = options.policies;
  if (policies.empty()) policies = {"linkfit", "first-fit", "best-fit", "random"};
  MigSetup probe;
  if (auto built = BuildMigCluster(options, probe); !built) return tl::unexpected(built.error());
  nlohmann::json results = nlohmann::json::array();
  std::vector<Series> series;
  nlohmann::json mix = nlohmann::json::array();
  for (std::size_t k = 0; k < kKindCount; ++k) {
    mix.push_back({{"kind", kKinds[k].label},
                   {"weight", kKinds[k].weight},
                   {"memory_slices", kKinds[k].memory},
                   {"compute_slices", kKinds[k].compute},
                   {"a100_40gb", probe.kind_profiles[0][k]->name},
                   {"h100_80gb", probe.kind_profiles[1][k]->name}});
  }
  for (const std::string& policy : policies) {
    MigOutcome all;
    for (std::uint64_t seed : options.seeds) {
      auto outcome = ReplayMig(policy, seed, options);
      if (!outcome) return WithContext(outcome.error(), policy + " seed " + std::to_string(seed));
      int arrived = 0;
      int placed = 0;
      for (std::size_t k = 0; k < kKindCount; ++k) {
        arrived += outcome->arrived[k];
        placed += outcome->placed[k];
        all.arrived[k] += outcome->arrived[k];
        all.placed[k] += outcome->placed[k];
      }
      if (!options.quiet) {
        std::fprintf(stderr,
                     "mig %-10s seed %3llu: %d of %d placed (%.2f %%), stranded slices %.1f "
                     "(%.1f s)\n",
                     policy.c_str(), static_cast<unsigned long long>(seed), placed, arrived,
                     100.0 * placed / std::max(1, arrived),
                     outcome->stranded_sum / std::max(1, outcome->samples), outcome->seconds);
      }
      all.stranded_sum += outcome->stranded_sum;
      all.stranded_share_sum += outcome->stranded_share_sum;
      all.used_share_sum += outcome->used_share_sum;
      all.samples += outcome->samples;
      all.seconds += outcome->seconds;
      if (seed == options.seeds.front()) {
        Series line{policy, {}, {}};
        // Every 10th arrival keeps the CSV small.
        for (std::size_t i = 0; i < outcome->stranded_series.size(); i += 10) {
          line.x.push_back(static_cast<double>(i));
          line.y.push_back(outcome->stranded_series[i]);
        }
        series.push_back(std::move(line));
      }
    }
    results.push_back(MigRow(policy, all));
  }
  const std::string csv = options.out_dir + "/stranded_slices.csv";
  auto written = WriteSeriesCsv(csv, "arrival", series);
  if (!written) return tl::unexpected(written.error());
  Plot plot{"Stranded MIG memory slices seen by each arriving pod (seed " +
                std::to_string(options.seeds.front()) + "; lower is better)",
            "arrival",
            "free slices no profile of the mix can use",
            csv,
            options.out_dir + "/stranded_slices.svg",
            series.size(),
            "set key top left\n"};
  PlotLines(plot);
  return nlohmann::json{
      {"experiment", "mig"},
      {"nodes_per_group", options.nodes_per_group},
      {"cluster_gpus", probe.cluster.total_gpus()},
      {"pods_per_seed", options.jobs},
      {"offered_load", options.load},
      {"mean_duration_s", kMeanDurationS},
      {"demand_mix", mix},
      {"seeds", options.seeds},
      {"results", results},
      {"plots", {"stranded_slices.svg"}},
      {"reading",
       {"placement_success_rate: share of arriving MIG pods placed at once (no queue; a pod "
        "that fits nowhere is rejected); slice_success_rate: the same weighted by the memory "
        "slices each pod asks for. success_rate_by_kind shows where the failures are: "
        "large profiles (3g, 4g, 7g) need aligned free ranges.",
        "stranded slices: free memory slices that no profile of the demand mix can use on "
        "their GPU, sampled at every arrival; slice_utilisation: used memory slices over "
        "capacity at the same instants."}}};
}

}  // namespace linkfit::bench
