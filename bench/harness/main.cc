// linkfit-bench: the trace-replay harness (issue 4). A thin CLI over the experiments.

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <string>

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

options:
  --trace DIR          trace folder (default: ../shared/traces/<experiment's trace>)
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
  --nodes-per-group N  topology: nodes of each of the five topologies; mig: of DGX A100 and of
                       DGX H100 (default: 8)
  --jobs N             topology: Philly-shaped jobs per seed; mig: pods per seed; latency: pods
                       per cluster size (default: 2000)
  --load PCT           topology, mig: offered load in % of GPU capacity (default: 90)
  --comm-share PCT     topology: communication share of a step, slowdown model (default: 30)
  --cases N            whole-machines: random clusters per family and seed (default: 40)
  --whole-machines L   linkfit's policy.whole_machines (keep | ring | off) written into its
                       config; whole-machines: a list, each setting a policy row (default:
                       ring,keep,off); other experiments: one setting (default: the config's)
  --quiet              no per-seed progress lines

environment:
  LINKFIT_BENCH_DEBUG=1  print every pod the linkfit policy could not place, and why
)";

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
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--quiet") {
      options.quiet = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "linkfit-bench: %s needs a value\n%s", flag.c_str(), kUsage);
      return 2;
    }
    const std::string value = argv[++i];
    auto number = linkfit::ParseInt(value);
    if (flag == "--trace") {
      options.trace_dir = value;
    } else if (flag == "--workload") {
      options.workload = value;
    } else if (flag == "--seeds") {
      auto seeds = linkfit::bench::ParseSeeds(value);
      if (!seeds) {
        std::fprintf(stderr, "linkfit-bench: %s\n", seeds.error().message.c_str());
        return 2;
      }
      options.seeds = *seeds;
    } else if (flag == "--policies") {
      options.policies.clear();
      for (std::string_view policy : linkfit::Split(value, ',')) {
        if (!linkfit::Trim(policy).empty()) options.policies.emplace_back(linkfit::Trim(policy));
      }
    } else if (flag == "--out") {
      options.out_dir = value;
    } else if (flag == "--linkfit") {
      options.linkfit_binary = value;
    } else if (flag == "--linkfit-config") {
      options.linkfit_config = value;
    } else if (flag == "--weight" && number && *number >= 0) {
      options.extender_weight = static_cast<int>(*number);
    } else if (flag == "--in-tree" && (value == "least" || value == "most" || value == "none")) {
      options.in_tree_score = value;
    } else if (flag == "--percentage-of-nodes-to-score" && number && *number > 0 &&
               *number <= 100) {
      options.percentage_of_nodes_to_score = static_cast<int>(*number);
    } else if (flag == "--demand" && number && *number > 0 && *number <= 1000) {
      options.demand_limit = static_cast<double>(*number) / 100.0;
    } else if (flag == "--nodes-per-group" && number && *number > 0 && *number <= 1000) {
      options.nodes_per_group = static_cast<int>(*number);
    } else if (flag == "--jobs" && number && *number > 0 && *number <= 1000000) {
      options.jobs = static_cast<int>(*number);
    } else if (flag == "--load" && number && *number > 0 && *number <= 500) {
      options.load = static_cast<double>(*number) / 100.0;
    } else if (flag == "--comm-share" && number && *number >= 0 && *number <= 100) {
      options.comm_share = static_cast<double>(*number) / 100.0;
    } else if (flag == "--baseline-mode" && (value == "paper" || value == "kube")) {
      options.baseline_mode = value;
    } else if (flag == "--cases" && number && *number > 0 && *number <= 100000) {
      options.cases = static_cast<int>(*number);
    } else if (flag == "--whole-machines" && !value.empty()) {
      options.linkfit_whole_machines = value;
    } else if (flag == "--max-pods" && number && *number >= 0) {
      options.max_pods = static_cast<std::size_t>(*number);
    } else {
      std::fprintf(stderr, "linkfit-bench: bad option %s %s\n%s", flag.c_str(), value.c_str(),
                   kUsage);
      return 2;
    }
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
