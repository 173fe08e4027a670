// `linkfit-bench latency`: extender verb latency measured during a replay (issue 4 §2,
// DESIGN.md §11), at 1,000 and 5,000 nodes.
//
// Cluster: N nodes drawn (seeded, with replacement) from openb's GPU node list (mostly 8-GPU
// nodes; single-socket PCIe topologies synthesised as in `fgd`), renamed lat-0 ... lat-(N-1).
// Pods: the FGD protocol's arrival sequence for the seed (openb `default`), the first --jobs of
// them (default 2,000), no departures. Every pod goes through the full kube-scheduler pipeline
// against a real `linkfit serve` (filter with every in-tree-feasible node name,
// prioritize when two or more pass, bind), one request in flight, keep-alive, loopback.
//
// Figures per verb and size: round-trip percentiles as the client sees them (request written to
// reply read; excludes the client's JSON building and parsing), request count, and the mean
// number of node names per filter request. These are replay round trips on the shared box, with
// the client and server competing for the same CPUs; `linkfit-load` (bench/load) is the pinned,
// controlled measurement of DESIGN.md §11's targets.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>

#include "harness/experiment.h"
#include "harness/openb_workload.h"
#include "harness/report.h"
#include "harness/trace.h"

namespace linkfit::bench {
namespace {

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(q * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

// Each verb's round-trip quantiles from `latencies` (milliseconds by verb), and the CDFs of
// filter and prioritize at `size` nodes appended to `cdfs`.
nlohmann::json VerbFigures(const std::map<std::string, std::vector<double>>& latencies, int size,
                           std::vector<Series>& cdfs) {
  nlohmann::json verbs = nlohmann::json::object();
  for (const char* verb : {"filter", "prioritize", "bind"}) {
    const auto it = latencies.find(verb);
    const std::vector<double> empty;
    const std::vector<double>& ms = it == latencies.end() ? empty : it->second;
    verbs[verb] = {{"requests", ms.size()},
                   {"p50_ms", Quantile(ms, 0.50)},
                   {"p90_ms", Quantile(ms, 0.90)},
                   {"p99_ms", Quantile(ms, 0.99)},
                   {"max_ms", Quantile(ms, 1.0)}};
    if (std::string(verb) != "bind") {
      std::vector<double> sorted = ms;
      std::sort(sorted.begin(), sorted.end());
      Series cdf{std::string(verb) + " " + std::to_string(size) + " nodes", {}, {}};
      for (std::size_t i = 0; i < sorted.size();
           i += std::max<std::size_t>(1, sorted.size() / 200)) {
        cdf.x.push_back(sorted[i]);
        cdf.y.push_back(static_cast<double>(i + 1) / static_cast<double>(sorted.size()));
      }
      cdfs.push_back(std::move(cdf));
    }
  }
  return verbs;
}

// One replay on a cluster of `size` nodes drawn from `gpu_nodes`: the results row, its round
// trips' CDFs added to `cdfs`.
Result<nlohmann::json> ReplayAtSize(int size, const std::vector<NodeRecord>& gpu_nodes,
                                    const std::vector<PodSpec>& trace, std::size_t pods_per_size,
                                    const BenchOptions& options, std::vector<Series>& cdfs) {
  const std::uint64_t seed = options.seeds.front();
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> draw(0, gpu_nodes.size() - 1);
  std::vector<NodeRecord> chosen;
  for (int i = 0; i < size; ++i) {
    NodeRecord node = gpu_nodes[draw(rng)];
    node.name = "lat-" + std::to_string(i);
    chosen.push_back(std::move(node));
  }
  Cluster cluster = BuildOpenbCluster(chosen);
  std::vector<PodSpec> arrivals =
      FgdArrivals(trace, seed, cluster.total_gpus(), options.demand_limit);
  if (arrivals.size() > pods_per_size) arrivals.resize(pods_per_size);
  auto placer = MakePlacer("linkfit", seed, trace, cluster, options);
  if (!placer) return WithContext(placer.error(), std::to_string(size) + " nodes");
  const auto start = std::chrono::steady_clock::now();
  int placed = 0;
  double names = 0;
  for (const PodSpec& pod : arrivals) {
    for (int node = 0; node < size; ++node) names += cluster.InTreeFits(node, pod) ? 1 : 0;
    auto result = (*placer)->Place(cluster, pod);
    if (!result) return WithContext(result.error(), std::to_string(size) + " nodes");
    if (*result) ++placed;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const nlohmann::json verbs = VerbFigures((*placer)->VerbLatenciesMs(), size, cdfs);
  if (!options.quiet) {
    std::fprintf(
        stderr,
        "latency %5d nodes: %zu pods (%d placed) in %.1f s; filter p50 %.3f ms p99 "
        "%.3f ms; prioritize p50 %.3f ms p99 %.3f ms; bind p50 %.3f ms\n",
        size, arrivals.size(), placed, seconds, verbs["filter"]["p50_ms"].get<double>(),
        verbs["filter"]["p99_ms"].get<double>(), verbs["prioritize"]["p50_ms"].get<double>(),
        verbs["prioritize"]["p99_ms"].get<double>(), verbs["bind"]["p50_ms"].get<double>());
  }
  nlohmann::json row = {{"policy", "linkfit"},
                        {"nodes", size},
                        {"cluster_gpus", cluster.total_gpus()},
                        {"pods", arrivals.size()},
                        {"placed", placed},
                        {"mean_names_per_filter",
                         arrivals.empty() ? 0.0 : names / static_cast<double>(arrivals.size())},
                        {"verbs", verbs},
                        {"seconds", seconds}};
  // Flat copies for the report's table.
  for (const char* verb : {"filter", "prioritize", "bind"}) {
    for (const char* figure : {"p50_ms", "p99_ms"}) {
      row[std::string(verb) + "_" + figure] = verbs[verb][figure];
    }
  }
  return row;
}

}  // namespace

Result<nlohmann::json> RunLatencyExperiment(const BenchOptions& given) {
  BenchOptions options = given;
  if (options.baseline_mode.empty()) options.baseline_mode = "kube";
  const std::string trace_dir = options.trace_dir.empty()
                                    ? options.repo_root + "/../shared/traces/alibaba-gpu-2023"
                                    : options.trace_dir;
  auto node_records = LoadOpenbNodes(trace_dir + "/openb_node_list_gpu_node.csv");
  if (!node_records) return tl::unexpected(node_records.error());
  auto records = LoadOpenbPods(trace_dir + "/openb_pod_list_" + options.workload + ".csv");
  if (!records) return tl::unexpected(records.error());
  std::vector<NodeRecord> gpu_nodes;
  for (const NodeRecord& node : *node_records) {
    if (node.gpu_count > 0) gpu_nodes.push_back(node);
  }
  if (gpu_nodes.empty()) return MakeError(trace_dir + ": no GPU node");
  const std::vector<PodSpec> trace = ToPodSpecs(*records);
  const std::uint64_t seed = options.seeds.front();
  const std::size_t pods_per_size =
      options.max_pods > 0 ? options.max_pods : static_cast<std::size_t>(options.jobs);

  nlohmann::json results = nlohmann::json::array();
  std::vector<Series> cdfs;
  for (const int size : {1000, 5000}) {
    auto row = ReplayAtSize(size, gpu_nodes, trace, pods_per_size, options, cdfs);
    if (!row) return tl::unexpected(row.error());
    results.push_back(std::move(*row));
  }
  const std::string csv = options.out_dir + "/verb_latency_cdf.csv";
  auto written = WriteSeriesCsv(csv, "round_trip_ms", cdfs);
  if (!written) return tl::unexpected(written.error());
  Plot plot{"Extender round trips during replay (CDF; left is better)",
            "round trip (ms)",
            "fraction of requests",
            csv,
            options.out_dir + "/verb_latency_cdf.svg",
            cdfs.size(),
            "set key bottom right\nset logscale x\nset yrange [0:1]\n",
            true};
  PlotLines(plot);
  return nlohmann::json{
      {"experiment", "latency"},
      {"workload", options.workload},
      {"seed", seed},
      {"pods_per_size", pods_per_size},
      {"results", results},
      {"plots", {"verb_latency_cdf.svg"}},
      {"reading",
       {"Round trips seen by the replaying client (loopback, keep-alive, one request in flight), "
        "with the client and linkfit serve sharing the machine's CPUs. DESIGN.md §11 targets "
        "(filter/prioritize p50 <= 0.15 ms / p99 <= 1 ms at 1,000 names, p50 <= 0.6 ms / p99 <= "
        "2 ms at 5,000) are measured under controlled conditions by linkfit-load "
        "(bench/load); this experiment shows what a replay sees."}}};
}

}  // namespace linkfit::bench
