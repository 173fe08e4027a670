// `linkfit-bench nic`: GPUs and RDMA NICs chosen together (issue 37), under arrivals and
// departures, linkfit against the ways Kubernetes aligns them today.
//
// Cluster: --nodes-per-group N (default 8) nodes of each NIC-bearing topology of config/topologies
// (kNicGroups below: where each NIC sits relative to each GPU comes from the fixture), 256 cores
// and 2 TiB each, so that GPUs and NICs are the only scarce resources.
//
// Workload (seeded; --trace DIR holds alibaba-gpu-2025/ and philly/, default ../shared/traces):
//   inference  a GPU instance (role HN) of Alibaba's 2025 trace drawn uniformly: 1 whole GPU, its
//              CPU and memory, and its rdma_request (percent of one NIC) as a NIC share
//              (linkfit.io/rdma-share, thousandths); its lifetime drawn from the trace's instances
//              created and deleted inside the window (deletion - creation > 0).
//   training   a Philly job of 2-8 GPUs drawn uniformly, with its GPU count and duration: whole
//              GPUs and one whole NIC per GPU (linkfit.io/rdma = GPUs), 4 cores and 32 GiB a GPU.
// A pod is a training pod with the probability that makes training --train-share (default 50 %)
// of the offered GPU-time. Arrivals are Poisson at the rate that makes the offered GPU-time
// --load (default 90 %) of the cluster's GPUs. A pod that fits nowhere when it arrives is refused
// (no queue), as in the mig experiment.
//
// Policies: linkfit (the real server; NICs read from its allocation record), gpu-only-linkfit
// (the real server with pods that ask no NIC; the kubelet's NICs), numa-only, pcie-root, random
// (nic_policies.h). Figures: see the summary's "reading".

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <queue>
#include <random>

#include "harness/experiment.h"
#include "harness/nic_placement.h"
#include "harness/nic_policies.h"
#include "harness/nic_report.h"
#include "harness/report.h"
#include "harness/topology_catalog.h"
#include "harness/trace.h"

namespace linkfit::bench {
namespace {

struct NicGroup {
  const char* file;
  const char* prefix;
  const char* model;
  double nic_gbps;  // one NIC's rate, GB/s
  const char* nic_source;
};

constexpr NicGroup kNicGroups[] = {
    {"dgx1-v100.json", "dgx1-v100-", "Tesla-V100-SXM2-32GB", 12.5,
     "4x 100 Gb/s EDR InfiniBand (DGX-1 datasheet)"},
    {"dgx-a100.json", "dgx-a100-", "A100-SXM4-40GB", 25.0,
     "8x 200 Gb/s HDR InfiniBand (DGX A100 datasheet; the fixture's 8 HDR NICs)"},
    {"dgx-h100.json", "dgx-h100-", "H100-80GB-HBM3", 50.0,
     "8x 400 Gb/s NDR ConnectX-7 (DGX H100 datasheet)"},
    {"pcie-8x-l40s-2socket.json", "l40s-", "L40S", 25.0, "assumed 200 Gb/s (composite machine)"},
    {"pcie-8x-cascaded-switch-2socket.json", "pcie-gen3-", "generic-pcie-gen3-16GB", 12.5,
     "assumed 100 Gb/s (PCIe gen 3 machine)"},
};

constexpr int kMaxTrainingGpus = 8;
constexpr std::int64_t kTrainingCpuMilliPerGpu = 4000;
constexpr std::int64_t kTrainingMemoryMibPerGpu = 32768;

struct NicSetup {
  Cluster cluster;
  std::vector<NetworkModel> network;  // per node
  std::vector<std::size_t> group;     // per node: its kNicGroups index
  int total_nic_milli = 0;
};

// The staged (host-memory) path's GB/s by PCIe generation: link-bandwidth.json's SYS_gen<N>.
Result<NetworkModel> StagedRates(const std::string& repo_root) {
  const std::string path = repo_root + "/config/link-bandwidth.json";
  auto text = ReadFile(path);
  if (!text) return tl::unexpected(text.error());
  const nlohmann::json root = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  const nlohmann::json::json_pointer pointer("/model_defaults_assumption/pair_effective_GBps");
  if (root.is_discarded() || !root.contains(pointer)) {
    return MakeError(path + ": no model_defaults_assumption.pair_effective_GBps");
  }
  NetworkModel model;
  for (int gen = 3; gen <= 5; ++gen) {
    const std::string key = "SYS_gen" + std::to_string(gen);
    const nlohmann::json& rates = root[pointer];
    const nlohmann::json value = rates.contains(key) ? rates[key] : nlohmann::json();
    if (!value.is_number() || value.get<double>() <= 0) {
      return MakeError(path + ": pair_effective_GBps." + key + ": expected a positive number");
    }
    model.staged_gbps[gen] = value.get<double>();
  }
  model.staged_gbps[1] = model.staged_gbps[2] = model.staged_gbps[3];
  model.staged_gbps[0] = model.staged_gbps[4];
  return model;
}

Result<NicSetup> BuildNicCluster(const BenchOptions& options) {
  auto staged = StagedRates(options.repo_root);
  if (!staged) return tl::unexpected(staged.error());
  NicSetup setup;
  for (const NicGroup& group : kNicGroups) {
    const std::string path = ShippedTopologyPath(options.repo_root, group.file);
    auto topology = LoadNodeTopology(path);
    if (!topology) return tl::unexpected(topology.error());
    const int nics = (*topology)->model().nic_count();
    if (nics == 0 || nics > kMaxNodeNics) {
      return MakeError(path + ": " + std::to_string(nics) + " NICs; the nic experiment needs 1-" +
                       std::to_string(kMaxNodeNics));
    }
    NetworkModel network = *staged;
    network.nic_gbps = group.nic_gbps;
    for (int i = 0; i < options.nodes_per_group; ++i) {
      SimNode node;
      node.name = group.prefix + std::to_string(i);
      node.gpu_model = group.model;
      node.cpu_capacity = 256000;
      node.memory_capacity = 2 * 1024 * 1024;
      node.gpu_count = (*topology)->gpu_count();
      node.nic_count = nics;
      node.topology = *topology;
      node.topology_file = path;
      node.nic_rate_gbps = group.nic_gbps * 8;  // as the node agent reads it from sysfs
      setup.cluster.AddNode(std::move(node));
      setup.network.push_back(network);
      setup.group.push_back(static_cast<std::size_t>(&group - kNicGroups));
      setup.total_nic_milli += nics * kWholeNicMilli;
    }
  }
  return setup;
}

struct TracePools {
  std::vector<RdmaPodRecord> inference;
  std::vector<double> inference_lifetimes;
  std::vector<PhillyJob> training;
};

Result<TracePools> LoadPools(const BenchOptions& options) {
  const std::string dir =
      options.trace_dir.empty() ? options.repo_root + "/../shared/traces" : options.trace_dir;
  TracePools pools;
  auto inference = LoadAlibaba2025GpuPods(dir + "/alibaba-gpu-2025/disaggregated_DLRM_trace.csv");
  if (!inference) return tl::unexpected(inference.error());
  for (const RdmaPodRecord& record : *inference) {
    if (record.num_gpu != 1 || record.rdma_percent <= 0) continue;
    pools.inference.push_back(record);
    if (record.creation_s >= 0 && record.deletion_s > record.creation_s) {
      pools.inference_lifetimes.push_back(record.deletion_s - record.creation_s);
    }
  }
  auto philly = LoadPhillyJobs(dir + "/philly/philly_jobs_pollux_derived.csv");
  if (!philly) return tl::unexpected(philly.error());
  for (const PhillyJob& job : *philly) {
    if (job.num_gpus >= 2 && job.num_gpus <= kMaxTrainingGpus && job.duration_s > 0) {
      pools.training.push_back(job);
    }
  }
  if (pools.inference.empty() || pools.inference_lifetimes.empty()) {
    return MakeError(dir + "/alibaba-gpu-2025: no GPU instance with a NIC share and a lifetime");
  }
  if (pools.training.empty()) return MakeError(dir + "/philly: no job of 2-8 GPUs");
  return pools;
}

PodSpec InferencePod(const RdmaPodRecord& record, double lifetime, std::size_t index) {
  PodSpec pod;
  pod.name = "inference-" + std::to_string(index);
  pod.uid = pod.name;
  pod.cpu_milli = record.cpu_milli;
  pod.memory_mib = record.memory_mib;
  pod.demand = GpuDemand::kWhole;
  pod.gpu_count = 1;
  pod.gpu_milli = kWholeGpuMilli;
  pod.nic_count = 1;
  pod.nic_milli = record.rdma_percent * 10;
  pod.duration_s = lifetime;
  return pod;
}

PodSpec TrainingPod(const PhillyJob& job, std::size_t index) {
  PodSpec pod;
  pod.name = "training-" + std::to_string(index);
  pod.uid = pod.name;
  pod.cpu_milli = kTrainingCpuMilliPerGpu * job.num_gpus;
  pod.memory_mib = kTrainingMemoryMibPerGpu * job.num_gpus;
  pod.demand = GpuDemand::kWhole;
  pod.gpu_count = job.num_gpus;
  pod.gpu_milli = kWholeGpuMilli;
  pod.nic_count = job.num_gpus;
  pod.nic_milli = kWholeNicMilli;
  pod.duration_s = job.duration_s;
  return pod;
}

std::vector<PodSpec> DrawPods(const TracePools& pools, const BenchOptions& options,
                              std::uint64_t seed, int capacity_gpus) {
  double inference_work = 0;  // mean GPU-seconds of a pod of each kind
  for (double lifetime : pools.inference_lifetimes) inference_work += lifetime;
  inference_work /= static_cast<double>(pools.inference_lifetimes.size());
  double training_work = 0;
  for (const PhillyJob& job : pools.training) training_work += job.num_gpus * job.duration_s;
  training_work /= static_cast<double>(pools.training.size());
  const double share = options.train_share;
  const double p_training =
      share * inference_work / std::max(1e-9, share * inference_work + (1 - share) * training_work);

  std::mt19937_64 rng(seed);
  std::bernoulli_distribution is_training(p_training);
  std::uniform_int_distribution<std::size_t> inference(0, pools.inference.size() - 1);
  std::uniform_int_distribution<std::size_t> lifetime(0, pools.inference_lifetimes.size() - 1);
  std::uniform_int_distribution<std::size_t> training(0, pools.training.size() - 1);
  std::vector<PodSpec> pods;
  double work = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(options.jobs); ++i) {
    if (is_training(rng)) {
      pods.push_back(TrainingPod(pools.training[training(rng)], i));
    } else {
      const RdmaPodRecord& record = pools.inference[inference(rng)];
      pods.push_back(InferencePod(record, pools.inference_lifetimes[lifetime(rng)], i));
    }
    work += pods.back().gpu_count * pods.back().duration_s;
  }
  // Offered load = rate x E[GPUs x duration] / capacity.
  const double rate = options.load * capacity_gpus / (work / static_cast<double>(pods.size()));
  std::exponential_distribution<double> gap(rate);
  double now = 0;
  for (PodSpec& pod : pods) {
    now += gap(rng);
    pod.arrival_s = now;
  }
  AssignShapes(pods);
  return pods;
}

// One policy's tallies over its seeds.
struct NicOutcome {
  int pods[2] = {0, 0};  // by kind: 0 inference, 1 training
  int refused[2] = {0, 0};
  int refused_gpus_free = 0;  // refused while some node had the GPUs (and CPU, memory) free
  std::array<int, kMaxTrainingGpus + 1> refused_by_gpus{};  // index: GPUs asked
  int aligned[2] = {0, 0};
  int misaligned = 0;
  int aligned_existed = 0;            // placed pods with an aligned choice somewhere
  int misaligned_though_existed = 0;  // ... placed misaligned all the same
  int below_nic_rate = 0;  // placed pods whose staged GPUs get less than their NICs' share rate
  int below_nic_rate_though_aligned_existed = 0;
  int misaligned_though_existed_on_node = 0;  // ... on the very node they went to
  // Pods of fewer GPUs than a whole machine placed on an idle machine that an 8-GPU training pod
  // could have taken (8 GPUs, 8 NICs): all of them, those while a node in use had an aligned
  // choice for them, and those while a node in use could take them at all.
  int broke_whole = 0;
  int broke_whole_though_used_aligned = 0;
  int broke_whole_though_used_fit = 0;
  std::vector<double> gbps[2];
  // Sampled at every arrival, as shares of the cluster's NIC capacity / counts.
  std::vector<double> nic_free_no_gpu;
  std::vector<double> nic_free_no_close_gpu;
  std::vector<double> idle_gpus_without_nic;
  std::vector<double> gpu_use;
  std::array<std::vector<double>, std::size(kNicGroups)> gpu_use_by_group;
  double seconds = 0;
};

// The state figures sampled at an arrival: free NIC capacity that no pod can use (its node has no
// idle GPU) or only staged (no idle GPU at PIX/PXB), and idle GPUs whose node has no NIC with the
// smallest share of the demand free.
void SampleState(const NicSetup& setup, int smallest_nic_milli, NicOutcome& outcome) {
  double no_gpu = 0;
  double no_close_gpu = 0;
  int gpus_without_nic = 0;
  int idle = 0;
  std::array<int, std::size(kNicGroups)> group_busy{};
  std::array<int, std::size(kNicGroups)> group_gpus{};
  for (std::size_t i = 0; i < setup.cluster.nodes().size(); ++i) {
    const SimNode& node = setup.cluster.nodes()[i];
    const unsigned idle_gpus = node.IdleGpus();
    idle += std::popcount(idle_gpus);
    group_busy[setup.group[i]] += node.gpu_count - std::popcount(idle_gpus);
    group_gpus[setup.group[i]] += node.gpu_count;
    if (idle_gpus != 0 && node.NicsWithFree(smallest_nic_milli) == 0) {
      gpus_without_nic += std::popcount(idle_gpus);
    }
    for (int n = 0; n < node.nic_count; ++n) {
      const double free = node.nic_free_milli[static_cast<std::size_t>(n)];
      bool close = false;
      for (int g = 0; g < node.gpu_count; ++g) {
        close = close || (((idle_gpus >> g) & 1) && GpuDirectPair(*node.topology, g, n));
      }
      if (idle_gpus == 0) no_gpu += free;
      if (!close) no_close_gpu += free;
    }
  }
  const double capacity = std::max(1, setup.total_nic_milli);
  outcome.nic_free_no_gpu.push_back(no_gpu / capacity);
  outcome.nic_free_no_close_gpu.push_back(no_close_gpu / capacity);
  outcome.idle_gpus_without_nic.push_back(gpus_without_nic);
  outcome.gpu_use.push_back(1.0 - idle / static_cast<double>(setup.cluster.total_gpus()));
  for (std::size_t g = 0; g < group_gpus.size(); ++g) {
    outcome.gpu_use_by_group[g].push_back(group_busy[g] / std::max(1.0, 1.0 * group_gpus[g]));
  }
}

Result<PlacerPtr> MakeNicPlacer(const std::string& policy, std::uint64_t seed,
                                const Cluster& cluster, const BenchOptions& options) {
  if (policy == "linkfit") return MakeExtenderPlacer(seed, cluster, options, NicChooser::kLinkfit);
  if (policy == "linkfit-rate") {  // the same server under policy.nic_alignment rate
    BenchOptions rate = options;
    rate.linkfit_nic_alignment = "rate";
    return MakeExtenderPlacer(seed, cluster, rate, NicChooser::kLinkfit);
  }
  if (policy == "gpu-only-linkfit") {
    return MakeExtenderPlacer(seed, cluster, options, NicChooser::kKubelet);
  }
  auto baseline = MakeNicBaseline(policy);
  if (!baseline) {
    return MakeError(baseline.error().message + "; or linkfit, linkfit-rate, gpu-only-linkfit");
  }
  return PlacerPtr(std::make_unique<PolicyPlacer>(std::move(*baseline), seed, TieBreak::kRandom));
}

// Places `pod` now and records its figures; false when it fits nowhere.
Result<bool> PlaceAndRecord(Placer& placer, NicSetup& setup, const PodSpec& pod,
                            Placement& placement, NicOutcome& outcome) {
  Cluster& cluster = setup.cluster;
  const int kind = pod.nic_milli == kWholeNicMilli ? 1 : 0;
  ++outcome.pods[kind];
  // Whether an aligned choice exists, per node, before the pod lands.
  std::vector<char> aligned_here(cluster.nodes().size(), 0);
  bool aligned_somewhere = false;
  for (std::size_t n = 0; n < aligned_here.size(); ++n) {
    const int node = static_cast<int>(n);
    aligned_here[n] =
        cluster.InTreeFits(node, pod) && AlignedChoiceExists(cluster.node(node), pod) ? 1 : 0;
    aligned_somewhere = aligned_somewhere || aligned_here[n] != 0;
  }
  // Whether a node in use (some GPU busy) had an aligned choice, or room at all.
  bool used_aligned = false;
  bool used_fit = false;
  for (std::size_t n = 0; n < aligned_here.size(); ++n) {
    const SimNode& candidate = cluster.nodes()[n];
    if (std::popcount(candidate.IdleGpus()) == candidate.gpu_count) continue;
    used_aligned = used_aligned || aligned_here[n] != 0;
    used_fit = used_fit || cluster.InTreeFits(static_cast<int>(n), pod);
  }
  std::vector<char> whole_before(cluster.nodes().size(), 0);
  for (std::size_t n = 0; n < whole_before.size(); ++n) {
    const SimNode& candidate = cluster.nodes()[n];
    whole_before[n] = candidate.gpu_count >= kMaxTrainingGpus &&
                      candidate.nic_count >= kMaxTrainingGpus &&
                      std::popcount(candidate.IdleGpus()) == candidate.gpu_count;
  }
  auto placed = placer.Place(cluster, pod);
  if (!placed) return tl::unexpected(placed.error());
  if (!*placed) {
    ++outcome.refused[kind];
    ++outcome.refused_by_gpus[static_cast<std::size_t>(pod.gpu_count)];
    PodSpec without_nics = pod;
    without_nics.nic_count = 0;
    for (int node = 0; node < static_cast<int>(cluster.nodes().size()); ++node) {
      if (cluster.InTreeFits(node, without_nics)) {
        ++outcome.refused_gpus_free;
        break;
      }
    }
    return false;
  }
  placement = **placed;
  if (pod.gpu_count < kMaxTrainingGpus &&
      whole_before[static_cast<std::size_t>(placement.node)] != 0) {
    ++outcome.broke_whole;
    if (used_aligned) ++outcome.broke_whole_though_used_aligned;
    if (used_fit) ++outcome.broke_whole_though_used_fit;
  }
  const SimNode& node = cluster.node(placement.node);
  const bool aligned = PlacementAligned(node, placement);
  if (aligned_somewhere) ++outcome.aligned_existed;
  if (aligned) {
    ++outcome.aligned[kind];
  } else {
    ++outcome.misaligned;
    if (aligned_somewhere) ++outcome.misaligned_though_existed;
    if (aligned_here[static_cast<std::size_t>(placement.node)] != 0) {
      ++outcome.misaligned_though_existed_on_node;
    }
  }
  const NetworkModel& network = setup.network[static_cast<std::size_t>(placement.node)];
  const double gbps = PodNetworkGbps(node, placement, network);
  outcome.gbps[kind].push_back(gbps);
  // Below the rate its NICs give it through GPUDirect: staging cost it bandwidth.
  const double held = network.nic_gbps * placement.nic_milli / kWholeNicMilli;
  if (placement.gpus != 0 && placement.nics != 0 && gbps + 1e-9 < held) {
    ++outcome.below_nic_rate;
    if (aligned_somewhere) ++outcome.below_nic_rate_though_aligned_existed;
  }
  return true;
}

Result<void> ReplayNic(const std::string& policy, std::uint64_t seed,
                       const std::vector<PodSpec>& pods, const BenchOptions& options,
                       NicOutcome& outcome) {
  auto setup = BuildNicCluster(options);
  if (!setup) return tl::unexpected(setup.error());
  auto placer = MakeNicPlacer(policy, seed, setup->cluster, options);
  if (!placer) return tl::unexpected(placer.error());
  int smallest_nic_milli = kWholeNicMilli;
  for (const PodSpec& pod : pods) smallest_nic_milli = std::min(smallest_nic_milli, pod.nic_milli);
  const auto start = std::chrono::steady_clock::now();
  std::vector<Placement> placements(pods.size());
  DepartureQueue departures;
  for (std::size_t i = 0; i < pods.size(); ++i) {
    const PodSpec& pod = pods[i];
    while (!departures.empty() && departures.top().time <= pod.arrival_s) {
      const std::size_t leaving = departures.top().index;
      departures.pop();
      auto released = (*placer)->Release(setup->cluster, pods[leaving], placements[leaving]);
      if (!released) return tl::unexpected(released.error());
    }
    SampleState(*setup, smallest_nic_milli, outcome);
    auto placed = PlaceAndRecord(**placer, *setup, pod, placements[i], outcome);
    if (!placed) return WithContext(placed.error(), "pod " + pod.name);
    if (*placed) departures.push({pod.arrival_s + pod.duration_s, i});
  }
  outcome.seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {};
}

double Ratio(double part, double whole) { return whole > 0 ? part / whole : 0.0; }

nlohmann::json NicRow(const std::string& policy, const NicOutcome& o) {
  nlohmann::json use_by_machine = nlohmann::json::object();
  for (std::size_t g = 0; g < std::size(kNicGroups); ++g) {
    use_by_machine[kNicGroups[g].file] = Mean(o.gpu_use_by_group[g]);
  }
  const int pods = o.pods[0] + o.pods[1];
  const int refused = o.refused[0] + o.refused[1];
  const int placed = pods - refused;
  const int aligned = o.aligned[0] + o.aligned[1];
  std::vector<double> all = o.gbps[0];
  all.insert(all.end(), o.gbps[1].begin(), o.gbps[1].end());
  return nlohmann::json{
      {"policy", policy},
      {"pods", pods},
      {"training_pods", o.pods[1]},
      {"refused", refused},
      {"refused_training", o.refused[1]},
      {"refused_inference", o.refused[0]},
      {"refused_with_gpus_free", o.refused_gpus_free},
      {"refused_by_gpu_count", o.refused_by_gpus},
      {"aligned_rate", Ratio(aligned, placed)},
      {"aligned_rate_training", Ratio(o.aligned[1], o.pods[1] - o.refused[1])},
      {"aligned_rate_inference", Ratio(o.aligned[0], o.pods[0] - o.refused[0])},
      {"misaligned", o.misaligned},
      {"below_nic_rate", o.below_nic_rate},
      {"below_nic_rate_though_aligned_existed", o.below_nic_rate_though_aligned_existed},
      {"aligned_choice_existed", o.aligned_existed},
      {"misaligned_though_aligned_existed", o.misaligned_though_existed},
      {"misaligned_though_aligned_on_its_node", o.misaligned_though_existed_on_node},
      {"broke_whole_machine", o.broke_whole},
      {"broke_whole_machine_though_used_aligned", o.broke_whole_though_used_aligned},
      {"broke_whole_machine_though_used_fit", o.broke_whole_though_used_fit},
      {"aligned_rate_where_possible",
       o.aligned_existed > 0 ? 1.0 - Ratio(o.misaligned_though_existed, o.aligned_existed) : 1.0},
      {"mean_gbps", Mean(all)},
      {"mean_gbps_training", Mean(o.gbps[1])},
      {"p10_gbps_training", Percentile(o.gbps[1], 0.10)},
      {"mean_gbps_inference", Mean(o.gbps[0])},
      {"nic_free_share_without_idle_gpu", Mean(o.nic_free_no_gpu)},
      {"nic_free_share_without_close_idle_gpu", Mean(o.nic_free_no_close_gpu)},
      {"idle_gpus_without_nic", Mean(o.idle_gpus_without_nic)},
      {"gpu_in_use", Mean(o.gpu_use)},
      {"gpu_in_use_by_machine", use_by_machine},
      {"seconds", o.seconds}};
}

}  // namespace

Result<nlohmann::json> RunNicExperiment(const BenchOptions& options) {
  std::vector<std::string> policies = options.policies;
  if (policies.empty()) {
    policies = {"linkfit", "linkfit-rate", "gpu-only-linkfit"};
    for (const std::string& name : NicBaselineNames()) policies.push_back(name);
  }
  auto probe = BuildNicCluster(options);
  if (!probe) return tl::unexpected(probe.error());
  auto pools = LoadPools(options);
  if (!pools) return tl::unexpected(pools.error());
  nlohmann::json results = nlohmann::json::array();
  std::vector<Series> cdfs;
  for (const std::string& policy : policies) {
    NicOutcome outcome;
    for (std::uint64_t seed : options.seeds) {
      const std::vector<PodSpec> pods =
          DrawPods(*pools, options, seed, probe->cluster.total_gpus());
      if (auto replayed = ReplayNic(policy, seed, pods, options, outcome); !replayed) {
        return WithContext(replayed.error(), policy + " seed " + std::to_string(seed));
      }
      if (!options.quiet) {
        std::fprintf(stderr, "nic %-17s seed %3llu: %d pods so far, %d refused, %d misaligned\n",
                     policy.c_str(), static_cast<unsigned long long>(seed),
                     outcome.pods[0] + outcome.pods[1], outcome.refused[0] + outcome.refused[1],
                     outcome.misaligned);
      }
    }
    results.push_back(NicRow(policy, outcome));
    cdfs.push_back(Cdf(policy, outcome.gbps[1]));
  }
  const std::string csv = options.out_dir + "/training_gbps_cdf.csv";
  if (auto written = WriteSeriesCsv(csv, "gbps", cdfs); !written) {
    return tl::unexpected(written.error());
  }
  PlotLines({"Network rate of training pods (CDF; right is better)",
             "estimated per-GPU network rate of the pod (GB/s)", "fraction of training pods", csv,
             options.out_dir + "/training_gbps_cdf.svg", cdfs.size(),
             "set key bottom right\nset yrange [0:1]\n", true});
  std::vector<std::string> machines;
  for (const NicGroup& group : kNicGroups) {
    machines.push_back(std::string(group.file) + ": NIC " + FormatGbps(group.nic_gbps) + ", " +
                       group.nic_source);
  }
  const NetworkModel& staged = probe->network.front();
  nlohmann::json summary = {{"experiment", "nic"},
                            {"notes", NicTargetNotes(results)},
                            {"reading", NicReading(machines, staged.staged_gbps)}};
  summary["nodes_per_group"] = options.nodes_per_group;
  summary["cluster_gpus"] = probe->cluster.total_gpus();
  summary["cluster_nics"] = probe->total_nic_milli / kWholeNicMilli;
  summary["pods_per_seed"] = options.jobs;
  summary["offered_load"] = options.load;
  summary["training_share_of_gpu_time"] = options.train_share;
  summary["seeds"] = options.seeds;
  summary["results"] = results;
  summary["plots"] = {"training_gbps_cdf.svg"};
  return summary;
}

}  // namespace linkfit::bench
