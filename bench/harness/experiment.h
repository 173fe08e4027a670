#pragma once

// The experiments `linkfit-bench` runs (issue 4 §2). Each writes its CSV series and plots under
// `options.out_dir` and returns the summary object that becomes OUT/summary.json:
//   {"experiment": "...", "results": [{"policy": "...", ...figures...}, ...], ...}
//
// Thread-safety: each call owns its clusters and placers; calls may not share an out_dir.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/scheduler.h"
#include "linkfit/common/result.h"

namespace linkfit::bench {

struct BenchOptions {
  std::string experiment;
  std::string repo_root = ".";
  std::string trace_dir;  // empty: the experiment's default under ../shared/traces
  std::string workload = "default";
  std::vector<std::uint64_t> seeds = {42};
  std::vector<std::string> policies;  // empty: the experiment's default set
  std::string out_dir = "out";
  std::string linkfit_binary = "build/release/src/app/linkfit";
  std::string linkfit_config;  // empty: a generated config with defaults only
  // keep | ring | off: linkfit's policy.whole_machines, written into the config it is started
  // with (a copy of linkfit_config); empty: as the config says.
  std::string linkfit_whole_machines;
  // aligned | rate: linkfit's policy.nic_alignment, written likewise; empty: as the config says.
  std::string linkfit_nic_alignment;
  int extender_weight = 1;              // kube-scheduler's `weight` for the extender (config/)
  std::string in_tree_score = "least";  // least | most | none: the in-tree score beside linkfit
  int percentage_of_nodes_to_score = 100;
  double demand_limit = 1.3;
  // How baselines behave (linkfit always goes through kube-scheduler's pipeline):
  //   "paper": as in the FGD paper's simulator: ties go to the first best node in a seeded node
  //            permutation, and fgd reports floor(100 x sigmoid(decrease)) (default for fgd);
  //   "kube":  kube-scheduler's selectHost (seeded random among the best), exact scores
  //            (default for topology).
  //   Empty: the experiment's default.
  std::string baseline_mode;
  // topology experiment
  int nodes_per_group = 8;  // nodes of each of the five topologies
  int jobs = 2000;          // Philly-shaped jobs per seed
  double load = 0.9;        // offered load (GPU-time / capacity)
  double comm_share = 0.3;  // slowdown model: communication share of a step on the ideal ring
  // nic experiment: the share of the offered GPU-time that comes from multi-GPU training pods
  double train_share = 0.5;
  std::size_t max_pods = 0;  // 0 = no cap (the smoke test caps)
  // whole-machines experiment: random small clusters per scenario family and seed
  int cases = 40;
  bool quiet = false;
};

// Parses "42-51" or "1,2,5" or "7".
Result<std::vector<std::uint64_t>> ParseSeeds(const std::string& text);

// Builds the placer for a policy name ("linkfit" or a baseline). `trace` is the workload's pod
// list (fgd's typical shapes); `cluster` is the simulator's cluster in its initial state (the
// linkfit placer writes it out as the server's cluster file).
Result<PlacerPtr> MakePlacer(const std::string& policy, std::uint64_t seed,
                             const std::vector<PodSpec>& trace, const Cluster& cluster,
                             const BenchOptions& options);

// Who chooses the RDMA NICs of the pods that ask for some, under a placer that runs linkfit.
enum class NicChooser {
  kNone,     // no pod asks for NICs (one that does is an error)
  kLinkfit,  // linkfit: the pod asks it for NICs, which are read back from its allocation record
             // (the server keeps a state file of every record)
  kKubelet,  // the pod goes to linkfit without its NIC request; the kubelet's rule picks the NICs
             // on the node linkfit chose (nic_placement.h, KubeletNics)
};

// The `linkfit` policy: a real `linkfit serve` started on `cluster` (extender_placer.cc).
Result<PlacerPtr> MakeExtenderPlacer(std::uint64_t seed, const Cluster& cluster,
                                     const BenchOptions& options,
                                     NicChooser nics = NicChooser::kNone);

Result<nlohmann::json> RunFgdExperiment(const BenchOptions& options);
Result<nlohmann::json> RunTopologyExperiment(const BenchOptions& options);
Result<nlohmann::json> RunMigExperiment(const BenchOptions& options);
Result<nlohmann::json> RunLatencyExperiment(const BenchOptions& options);
Result<nlohmann::json> RunWholeMachinesExperiment(const BenchOptions& options);
Result<nlohmann::json> RunNicExperiment(const BenchOptions& options);

// Keys of linkfit's `policy` block and their values, e.g. {"whole_machines", "keep"}.
using PolicySettings = std::vector<std::pair<std::string, std::string>>;

// The config `linkfit serve` runs with: `base` (a config file's text; empty: defaults) with
// each of `settings` set in its policy block (replacing the base's), relative paths resolved
// against `base_dir`, and mig_profiles_dir defaulting to `default_mig_dir`. Fails on a base whose
// `policy` is not a block mapping.
Result<std::string> DeriveLinkfitConfig(const std::string& base, const std::string& base_dir,
                                        const PolicySettings& settings,
                                        const std::string& default_mig_dir);

}  // namespace linkfit::bench
