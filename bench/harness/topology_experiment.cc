// `linkfit-bench topology`: a mixed-topology cluster under Philly-shaped demand with arrivals and
// departures (issue 4 §2, DESIGN.md §11 "multi-GPU pods on their node's best available ring").
//
// Cluster: --nodes-per-group N (default 8) nodes of each of DGX-1 V100, DGX A100, DGX H100,
// 8x L40S PCIe (two sockets) and 8x A100 PCIe with NVLink bridge pairs (config/topologies/).
// Every node has 128 cores and 1 TiB of memory, so GPUs are the only scarce resource.
//
// Workload: jobs drawn (seeded, with replacement) from the Philly digest's jobs of 1-8 GPUs, each
// keeping its GPU count and duration; pods ask for 4 cores and 32 GiB per GPU. Arrivals are a
// Poisson process whose rate makes the offered load --load (default 0.9) of the cluster's GPUs.
// A pod that fits nowhere waits in a FIFO queue; after every departure the queue is retried in
// order (a pod of k GPUs is skipped once a pod of <= k GPUs failed in the same pass). After the
// last arrival the replay runs on until every pod has been placed and has left.
//
// Per policy (multi-GPU pods): nvlink_ring_rate (the chosen set's best ring is all NVLink),
// optimal_ring_rate (its ring equals the best ring any k-subset of that node's free GPUs offered
// at that moment), mean ring bandwidth, estimated slowdown, queueing delay, GPU utilisation.
//
// Slowdown model (data-parallel training, one NCCL ring all-reduce per step, not overlapped):
// step time = compute + comm, comm proportional to 1 / ring bandwidth. With `f` the share of
// communication in a step on the best ring an idle node of that type offers for k GPUs (the job's
// "ideal" placement), slowdown = (1 - f) + f x ideal_ring / ring. f = --comm-share (default 0.3,
// a mid value for ResNet/BERT-class models on 8 GPUs without overlap). 1.0 = no loss.

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <queue>
#include <random>

#include "harness/experiment.h"
#include "harness/report.h"
#include "harness/topology_catalog.h"
#include "harness/trace.h"

namespace linkfit::bench {
namespace {

struct NodeGroup {
  const char* file;
  const char* prefix;
  const char* model;
};

constexpr NodeGroup kGroups[] = {
    {"dgx1-v100.json", "dgx1-v100-", "Tesla-V100-SXM2-16GB"},
    {"dgx-a100.json", "dgx-a100-", "A100-SXM4-40GB"},
    {"dgx-h100.json", "dgx-h100-", "H100-80GB-HBM3"},
    {"pcie-8x-l40s-2socket.json", "l40s-", "L40S"},
    {"pcie-8x-a100-nvlink-bridge-pairs.json", "a100-pcie-", "A100-PCIE-40GB"},
};

struct Job {
  int gpus = 1;
  double arrival_s = 0;
  double duration_s = 0;
};

struct Outcome {
  int multi_gpu_pods = 0;
  int nvlink_rings = 0;
  int optimal_rings = 0;
  // Multi-GPU pods for which some node's idle GPUs held an all-NVLink set of their size when
  // they were placed, and those of them placed off NVLink all the same.
  int nvlink_possible = 0;
  int nvlink_missed = 0;
  std::vector<double> ring_gbps;  // multi-GPU pods, as placed
  std::vector<double> slowdown;
  std::vector<double> queue_s;  // every pod
  std::vector<double> multi_queue_s;
  double gpu_seconds_busy = 0;  // allocated GPU-seconds within [first, last arrival]
  double span_s = 0;
  double seconds = 0;
};

Result<Cluster> BuildMixedCluster(const BenchOptions& options) {
  Cluster cluster;
  for (const NodeGroup& group : kGroups) {
    const std::string path = ShippedTopologyPath(options.repo_root, group.file);
    auto topology = LoadNodeTopology(path);
    if (!topology) return tl::unexpected(topology.error());
    for (int i = 0; i < options.nodes_per_group; ++i) {
      SimNode node;
      node.name = group.prefix + std::to_string(i);
      node.gpu_model = group.model;
      node.cpu_capacity = 128000;
      node.memory_capacity = 1024 * 1024;
      node.gpu_count = (*topology)->gpu_count();
      node.topology = *topology;
      node.topology_file = path;
      cluster.AddNode(std::move(node));
    }
  }
  return cluster;
}

Result<std::vector<Job>> DrawJobs(const BenchOptions& options, std::uint64_t seed,
                                  double capacity_gpus) {
  const std::string dir = options.trace_dir.empty() ? options.repo_root + "/../shared/traces/philly"
                                                    : options.trace_dir;
  auto all = LoadPhillyJobs(dir + "/philly_jobs_pollux_derived.csv");
  if (!all) return tl::unexpected(all.error());
  std::vector<PhillyJob> usable;
  for (const PhillyJob& job : *all) {
    if (job.num_gpus >= 1 && job.num_gpus <= 8 && job.duration_s > 0) usable.push_back(job);
  }
  if (usable.empty()) return MakeError(dir + ": no Philly job of 1-8 GPUs");
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> draw(0, usable.size() - 1);
  std::vector<Job> jobs(static_cast<std::size_t>(options.jobs));
  double gpu_seconds = 0;
  for (Job& job : jobs) {
    const PhillyJob& source = usable[draw(rng)];
    job.gpus = source.num_gpus;
    job.duration_s = source.duration_s;
    gpu_seconds += job.gpus * job.duration_s;
  }
  // Offered load = rate x E[gpus x duration] / capacity.
  const double mean_work = gpu_seconds / static_cast<double>(jobs.size());
  const double rate = options.load * capacity_gpus / mean_work;
  std::exponential_distribution<double> gap(rate);
  double now = 0;
  for (Job& job : jobs) {
    now += gap(rng);
    job.arrival_s = now;
  }
  return jobs;
}

// Whether some node's idle GPUs hold a k-set whose ring is all NVLink (the placement the
// nvlink_ring_rate asks for exists somewhere; CPU and memory never bind in this experiment).
bool NvlinkSetExists(const Cluster& cluster, int k) {
  for (const SimNode& node : cluster.nodes()) {
    if (node.topology == nullptr) continue;
    const unsigned idle = node.IdleGpus();
    if (std::popcount(idle) < k) continue;
    for (unsigned subset = idle; subset != 0; subset = (subset - 1) & idle) {
      if (std::popcount(subset) == k &&
          node.topology->RingAllNvlink(static_cast<GpuMask>(subset))) {
        return true;
      }
    }
  }
  return false;
}

PodSpec PodOf(const Job& job, std::size_t index) {
  PodSpec pod;
  pod.name = "job-" + std::to_string(index);
  pod.uid = pod.name;
  pod.cpu_milli = 4000LL * job.gpus;
  pod.memory_mib = 32768LL * job.gpus;
  pod.demand = GpuDemand::kWhole;
  pod.gpu_count = job.gpus;
  pod.gpu_milli = kWholeGpuMilli;
  pod.arrival_s = job.arrival_s;
  pod.duration_s = job.duration_s;
  pod.shape = job.gpus;
  return pod;
}

// The ring figures of a multi-GPU pod placed on `node` at `p`, after waiting `waited` seconds.
void RecordRing(const SimNode& node, const Placement& p, const PodSpec& pod, bool nvlink_possible,
                double waited, double comm_share, Outcome& outcome) {
  const auto free_before = static_cast<GpuMask>(node.IdleGpus() | p.gpus);
  const NodeTopology& topology = *node.topology;
  const double ring = topology.RingMbps(p.gpus);
  const double best_now = topology.BestRingMbps(free_before, pod.gpu_count);
  const auto all = static_cast<GpuMask>((1u << topology.gpu_count()) - 1u);
  const double ideal = topology.BestRingMbps(all, pod.gpu_count);
  ++outcome.multi_gpu_pods;
  const bool nvlink = topology.RingAllNvlink(p.gpus);
  if (nvlink) ++outcome.nvlink_rings;
  if (nvlink_possible) ++outcome.nvlink_possible;
  if (nvlink_possible && !nvlink) ++outcome.nvlink_missed;
  if (ring >= best_now) ++outcome.optimal_rings;
  outcome.ring_gbps.push_back(ring / 1000.0);
  outcome.slowdown.push_back(ring > 0 ? (1 - comm_share) + comm_share * ideal / ring : 0);
  outcome.multi_queue_s.push_back(waited);
}

// One replay of the job stream through one policy: arrivals in order, a FIFO queue, departures
// that retry it. Single use: Run once.
class TopologyReplay {
 public:
  TopologyReplay(Cluster& cluster, std::vector<PodSpec> pods, Placer& placer,
                 const BenchOptions& options)
      : cluster_(cluster),
        pods_(std::move(pods)),
        placer_(placer),
        options_(options),
        placements_(pods_.size()) {}

  Result<Outcome> Run(const std::string& policy) {
    const auto start = std::chrono::steady_clock::now();
    first_ = pods_.empty() ? 0 : pods_.front().arrival_s;
    last_ = pods_.empty() ? 0 : pods_.back().arrival_s;
    outcome_.span_s = last_ - first_;
    clock_ = first_;
    std::size_t next = 0;
    while (next < pods_.size() || !departures_.empty()) {
      const bool arrival_first =
          next < pods_.size() &&
          (departures_.empty() || pods_[next].arrival_s < departures_.top().time);
      if (arrival_first) {
        if (auto arrived = Arrive(next++); !arrived) return tl::unexpected(arrived.error());
        continue;
      }
      const Departure departure = departures_.top();
      departures_.pop();
      Advance(departure.time);
      auto released =
          placer_.Release(cluster_, pods_[departure.index], placements_[departure.index]);
      if (!released) return tl::unexpected(released.error());
      allocated_gpus_ -= pods_[departure.index].gpu_count;
      // Several departures at one instant: retry once after the last of them.
      if (!departures_.empty() && departures_.top().time == departure.time) continue;
      if (auto drained = Drain(departure.time); !drained) {
        return tl::unexpected(drained.error());
      }
    }
    if (!pending_.empty()) {
      return MakeError(policy + ": " + std::to_string(pending_.size()) +
                       " pods never fit an empty cluster");
    }
    outcome_.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return std::move(outcome_);
  }

 private:
  // Accrues busy GPU-seconds inside [first, last] up to `to`.
  void Advance(double to) {
    const double from = std::max(clock_, first_);
    const double until = std::min(to, last_);
    if (until > from) outcome_.gpu_seconds_busy += allocated_gpus_ * (until - from);
    clock_ = to;
  }

  Result<void> Arrive(std::size_t i) {
    const double now = pods_[i].arrival_s;
    Advance(now);
    if (!pending_.empty()) {
      pending_.push_back(i);  // FIFO: queued pods go first
      return Drain(now);
    }
    auto placed = TryPlace(i, now);
    if (!placed) return tl::unexpected(placed.error());
    if (!*placed) pending_.push_back(i);
    return {};
  }

  // Tries to place pod `i` at time `now`; records its figures when it lands.
  Result<bool> TryPlace(std::size_t i, double now) {
    const PodSpec& pod = pods_[i];
    const bool nvlink_possible = pod.gpu_count >= 2 && NvlinkSetExists(cluster_, pod.gpu_count);
    auto placed = placer_.Place(cluster_, pod);
    if (!placed) return tl::unexpected(placed.error());
    if (!*placed) return false;
    const Placement& p = **placed;
    placements_[i] = p;
    allocated_gpus_ += pod.gpu_count;
    departures_.push({now + pod.duration_s, i});
    outcome_.queue_s.push_back(now - pod.arrival_s);
    if (pod.gpu_count >= 2) {
      RecordRing(cluster_.node(p.node), p, pod, nvlink_possible, now - pod.arrival_s,
                 options_.comm_share, outcome_);
    }
    return true;
  }

  // Retries the queue in order; a pod of k GPUs is skipped once one of <= k GPUs failed.
  Result<void> Drain(double now) {
    int smallest_failed = 1 << 20;
    for (auto it = pending_.begin(); it != pending_.end();) {
      const int k = pods_[*it].gpu_count;
      if (k >= smallest_failed) {
        ++it;
        continue;
      }
      auto placed = TryPlace(*it, now);
      if (!placed) return tl::unexpected(placed.error());
      if (*placed) {
        it = pending_.erase(it);
      } else {
        smallest_failed = k;
        ++it;
      }
    }
    return {};
  }

  Cluster& cluster_;
  const std::vector<PodSpec> pods_;
  Placer& placer_;
  const BenchOptions& options_;
  Outcome outcome_;
  std::vector<Placement> placements_;
  std::deque<std::size_t> pending_;
  DepartureQueue departures_;
  double first_ = 0;
  double last_ = 0;
  double clock_ = 0;
  int allocated_gpus_ = 0;
};

Result<Outcome> ReplayTopology(const std::string& policy, std::uint64_t seed,
                               const std::vector<Job>& jobs, const BenchOptions& options) {
  auto built = BuildMixedCluster(options);
  if (!built) return tl::unexpected(built.error());
  Cluster cluster = std::move(*built);
  std::vector<PodSpec> pods;
  for (std::size_t i = 0; i < jobs.size(); ++i) pods.push_back(PodOf(jobs[i], i));
  auto placer = MakePlacer(policy, seed, pods, cluster, options);
  if (!placer) return tl::unexpected(placer.error());
  return TopologyReplay(cluster, std::move(pods), **placer, options).Run(policy);
}

// One policy's row of the results table, over all its seeds.
nlohmann::json TopologyRow(const std::string& policy, const Outcome& all, int total_gpus) {
  const double multi = std::max(1, all.multi_gpu_pods);
  return nlohmann::json{
      {"policy", policy},
      {"multi_gpu_pods", all.multi_gpu_pods},
      {"nvlink_ring_rate", all.nvlink_rings / multi},
      {"optimal_ring_rate", all.optimal_rings / multi},
      {"nvlink_possible_rate", all.nvlink_possible / multi},
      {"nvlink_missed_where_possible", all.nvlink_missed},
      {"nvlink_ring_rate_where_possible",
       all.nvlink_possible > 0 ? 1.0 - all.nvlink_missed / static_cast<double>(all.nvlink_possible)
                               : 1.0},
      {"mean_ring_gbps", Mean(all.ring_gbps)},
      {"p10_ring_gbps", Percentile(all.ring_gbps, 0.10)},
      {"mean_slowdown", Mean(all.slowdown)},
      {"p90_slowdown", Percentile(all.slowdown, 0.90)},
      {"mean_queue_s", Mean(all.queue_s)},
      {"p95_queue_s", Percentile(all.queue_s, 0.95)},
      {"mean_queue_s_multi_gpu", Mean(all.multi_queue_s)},
      {"gpu_utilisation", all.span_s > 0 ? all.gpu_seconds_busy / (all.span_s * total_gpus) : 0.0},
      {"seconds", all.seconds}};
}

}  // namespace

Result<nlohmann::json> RunTopologyExperiment(const BenchOptions& given) {
  BenchOptions options = given;
  if (options.baseline_mode.empty()) options.baseline_mode = "kube";
  std::vector<std::string> policies = options.policies;
  if (policies.empty()) {
    policies = {"linkfit", "default-scheduler", "random", "packing", "bestfit", "fgd"};
  }
  auto probe = BuildMixedCluster(options);
  if (!probe) return tl::unexpected(probe.error());
  const int total_gpus = probe->total_gpus();
  nlohmann::json results = nlohmann::json::array();
  std::vector<Series> cdfs;
  for (const std::string& policy : policies) {
    Outcome all;
    for (std::uint64_t seed : options.seeds) {
      auto jobs = DrawJobs(options, seed, total_gpus);
      if (!jobs) return tl::unexpected(jobs.error());
      auto outcome = ReplayTopology(policy, seed, *jobs, options);
      if (!outcome) return WithContext(outcome.error(), policy + " seed " + std::to_string(seed));
      if (!options.quiet) {
        std::fprintf(stderr,
                     "topology %-18s seed %3llu: %d multi-GPU pods, optimal ring %.1f %%, "
                     "NVLink ring %.1f %%, an NVLink set existed for %d, missed %d (%.1f s)\n",
                     policy.c_str(), static_cast<unsigned long long>(seed), outcome->multi_gpu_pods,
                     100.0 * outcome->optimal_rings / std::max(1, outcome->multi_gpu_pods),
                     100.0 * outcome->nvlink_rings / std::max(1, outcome->multi_gpu_pods),
                     outcome->nvlink_possible, outcome->nvlink_missed, outcome->seconds);
      }
      all.multi_gpu_pods += outcome->multi_gpu_pods;
      all.nvlink_rings += outcome->nvlink_rings;
      all.optimal_rings += outcome->optimal_rings;
      all.nvlink_possible += outcome->nvlink_possible;
      all.nvlink_missed += outcome->nvlink_missed;
      using Field = std::vector<double> Outcome::*;
      for (Field field :
           {&Outcome::ring_gbps, &Outcome::slowdown, &Outcome::queue_s, &Outcome::multi_queue_s}) {
        (all.*field)
            .insert((all.*field).end(), ((*outcome).*field).begin(), ((*outcome).*field).end());
      }
      all.gpu_seconds_busy += outcome->gpu_seconds_busy;
      all.span_s += outcome->span_s;
      all.seconds += outcome->seconds;
    }
    results.push_back(TopologyRow(policy, all, total_gpus));
    cdfs.push_back(Cdf(policy, all.ring_gbps));
  }
  const std::string csv = options.out_dir + "/ring_bandwidth_cdf.csv";
  auto written = WriteSeriesCsv(csv, "ring_gbps", cdfs);
  if (!written) return tl::unexpected(written.error());
  Plot plot{"Ring bandwidth of multi-GPU pods (CDF; right is better)",
            "ring bandwidth of the pod's GPU set (GB/s)",
            "fraction of multi-GPU pods",
            csv,
            options.out_dir + "/ring_bandwidth_cdf.svg",
            cdfs.size(),
            "set key bottom right\nset logscale x\nset yrange [0:1]\n",
            true};
  PlotLines(plot);
  return nlohmann::json{
      {"experiment", "topology"},
      {"nodes_per_group", options.nodes_per_group},
      {"cluster_gpus", total_gpus},
      {"jobs_per_seed", options.jobs},
      {"offered_load", options.load},
      {"baseline_mode", options.baseline_mode},
      {"comm_share", options.comm_share},
      {"seeds", options.seeds},
      {"results", results},
      {"plots", {"ring_bandwidth_cdf.svg"}},
      {"reading",
       {"optimal_ring_rate: share of multi-GPU pods placed on the best ring any set of that "
        "node's free GPUs offered at that moment. nvlink_ring_rate: share whose ring is all "
        "NVLink/NVSwitch (impossible on the L40S nodes and on A100-PCIe sets larger than a "
        "bridged pair). nvlink_possible_rate: share of multi-GPU pods for which, when they were "
        "placed, some node's idle GPUs held an all-NVLink set of their size; "
        "nvlink_missed_where_possible: those placed off NVLink all the same; "
        "nvlink_ring_rate_where_possible = 1 - missed / possible.",
        "mean_slowdown: (1 - f) + f x ideal ring / ring, f = comm_share, ideal = the best ring "
        "an idle node of that type offers for that many GPUs. Queueing delay counts from "
        "arrival to bind; GPU utilisation is allocated GPU-time over capacity between the first "
        "and last arrival."}}};
}

}  // namespace linkfit::bench
