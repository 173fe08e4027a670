// linkfit-bench: the trace-replay harness (issue 4). A thin CLI over the experiments.

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/flags.h"
#include "harness/experiment.h"
#include "harness/report.h"
#include "linkfit/common/strings.h"

namespace {

constexpr const char* kUsage = R"(usage: linkfit-bench EXPERIMENT [options]

experiments:
  fgd        the FGD paper's protocol on Alibaba openb (130 % demand, no departures)
  topology   mixed-topology cluster under Philly-shaped multi-GPU demand, with departures
  mig        MIG-profile demand on MIG-capable nodes (first-fit, best-fit, random, linkfit)
  latency    extender verb latency at 1,000 and 5,000 nodes, collected during replay
  whole-machines  small random clusters: do small pods leave the whole machines big pods need?
             (against an exact oracle; linkfit under each policy.whole_machines setting)
  nic        NIC-bearing machines under the 2025 trace's GPU + NIC-share pods and Philly training
             pods with one NIC per GPU: GPU-NIC alignment (linkfit, gpu-only-linkfit, numa-only,
             pcie-root, random)

options:
  --trace DIR          trace folder (default: ../shared/traces/<experiment's trace>; nic: the
                       folder holding alibaba-gpu-2025/ and philly/, default ../shared/traces)
  --workload NAME      openb pod list variant for fgd (default: default)
  --seeds LIST         e.g. 42-51 or 1,5,9 (default: 42)
  --policies LIST      comma-separated: linkfit,default-scheduler,random,dotprod,clustering,
                       packing,bestfit,fgd (default: all of them that apply)
  --out DIR            output folder (default: out)
  --linkfit PATH       linkfit binary (default: build/release/src/app/linkfit)
  --linkfit-config F   config for linkfit serve (default: a generated one with defaults)
  --weight N           the extender's kube-scheduler weight (default: 1, as shipped)
  --in-tree SCORE      least | most | none: in-tree score added to linkfit's (default: least)
  --percentage-of-nodes-to-score P   sample of feasible nodes sent to linkfit (default: 100)
  --demand PCT         arrived demand to stop at, fgd (default: 130)
  --max-pods N         replay at most N pods per seed (smoke tests)
  --baseline-mode M    paper | kube: baselines as in the FGD paper's simulator (ties to the
                       first best node of a seeded node permutation, fgd's integer sigmoid
                       score) or as under kube-scheduler (seeded random tie-break, exact scores).
                       Default: paper for fgd, kube for the other experiments
  --nodes-per-group N  topology, nic: nodes of each of the five topologies; mig: of DGX A100
                       and of DGX H100 (default: 8)
  --jobs N             topology: Philly-shaped jobs per seed; mig, nic: pods per seed; latency:
                       pods per cluster size (default: 2000)
  --load PCT           topology, mig, nic: offered load in % of GPU capacity (default: 90)
  --train-share PCT    nic: share of the offered GPU-time from training pods (default: 50)
  --comm-share PCT     topology: communication share of a step, slowdown model (default: 30)
  --cases N            whole-machines: random clusters per family and seed (default: 40)
  --whole-machines L   linkfit's policy.whole_machines (keep | ring | off) written into its
                       config; whole-machines: a list, each setting a policy row (default:
                       ring,keep,off); other experiments: one setting (default: the config's)
  --quiet              no per-seed progress lines

environment:
  LINKFIT_BENCH_DEBUG=1  print every pod the linkfit policy could not place, and why
)";

// A value in percent, as a fraction, when it lies in [min, max].
std::function<bool(const std::string&)> Percent(double* out, std::int64_t min, std::int64_t max) {
  return [out, min, max](const std::string& value) {
    const auto number = linkfit::ParseInt(value);
    if (!number || *number < min || *number > max) return false;
    *out = static_cast<double>(*number) / 100.0;
    return true;
  };
}

// One of `allowed`.
std::function<bool(const std::string&)> OneOf(std::string* out, std::vector<std::string> allowed) {
  return [out, allowed = std::move(allowed)](const std::string& value) {
    if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) return false;
    *out = value;
    return true;
  };
}

// The options after the experiment's name (argv[2] on).
linkfit::Result<void> ParseFlags(int argc, char** argv, linkfit::bench::BenchOptions* options) {
  linkfit::bench::BenchOptions& o = *options;
  std::string seeds_error;
  std::int64_t max_pods = static_cast<std::int64_t>(o.max_pods);
  linkfit::bench::Flags flags;
  flags.Switch("--quiet", &o.quiet)
      .String("--trace", &o.trace_dir)
      .String("--workload", &o.workload)
      .Value("--seeds",
             [&](const std::string& value) {
               auto seeds = linkfit::bench::ParseSeeds(value);
               if (!seeds) seeds_error = seeds.error().message;
               if (seeds) o.seeds = *seeds;
               return seeds.has_value();
             })
      .Value("--policies",
             [&o](const std::string& value) {
               o.policies.clear();
               for (std::string_view policy : linkfit::Split(value, ',')) {
                 if (!linkfit::Trim(policy).empty()) o.policies.emplace_back(linkfit::Trim(policy));
               }
               return true;
             })
      .String("--out", &o.out_dir)
      .String("--linkfit", &o.linkfit_binary)
      .String("--linkfit-config", &o.linkfit_config)
      .Int("--weight", &o.extender_weight, 0)
      .Value("--in-tree", OneOf(&o.in_tree_score, {"least", "most", "none"}))
      .Int("--percentage-of-nodes-to-score", &o.percentage_of_nodes_to_score, 1, 100)
      .Value("--demand", Percent(&o.demand_limit, 1, 1000))
      .Int("--nodes-per-group", &o.nodes_per_group, 1, 1000)
      .Int("--jobs", &o.jobs, 1, 1000000)
      .Value("--load", Percent(&o.load, 1, 500))
      .Value("--comm-share", Percent(&o.comm_share, 0, 100))
      .Value("--train-share", Percent(&o.train_share, 0, 100))
      .Value("--baseline-mode", OneOf(&o.baseline_mode, {"paper", "kube"}))
      .Int("--cases", &o.cases, 1, 100000)
      .Value("--whole-machines",
             [&o](const std::string& value) {
               o.linkfit_whole_machines = value;
               return !value.empty();
             })
      .Int64("--max-pods", &max_pods, 0);
  auto parsed = flags.Parse(argc, argv, 2);
  if (!parsed) {
    // A bad seed list says what is wrong with it.
    if (!seeds_error.empty()) return linkfit::MakeError("bad option --seeds: " + seeds_error);
    return parsed;
  }
  o.max_pods = static_cast<std::size_t>(max_pods);
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  using linkfit::bench::BenchOptions;
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  BenchOptions options;
  options.experiment = argv[1];
  std::string command_line = "linkfit-bench";
  for (int i = 1; i < argc; ++i) command_line += std::string(" ") + argv[i];
  if (auto parsed = ParseFlags(argc, argv, &options); !parsed) {
    std::fprintf(stderr, "linkfit-bench: %s\n%s", parsed.error().message.c_str(),
                 parsed.error().message.starts_with("bad option --seeds") ? "" : kUsage);
    return 2;
  }
  const std::string& setting = options.linkfit_whole_machines;
  if (options.experiment != "whole-machines" && !setting.empty() && setting != "keep" &&
      setting != "ring" && setting != "off") {
    std::fprintf(stderr, "linkfit-bench: --whole-machines takes keep, ring or off here\n");
    return 2;
  }
  mkdir(options.out_dir.c_str(), 0755);

  linkfit::Result<nlohmann::json> summary = linkfit::MakeError("");
  if (options.experiment == "fgd") {
    summary = linkfit::bench::RunFgdExperiment(options);
  } else if (options.experiment == "topology") {
    summary = linkfit::bench::RunTopologyExperiment(options);
  } else if (options.experiment == "mig") {
    summary = linkfit::bench::RunMigExperiment(options);
  } else if (options.experiment == "latency") {
    summary = linkfit::bench::RunLatencyExperiment(options);
  } else if (options.experiment == "whole-machines") {
    summary = linkfit::bench::RunWholeMachinesExperiment(options);
  } else if (options.experiment == "nic") {
    summary = linkfit::bench::RunNicExperiment(options);
  } else {
    std::fprintf(stderr, "linkfit-bench: unknown experiment '%s'\n%s", options.experiment.c_str(),
                 kUsage);
    return 2;
  }
  if (!summary) {
    std::fprintf(stderr, "linkfit-bench %s: %s\n", options.experiment.c_str(),
                 summary.error().message.c_str());
    return 1;
  }
  (*summary)["command"] = command_line;
  auto written = linkfit::bench::WriteSummary(options.out_dir, *summary);
  if (written) written = linkfit::bench::WriteReport(options.out_dir, *summary, command_line);
  if (!written) {
    std::fprintf(stderr, "linkfit-bench: %s\n", written.error().message.c_str());
    return 1;
  }
  std::printf("%s\n", (*summary)["results"].dump(2).c_str());
  std::printf("wrote %s/summary.json and %s/report.md\n", options.out_dir.c_str(),
              options.out_dir.c_str());
  return 0;
}
