// `linkfit-bench whole-machines`: do small pods leave the whole machines big pods need? (issue 35)
//
// Per seed and scenario family, --cases random small clusters (whole_machines_cases.h) with an
// oracle's answer (whole_machines_oracle.h: exact) of how many of the case's big pods could be
// placed beside all of its small pods. Every policy replays every case from the same start:
// small pods first, then big ones, no departures, each pod placed at once or never.
//
// Policies: linkfit over HTTP through the kube-scheduler pipeline (extender_placer.cc), once per
// setting of policy.whole_machines (--whole-machines, default ring,keep,off), a fresh
// `linkfit serve` per case (it learns the running pods from the cluster file and each arriving
// pod from its filter call, as in production); bestfit (the FGD paper's best fit: the least free
// CPU and GPU after the pod, i.e. MostAllocated over both), default-scheduler (NodeResourcesFit
// LeastAllocated, kube-scheduler's default), fgd (FGD's fragmentation over the case's own pod
// shapes) and random, with kube-scheduler's random tie-break. The baselines know no closeness:
// a pod that requires `nvlink` is kept off nodes where no all-NVLink set of its size is free (a
// nodeAffinity to NVLink machines would do that), and takes such a set when go-gpuallocator's
// choice is not one. fgd has no MIG measure: its MIG pods score alike everywhere (best-fit slot).
//
// Output: families.csv (the table below), cases.csv (every case and policy), summary.json.
// Figures per family and policy: big pods placed (on a set meeting their closeness) against the
// oracle's; small pods placed; the small 2-GPU pods' ring bandwidth, how many got the best ring
// any node offered at that moment, and how many small pods opened an idle machine.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>

#include "harness/experiment.h"
#include "harness/whole_machines_cases.h"
#include "linkfit/common/strings.h"

namespace linkfit::bench {
namespace {

// An all-NVLink set of `k` idle GPUs on the node (the best ring among them), or 0.
GpuMask BestNvlinkSet(const SimNode& node, int k) {
  if (!node.topology) return 0;
  const unsigned idle = node.IdleGpus();
  GpuMask best = 0;
  std::uint32_t best_ring = 0;
  for (unsigned set = idle; set != 0; set = (set - 1) & idle) {
    if (std::popcount(set) != k || !node.topology->RingAllNvlink(static_cast<GpuMask>(set))) {
      continue;
    }
    const std::uint32_t ring = node.topology->RingMbps(static_cast<GpuMask>(set));
    if (best == 0 || ring > best_ring) {
      best = static_cast<GpuMask>(set);
      best_ring = ring;
    }
  }
  return best;
}

// A baseline with the two additions the header describes.
class ConstrainedBaseline : public Policy {
 public:
  explicit ConstrainedBaseline(PolicyPtr inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  NodeChoice Evaluate(const Cluster& cluster, int node, const PodSpec& pod) const override {
    NodeChoice choice = inner_->Evaluate(cluster, node, pod);
    if (pod.demand == GpuDemand::kMig && !choice.feasible) {
      choice.placement = DefaultDeviceChoice(cluster, node, pod);
      choice.feasible = choice.placement.node >= 0;
      choice.score = 0;
    }
    if (!choice.feasible || !pod.closeness_required || pod.gpu_count < 2) return choice;
    const SimNode& n = cluster.node(node);
    if (n.topology && n.topology->RingAllNvlink(choice.placement.gpus)) return choice;
    const GpuMask set = BestNvlinkSet(n, pod.gpu_count);
    choice.feasible = set != 0;
    choice.placement.gpus = set;
    return choice;
  }

 private:
  PolicyPtr inner_;
};

struct Tally {
  int cases = 0;
  int cases_all_placeable = 0;
  int big = 0;
  int big_oracle = 0;
  int big_placed = 0;
  int big8 = 0, big8_placed = 0, big4 = 0, big4_placed = 0, big7g = 0, big7g_placed = 0;
  int small = 0;
  int small_placed = 0;
  int small2 = 0;
  double small2_ring_gbps = 0;  // sum
  int small2_best_ring = 0;
  int small_opened_idle = 0;
  int cases_short = 0;  // cases where the policy placed fewer big pods than the oracle
  double seconds = 0;
};

bool WholeIdle(const SimNode& node) {
  if (node.IdleGpuCount() != node.gpu_count) return false;
  for (int g = 0; g < node.gpu_count; ++g) {
    if (node.mig_slices_used[static_cast<std::size_t>(g)] != 0) return false;
  }
  return true;
}

// Replays one case under one policy; adds its figures to `tally`.
Result<void> Replay(const std::string& policy, const std::string& setting, std::uint64_t seed,
                    const WholeMachinesCase& the_case, const BenchOptions& options, Tally& tally) {
  Cluster cluster = the_case.cluster;
  std::vector<PodSpec> pods = the_case.small;
  pods.insert(pods.end(), the_case.big.begin(), the_case.big.end());
  PlacerPtr placer;
  if (policy == "linkfit") {
    BenchOptions with = options;
    with.linkfit_whole_machines = setting;
    auto made = MakePlacer("linkfit", seed, pods, cluster, with);
    if (!made) return tl::unexpected(made.error());
    placer = std::move(*made);
  } else {
    auto baseline = MakeBaseline(policy, pods, /*integer_scores=*/false);
    if (!baseline) return tl::unexpected(baseline.error());
    placer = std::make_unique<PolicyPlacer>(
        std::make_unique<ConstrainedBaseline>(std::move(*baseline)), seed, TieBreak::kRandom);
  }
  const bool debug = std::getenv("LINKFIT_BENCH_DEBUG") != nullptr;
  if (debug) {
    for (const Cluster::Preloaded& item : cluster.preloaded()) {
      std::fprintf(stderr, "running: %s on %s gpus 0x%x mig %s %d@%d\n", item.pod.name.c_str(),
                   cluster.node(item.placement.node).name.c_str(),
                   static_cast<unsigned>(item.placement.gpus), item.pod.mig_profile.c_str(),
                   item.placement.mig_gpu, item.placement.mig_start);
    }
  }
  const auto start = std::chrono::steady_clock::now();
  int big_placed = 0;
  for (std::size_t i = 0; i < pods.size(); ++i) {
    const PodSpec& pod = pods[i];
    const bool big = i >= the_case.small.size();
    std::vector<bool> idle_before;
    std::uint32_t best_ring = 0;
    for (const SimNode& node : cluster.nodes()) {
      idle_before.push_back(WholeIdle(node));
      if (!big && pod.gpu_count == 2 && pod.demand == GpuDemand::kWhole && node.topology) {
        best_ring = std::max(best_ring, node.topology->BestRingMbps(node.IdleGpus(), 2));
      }
    }
    auto placed = placer->Place(cluster, pod);
    if (!placed) return WithContext(placed.error(), pod.name);
    const bool landed = placed->has_value();
    const SimNode* node = landed ? &cluster.node((*placed)->node) : nullptr;
    if (debug) {
      std::fprintf(stderr, "%s: %s (%d GPUs%s%s) -> %s gpus 0x%x mig %d@%d\n", policy.c_str(),
                   pod.name.c_str(), pod.gpu_count, pod.mig_profile.empty() ? "" : " MIG ",
                   pod.mig_profile.c_str(), landed ? node->name.c_str() : "(none)",
                   landed ? static_cast<unsigned>((*placed)->gpus) : 0u,
                   landed ? (*placed)->mig_gpu : -1, landed ? (*placed)->mig_start : -1);
    }
    if (big) {
      const bool met = landed && (!pod.closeness_required || pod.gpu_count < 2 ||
                                  node->topology->RingAllNvlink((*placed)->gpus));
      if (landed && !met) return MakeError(policy + " placed " + pod.name + " off its closeness");
      const int add = met ? 1 : 0;
      big_placed += add;
      if (pod.demand == GpuDemand::kMig) {
        ++tally.big7g;
        tally.big7g_placed += add;
      } else if (pod.gpu_count == 8) {
        ++tally.big8;
        tally.big8_placed += add;
      } else {
        ++tally.big4;
        tally.big4_placed += add;
      }
      continue;
    }
    ++tally.small;
    if (!landed) continue;
    ++tally.small_placed;
    if (idle_before[static_cast<std::size_t>((*placed)->node)]) ++tally.small_opened_idle;
    if (pod.demand == GpuDemand::kWhole && pod.gpu_count == 2) {
      const std::uint32_t ring = node->topology->RingMbps((*placed)->gpus);
      ++tally.small2;
      tally.small2_ring_gbps += ring / 1000.0;
      if (ring >= best_ring) ++tally.small2_best_ring;
    }
  }
  tally.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++tally.cases;
  if (the_case.oracle_big == static_cast<int>(the_case.big.size())) ++tally.cases_all_placeable;
  tally.big += static_cast<int>(the_case.big.size());
  tally.big_oracle += std::max(0, the_case.oracle_big);
  tally.big_placed += big_placed;
  if (big_placed < the_case.oracle_big) ++tally.cases_short;
  return {};
}

double Ratio(int a, int b) { return b > 0 ? static_cast<double>(a) / b : 0.0; }

nlohmann::json Row(const std::string& family, const std::string& label, const Tally& t) {
  return {{"family", family},
          {"policy", label},
          {"cases", t.cases},
          {"cases_all_placeable", t.cases_all_placeable},
          {"big_pods", t.big},
          {"big_oracle", t.big_oracle},
          {"big_placed", t.big_placed},
          {"big_share_of_oracle", Ratio(t.big_placed, t.big_oracle)},
          {"cases_short_of_oracle", t.cases_short},
          {"big8_placed", std::to_string(t.big8_placed) + "/" + std::to_string(t.big8)},
          {"big4_placed", std::to_string(t.big4_placed) + "/" + std::to_string(t.big4)},
          {"big7g_placed", std::to_string(t.big7g_placed) + "/" + std::to_string(t.big7g)},
          {"small_placed", Ratio(t.small_placed, t.small)},
          {"small2_pods", t.small2},
          {"small2_mean_ring_gbps", t.small2 > 0 ? t.small2_ring_gbps / t.small2 : 0.0},
          {"small2_best_ring_rate", Ratio(t.small2_best_ring, t.small2)},
          {"small_opened_idle", t.small_opened_idle},
          {"seconds", t.seconds}};
}

// linkfit's whole-machines settings to compare (--whole-machines; default ring, keep and off).
Result<std::vector<std::string>> WholeMachineSettings(const BenchOptions& options) {
  std::vector<std::string> settings;
  const std::string setting_list =
      options.linkfit_whole_machines.empty() ? "ring,keep,off" : options.linkfit_whole_machines;
  for (std::string_view s : Split(setting_list, ',')) {
    if (s != "ring" && s != "keep" && s != "off") {
      return MakeError("--whole-machines takes ring, keep and off, not '" + std::string(s) + "'");
    }
    settings.emplace_back(s);
  }
  return settings;
}

// families.csv: the table of results, one row per family and policy, in a fixed column order.
Result<void> WriteFamiliesCsv(const std::string& path, const nlohmann::json& results) {
  const std::vector<std::string> columns = {"family",
                                            "policy",
                                            "cases",
                                            "cases_all_placeable",
                                            "big_pods",
                                            "big_oracle",
                                            "big_placed",
                                            "big_share_of_oracle",
                                            "cases_short_of_oracle",
                                            "big8_placed",
                                            "big4_placed",
                                            "big7g_placed",
                                            "small_placed",
                                            "small2_pods",
                                            "small2_mean_ring_gbps",
                                            "small2_best_ring_rate",
                                            "small_opened_idle"};
  std::ofstream families_csv(path);
  for (std::size_t i = 0; i < columns.size(); ++i) families_csv << (i ? "," : "") << columns[i];
  families_csv << '\n';
  for (const nlohmann::json& row : results) {
    for (std::size_t i = 0; i < columns.size(); ++i) {
      const nlohmann::json& value = row[columns[i]];
      families_csv << (i ? "," : "")
                   << (value.is_string() ? value.get<std::string>() : value.dump());
    }
    families_csv << '\n';
  }
  if (!families_csv) return MakeError(path + ": write failed");
  return {};
}

}  // namespace

Result<nlohmann::json> RunWholeMachinesExperiment(const BenchOptions& given) {
  BenchOptions options = given;
  options.baseline_mode = "kube";
  std::vector<std::string> policies = options.policies;
  if (policies.empty()) policies = {"linkfit", "bestfit", "default-scheduler", "fgd", "random"};
  auto settings = WholeMachineSettings(options);
  if (!settings) return tl::unexpected(settings.error());
  auto catalog = LoadMachineCatalog(options.repo_root);
  if (!catalog) return tl::unexpected(catalog.error());

  // Policy labels in report order: linkfit once per setting.
  std::vector<std::pair<std::string, std::string>> runs;  // (policy, setting)
  for (const std::string& policy : policies) {
    if (policy == "linkfit") {
      for (const std::string& setting : *settings) runs.emplace_back(policy, setting);
    } else {
      runs.emplace_back(policy, "");
    }
  }
  auto label = [](const std::pair<std::string, std::string>& run) {
    return run.second.empty() ? run.first : run.first + " (" + run.second + ")";
  };

  std::ofstream cases_csv(options.out_dir + "/cases.csv");
  cases_csv << "family,seed,case,machines,small_pods,big_pods,big_oracle,policy,big_placed\n";
  nlohmann::json results = nlohmann::json::array();
  nlohmann::json targets = nlohmann::json::array();
  for (const WholeMachinesFamily family : kWholeMachinesFamilies) {
    std::vector<Tally> tallies(runs.size());
    for (const std::uint64_t seed : options.seeds) {
      const auto family_number = static_cast<std::uint64_t>(static_cast<int>(family));
      std::mt19937_64 rng(seed * std::uint64_t{1000003} + family_number * std::uint64_t{7919});
      for (int c = 0; c < options.cases; ++c) {
        auto the_case = DrawCase(family, *catalog, rng);
        if (!the_case) return WithContext(the_case.error(), FamilyName(family));
        for (std::size_t r = 0; r < runs.size(); ++r) {
          const int before = tallies[r].big_placed;
          auto replayed =
              Replay(runs[r].first, runs[r].second, seed * 1000 + static_cast<std::uint64_t>(c),
                     *the_case, options, tallies[r]);
          if (!replayed) {
            return WithContext(replayed.error(), std::string(FamilyName(family)) + " seed " +
                                                     std::to_string(seed) + " case " +
                                                     std::to_string(c) + " " + label(runs[r]));
          }
          cases_csv << FamilyName(family) << ',' << seed << ',' << c << ','
                    << the_case->cluster.nodes().size() << ',' << the_case->small.size() << ','
                    << the_case->big.size() << ',' << the_case->oracle_big << ',' << label(runs[r])
                    << ',' << tallies[r].big_placed - before << '\n';
        }
      }
      if (!options.quiet) {
        std::fprintf(stderr, "whole-machines %-14s seed %3llu: %d cases\n", FamilyName(family),
                     static_cast<unsigned long long>(seed), options.cases);
      }
    }
    int bestfit_placed = -1;
    for (std::size_t r = 0; r < runs.size(); ++r) {
      if (runs[r].first == "bestfit") bestfit_placed = tallies[r].big_placed;
    }
    for (std::size_t r = 0; r < runs.size(); ++r) {
      results.push_back(Row(FamilyName(family), label(runs[r]), tallies[r]));
      if (ServesAsWell(family) && runs[r].first == "linkfit") {
        const double share = Ratio(tallies[r].big_placed, tallies[r].big_oracle);
        targets.push_back(
            {{"family", FamilyName(family)},
             {"policy", label(runs[r])},
             {"big_share_of_oracle", share},
             {"at_least_99_percent", share >= 0.99},
             {"not_below_bestfit", bestfit_placed < 0 || tallies[r].big_placed >= bestfit_placed}});
      }
    }
  }
  if (!cases_csv) return MakeError(options.out_dir + "/cases.csv: write failed");
  if (auto written = WriteFamiliesCsv(options.out_dir + "/families.csv", results); !written) {
    return tl::unexpected(written.error());
  }
  return nlohmann::json{
      {"experiment", "whole-machines"},
      {"seeds", options.seeds},
      {"cases_per_family_and_seed", options.cases},
      {"families",
       {{"mig-a100", "as well"},
        {"used-nvswitch", "as well"},
        {"workstations", "worse"},
        {"other-kinds", "worse"},
        {"mig-a100-h100", "worse"}}},
      {"results", results},
      {"targets", targets},
      {"reading",
       {"Families: partly used machines serve the small pods as well (mig-a100, used-nvswitch) "
        "or worse (workstations, other-kinds, mig-a100-h100); bench/harness/"
        "whole_machines_cases.h.",
        "big_oracle: the most big pods an exact search could place beside every small pod, "
        "summed over cases; big_share_of_oracle = big_placed / big_oracle. small2_*: the small "
        "2-GPU pods' ring (GB/s) and how many got the best ring any node offered then; "
        "small_opened_idle: small pods placed on a machine that was idle.",
        "Target (issue 35): where partly used machines serve the small pods as well, linkfit "
        "places >= 99 % of the big pods the oracle could place and never fewer than bestfit."}}};
}

}  // namespace linkfit::bench
