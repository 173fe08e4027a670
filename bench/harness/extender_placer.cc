// The `linkfit` policy: the simulator plays kube-scheduler against a real `linkfit serve` over
// HTTP, in the exact wire format of ../shared/spec/extender-protocol.md (nodeCacheCapable mode):
//
//   in-tree filters (simulator) -> POST /scheduler/filter {"Pod", "Nodes":null, "NodeNames"}
//   -> if >= 2 pass: POST /scheduler/prioritize, total = in-tree score + Score x weight x 10
//   -> seeded tie-break -> POST /scheduler/bind -> GET /inspect/{node} (which devices linkfit
//   gave the pod) -> the simulator applies the same devices to its own cluster.
// Departures: POST /standalone/release {"PodUID"}.
// RDMA NICs (NicChooser::kLinkfit): the pod asks linkfit for them (linkfit.io/rdma or
// linkfit.io/rdma-share), the server keeps a state file, and the NICs are read from the pod's
// allocation record there (nic_placement.h, RecordedNics).
//
// The HTTP calls are wire::ExtenderClient's, as `linkfit demo`'s and `linkfit explain`'s.

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/child_process.h"
#include "common/extender_args.h"
#include "harness/cluster_file.h"
#include "harness/experiment.h"
#include "harness/nic_placement.h"
#include "linkfit/common/strings.h"
#include "linkfit/wire/extender_client.h"
#include "linkfit/wire/scheduling_cycle.h"

namespace linkfit::bench {
namespace {

constexpr const char* kNamespace = "bench";

std::string Quantity(std::int64_t value, const char* suffix) {
  return std::to_string(value) + suffix;
}

// The pod object kube-scheduler would send: resources in requests and limits, linkfit's hints as
// annotations (issue 3's public API). The harness's own, as each tool's pod is: it is built from a
// trace PodSpec, while linkfit-load's (load/workload.h) is a fixed realistic object whose bytes
// its latency figures measured, wire_codec_bench's is the codec figures' corpus, and `linkfit
// demo`'s lives in src/app, which cannot use bench/. `ask_nics`: the pod's NIC request goes in too.
nlohmann::json PodJson(const PodSpec& pod, bool ask_nics) {
  nlohmann::json resources = {{"cpu", Quantity(pod.cpu_milli, "m")},
                              {"memory", Quantity(pod.memory_mib, "Mi")}};
  nlohmann::json annotations = nlohmann::json::object();
  switch (pod.demand) {
    case GpuDemand::kNone:
      break;
    case GpuDemand::kWhole:
      resources["nvidia.com/gpu"] = std::to_string(pod.gpu_count);
      break;
    case GpuDemand::kShare:
      annotations["linkfit.io/gpu-share"] = std::to_string(pod.gpu_milli);
      annotations["linkfit.io/gpus"] = std::to_string(pod.gpu_count);
      break;
    case GpuDemand::kMig:
      resources["nvidia.com/mig-" + pod.mig_profile] = "1";
      break;
  }
  if (ask_nics && pod.nic_count > 0) {
    if (pod.nic_milli == kWholeNicMilli) {
      resources["linkfit.io/rdma"] = std::to_string(pod.nic_count);
    } else {
      // The share resource counts the pod's thousandths of all its NICs, as the kubelet does.
      resources["linkfit.io/rdma-share"] = std::to_string(pod.nic_milli * pod.nic_count);
      if (pod.nic_count != std::max(pod.gpu_count, 1)) {
        annotations["linkfit.io/nics"] = std::to_string(pod.nic_count);
      }
    }
  }
  if (!pod.gpu_models.empty()) {
    std::string models;
    for (const std::string& model : pod.gpu_models) models += (models.empty() ? "" : "|") + model;
    annotations["linkfit.io/gpu-model"] = models;
  }
  if (!pod.closeness.empty()) {
    annotations["linkfit.io/closeness"] = pod.closeness;
    annotations["linkfit.io/closeness-policy"] = pod.closeness_required ? "required" : "preferred";
  }
  return {{"metadata",
           {{"name", pod.name},
            {"namespace", kNamespace},
            {"uid", pod.uid},
            {"annotations", annotations}}},
          {"spec",
           {{"schedulerName", "default-scheduler"},
            {"containers",
             {{{"name", "main"},
               {"image", "bench"},
               {"resources", {{"requests", resources}, {"limits", resources}}}}}}}},
          {"status", {{"phase", "Pending"}}}};
}

// True when object[key] is the string `expected` (without nlohmann's value(), whose string
// overload trips GCC 12's -Wnull-dereference).
bool StringEquals(const nlohmann::json& object, const char* key, const std::string& expected) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() && it->get_ref<const std::string&>() == expected;
}

class ExtenderPlacer : public Placer {
 public:
  ExtenderPlacer(std::uint64_t seed, const BenchOptions& options, NicChooser nics,
                 std::string temp_dir, ChildProcess process)
      : options_(options),
        rng_(seed),
        nics_(nics),
        temp_dir_(std::move(temp_dir)),
        process_(std::move(process)),
        client_("http://127.0.0.1:" + std::to_string(process_.port()), "/scheduler",
                {.connect_seconds = 5, .read_seconds = 30, .write_seconds = 30}) {
    // Each POST's round trip, by verb (the path's last part: filter, prioritize, bind, release).
    client_.set_observer([this](std::string_view method, std::string_view path, double ms) {
      if (method == "POST") latencies_[std::string(path.substr(path.rfind('/') + 1))].push_back(ms);
    });
  }

  ~ExtenderPlacer() override {
    client_.Stop();
    process_.Stop();
    std::error_code ignored;
    std::filesystem::remove_all(temp_dir_, ignored);
  }

  std::string name() const override { return "linkfit"; }

  std::map<std::string, std::vector<double>> VerbLatenciesMs() const override { return latencies_; }

  Result<std::optional<Placement>> Place(Cluster& cluster, const PodSpec& pod) override {
    // In-tree filters, then kube-scheduler's sampling of feasible nodes.
    std::vector<int> feasible;
    const int node_count = static_cast<int>(cluster.nodes().size());
    for (int node = 0; node < node_count; ++node) {
      if (cluster.InTreeFits(node, pod)) feasible.push_back(node);
    }
    if (feasible.empty()) {
      if (debug_) {
        std::fprintf(stderr, "no in-tree feasible node for %s (allocated %lld)\n", pod.name.c_str(),
                     static_cast<long long>(cluster.allocated_gpu_milli()));
      }
      return std::optional<Placement>();
    }
    if (options_.percentage_of_nodes_to_score < 100) {
      const std::size_t keep = std::max<std::size_t>(
          std::min<std::size_t>(feasible.size(), 100),
          feasible.size() * static_cast<std::size_t>(options_.percentage_of_nodes_to_score) / 100);
      feasible.resize(std::min(keep, feasible.size()));
    }
    const std::string pod_json = PodJson(pod, nics_ == NicChooser::kLinkfit).dump();
    std::vector<std::string> names;
    for (int node : feasible) names.push_back(cluster.node(node).name);

    wire::SchedulingCycle cycle(client_);
    const wire::CyclePod cycle_pod{pod_json, pod.name, kNamespace, pod.uid};
    // kube-scheduler's choice: in-tree score + extender score x weight x 10, ties at random.
    const auto choose = [&](const std::vector<std::string>& passed,
                            const std::vector<wire::HostScore>& scores) {
      std::map<std::string, double> extender_score;
      for (const wire::HostScore& entry : scores) {
        extender_score[entry.host] = static_cast<double>(entry.score);
      }
      TieBreaker ties(&rng_);
      std::string chosen = passed.front();
      for (const std::string& name : passed) {
        const SimNode& node = cluster.node(cluster.NodeIndex(name));
        double total = 0;
        if (options_.in_tree_score == "least") total = LeastAllocatedScore(node, pod);
        if (options_.in_tree_score == "most") total = MostAllocatedScore(node, pod);
        auto it = extender_score.find(name);
        if (it != extender_score.end()) total += it->second * options_.extender_weight * 10;
        if (ties.Offer(total)) chosen = name;
      }
      return chosen;
    };
    Result<wire::CycleOutcome> scheduled = cycle.Schedule(cycle_pod, names, choose);
    if (!scheduled) {
      return MakeError(scheduled.error().message +
                       (process_.Alive() ? "" : " (linkfit serve exited)"));
    }
    if (!scheduled->filter.error.empty()) {
      return MakeError("filter Error for pod " + pod.name + ": " + scheduled->filter.error);
    }
    for (const std::string& name : scheduled->filter.passed) {
      if (cluster.NodeIndex(name) < 0) {
        return MakeError("filter returned a node not in the request: " + name);
      }
    }
    if (scheduled->node.empty()) {
      if (debug_) DebugRejection(cluster, pod, scheduled->filter, feasible.size());
      return std::optional<Placement>();
    }
    const std::string& node_name = scheduled->node;
    if (!scheduled->bind_error.empty()) {
      // kube-scheduler would requeue the pod; the replay counts it as not placed.
      ++bind_errors_;
      if (debug_) {
        std::fprintf(stderr, "bind of %s to %s failed: %s\n", pod.name.c_str(), node_name.c_str(),
                     scheduled->bind_error.c_str());
      }
      return std::optional<Placement>();
    }
    const int chosen = cluster.NodeIndex(node_name);
    auto placement = LearnDevices(cluster, chosen, pod);
    if (!placement) return tl::unexpected(placement.error());
    if (auto nics = AddNics(cluster.node(chosen), pod, *placement); !nics) {
      return tl::unexpected(nics.error());
    }
    cluster.Apply(pod, *placement);
    return std::optional<Placement>(*placement);
  }

  Result<void> Release(Cluster& cluster, const PodSpec& pod, const Placement& placement) override {
    auto released = client_.Post("/standalone/release", nlohmann::json{{"PodUID", pod.uid}}.dump());
    if (!released) {
      return MakeError(released.error().message +
                       (process_.Alive() ? "" : " (linkfit serve exited)"));
    }
    cluster.Release(pod, placement);
    return {};
  }

 private:
  // LINKFIT_BENCH_DEBUG=1: one line per pod linkfit rejects, with its reasons for the first
  // nodes and how many nodes the simulator sees with a GPU free enough for it.
  static void DebugRejection(const Cluster& cluster, const PodSpec& pod,
                             const wire::FilterAnswer& filtered, std::size_t feasible) {
    std::string reasons;
    for (const auto& [node, reason] : filtered.failed) {
      if (reasons.size() >= 300) break;
      reasons += node + ": " + reason + "; ";
    }
    int with_gpu = 0;
    std::int64_t most_cpu = 0;
    for (const SimNode& n : cluster.nodes()) {
      int best = 0;
      for (int g = 0; g < n.gpu_count; ++g) {
        best = std::max<int>(best, n.gpu_free_milli[static_cast<std::size_t>(g)]);
      }
      if (best >= pod.gpu_milli) {
        ++with_gpu;
        most_cpu = std::max(most_cpu, n.cpu_free);
      }
    }
    std::fprintf(stderr,
                 "linkfit rejects %s (%lld cpu milli, %d x %d milli GPU; %zu in-tree feasible "
                 "nodes; allocated %lld of %lld GPU milli; %d nodes have such a GPU free, the "
                 "most CPU there %lld): %s\n",
                 pod.name.c_str(), static_cast<long long>(pod.cpu_milli), pod.gpu_count,
                 pod.gpu_milli, feasible, static_cast<long long>(cluster.allocated_gpu_milli()),
                 static_cast<long long>(cluster.total_gpu_milli()), with_gpu,
                 static_cast<long long>(most_cpu), reasons.c_str());
  }

  // The NICs the pod holds on `node`: those of linkfit's allocation record, or the kubelet's.
  Result<void> AddNics(const SimNode& node, const PodSpec& pod, Placement& placement) const {
    if (pod.nic_count == 0) return {};
    if (nics_ == NicChooser::kNone) {
      return MakeError("pod " + pod.uid +
                       " asks for NICs; this linkfit placer does not place them");
    }
    if (nics_ == NicChooser::kLinkfit) {
      LINKFIT_ASSIGN_OR_RETURN(placement.nics, RecordedNics(StateFile(), pod, node));
    } else {
      placement.nics = KubeletNics(node, placement.gpus, pod);
      if (placement.nics == 0)
        return MakeError("no NICs left for pod " + pod.uid + " on " + node.name);
    }
    placement.nic_milli = pod.nic_milli;
    // The simulator's own NIC state must agree with the choice.
    for (int n = 0; n < node.nic_count; ++n) {
      if (((placement.nics >> n) & 1) != 0 &&
          node.nic_free_milli[static_cast<std::size_t>(n)] < pod.nic_milli) {
        return MakeError("pod " + pod.uid + " got NIC " + std::to_string(n) + " of " + node.name +
                         ", which the simulator sees without " + std::to_string(pod.nic_milli) +
                         " thousandths free");
      }
    }
    return {};
  }

  std::string StateFile() const { return temp_dir_ + "/state.json"; }

  // Asks the server which devices it recorded for the pod on `node`.
  Result<Placement> LearnDevices(const Cluster& cluster, int node, const PodSpec& pod) {
    Placement placement;
    placement.node = node;
    if (pod.demand == GpuDemand::kNone) return placement;
    const std::string path = "/inspect/" + cluster.node(node).name;
    nlohmann::json inspect;
    LINKFIT_ASSIGN_OR_RETURN(inspect, client_.GetJson(path));
    if (inspect.contains("nodes") && inspect["nodes"].is_array() && !inspect["nodes"].empty()) {
      inspect = inspect["nodes"][0];
    }
    const std::string qualified = std::string(kNamespace) + "/" + pod.name;
    auto holds = [&](const nlohmann::json& pods) {
      if (!pods.is_array()) return false;
      for (const auto& entry : pods) {
        if (entry.is_string() && (entry == pod.uid || entry == qualified)) return true;
        if (entry.is_object() &&
            (StringEquals(entry, "uid", pod.uid) || StringEquals(entry, "pod", pod.uid))) {
          return true;
        }
      }
      return false;
    };
    unsigned gpus = 0;
    if (inspect.contains("gpus") && inspect["gpus"].is_array()) {
      for (const auto& gpu : inspect["gpus"]) {
        const auto found = gpu.find("index");
        const int index = found != gpu.end() && found->is_number_integer() ? found->get<int>() : -1;
        if (index < 0 || index >= cluster.node(node).gpu_count) continue;
        bool held = gpu.contains("pods") && holds(gpu["pods"]);
        // MIG instances and shares may be listed per device with their own pod lists.
        for (const char* key : {"mig_instances", "mig", "shares"}) {
          if (!gpu.contains(key) || !gpu[key].is_array()) continue;
          for (const auto& item : gpu[key]) {
            const bool mine =
                (item.contains("pods") && holds(item["pods"])) ||
                (item.contains("pod") && holds(nlohmann::json::array({item["pod"]}))) ||
                (item.contains("uid") && item["uid"] == pod.uid);
            if (!mine) continue;
            held = true;
            if (pod.demand == GpuDemand::kMig && item.contains("start")) {
              placement.mig_start = item["start"].get<int>();
            }
          }
        }
        if (held) gpus |= 1u << index;
      }
    }
    if (pod.demand == GpuDemand::kMig) {
      if (std::popcount(gpus) != 1) {
        return MakeError("inspect of " + cluster.node(node).name + " does not show pod " + pod.uid +
                         " on exactly one GPU");
      }
      placement.mig_gpu = std::countr_zero(gpus);
      const MigProfile* profile = cluster.FindMigProfile(node, pod.mig_profile);
      if (profile == nullptr) return MakeError("unknown MIG profile " + pod.mig_profile);
      placement.mig_size = profile->memory_slices;
      placement.mig_compute = profile->compute_slices;
      if (placement.mig_start < 0) {
        // The server did not say where; take the first legal free start on that GPU.
        const unsigned used =
            cluster.node(node).mig_slices_used[static_cast<std::size_t>(placement.mig_gpu)];
        for (int start : profile->starts) {
          const unsigned range = ((1u << profile->memory_slices) - 1u) << start;
          if ((used & range) == 0) {
            placement.mig_start = start;
            break;
          }
        }
      }
      if (placement.mig_start < 0) return MakeError("no free MIG start matches linkfit's choice");
      return placement;
    }
    if (std::popcount(gpus) != pod.gpu_count) {
      return MakeError("inspect of " + cluster.node(node).name + " shows pod " + pod.uid + " on " +
                       std::to_string(std::popcount(gpus)) + " GPUs, expected " +
                       std::to_string(pod.gpu_count));
    }
    placement.gpus = static_cast<GpuMask>(gpus);
    placement.gpu_milli = pod.gpu_milli;
    // The simulator's own fit rule must agree with linkfit's choice.
    for (int g = 0; g < cluster.node(node).gpu_count; ++g) {
      if (((gpus >> g) & 1) &&
          cluster.node(node).gpu_free_milli[static_cast<std::size_t>(g)] < pod.gpu_milli) {
        return MakeError("linkfit gave pod " + pod.uid + " GPU " + std::to_string(g) + " of " +
                         cluster.node(node).name + ", which the simulator sees as full");
      }
    }
    return placement;
  }

  BenchOptions options_;
  std::mt19937_64 rng_;
  NicChooser nics_;
  std::string temp_dir_;
  ChildProcess process_;
  wire::ExtenderClient client_;
  std::map<std::string, std::vector<double>> latencies_;
  int bind_errors_ = 0;
  bool debug_ = std::getenv("LINKFIT_BENCH_DEBUG") != nullptr;
};

// A top-level key's line: "key:" at column 0, then the rest of the line after the colon.
std::optional<std::string> TopLevelValue(const std::string& line, const std::string& key) {
  if (line.rfind(key + ":", 0) != 0) return std::nullopt;
  return std::string(Trim(std::string_view(line).substr(key.size() + 1)));
}

}  // namespace

Result<std::string> DeriveLinkfitConfig(const std::string& base, const std::string& base_dir,
                                        const PolicySettings& settings,
                                        const std::string& default_mig_dir) {
  std::vector<std::string> lines;
  for (std::string_view line : Split(base, '\n')) lines.emplace_back(line);
  std::string written;  // the settings as lines of the policy block
  for (const auto& [key, value] : settings) written += "  " + key + ": " + value + "\n";
  // A line of the base's policy block that one of `settings` replaces.
  const auto replaced = [&](const std::string& line) {
    return std::any_of(settings.begin(), settings.end(), [&](const auto& setting) {
      return Trim(line).rfind(setting.first + ":", 0) == 0;
    });
  };
  std::string out = "# derived by linkfit-bench\n";
  bool mig_dir = false;
  bool in_policy = false;
  bool policy = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const bool top_level = !line.empty() && line[0] != ' ' && line[0] != '#';
    if (top_level) in_policy = false;
    if (auto value = TopLevelValue(line, "mig_profiles_dir")) {
      std::string path = *value;
      if (path.size() >= 2 && (path.front() == '"' || path.front() == '\'')) {
        path = path.substr(1, path.size() - 2);
      }
      if (!path.empty() && path.front() != '/') path = base_dir + "/" + path;
      out += "mig_profiles_dir: \"" + std::filesystem::absolute(path).lexically_normal().string() +
             "\"\n";
      mig_dir = true;
      continue;
    }
    if (auto value = TopLevelValue(line, "policy")) {
      if (!value->empty() && value->front() != '#') {
        return MakeError("the config's policy must be a block mapping to set " +
                         (settings.empty() ? std::string("policy keys") : settings.front().first));
      }
      out += line + "\n" + written;
      in_policy = policy = true;
      continue;
    }
    // The base's own setting gives way to the one written above.
    if (in_policy && replaced(line)) continue;
    out += line + "\n";
  }
  if (!mig_dir) out += "mig_profiles_dir: \"" + default_mig_dir + "\"\n";
  if (!policy && !settings.empty()) out += "policy:\n" + written;
  return out;
}

Result<PlacerPtr> MakeExtenderPlacer(std::uint64_t seed, const Cluster& cluster,
                                     const BenchOptions& options, NicChooser nics) {
  auto dir = MakeTempDir("linkfit-bench-");
  if (!dir) return tl::unexpected(dir.error());
  // Removes the folder unless the placer took it over.
  struct Cleanup {
    std::string path;
    ~Cleanup() {
      std::error_code ignored;
      if (!path.empty()) std::filesystem::remove_all(path, ignored);
    }
  } cleanup{*dir};
  auto cluster_file = WriteClusterFile(cluster, *dir);
  if (!cluster_file) return tl::unexpected(cluster_file.error());
  std::string config = options.linkfit_config;
  const std::string mig_dir =
      std::filesystem::absolute(options.repo_root + "/config/mig").lexically_normal().string();
  PolicySettings settings;
  if (!options.linkfit_whole_machines.empty()) {
    settings.emplace_back("whole_machines", options.linkfit_whole_machines);
  }
  if (!options.linkfit_nic_alignment.empty()) {
    settings.emplace_back("nic_alignment", options.linkfit_nic_alignment);
  }
  if (!settings.empty()) {
    std::string base;
    std::string base_dir = ".";
    if (!config.empty()) {
      std::ifstream in(config);
      if (!in) return MakeError(config + ": cannot read");
      std::ostringstream text;
      text << in.rdbuf();
      base = text.str();
      base_dir = std::filesystem::path(config).parent_path().string();
      if (base_dir.empty()) base_dir = ".";
    } else {
      base = "listen: \"127.0.0.1:0\"\n";
    }
    auto derived = DeriveLinkfitConfig(base, base_dir, settings, mig_dir);
    if (!derived) return WithContext(derived.error(), config.empty() ? "config" : config);
    config = *dir + "/linkfit.yaml";
    std::ofstream out(config);
    out << *derived;
    if (!out) return MakeError(config + ": cannot write");
  } else if (config.empty()) {
    config = *dir + "/linkfit.yaml";
    std::ofstream out(config);
    // Defaults, except the MIG tables (found next to the config file by default, and this one
    // lives in a temporary folder).
    out << "# written by linkfit-bench: defaults only\nlisten: \"127.0.0.1:0\"\n"
        << "mig_profiles_dir: \""
        << std::filesystem::absolute(options.repo_root + "/config/mig").lexically_normal().string()
        << "\"\n";
  }
  if (access(options.linkfit_binary.c_str(), X_OK) != 0) {
    return MakeError("linkfit binary '" + options.linkfit_binary +
                     "' not found or not executable (--linkfit)");
  }
  ChildProcessOptions launch;
  launch.argv = {options.linkfit_binary, "serve",    "--config",   config, "--cluster",
                 *cluster_file,          "--listen", "127.0.0.1:0"};
  // Every allocation record, rewritten after each bind: where the NICs linkfit chose are read.
  if (nics == NicChooser::kLinkfit) {
    launch.argv.insert(launch.argv.end(), {"--state-file", *dir + "/state.json"});
  }
  launch.name = "linkfit serve";
  launch.stderr_log = *dir + "/linkfit.log";
  launch.drain_stdout = true;
  launch.ready_timeout_s = 60.0;
  auto process = ChildProcess::Start(launch);
  if (!process) return tl::unexpected(process.error());  // the message quotes the log
  cleanup.path.clear();
  return PlacerPtr(
      std::make_unique<ExtenderPlacer>(seed, options, nics, *dir, std::move(*process)));
}

}  // namespace linkfit::bench
