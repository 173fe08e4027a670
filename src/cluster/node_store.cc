#include "linkfit/cluster/node_store.h"

#include <functional>

#include "linkfit/common/log.h"
#include "linkfit/common/strings.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/kube/object_json.h"

namespace linkfit::cluster {
namespace {

void HashInto(std::uint64_t& hash, std::string_view text) {
  hash = hash * 1000003u ^ std::hash<std::string_view>{}(text);
}

const std::string* Annotation(const kube::NodeView& node, const char* key) {
  const auto it = node.annotations.find(key);
  return it == node.annotations.end() ? nullptr : &it->second;
}

std::int64_t Allocatable(const kube::NodeView& node, const char* resource) {
  const auto it = node.allocatable.find(resource);
  return it == node.allocatable.end() ? 0 : it->second;
}

}  // namespace

NodeStore::NodeStore(state::ClusterCache& cache, model::NodeModelFactory& factory, PodStore& pods,
                     MetricsSink& metrics)
    : cache_(cache), factory_(factory), pods_(pods), metrics_(metrics) {}

void NodeStore::BeginList() {
  MutexLock lock(mutex_);
  ++generation_;
}

void NodeStore::ListItem(std::string_view object_json) {
  auto node = kube::DecodeNode(object_json);
  if (!node) {
    log::Error("nodes: a listed node does not decode, skipped: " + node.error().message);
    metrics_.CountBadObject("node", "json");
    return;
  }
  Upsert(*node);
}

void NodeStore::EndList(std::string_view resource_version) {
  std::vector<std::string> gone;
  {
    MutexLock lock(mutex_);
    for (const auto& [name, entry] : nodes_) {
      if (entry.list_generation != generation_) gone.push_back(name);
    }
    ++lists_;
  }
  for (const std::string& name : gone) Delete(name);
  if (!gone.empty()) {
    log::Info("nodes: relist at resourceVersion " + std::string(resource_version) + " removed " +
              std::to_string(gone.size()) + " nodes whose deletion the watch missed");
  }
}

void NodeStore::Event(kube::WatchEventType type, std::string_view object_json) {
  auto node = kube::DecodeNode(object_json);
  if (!node) {
    log::Error("nodes: a watch event's node does not decode, skipped: " + node.error().message);
    metrics_.CountBadObject("node", "json");
    return;
  }
  if (type == kube::WatchEventType::kDeleted) {
    Delete(node->name);
  } else {
    Upsert(*node);
  }
}

void NodeStore::UpdateReport(const kube::NodeView& node) {
  const std::string* text = Annotation(node, kube::kAnnotationDevicesInUse);
  std::uint64_t hash = 0;
  if (text != nullptr) {
    hash = 1469598103934665603u;
    HashInto(hash, *text);
    if (hash == 0) hash = 1;
  }
  {
    MutexLock lock(mutex_);
    const auto it = nodes_.find(node.name);
    if (it == nodes_.end() || it->second.devices_hash == hash) return;
    it->second.devices_hash = hash;
  }
  std::optional<kube::DevicesInUse> report;
  if (text != nullptr) {
    auto decoded = kube::DecodeDevicesInUse(*text);
    if (decoded) {
      report = std::move(*decoded);
    } else {
      log::Error(
          "node " + node.name + ": annotation " + kube::kAnnotationDevicesInUse +
          " is unusable, its pods' devices stay recorded or estimated: " + decoded.error().message);
      metrics_.CountBadObject("node", "devices-in-use");
    }
  }
  pods_.SetReportedDevices(node.name, std::move(report));
}

void NodeStore::Upsert(const kube::NodeView& node) {
  const Change change = UpsertEntry(node);
  // The pod store is told outside this store's lock (it takes its own, then the cache's). The
  // report first, so that pods applied when the node appears are counted on it.
  UpdateReport(node);
  if (change == Change::kModelled) pods_.NodeAppeared(node.name);
  if (change == Change::kRemoved) pods_.NodeRemoved(node.name);
}

NodeStore::Change NodeStore::UpsertEntry(const kube::NodeView& node) {
  {
    MutexLock lock(mutex_);
    Entry& entry = nodes_[node.name];
    entry.list_generation = generation_;
    const std::string* topology_text = Annotation(node, kube::kAnnotationTopology);
    if (topology_text == nullptr) {
      if (entry.facts_hash != 0) {
        log::Info("node " + node.name + ": annotation " + kube::kAnnotationTopology +
                  " removed; linkfit no longer places on it");
        cache_.RemoveNode(node.name);
        cache_.SetNodeProblem(node.name, "");
        entry.facts_hash = 0;
        SetHandoffModeLocked(entry, kNoMode);
        return Change::kRemoved;
      }
      cache_.SetNodeProblem(node.name, "");
      return Change::kNone;
    }
    const std::string* mig_text = Annotation(node, kAnnotationMigMode);
    std::map<std::string, std::string> labels;
    for (const auto& [key, value] : node.labels) {
      if (StartsWith(key, "nvidia.com/") || StartsWith(key, "linkfit.io/")) labels[key] = value;
    }
    const std::int64_t cpu_milli = Allocatable(node, "cpu");
    const std::int64_t memory_bytes = (Allocatable(node, "memory") + 999) / 1000;
    std::uint64_t hash = 1469598103934665603u;
    HashInto(hash, *topology_text);
    HashInto(hash, mig_text != nullptr ? *mig_text : "");
    for (const auto& [key, value] : labels) {
      HashInto(hash, key);
      HashInto(hash, value);
    }
    HashInto(hash, std::to_string(cpu_milli) + "/" + std::to_string(memory_bytes));
    if (hash == 0) hash = 1;
    if (hash == entry.facts_hash) return Change::kNone;  // a status update: nothing changed

    auto topology = factory_.TopologyFromText(
        *topology_text, "node " + node.name + " " + kube::kAnnotationTopology);
    if (!topology)
      return RefuseLocked(node.name, entry, kube::kAnnotationTopology, topology.error().message);
    topology::GpuMask mig = 0;
    if (mig_text != nullptr) {
      auto parsed = model::ParseMigMode(*mig_text, (*topology)->gpu_count());
      if (!parsed)
        return RefuseLocked(node.name, entry, kAnnotationMigMode, parsed.error().message);
      mig = *parsed;
    }
    auto info =
        factory_.Build({node.name, std::move(labels), *topology, mig, cpu_milli, memory_bytes});
    if (!info) return RefuseLocked(node.name, entry, kAnnotationMigMode, info.error().message);
    cache_.SetNodeProblem(node.name, "");
    const int dropped = cache_.UpsertNode(std::move(*info));
    if (dropped > 0) metrics_.CountBadObject("node", "pods-dropped");
    entry.facts_hash = hash;
    const std::string& mode = (*topology)->spec().handoff_mode;
    int mode_index = kUnsaid;
    for (int i = 0; i < kUnsaid; ++i) {
      if (mode == topology::kHandoffModes[i]) mode_index = i;
    }
    SetHandoffModeLocked(entry, mode_index);
    return Change::kModelled;
  }
}

NodeStore::Change NodeStore::RefuseLocked(const std::string& name, Entry& entry,
                                          const std::string& what, const std::string& problem) {
  const std::string reason = "node's " + what + " is unusable: " + problem;
  log::Error("node " + name + ": " + reason + "; linkfit does not place on it");
  metrics_.CountBadObject("node", what == kAnnotationMigMode ? "mig-mode" : "topology");
  const bool was_modelled = entry.facts_hash != 0;
  if (was_modelled) cache_.RemoveNode(name);
  cache_.SetNodeProblem(name, reason);
  entry.facts_hash = 0;
  SetHandoffModeLocked(entry, kNoMode);
  return was_modelled ? Change::kRemoved : Change::kNone;
}

void NodeStore::SetHandoffModeLocked(Entry& entry, int mode) {
  if (mode == entry.handoff_mode) return;
  if (entry.handoff_mode != kNoMode) --nodes_by_mode_[static_cast<std::size_t>(entry.handoff_mode)];
  if (mode != kNoMode) ++nodes_by_mode_[static_cast<std::size_t>(mode)];
  entry.handoff_mode = mode;
  for (int i = 0; i <= kUnsaid; ++i) {
    metrics_.SetNodesByHandoffMode(i == kUnsaid ? "unreported" : topology::kHandoffModes[i],
                                   nodes_by_mode_[static_cast<std::size_t>(i)]);
  }
}

void NodeStore::Delete(const std::string& name) {
  {
    MutexLock lock(mutex_);
    if (const auto it = nodes_.find(name); it != nodes_.end()) {
      SetHandoffModeLocked(it->second, kNoMode);
    }
    nodes_.erase(name);
    cache_.RemoveNode(name);
    cache_.SetNodeProblem(name, "");
  }
  pods_.SetReportedDevices(name, std::nullopt);
  pods_.NodeRemoved(name);
}

std::size_t NodeStore::known() const {
  MutexLock lock(mutex_);
  return nodes_.size();
}

std::size_t NodeStore::modelled() const {
  MutexLock lock(mutex_);
  std::size_t count = 0;
  for (const auto& [name, entry] : nodes_) count += entry.facts_hash != 0 ? 1 : 0;
  return count;
}

std::uint64_t NodeStore::lists_applied() const {
  MutexLock lock(mutex_);
  return lists_;
}

}  // namespace linkfit::cluster
