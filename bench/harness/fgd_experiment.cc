// `linkfit-bench fgd`: the FGD paper's protocol (openb trace, 130 % arrived demand, no
// departures), every policy with the same seeds. Figures per policy are means over the seeds.

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "harness/experiment.h"
#include "harness/openb_bound.h"
#include "harness/openb_forced_bound.h"
#include "harness/openb_workload.h"
#include "harness/report.h"

namespace linkfit::bench {
namespace {

constexpr int kDemandSteps = 130;  // the allocation ratio is sampled at 0..130 % arrived demand

struct SeedRun {
  std::vector<double> ratio_at_level;  // index = arrived demand in %, value = allocation in %
  double ratio_100 = 0;
  double ratio_130 = 0;
  int pods = 0;
  int failed_pods = 0;
  int failed_though_fit = 0;  // failed while some node could take it (openb_forced_bound.h)
  double failed_gpus = 0;
  int first_behind_level = -1;  // first level where allocation < demand - 1 point
  double seconds = 0;
  // Where the unallocated GPUs are at the end (GPUs): on nodes where no GPU pod shape of the
  // trace fits because of CPU or memory, on nodes where the free shares are too small for every
  // shape, and on nodes where some shape would still fit.
  double stranded_cpu_memory_gpus = 0;
  double fragment_gpus = 0;
  double usable_gpus = 0;
  std::array<int, 6> failed_by_class{};  // CPU-only, share, 1, 2, 4, 8 GPUs
  // One line per node with free GPU capacity at the end (leftovers.csv): model, GPUs, free GPU
  // milli, free CPU milli, free memory MiB, class (stranded, fragment, usable).
  std::string leftovers;
};

// Classifies the free GPU capacity of every node at the end of a replay (see SeedRun).
void ClassifyLeftovers(const Cluster& cluster, const std::vector<PodSpec>& shapes, SeedRun& run) {
  const int node_count = static_cast<int>(cluster.nodes().size());
  for (int node = 0; node < node_count; ++node) {
    const SimNode& n = cluster.node(node);
    const double free_gpus = static_cast<double>(n.FreeGpuMilli()) / kWholeGpuMilli;
    if (free_gpus <= 0) continue;
    bool fits = false;
    bool gpu_fits = false;
    for (const PodSpec& shape : shapes) {
      if (cluster.DeviceFits(node, shape)) {
        fits = true;
        break;
      }
      PodSpec gpu_only = shape;
      gpu_only.cpu_milli = 0;
      gpu_only.memory_mib = 0;
      gpu_fits = gpu_fits || cluster.DeviceFits(node, gpu_only);
    }
    const char* kind = "usable";
    if (fits) {
      run.usable_gpus += free_gpus;
    } else if (gpu_fits) {
      run.stranded_cpu_memory_gpus += free_gpus;
      kind = "stranded";
    } else {
      run.fragment_gpus += free_gpus;
      kind = "fragment";
    }
    run.leftovers += n.gpu_model + "," + std::to_string(n.gpu_count) + "," +
                     std::to_string(n.FreeGpuMilli()) + "," + std::to_string(n.cpu_free) + "," +
                     std::to_string(n.memory_free) + "," + kind + ",";
    for (int g = 0; g < n.gpu_count; ++g) {
      const int free = n.gpu_free_milli[static_cast<std::size_t>(g)];
      if (free > 0) run.leftovers += std::to_string(free) + " ";
    }
    run.leftovers += "\n";
  }
}

Result<SeedRun> ReplayOneSeed(const std::string& policy, std::uint64_t seed,
                              const std::vector<PodSpec>& trace,
                              const std::vector<NodeRecord>& node_records,
                              const BenchOptions& options) {
  Cluster cluster = BuildOpenbCluster(node_records);
  const double capacity = cluster.total_gpus();
  std::vector<PodSpec> arrivals = FgdArrivals(trace, seed, capacity, options.demand_limit);
  if (options.max_pods > 0 && arrivals.size() > options.max_pods) {
    arrivals.resize(options.max_pods);
  }
  auto placer = MakePlacer(policy, seed, trace, cluster, options);
  if (!placer) return tl::unexpected(placer.error());

  SeedRun run;
  run.ratio_at_level.assign(kDemandSteps + 1, -1.0);
  run.ratio_at_level[0] = 0;
  const auto start = std::chrono::steady_clock::now();
  double arrived = 0;
  bool passed_100 = false;
  for (const PodSpec& pod : arrivals) {
    auto placed = (*placer)->Place(cluster, pod);
    if (!placed) return WithContext(placed.error(), policy + " seed " + std::to_string(seed));
    ++run.pods;
    if (!*placed) {
      ++run.failed_pods;
      for (int node = 0; node < static_cast<int>(cluster.nodes().size()); ++node) {
        if (cluster.DeviceFits(node, pod)) {
          ++run.failed_though_fit;
          break;
        }
      }
      run.failed_gpus += pod.RequestedGpus();
      const int pod_class = PodClass(pod);
      ++run.failed_by_class[static_cast<std::size_t>(pod_class + 1)];
    }
    arrived += pod.RequestedGpus();
    const double demand_pct = 100.0 * arrived / capacity;
    const double allocated_pct = 100.0 * static_cast<double>(cluster.allocated_gpu_milli()) /
                                 static_cast<double>(cluster.total_gpu_milli());
    const int level = std::min(kDemandSteps, static_cast<int>(std::floor(demand_pct)));
    for (int l = 0; l <= level; ++l) {
      if (run.ratio_at_level[static_cast<std::size_t>(l)] < 0) {
        run.ratio_at_level[static_cast<std::size_t>(l)] = allocated_pct;
      }
    }
    if (!passed_100 && demand_pct >= 100.0) {
      passed_100 = true;
      run.ratio_100 = allocated_pct;
    }
    if (run.first_behind_level < 0 && allocated_pct < demand_pct - 1.0) {
      run.first_behind_level = static_cast<int>(std::floor(demand_pct));
    }
    run.ratio_130 = allocated_pct;
  }
  double last = 0;
  for (double& value : run.ratio_at_level) {  // levels never reached keep the last value
    if (value < 0) value = last;
    last = value;
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<PodSpec> shapes;
  std::vector<bool> seen;
  for (const PodSpec& pod : trace) {
    if (pod.demand == GpuDemand::kNone || pod.shape < 0) continue;
    if (seen.size() <= static_cast<std::size_t>(pod.shape)) {
      seen.resize(static_cast<std::size_t>(pod.shape) + 1, false);
    }
    if (seen[static_cast<std::size_t>(pod.shape)]) continue;
    seen[static_cast<std::size_t>(pod.shape)] = true;
    shapes.push_back(pod);
  }
  ClassifyLeftovers(cluster, shapes, run);
  return run;
}

double StdDev(const std::vector<double>& values) {
  const double mean = Mean(values);
  double sum = 0;
  for (double value : values) sum += (value - mean) * (value - mean);
  return values.size() < 2 ? 0 : std::sqrt(sum / static_cast<double>(values.size() - 1));
}

// The FGD paper's table (../shared/baselines/README.md), ratio at 130 % and unallocated GPUs.
const std::map<std::string, std::pair<double, int>>& PaperFigures() {
  static const std::map<std::string, std::pair<double, int>> figures = {
      {"random", {87.47, 778}},  {"dotprod", {90.85, 568}}, {"clustering", {91.88, 505}},
      {"packing", {92.00, 497}}, {"bestfit", {93.08, 430}}, {"fgd", {95.39, 286}}};
  return figures;
}

// The upper bounds of each seed's arrivals beside the policies: the LP of openb_bound.h and the
// forced-share bound of openb_forced_bound.h.
Result<std::vector<nlohmann::json>> BoundResults(const std::vector<NodeRecord>& nodes,
                                                 const std::vector<PodSpec>& trace,
                                                 const BenchOptions& options, int total_gpus) {
  std::vector<double> lp_pct;
  std::vector<double> forced_pct;
  nlohmann::json forced_by_seed = nlohmann::json::array();
  for (std::uint64_t seed : options.seeds) {
    const Cluster cluster = BuildOpenbCluster(nodes);
    std::vector<PodSpec> arrivals =
        FgdArrivals(trace, seed, cluster.total_gpus(), options.demand_limit);
    if (options.max_pods > 0 && arrivals.size() > options.max_pods) {
      arrivals.resize(options.max_pods);
    }
    const std::string context = "upper bound, seed " + std::to_string(seed);
    auto bound = OpenbGpuBound(cluster, arrivals);
    if (!bound) return WithContext(bound.error(), context);
    lp_pct.push_back(100.0 * bound->ratio);
    const auto started = std::chrono::steady_clock::now();
    auto forced = OpenbForcedShareBound(cluster, arrivals);
    if (!forced) return WithContext(forced.error(), context);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    forced_pct.push_back(100.0 * forced->ratio);
    nlohmann::json shapes = nlohmann::json::array();
    for (const ForcedShape& shape : forced->forced) {
      shapes.push_back({{"gpu_milli", shape.gpu_milli},
                        {"cpu_milli", shape.cpu_milli},
                        {"memory_mib", shape.memory_mib},
                        {"arrivals", shape.arrivals},
                        {"forced", shape.forced}});
    }
    forced_by_seed.push_back(
        {{"seed", seed},
         {"pct", 100.0 * forced->ratio},
         {"unallocated_gpus", (1.0 - forced->ratio) * total_gpus},
         {"forced_shapes", shapes},
         {"forced_prefix_pct",
          100.0 * forced->forced_prefix_gpu_milli / static_cast<double>(cluster.total_gpu_milli())},
         {"window_pct",
          100.0 * forced->window_gpu_milli / static_cast<double>(cluster.total_gpu_milli())},
         {"theta_first_possible_failure", forced->theta_first_possible_failure},
         {"theta_worst_window",
          {forced->theta_worst_window.first, forced->theta_worst_window.second}},
         {"window_programs", forced->window_programs},
         {"window_fallbacks", forced->window_fallbacks},
         {"closing_programs", forced->closing_programs},
         {"seconds", seconds}});
    if (!options.quiet) {
      std::fprintf(
          stderr,
          "fgd %-18s seed %3llu: %.2f %% at 130 %% (LP over %d shapes x %d node kinds, "
          "%d pivots); forced shares %.2f %% (%.0f GPUs unallocated; step 2 %.2f %%, %d+%d "
          "LPs, %d fallbacks, %.1f s)\n",
          "upper-bound-lp", static_cast<unsigned long long>(seed), 100.0 * bound->ratio,
          bound->shapes, bound->kinds, bound->pivots, 100.0 * forced->ratio,
          (1.0 - forced->ratio) * total_gpus,
          100.0 * forced->forced_prefix_gpu_milli / static_cast<double>(cluster.total_gpu_milli()),
          forced->closing_programs, forced->window_programs, forced->window_fallbacks, seconds);
    }
  }
  std::vector<nlohmann::json> results;
  for (const auto& [name, pct] : {std::pair{"upper-bound-lp", &lp_pct},
                                  std::pair{"upper-bound-forced-shares", &forced_pct}}) {
    const double mean = Mean(*pct);
    results.push_back({{"policy", name},
                       {"gpu_allocation_ratio", mean / 100.0},
                       {"gpu_allocation_ratio_pct", mean},
                       {"gpu_allocation_ratio_pct_stddev", StdDev(*pct)},
                       {"unallocated_gpus", (1.0 - mean / 100.0) * total_gpus},
                       {"per_seed_pct", *pct},
                       {"seeds", pct->size()}});
  }
  results.back()["by_seed"] = forced_by_seed;
  return results;
}

// One policy's row of the results table: its seeds' means (and the paper's figures where the
// FGD paper reports the policy).
nlohmann::json SummarizePolicy(const std::string& policy, const std::vector<SeedRun>& runs,
                               int total_gpus) {
  std::vector<double> at_130, at_100, behind, seconds, failed, stranded, fragment, usable;
  std::vector<double> failed_though_fit;
  std::array<double, 6> failed_by_class{};
  for (const SeedRun& run : runs) {
    stranded.push_back(run.stranded_cpu_memory_gpus);
    fragment.push_back(run.fragment_gpus);
    usable.push_back(run.usable_gpus);
    for (std::size_t c = 0; c < failed_by_class.size(); ++c) {
      failed_by_class[c] += run.failed_by_class[c] / static_cast<double>(runs.size());
    }
    at_130.push_back(run.ratio_130);
    at_100.push_back(run.ratio_100);
    behind.push_back(run.first_behind_level < 0 ? 130.0 : run.first_behind_level);
    seconds.push_back(run.seconds);
    failed.push_back(run.failed_pods);
    failed_though_fit.push_back(run.failed_though_fit);
  }
  const double ratio = Mean(at_130);
  nlohmann::json result = {{"policy", policy},
                           {"gpu_allocation_ratio", ratio / 100.0},
                           {"gpu_allocation_ratio_pct", ratio},
                           {"gpu_allocation_ratio_pct_stddev", StdDev(at_130)},
                           {"unallocated_gpus", (1.0 - ratio / 100.0) * total_gpus},
                           {"gpu_allocation_ratio_at_100_pct", Mean(at_100)},
                           {"unallocated_gpus_at_100", (1.0 - Mean(at_100) / 100.0) * total_gpus},
                           {"first_demand_pct_one_point_behind", Mean(behind)},
                           {"failed_pods", Mean(failed)},
                           {"failed_pods_that_fitted_somewhere", Mean(failed_though_fit)},
                           {"unallocated_gpus_cpu_memory_stranded", Mean(stranded)},
                           {"unallocated_gpus_share_fragments", Mean(fragment)},
                           {"unallocated_gpus_still_usable", Mean(usable)},
                           {"failed_pods_by_class",
                            {{"cpu_only", failed_by_class[0]},
                             {"share", failed_by_class[1]},
                             {"gpu1", failed_by_class[2]},
                             {"gpu2", failed_by_class[3]},
                             {"gpu4", failed_by_class[4]},
                             {"gpu8", failed_by_class[5]}}},
                           {"seeds", runs.size()},
                           {"seconds_per_seed", Mean(seconds)}};
  auto paper = PaperFigures().find(policy);
  if (paper != PaperFigures().end()) {
    result["paper_gpu_allocation_ratio_pct"] = paper->second.first;
    result["paper_unallocated_gpus"] = paper->second.second;
  }
  return result;
}

// One policy's allocation-vs-demand curve: the mean over seeds at each demand level.
Series CurveOf(const std::string& policy, const std::vector<SeedRun>& runs) {
  Series curve{policy, {}, {}};
  for (int level = 0; level <= kDemandSteps; ++level) {
    std::vector<double> values;
    for (const SeedRun& run : runs) {
      values.push_back(run.ratio_at_level[static_cast<std::size_t>(level)]);
    }
    curve.x.push_back(level);
    curve.y.push_back(Mean(values));
  }
  return curve;
}

}  // namespace

Result<nlohmann::json> RunFgdExperiment(const BenchOptions& given) {
  BenchOptions options = given;
  if (options.baseline_mode.empty()) options.baseline_mode = "paper";
  const std::string trace_dir = options.trace_dir.empty()
                                    ? options.repo_root + "/../shared/traces/alibaba-gpu-2023"
                                    : options.trace_dir;
  auto nodes = LoadOpenbNodes(trace_dir + "/openb_node_list_gpu_node.csv");
  if (!nodes) return tl::unexpected(nodes.error());
  auto records = LoadOpenbPods(trace_dir + "/openb_pod_list_" + options.workload + ".csv");
  if (!records) return tl::unexpected(records.error());
  const std::vector<PodSpec> trace = ToPodSpecs(*records);
  const int total_gpus = BuildOpenbCluster(*nodes).total_gpus();

  std::vector<std::string> policies = options.policies;
  if (policies.empty()) {
    policies = {"linkfit",    "default-scheduler", "random",  "dotprod",
                "clustering", "packing",           "bestfit", "fgd"};
  }
  nlohmann::json results = nlohmann::json::array();
  std::vector<Series> series;
  std::string leftovers =
      "policy,seed,model,gpus,free_gpu_milli,free_cpu_milli,free_memory_mib,class,free_milli_by_"
      "gpu\n";
  for (const std::string& policy : policies) {
    std::vector<SeedRun> runs;
    for (std::uint64_t seed : options.seeds) {
      auto run = ReplayOneSeed(policy, seed, trace, *nodes, options);
      if (!run) return tl::unexpected(run.error());
      if (!options.quiet) {
        std::fprintf(stderr,
                     "fgd %-18s seed %3llu: %.2f %% at 130 %% (%d/%d pods failed, %.1f s; "
                     "unallocated GPUs: %.0f CPU/memory-stranded, %.0f share fragments, %.0f "
                     "usable)\n",
                     policy.c_str(), static_cast<unsigned long long>(seed), run->ratio_130,
                     run->failed_pods, run->pods, run->seconds, run->stranded_cpu_memory_gpus,
                     run->fragment_gpus, run->usable_gpus);
      }
      const std::string prefix = policy + "," + std::to_string(seed) + ",";
      for (std::size_t at = 0; at < run->leftovers.size();) {
        const std::size_t end = run->leftovers.find('\n', at);
        leftovers += prefix + run->leftovers.substr(at, end - at + 1);
        at = end + 1;
      }
      runs.push_back(std::move(*run));
    }
    results.push_back(SummarizePolicy(policy, runs, total_gpus));
    series.push_back(CurveOf(policy, runs));
  }
  auto bounds = BoundResults(*nodes, trace, options, total_gpus);
  if (!bounds) return tl::unexpected(bounds.error());
  for (nlohmann::json& bound : *bounds) results.push_back(std::move(bound));
  auto written =
      WriteSeriesCsv(options.out_dir + "/allocation_vs_demand.csv", "arrived_demand_pct", series);
  if (!written) return tl::unexpected(written.error());
  written = WriteText(options.out_dir + "/leftovers.csv", leftovers);
  if (!written) return tl::unexpected(written.error());
  Plot plot{"GPU allocation vs arrived demand (openb " + options.workload + ", FGD protocol)",
            "arrived GPU demand (% of capacity)",
            "GPUs allocated (% of capacity)",
            options.out_dir + "/allocation_vs_demand.csv",
            options.out_dir + "/allocation_vs_demand.svg",
            series.size(),
            "set key bottom right\n"
            "set xrange [60:130]\nset yrange [60:100]\n"};
  PlotLines(plot);
  return nlohmann::json{{"experiment", "fgd"},
                        {"workload", options.workload},
                        {"baseline_mode", options.baseline_mode},
                        {"seeds", options.seeds},
                        {"cluster_gpus", total_gpus},
                        {"demand_limit_pct", options.demand_limit * 100},
                        {"results", results},
                        {"reading",
                         {"upper-bound-lp: no policy can allocate more of the same arrivals: an "
                          "LP over pod shapes and node kinds (bench/harness/openb_bound.h) that "
                          "relaxes the arrival order, integrality, and packing within nodes and "
                          "GPUs (a kind's nodes pooled).",
                          "upper-bound-forced-shares: no policy that places every pod that fits "
                          "somewhere when it arrives can allocate more: shares > 0.5 GPU that "
                          "must be placed keep a GPU each, beside which only small shares fit "
                          "(bench/harness/openb_forced_bound.h). failed_pods_that_fitted_somewhere "
                          "says whether a policy obeyed that rule."}}};
}

}  // namespace linkfit::bench
