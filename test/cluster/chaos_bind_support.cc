#include "cluster/chaos_bind_support.h"

#include <httplib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <thread>

#include "linkfit/kube/annotations.h"
#include "testing/fixtures.h"

namespace linkfit::cluster::chaos {

using nlohmann::json;
using std::chrono::milliseconds;

int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && std::atoi(value) > 0 ? std::atoi(value) : fallback;
}

std::string LinkfitConfig(bool exactly_once_keys) {
  std::string config = "mig_profiles_dir: " + linkfit::testing::SourcePath("config/mig") +
                       "\nlimits: {threads: 16}\n"
                       "kubernetes:\n"
                       "  request_timeout_ms: 2000\n"
                       "  list_page_size: 50\n";
  if (exactly_once_keys) {
    config +=
        "  bind_timeout_ms: 3000\n"
        "  bind_settle_margin_ms: 500\n"
        "  binder_lease: {namespace: linkfit-system, name: linkfit-binder, duration_ms: 6000}\n";
  }
  return config;
}

std::vector<uint32_t> SeedsFromEnv() {
  const char* value = std::getenv("LINKFIT_CHAOS_SEEDS");
  std::stringstream list(value != nullptr && *value != '\0' ? value : "1");
  std::vector<uint32_t> seeds;
  for (std::string item; std::getline(list, item, ',');) {
    const auto dash = item.find('-');
    const uint32_t first = static_cast<uint32_t>(std::strtoul(item.c_str(), nullptr, 10));
    const uint32_t last =
        dash == std::string::npos
            ? first
            : static_cast<uint32_t>(std::strtoul(item.c_str() + dash + 1, nullptr, 10));
    for (uint32_t seed = first; seed <= last; ++seed) seeds.push_back(seed);
  }
  return seeds;
}

double SecondsBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

void PodQueue::Add(std::string name) {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.push_back({std::move(name)});
}

std::optional<PodQueue::Entry> PodQueue::Take() {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = Clock::now();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->ready_at > now) continue;
    Entry entry = std::move(*it);
    entries_.erase(it);
    return entry;
  }
  return std::nullopt;
}

void PodQueue::Backoff(Entry entry) {
  entry.backoff = std::min(std::max(entry.backoff * 2, milliseconds(200)), milliseconds(2000));
  entry.ready_at = Clock::now() + entry.backoff;
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.push_back(std::move(entry));
}

std::optional<BoundPod> ReadBoundPod(const json& pod, std::string* problem) {
  const json spec = pod.value("spec", json::object());
  const json metadata = pod.value("metadata", json::object());
  const std::string phase = pod.value("status", json::object()).value("phase", "");
  if (!spec.contains("nodeName") || phase == "Succeeded" || phase == "Failed") return std::nullopt;
  BoundPod bound{metadata.value("name", ""), metadata.value("uid", ""), spec["nodeName"], {}};
  const json annotations = metadata.value("annotations", json::object());
  if (!annotations.contains(kube::kAnnotationAllocation)) {
    *problem = "bound to " + bound.node + " without a " + kube::kAnnotationAllocation + " record";
    return std::nullopt;
  }
  const std::string text = annotations[kube::kAnnotationAllocation].get<std::string>();
  auto record = kube::DecodeAllocationRecord(text);
  if (!record || record->node != bound.node) {
    *problem = "bound to " + bound.node + " with a bad record: " + text;
    return std::nullopt;
  }
  bound.gpus = record->devices.gpus;
  return bound;
}

Holdings ApiHoldings(const std::vector<json>& pods) {
  Holdings holdings;
  for (const json& pod : pods) {
    std::string problem;
    const auto bound = ReadBoundPod(pod, &problem);
    if (!bound) continue;
    uint32_t& mask = holdings[bound->node][bound->uid];
    for (int gpu : bound->gpus) mask |= 1u << gpu;
  }
  return holdings;
}

std::optional<Holdings> InspectHoldings(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(2);
  auto reply = client.Get("/inspect");
  if (!reply || reply->status != 200) return std::nullopt;
  const json inspect = json::parse(reply->body, nullptr, false);
  if (!inspect.is_object() || !inspect.contains("nodes")) return std::nullopt;
  Holdings holdings;
  for (const json& node : inspect["nodes"]) {
    for (const json& gpu : node["gpus"]) {
      for (const json& uid : gpu["pods"]) {
        holdings[node["name"]][uid.get<std::string>()] |= 1u << gpu["index"].get<int>();
      }
    }
  }
  return holdings;
}

std::string Difference(const Holdings& cached, const Holdings& truth) {
  std::string out;
  const auto describe = [](const Holdings& holdings, const std::string& node) {
    const auto it = holdings.find(node);
    return it == holdings.end() ? std::string("{}") : json(it->second).dump();
  };
  std::set<std::string> nodes;
  for (const auto& [node, pods] : cached) nodes.insert(node);
  for (const auto& [node, pods] : truth) nodes.insert(node);
  for (const std::string& node : nodes) {
    const std::string mine = describe(cached, node);
    const std::string theirs = describe(truth, node);
    if (mine != theirs) out += node + ": /inspect " + mine + ", API records " + theirs + "; ";
  }
  return out;
}

std::optional<double> CacheEqualAfter(const linkfit::testing::FakeApiServer& fake, int port,
                                      milliseconds limit, std::string* difference) {
  const auto since = Clock::now();
  while (Clock::now() - since < limit) {
    const Holdings truth = ApiHoldings(fake.Pods());
    const auto cached = InspectHoldings(port);
    if (cached && *cached == truth) return SecondsBetween(since, Clock::now());
    *difference = cached ? Difference(*cached, truth) : "/inspect did not answer";
    std::this_thread::sleep_for(milliseconds(20));
  }
  return std::nullopt;
}

void Sampler::Sample(const std::vector<json>& pods) {
  const double now = SecondsBetween(start_, Clock::now());
  std::map<std::pair<std::string, int>, std::string> holders;  // (node, GPU) -> pod
  std::map<std::string, std::string> clashes;                  // "first|second|node" -> GPUs
  bool violated = false;
  for (const json& pod : pods) {
    std::string problem;
    const auto bound = ReadBoundPod(pod, &problem);
    const std::string name = pod["metadata"]["name"];
    if (!problem.empty()) {
      violated = true;
      violations_.emplace("record " + name, "ml/" + name + " " + problem);
    }
    if (!bound) continue;
    first_bound_s_.emplace(name, now);
    for (int gpu : bound->gpus) {
      const auto [it, fresh] = holders.emplace(std::make_pair(bound->node, gpu), name);
      if (fresh) continue;
      violated = true;
      std::string& gpus = clashes[it->second + "|" + name + "|" + bound->node];
      gpus += (gpus.empty() ? "" : ",") + std::to_string(gpu);
    }
  }
  for (const auto& [key, gpus] : clashes) {
    const auto first = key.find('|');
    const auto second = key.find('|', first + 1);
    violations_.emplace(key, "GPUs " + key.substr(second + 1) + "/[" + gpus + "] held by " +
                                 Describe(key.substr(0, first)) + " and " +
                                 Describe(key.substr(first + 1, second - first - 1)));
  }
  ++samples_;
  if (violated) ++violation_samples_;
}

std::string Sampler::Describe(const std::string& name) const {
  char text[128];
  std::snprintf(text, sizeof text, "ml/%s (first seen bound at %.2f s)", name.c_str(),
                first_bound_s_.at(name));
  return text;
}

}  // namespace linkfit::cluster::chaos
