// `linkfit demo`: a guided tour of the extender for newcomers (`make demo`). It starts the
// Service in-process on 127.0.0.1:<free port> with the demo cluster and drives it over real HTTP
// exactly as kube-scheduler does in cache mode: filter with every node name, prioritize the nodes
// that passed when there are two or more, bind to the top score (the first node on ties, where
// kube-scheduler would pick one of them at random). /explain gives the ring bandwidth each node
// could offer and /inspect/{node} the devices bind recorded, so every paragraph says what the pod
// asked, who passed, the scores, where it landed and why. The HTTP calls are
// wire::ExtenderClient's.

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "app/service.h"
#include "linkfit/app/cli.h"
#include "linkfit/common/flags.h"
#include "linkfit/common/log.h"
#include "linkfit/wire/extender_client.h"
#include "linkfit/wire/scheduling_cycle.h"

namespace linkfit::app {
namespace {

using nlohmann::json;

constexpr std::size_t kWidth = 100;      // lines are wrapped to this many columns
constexpr const char* kIndent = "    ";  // paragraph body
constexpr std::size_t kLabelWidth = 8;   // "filter: " etc.

struct DemoPod {
  std::string name;
  std::string intent;  // one sentence for a newcomer
  json annotations;
  json resources;    // container limits (and requests)
  std::string note;  // how linkfit treats this kind of request, appended to "why"
};

std::vector<DemoPod> DemoPods(const Config& config) {
  const json nvlink_required = {{"linkfit.io/closeness", "nvlink"},
                                {"linkfit.io/closeness-policy", "required"}};
  json big_annotations = nvlink_required;
  big_annotations["linkfit.io/gpu-model"] = "A100|H100";
  const std::string share_note =
      config.policy.share_policy == "spread"
          ? "Shares spread over idle GPUs (policy.share_policy: spread)."
          : "Shares pack onto GPUs that already hold shares (policy.share_policy: pack), so "
            "whole GPUs stay free.";
  return {
      {"train-4gpu",
       "a training job that needs 4 GPUs joined by NVLink",
       nvlink_required,
       {{"nvidia.com/gpu", "4"}},
       ""},
      {"finetune-2gpu",
       "a fine-tuning job: 2 GPUs, no topology hint",
       json::object(),
       {{"nvidia.com/gpu", "2"}},
       ""},
      {"embedder-mig",
       "an inference server: one 3g.20gb MIG instance of an A100",
       json::object(),
       {{"nvidia.com/mig-3g.20gb", "1"}},
       "On that node linkfit picks the GPU and start that keep the most MIG instances placeable."},
      {"notebook-share",
       "a notebook: a quarter of one GPU, time-shared with others",
       json::object(),
       {{config.shared_gpu_resource, "250"}},
       share_note},
      {"train-8gpu",
       "a large training job: 8 A100 or H100 GPUs joined by NVLink",
       big_annotations,
       {{"nvidia.com/gpu", "8"}},
       ""},
  };
}

json PodJson(const DemoPod& pod, int number) {
  const json resources = {{"requests", pod.resources}, {"limits", pod.resources}};
  return {
      {"metadata",
       {{"name", pod.name},
        {"namespace", "demo"},
        {"uid", "demo-pod-" + std::to_string(number)},
        {"annotations", pod.annotations}}},
      {"spec", {{"containers", json::array({json{{"name", "main"}, {"resources", resources}}})}}}};
}

// Writes `prefix` then `text` word-wrapped to kWidth, continuation lines indented by the
// prefix's width.
void Wrap(std::ostream& out, const std::string& prefix, const std::string& text) {
  const std::string hang(prefix.size(), ' ');
  std::string line = prefix;
  bool line_has_word = false;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(pos, end - pos);
    pos = end + 1;
    if (line_has_word && line.size() + 1 + word.size() > kWidth) {
      out << line << "\n";
      line = hang;
      line_has_word = false;
    }
    line += (line_has_word ? " " : "") + word;
    line_has_word = true;
  }
  out << line << "\n";
}

std::string PadRight(std::string text, std::size_t width) {
  if (text.size() < width) text.resize(width, ' ');
  return text;
}

// One labelled field of a pod's paragraph ("    filter: ...").
void Say(std::ostream& out, const std::string& label, const std::string& text) {
  Wrap(out, kIndent + PadRight(label, kLabelWidth), text);
}

// Keeps the first two clauses of a "; "-separated reason and counts the rest.
std::string ShortReason(const std::string& reason) {
  std::vector<std::string> parts;
  std::size_t pos = 0;
  while (pos <= reason.size()) {
    std::size_t end = reason.find("; ", pos);
    if (end == std::string::npos) end = reason.size();
    parts.push_back(reason.substr(pos, end - pos));
    pos = end + 2;
  }
  if (parts.size() <= 2) return reason;
  return parts[0] + "; " + parts[1] + " (and " + std::to_string(parts.size() - 2) + " more)";
}

std::string Join(const std::vector<std::string>& items, const std::string& separator) {
  std::string joined;
  for (const std::string& item : items) joined += (joined.empty() ? "" : separator) + item;
  return joined;
}

// What happened to one pod.
struct Outcome {
  std::string asks;                  // the request as linkfit understood it
  std::map<std::string, int> rings;  // node -> ring GB/s of its best set (from /explain)
  // node -> why it loses the whole-machine points ("loses 70 of 140 points: it would break ...")
  std::map<std::string, std::string> losses;
  std::vector<std::string> passed;
  std::vector<std::pair<std::string, std::string>> failed;  // node, reason; in node order
  std::set<std::string> unresolvable;
  std::vector<std::pair<std::string, std::int64_t>> scores;  // in passed order
  std::string node;                                          // where it was bound; "" if nowhere
  std::string devices;                                       // what /inspect shows it holds
  std::string error;
};

// Reads "<node>: fits on GPUs 0,1 (ring 230 GB/s)" lines of /explain.
void ReadExplain(const json& reply, Outcome& outcome) {
  if (!reply.contains("lines") || !reply["lines"].is_array()) return;
  for (const json& entry : reply["lines"]) {
    if (!entry.is_string()) continue;
    const std::string line = entry.get<std::string>();
    const std::string asks_prefix = " asks for ";
    if (const auto at = line.find(asks_prefix); line.rfind("pod ", 0) == 0 && at != line.npos) {
      outcome.asks = line.substr(at + asks_prefix.size());
      continue;
    }
    const auto colon = line.find(": ");
    // The whole-machine clauses only: a PCIe ring that loses to an NVLink one breaks nothing.
    if (const auto loses = line.find("; loses "); colon != line.npos && loses != line.npos &&
                                                  line.find(" would break ", loses) != line.npos) {
      outcome.losses[line.substr(0, colon)] = line.substr(loses + 2);
    }
    const auto ring = line.find("(ring ");
    if (colon == line.npos || ring == line.npos) continue;
    int gbps = 0;
    const char* begin = line.data() + ring + 6;
    if (std::from_chars(begin, line.data() + line.size(), gbps).ec == std::errc()) {
      outcome.rings[line.substr(0, colon)] = gbps;
    }
  }
}

std::vector<std::string> StringList(const json& value) {
  std::vector<std::string> list;
  if (!value.is_array()) return list;
  for (const json& item : value) {
    if (item.is_string()) list.push_back(item.get<std::string>());
  }
  return list;
}

// Describes the devices `uid` holds on a node from its /inspect document.
std::string DevicesOf(const json& node, const std::string& uid) {
  std::vector<std::string> whole;
  std::vector<std::string> parts;
  std::string model;
  std::string left;
  for (const json& gpu : node.value("gpus", json::array())) {
    const std::string index = std::to_string(gpu.value("index", -1));
    const std::string mode = gpu.value("mode", "");
    for (const json& instance : gpu.value("mig_instances", json::array())) {
      if (instance.value("pod", "") != uid) continue;
      const json slices = instance.value("slices", json::array({0, 0}));
      parts.push_back("MIG " + instance.value("profile", "?") + " on GPU " + index +
                      ", memory slices " + std::to_string(slices[0].get<int>()) + "-" +
                      std::to_string(slices[1].get<int>() - 1));
      model = gpu.value("model", "");
    }
    for (const json& share : gpu.value("shares", json::array())) {
      if (share.value("pod", "") != uid) continue;
      parts.push_back(std::to_string(share.value("milli", 0)) + "/1000 of GPU " + index);
      left = "; " + std::to_string(1000 - gpu.value("shared_milli", 0)) + "/1000 of GPU " + index +
             " left for other shares";
      model = gpu.value("model", "");
    }
    const std::vector<std::string> pods = StringList(gpu.value("pods", json::array()));
    if (mode == "whole" && std::find(pods.begin(), pods.end(), uid) != pods.end()) {
      whole.push_back(index);
      model = gpu.value("model", "");
    }
  }
  if (!whole.empty()) {
    parts.insert(parts.begin(),
                 std::string(whole.size() == 1 ? "GPU " : "GPUs ") + Join(whole, ","));
  }
  return Join(parts, "; ") + (model.empty() ? "" : " (" + model + ")") + left;
}

Result<Outcome> Schedule(wire::ExtenderClient& api, const json& pod,
                         const std::vector<std::string>& nodes) {
  Outcome outcome;
  const wire::CyclePod cycle_pod{pod.dump(), pod["metadata"]["name"].get<std::string>(), "demo",
                                 pod["metadata"]["uid"].get<std::string>()};
  json explain;
  LINKFIT_ASSIGN_OR_RETURN(explain, api.PostJson("/explain", cycle_pod.json));
  ReadExplain(explain, outcome);

  wire::SchedulingCycle cycle(api);
  wire::CycleOutcome scheduled;
  LINKFIT_ASSIGN_OR_RETURN(scheduled, cycle.Schedule(cycle_pod, nodes));
  outcome.passed = scheduled.filter.passed;
  outcome.failed = scheduled.filter.failed;
  outcome.unresolvable = scheduled.filter.unresolvable;
  for (const wire::HostScore& entry : scheduled.scores) {
    outcome.scores.emplace_back(entry.host, entry.score);
  }
  if (!scheduled.filter.error.empty()) {
    outcome.error = scheduled.filter.error;
    return outcome;
  }
  if (scheduled.node.empty()) return outcome;
  if (!scheduled.bind_error.empty()) {
    outcome.error = "bind to " + scheduled.node + " failed: " + scheduled.bind_error;
    return outcome;
  }
  outcome.node = scheduled.node;
  json inspect;
  LINKFIT_ASSIGN_OR_RETURN(inspect, api.GetJson("/inspect/" + outcome.node));
  outcome.devices = DevicesOf(inspect, cycle_pod.uid);
  return outcome;
}

std::string ScoreOf(const Outcome& outcome, const std::string& node) {
  for (const auto& [host, score] : outcome.scores) {
    if (host == node) return std::to_string(score);
  }
  return "?";
}

// The text between `from` and `to` in `text` ("" when either is missing).
std::string Between(const std::string& text, const std::string& from, const std::string& to) {
  const auto begin = text.find(from);
  if (begin == std::string::npos) return "";
  const auto end = text.find(to, begin + from.size());
  return end == std::string::npos ? ""
                                  : text.substr(begin + from.size(), end - begin - from.size());
}

// " Whole machines kept: ..." when candidates lost the whole-machine points (/explain's clause
// "loses P of R points: it would break WHAT while KEEPER serves the pod HOW (policy...)").
std::string WholeMachinesKept(const Outcome& outcome) {
  std::vector<std::string> nodes;
  std::set<std::string> what;
  std::string clause;
  for (const std::string& node : outcome.passed) {
    const auto loss = outcome.losses.find(node);
    if (loss == outcome.losses.end() || node == outcome.node) continue;
    nodes.push_back(node);
    const std::string broken = Between(loss->second, "would break ", " while ");
    what.insert(broken.substr(0, broken.find(" (")));  // "an idle whole machine", sizes apart
    clause = loss->second;
  }
  if (nodes.empty()) return "";
  const std::string last = nodes.back();
  nodes.pop_back();
  const std::string where = nodes.empty() ? last : Join(nodes, ", ") + " or " + last;
  return " Whole machines kept: on " + where + " the pod would break " +
         (what.size() == 1 ? *what.begin() : std::string("a whole machine or a free NVLink set")) +
         ", which costs " + Between(clause, "loses ", ": ") + " while " +
         Between(clause, " while ", " serves ") + " serves it " +
         Between(clause, " serves the pod ", " (policy") + " (policy" +
         Between(clause, "(policy", ")") + "), so big pods keep their machines.";
}

// Says why the chosen node is a good choice, from the rings and scores the pod was offered.
std::string Why(const Outcome& outcome) {
  if (outcome.passed.size() == 1) return "it is the only node that can host this pod now.";
  std::string why;
  const auto mine = outcome.rings.find(outcome.node);
  if (mine != outcome.rings.end() && outcome.rings.size() >= 2) {
    std::map<int, std::vector<std::string>, std::greater<>> others;  // ring -> nodes
    for (const std::string& node : outcome.passed) {
      const auto ring = outcome.rings.find(node);
      if (node != outcome.node && ring != outcome.rings.end()) others[ring->second].push_back(node);
    }
    bool equal_ring_scored_lower = false;
    const int best_other = others.empty() ? 0 : others.begin()->first;
    why = mine->second >= best_other ? "the fastest GPU set on offer; "
                                     : "not the fastest ring, but the best overall score; ";
    std::vector<std::string> groups;
    for (const auto& [gbps, nodes] : others) {
      std::string group = Join(nodes, " and ");
      if (gbps == mine->second) {
        group += " also offered " + std::to_string(gbps) + " GB/s";
        for (const std::string& node : nodes) {
          equal_ring_scored_lower =
              equal_ring_scored_lower || ScoreOf(outcome, node) != ScoreOf(outcome, outcome.node);
        }
      } else if (groups.empty() || gbps != others.rbegin()->first) {
        group += " offered " + std::to_string(gbps) + " GB/s";
      } else {
        group += " only " + std::to_string(gbps) + " GB/s";
      }
      groups.push_back(group);
    }
    why += Join(groups, ", ") + ".";
    if (equal_ring_scored_lower && outcome.losses.empty()) {
      why += " At equal bandwidth the packing and fragmentation terms decided.";
    }
  }
  std::vector<std::string> tied;
  const std::string top = ScoreOf(outcome, outcome.node);
  for (const auto& [host, score] : outcome.scores) {
    if (host != outcome.node && std::to_string(score) == top) tied.push_back(host);
  }
  if (!tied.empty()) {
    why += (why.empty() ? "" : " ") + Join(tied, " and ") + " scored the same " + top +
           "; ties go to the first node here (kube-scheduler picks one at random).";
  }
  if (why.empty()) why = "the highest score.";
  return why + WholeMachinesKept(outcome);
}

void Tell(std::ostream& out, int number, const DemoPod& pod, const Outcome& outcome,
          std::size_t node_count, int score_range) {
  out << "\n" << number << ") demo/" << pod.name << ": " << pod.intent << "\n";
  Say(out, "asks:", outcome.asks.empty() ? "?" : outcome.asks);
  if (!outcome.error.empty()) {
    Say(out, "error:", outcome.error);
    return;
  }
  Say(out, "filter:",
      std::to_string(outcome.passed.size()) + " of " + std::to_string(node_count) + " nodes pass" +
          (outcome.passed.empty() ? "; nothing to score or bind." : ""));
  if (outcome.passed.empty()) {
    for (const auto& [node, reason] : outcome.failed) {
      const bool never = outcome.unresolvable.count(node) != 0;
      Say(out, "", node + (never ? " (never): " : " (busy): ") + ShortReason(reason));
    }
    Say(out, "result:",
        "not bound; the pod stays Pending. \"busy\" nodes could take it once GPUs are freed "
        "(kube-scheduler may preempt there); \"never\" nodes cannot.");
    return;
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;  // reason -> nodes
  for (const auto& [node, reason] : outcome.failed) {
    const std::string text = ShortReason(reason);
    auto group = std::find_if(groups.begin(), groups.end(),
                              [&](const auto& entry) { return entry.first == text; });
    if (group == groups.end()) {
      groups.push_back({text, {node}});
    } else {
      group->second.push_back(node);
    }
  }
  for (const auto& [reason, nodes] : groups) Say(out, "", Join(nodes, ", ") + ": " + reason);
  if (!outcome.scores.empty()) {
    std::vector<std::pair<std::string, std::int64_t>> sorted = outcome.scores;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    std::vector<std::string> items;
    for (const auto& [host, score] : sorted) items.push_back(host + " " + std::to_string(score));
    Say(out, "scores:", Join(items, ", ") + " (0-" + std::to_string(score_range) + ")");
  }
  std::string placed = outcome.node + ", " + outcome.devices;
  if (const auto ring = outcome.rings.find(outcome.node); ring != outcome.rings.end()) {
    placed += ", ring " + std::to_string(ring->second) + " GB/s";
  }
  Say(out, "placed:", placed);
  Say(out, "why:", Why(outcome) + (pod.note.empty() ? "" : " " + pod.note));
}

// One line per node: its GPUs and what already runs there.
void TellCluster(std::ostream& out, const json& inspect) {
  for (const json& node : inspect.value("nodes", json::array())) {
    const json gpus = node.value("gpus", json::array());
    std::vector<std::string> mig;
    std::vector<std::string> holders;
    for (const json& gpu : gpus) {
      if (gpu.value("mode", "") == "mig") mig.push_back(std::to_string(gpu.value("index", -1)));
      for (const std::string& pod : StringList(gpu.value("pod_names", json::array()))) {
        if (std::find(holders.begin(), holders.end(), pod) == holders.end()) {
          holders.push_back(pod);
        }
      }
    }
    std::string text = std::to_string(gpus.size()) + "x " + node.value("model", "?") + ", " +
                       std::to_string(node.value("free_whole_gpus", json::array()).size()) +
                       " free";
    if (!mig.empty()) text += "; GPUs " + Join(mig, ",") + " in MIG mode";
    if (!holders.empty()) text += "; in use by " + Join(holders, ", ");
    Wrap(out, "  " + PadRight(node.value("name", "?") + " ", 16), text);
  }
}

// "Cluster now: ..." from /inspect, one line.
std::string Summary(const json& inspect) {
  int total = 0, whole = 0, mig = 0, instances = 0, shared = 0, idle = 0;
  const json nodes = inspect.value("nodes", json::array());
  for (const json& node : nodes) {
    for (const json& gpu : node.value("gpus", json::array())) {
      ++total;
      const std::string mode = gpu.value("mode", "");
      whole += mode == "whole" ? 1 : 0;
      shared += mode == "shared" ? 1 : 0;
      idle += mode == "idle" ? 1 : 0;
      if (mode == "mig") {
        ++mig;
        instances += static_cast<int>(gpu.value("mig_instances", json::array()).size());
      }
    }
  }
  return "Cluster now: " + std::to_string(total) + " GPUs on " + std::to_string(nodes.size()) +
         " nodes; " + std::to_string(whole) + " used whole, " + std::to_string(shared) +
         " shared, " + std::to_string(mig) + " in MIG mode (" + std::to_string(instances) +
         " instances), " + std::to_string(idle) + " idle.";
}

// Introduces the cluster, schedules every demo pod and sums up. Returns how many pods were placed.
Result<int> Drive(wire::ExtenderClient& api, const Config& config, int port, std::ostream& out) {
  json cluster;
  LINKFIT_ASSIGN_OR_RETURN(cluster, api.GetJson("/inspect"));
  std::vector<std::string> nodes;
  for (const json& node : cluster.value("nodes", json::array())) {
    nodes.push_back(node.value("name", ""));
  }
  Wrap(out, "",
       "linkfit demo: the extender in standalone mode on http://127.0.0.1:" + std::to_string(port) +
           ", driven over HTTP the way kube-scheduler drives it: filter with every node name, "
           "prioritize the nodes that pass, bind to the top score. /explain and /inspect show "
           "what each node offered and which devices the pod got.");
  out << "\nCluster (" << config.cluster_file.value_or("?") << "):\n";
  TellCluster(out, cluster);

  const std::vector<DemoPod> pods = DemoPods(config);
  int placed = 0;
  for (std::size_t i = 0; i < pods.size(); ++i) {
    const int number = static_cast<int>(i) + 1;
    Outcome outcome;
    LINKFIT_ASSIGN_OR_RETURN(outcome, Schedule(api, PodJson(pods[i], number), nodes));
    Tell(out, number, pods[i], outcome, nodes.size(), config.policy.score_range);
    placed += outcome.node.empty() ? 0 : 1;
  }
  json after;
  LINKFIT_ASSIGN_OR_RETURN(after, api.GetJson("/inspect"));
  out << "\n" << Summary(after) << "\n";
  return placed;
}

int Fail(std::ostream& err, const std::string& message) {
  err << "linkfit demo: " << message << "\n";
  return 1;
}

}  // namespace

int RunDemo(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto flags = Flags::Parse(args, {{"config"}});
  if (!flags) {
    err << "linkfit demo: " << flags.error().message << "\n";
    return 2;
  }
  const std::string path = flags->Get("config").value_or("config/demo.yaml");
  std::error_code ignored;
  if (!std::filesystem::is_regular_file(path, ignored)) {
    err << "linkfit demo: " << path
        << " not found; run from the repository root or pass --config FILE\n";
    return 2;
  }
  auto config = LoadConfig(path);
  if (!config) return Fail(err, config.error().message);
  // The demo talks to itself over loopback: plain HTTP on a free port, nothing persisted.
  config->listen = "127.0.0.1:0";
  config->listen_host = "127.0.0.1";
  config->listen_port = 0;
  config->tls = TlsConfig{};
  config->state_file.reset();
  if (config->log_level == "debug") log::SetLevel(log::Level::kDebug);
  if (config->log_level == "warning") log::SetLevel(log::Level::kWarning);
  if (config->log_level == "error") log::SetLevel(log::Level::kError);
  if (config->log_level == "off") log::SetLevel(log::Level::kOff);

  auto service = Service::Start(*config);
  if (!service) return Fail(err, service.error().message);
  wire::ExtenderClient api("http://127.0.0.1:" + std::to_string((*service)->port()),
                           config->url_prefix);
  Result<int> placed = 0;
  try {  // a reply of an unexpected shape throws json::type_error while it is read
    placed = Drive(api, *config, (*service)->port(), out);
  } catch (const json::exception& error) {
    placed = MakeError(std::string("unexpected reply: ") + error.what());
  }
  (*service)->Stop();
  (*service)->Wait();
  if (!placed) return Fail(err, placed.error().message);
  out << *placed << " of " << DemoPods(*config).size() << " demo pods placed; server stopped.\n";
  return 0;
}

}  // namespace linkfit::app
