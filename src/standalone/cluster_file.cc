#include "linkfit/standalone/standalone.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "linkfit/common/log.h"
#include "linkfit/common/strings.h"
#include "linkfit/kube/quantity.h"
#include "linkfit/topology/topology.h"

namespace linkfit::standalone {
namespace {

namespace fs = std::filesystem;

std::string Where(const std::string& source, const YAML::Node& node) {
  if (!node.IsDefined()) return source;  // a missing key has no position (Mark() would throw)
  const YAML::Mark mark = node.Mark();
  if (mark.line < 0) return source;
  return source + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

Result<void> CheckKeys(const YAML::Node& node, const std::string& source, const std::string& path,
                       const std::set<std::string>& known) {
  if (!node.IsMap()) return MakeError(Where(source, node) + ": " + path + ": expected a mapping");
  for (const auto& entry : node) {
    const std::string key = entry.first.as<std::string>("");
    if (known.count(key) == 0) {
      std::string names;
      for (const std::string& k : known) names += (names.empty() ? "" : ", ") + k;
      return MakeError(Where(source, entry.first) + ": " + path + "." + key +
                       ": unknown key; known keys: " + names);
    }
  }
  return {};
}

Result<std::string> ScalarString(const YAML::Node& node, const std::string& source,
                                 const std::string& path) {
  if (!node || !node.IsScalar() || node.Scalar().empty()) {
    return MakeError(Where(source, node) + ": " + path + ": expected a non-empty string");
  }
  return node.Scalar();
}

Result<long> ScalarInt(const YAML::Node& node, const std::string& source, const std::string& path,
                       long min, long max) {
  const auto value = node && node.IsScalar() ? ParseInt(node.Scalar()) : std::nullopt;
  if (!value || *value < min || *value > max) {
    return MakeError(Where(source, node) + ": " + path + ": expected an integer from " +
                     std::to_string(min) + " to " + std::to_string(max));
  }
  return static_cast<long>(*value);
}

// The same for the value of `key` in the mapping `parent`: a missing key is reported at the
// mapping's line (the value has none).
Result<std::string> ScalarString(const YAML::Node& parent, const char* key,
                                 const std::string& source, const std::string& path) {
  const YAML::Node node = parent[key];
  if (!node) return MakeError(Where(source, parent) + ": " + path + ": missing key");
  return ScalarString(node, source, path);
}

Result<long> ScalarInt(const YAML::Node& parent, const char* key, const std::string& source,
                       const std::string& path, long min, long max) {
  const YAML::Node node = parent[key];
  if (!node) return MakeError(Where(source, parent) + ": " + path + ": missing key");
  return ScalarInt(node, source, path, min, max);
}

// An optional Kubernetes quantity (`64`, `500m`, `256Gi`) under `key`, in thousandths of its
// unit; 0 when the key is absent.
Result<std::int64_t> OptionalQuantityMilli(const YAML::Node& parent, const char* key,
                                           const std::string& source, const std::string& path) {
  const YAML::Node node = parent[key];
  if (!node) return std::int64_t{0};
  auto milli = node.IsScalar() ? kube::ParseQuantityMilli(node.Scalar())
                               : Result<std::int64_t>(MakeError("expected a quantity"));
  if (!milli || *milli < 0) {
    return MakeError(Where(source, node) + ": " + path +
                     ": expected a non-negative Kubernetes quantity" +
                     (milli ? std::string() : " (" + milli.error().message + ")"));
  }
  return *milli;
}

// Memory quantities are bytes: thousandths rounded up.
std::int64_t MilliToBytes(std::int64_t milli) { return (milli + 999) / 1000; }

std::string Resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || fs::path(path).is_absolute() || base_dir.empty()) return path;
  return (fs::path(base_dir) / path).lexically_normal().string();
}

Result<topology::GpuMask> ParseMigGpus(const YAML::Node& node, const std::string& source,
                                       const std::string& path, int gpu_count) {
  const auto all = static_cast<topology::GpuMask>((1u << gpu_count) - 1u);
  if (!node) return topology::GpuMask{0};
  if (node.IsScalar()) {
    if (node.Scalar() == "all") return all;
    if (node.Scalar() == "none") return topology::GpuMask{0};
  }
  if (!node.IsSequence()) {
    return MakeError(Where(source, node) + ": " + path + ": expected all, none or a list of GPUs");
  }
  unsigned mask = 0;
  for (const YAML::Node& item : node) {
    long gpu = 0;
    LINKFIT_ASSIGN_OR_RETURN(gpu, ScalarInt(item, source, path + "[]", 0, gpu_count - 1));
    mask |= 1u << gpu;
  }
  return static_cast<topology::GpuMask>(mask);
}

// A position in the file, kept for messages about what is only checked after reading (an
// allocation that collides with another).
struct Position {
  int line = -1;  // 0-based, as YAML::Mark
  int column = 0;
};

Position PositionOf(const YAML::Node& node) {
  if (!node.IsDefined()) return {};
  const YAML::Mark mark = node.Mark();
  return {mark.line, mark.column};
}

std::string Where(const std::string& source, Position position) {
  if (position.line < 0) return source;
  return source + ":" + std::to_string(position.line + 1) + ":" +
         std::to_string(position.column + 1);
}

// One entry of `nodes`: one node, or `count` nodes named prefix0, prefix1, ...
struct NodeGroup {
  std::string name;        // the node's name, or the prefix
  long count = 1;          // how many of the entry's nodes were read (all, unless it is bad)
  bool prefixed = false;   // `name` is a prefix
  model::NodeFacts facts;  // every node's facts but its name
  std::string where_mig;   // "file:line:col: nodes[i].mig" for a model that cannot be built

  std::string NodeName(long n) const { return prefixed ? name + std::to_string(n) : name; }
};

struct PlannedAllocation {
  state::Assignment assignment;
  Position position;  // of the list item
};

// The cluster file read into plain values, before any node is built. Reading stops at the first
// problem, kept in `problem`: what was read before it is still built and applied, in the file's
// order, so a bad file fails with the message it failed with when nodes were built while it was
// read, and leaves the cache as that did.
struct ClusterPlan {
  std::vector<NodeGroup> groups;
  std::vector<PlannedAllocation> allocations;
  int topologies = 0;
  Result<void> problem;
};

// The nodes allocations may name while the file is read: the file's (one model per group, built
// for its first node; every node of a group has the same model but its name), then the cache's.
class KnownNodes {
 public:
  explicit KnownNodes(state::SnapshotPtr existing) : existing_(std::move(existing)) {}

  // Starts a group; its model is set once built.
  void AddGroup() { models_.emplace_back(); }
  void SetModel(state::NodeInfoPtr model) { models_.back() = std::move(model); }
  // Records `name` in the last group; false if it was already recorded.
  bool Add(const std::string& name) { return group_of_.emplace(name, models_.size() - 1).second; }

  // Returns the node's model, or nullptr when neither the file nor the cache has the node.
  const state::NodeInfo* Find(const std::string& name) const {
    if (const auto it = group_of_.find(name); it != group_of_.end()) {
      return models_[it->second].get();
    }
    const state::NodeState* node = existing_->Find(name);
    return node == nullptr ? nullptr : &node->info();
  }

 private:
  state::SnapshotPtr existing_;
  std::vector<state::NodeInfoPtr> models_;
  std::unordered_map<std::string, std::size_t> group_of_;
};

// Parses one allocation against the known nodes (for GPU counts and MIG profile names).
Result<state::Assignment> ParseAllocation(const YAML::Node& item, const std::string& source,
                                          const std::string& path, const KnownNodes& nodes) {
  if (auto keys = CheckKeys(item, source, path,
                            {"pod", "uid", "node", "gpus", "mig", "shares", "cpu", "memory"});
      !keys) {
    return tl::unexpected(keys.error());
  }
  state::Assignment a;
  std::string pod;
  LINKFIT_ASSIGN_OR_RETURN(pod, ScalarString(item, "pod", source, path + ".pod"));
  const auto slash = pod.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == pod.size()) {
    return MakeError(Where(source, item["pod"]) + ": " + path + ".pod: expected namespace/name");
  }
  a.pod_namespace = pod.substr(0, slash);
  a.pod_name = pod.substr(slash + 1);
  LINKFIT_ASSIGN_OR_RETURN(a.pod_uid, ScalarString(item, "uid", source, path + ".uid"));
  LINKFIT_ASSIGN_OR_RETURN(a.node, ScalarString(item, "node", source, path + ".node"));
  const state::NodeInfo* node = nodes.Find(a.node);
  if (node == nullptr) {
    return MakeError(Where(source, item["node"]) + ": " + path + ".node: unknown node " + a.node);
  }
  const int gpu_count = node->gpu_count();
  LINKFIT_ASSIGN_OR_RETURN(a.cpu_milli, OptionalQuantityMilli(item, "cpu", source, path + ".cpu"));
  std::int64_t memory_milli = 0;
  LINKFIT_ASSIGN_OR_RETURN(memory_milli,
                           OptionalQuantityMilli(item, "memory", source, path + ".memory"));
  a.memory_bytes = MilliToBytes(memory_milli);
  const int kinds = (item["gpus"] ? 1 : 0) + (item["mig"] ? 1 : 0) + (item["shares"] ? 1 : 0);
  const bool gpu_less = kinds == 0 && (item["cpu"] || item["memory"]);
  if (kinds != 1 && !gpu_less) {
    return MakeError(Where(source, item) + ": " + path +
                     ": give exactly one of gpus, mig, shares (or only cpu/memory for a pod "
                     "without GPUs)");
  }
  unsigned mask = 0;
  if (gpu_less) {
    a.kind = state::Assignment::Kind::kWhole;
  } else if (const YAML::Node gpus = item["gpus"]) {
    a.kind = state::Assignment::Kind::kWhole;
    if (!gpus.IsSequence() || gpus.size() == 0) {
      return MakeError(Where(source, gpus) + ": " + path + ".gpus: expected a list of GPUs");
    }
    for (const YAML::Node& g : gpus) {
      long gpu = 0;
      LINKFIT_ASSIGN_OR_RETURN(gpu, ScalarInt(g, source, path + ".gpus[]", 0, gpu_count - 1));
      mask |= 1u << gpu;
    }
  } else if (const YAML::Node mig = item["mig"]) {
    a.kind = state::Assignment::Kind::kMig;
    if (node->mig_planners.empty()) {
      return MakeError(Where(source, mig) + ": " + path + ".mig: node " + a.node +
                       " has no MIG-capable GPUs");
    }
    if (!mig.IsSequence() || mig.size() == 0) {
      return MakeError(Where(source, mig) + ": " + path + ".mig: expected a list of instances");
    }
    for (const YAML::Node& slot : mig) {
      if (auto keys = CheckKeys(slot, source, path + ".mig[]", {"gpu", "profile", "start"});
          !keys) {
        return tl::unexpected(keys.error());
      }
      long gpu = 0;
      long start = 0;
      std::string profile;
      LINKFIT_ASSIGN_OR_RETURN(
          gpu, ScalarInt(slot, "gpu", source, path + ".mig[].gpu", 0, gpu_count - 1));
      LINKFIT_ASSIGN_OR_RETURN(start,
                               ScalarInt(slot, "start", source, path + ".mig[].start", 0, 7));
      LINKFIT_ASSIGN_OR_RETURN(profile,
                               ScalarString(slot, "profile", source, path + ".mig[].profile"));
      // A profile of the GPU's own model's set (a node may mix models).
      const alloc::MigPlanner* planner = node->MigPlannerOf(static_cast<int>(gpu));
      const int index = planner == nullptr ? -1 : planner->set().FindProfile(profile);
      if (index < 0) {
        return MakeError(Where(source, slot["profile"]) + ": " + path + ".mig[].profile: " +
                         profile + " is not a MIG profile of GPU " + std::to_string(gpu) + " (" +
                         node->topology().gpu(static_cast<int>(gpu)).model + ")");
      }
      a.mig.push_back({static_cast<int>(gpu), alloc::MigInstance{index, static_cast<int>(start)}});
      mask |= 1u << gpu;
    }
  } else {
    const YAML::Node shares = item["shares"];
    a.kind = state::Assignment::Kind::kShared;
    if (!shares.IsSequence() || shares.size() == 0) {
      return MakeError(Where(source, shares) + ": " + path + ".shares: expected a list of shares");
    }
    for (const YAML::Node& slot : shares) {
      if (auto keys = CheckKeys(slot, source, path + ".shares[]", {"gpu", "milli"}); !keys) {
        return tl::unexpected(keys.error());
      }
      long gpu = 0;
      long milli = 0;
      LINKFIT_ASSIGN_OR_RETURN(
          gpu, ScalarInt(slot, "gpu", source, path + ".shares[].gpu", 0, gpu_count - 1));
      LINKFIT_ASSIGN_OR_RETURN(milli,
                               ScalarInt(slot, "milli", source, path + ".shares[].milli", 1, 1000));
      a.shares.push_back({static_cast<int>(gpu), static_cast<int>(milli)});
      mask |= 1u << gpu;
    }
  }
  a.gpus = static_cast<topology::GpuMask>(mask);
  return a;
}

Result<YAML::Node> ParseYamlFile(const std::string& path) {
  try {
    return YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return MakeError(path + ": cannot read the file");
  } catch (const YAML::Exception& e) {
    return MakeError(path + ": " + e.what());
  }
}

// Reads the allocations into `plan` until the first bad one.
Result<void> ReadAllocations(const YAML::Node& list, const std::string& source,
                             const KnownNodes& nodes, ClusterPlan& plan) {
  if (!list || list.IsNull()) return {};
  if (!list.IsSequence()) return MakeError(Where(source, list) + ": allocations: expected a list");
  plan.allocations.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = list[i];
    auto assignment =
        ParseAllocation(item, source, "allocations[" + std::to_string(i) + "]", nodes);
    if (!assignment) return tl::unexpected(assignment.error());
    plan.allocations.push_back({std::move(*assignment), PositionOf(item)});
  }
  return {};
}

// Reads the entries of `nodes` into `plan` until the first bad one. Each group's model is built
// once here (its errors do not depend on the node's name) so that allocations can be checked
// against it; the nodes themselves are built after the YAML tree is gone.
Result<void> ReadNodes(const YAML::Node& nodes, const std::string& path,
                       model::NodeModelFactory& factory, KnownNodes& known, ClusterPlan& plan) {
  const std::string base = fs::path(path).parent_path().string();
  std::map<std::string, topology::TopologyPtr> topologies;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const YAML::Node entry = nodes[i];
    const std::string where = "nodes[" + std::to_string(i) + "]";
    if (auto keys = CheckKeys(
            entry, path, where,
            {"name", "name_prefix", "count", "topology", "labels", "mig", "cpu", "memory"});
        !keys) {
      return keys;
    }
    std::string topology_path;
    LINKFIT_ASSIGN_OR_RETURN(topology_path,
                             ScalarString(entry, "topology", path, where + ".topology"));
    topology_path = Resolve(base, topology_path);
    auto cached = topologies.find(topology_path);
    if (cached == topologies.end()) {
      auto text = topology::ReadTopologyFile(topology_path);
      if (!text) {
        return MakeError(Where(path, entry["topology"]) + ": " + where +
                         ".topology: " + text.error().message);
      }
      auto topo = factory.TopologyFromText(*text, topology_path);
      if (!topo) {
        return MakeError(Where(path, entry["topology"]) + ": " + where +
                         ".topology: " + topology_path + ": " + topo.error().message);
      }
      cached = topologies.emplace(topology_path, *topo).first;
      plan.topologies = static_cast<int>(topologies.size());
    }
    NodeGroup group;
    model::NodeFacts& facts = group.facts;
    facts.topology = cached->second;
    if (const YAML::Node label_map = entry["labels"]) {
      if (!label_map.IsMap())
        return MakeError(Where(path, label_map) + ": " + where + ".labels: expected a mapping");
      for (const auto& label : label_map)
        facts.labels[label.first.as<std::string>()] = label.second.as<std::string>();
    }
    LINKFIT_ASSIGN_OR_RETURN(facts.mig_enabled, ParseMigGpus(entry["mig"], path, where + ".mig",
                                                             facts.topology->gpu_count()));
    std::int64_t memory_milli = 0;
    LINKFIT_ASSIGN_OR_RETURN(facts.cpu_milli,
                             OptionalQuantityMilli(entry, "cpu", path, where + ".cpu"));
    LINKFIT_ASSIGN_OR_RETURN(memory_milli,
                             OptionalQuantityMilli(entry, "memory", path, where + ".memory"));
    facts.memory_bytes = MilliToBytes(memory_milli);
    if (entry["name"]) {
      if (entry["name_prefix"] || entry["count"]) {
        return MakeError(Where(path, entry) + ": " + where +
                         ": give name, or name_prefix with count");
      }
      LINKFIT_ASSIGN_OR_RETURN(group.name, ScalarString(entry, "name", path, where + ".name"));
    } else {
      group.prefixed = true;
      LINKFIT_ASSIGN_OR_RETURN(group.name,
                               ScalarString(entry, "name_prefix", path, where + ".name_prefix"));
      LINKFIT_ASSIGN_OR_RETURN(group.count,
                               ScalarInt(entry, "count", path, where + ".count", 1, 100000));
    }
    group.where_mig = Where(path, entry["mig"]) + ": " + where + ".mig";
    known.AddGroup();
    const long count = group.count;
    for (long n = 0; n < count; ++n) {
      const std::string name = group.NodeName(n);
      if (!known.Add(name)) {
        const char* key = entry["name"] ? "name" : "name_prefix";
        group.count = n;  // the nodes before the duplicate are still built
        if (n > 0) plan.groups.push_back(std::move(group));
        return MakeError(Where(path, entry[key]) + ": " + where + "." + key +
                         ": duplicate node name " + name);
      }
      if (n == 0) {
        model::NodeFacts first = facts;
        first.name = name;
        auto model = factory.Build(std::move(first));
        if (!model) return MakeError(group.where_mig + ": " + model.error().message);
        known.SetModel(std::move(*model));
      }
    }
    plan.groups.push_back(std::move(group));
  }
  return {};
}

// Phase 1 of LoadClusterFile: everything the file says, checked, as plain values. The YAML tree
// and every lookup table built to check the file are freed when this returns.
ClusterPlan ReadClusterFile(const std::string& path, model::NodeModelFactory& factory,
                            const state::ClusterCache& cache) {
  ClusterPlan plan;
  plan.problem = [&]() -> Result<void> {
    YAML::Node root;
    LINKFIT_ASSIGN_OR_RETURN(root, ParseYamlFile(path));
    if (auto keys = CheckKeys(root, path, "$", {"nodes", "allocations"}); !keys) return keys;
    const YAML::Node nodes = root["nodes"];
    if (!nodes || !nodes.IsSequence() || nodes.size() == 0) {
      return MakeError(Where(path, root) + ": nodes: expected a non-empty list");
    }
    try {
      KnownNodes known(cache.Snapshot());
      if (auto read = ReadNodes(nodes, path, factory, known, plan); !read) return read;
      return ReadAllocations(root["allocations"], path, known, plan);
    } catch (const YAML::Exception& e) {
      return MakeError(path + ": " + e.what());
    }
  }();
  return plan;
}

}  // namespace

// Loading runs in two phases so that the long-lived nodes do not land in the holes of the YAML
// tree: glibc cannot return a page that holds one live block, so nodes scattered among the
// tree's freed blocks kept about 2 KB per node resident after loading (bench/RESULTS.md, issue
// 11). The file is read into plain values first and the tree freed; then the nodes are built.
Result<ClusterLoadStats> LoadClusterFile(const std::string& path, model::NodeModelFactory& factory,
                                         state::ClusterCache& cache) {
  ClusterPlan plan = ReadClusterFile(path, factory, cache);
  ClusterLoadStats stats;
  stats.topologies = plan.topologies;
  for (NodeGroup& group : plan.groups) {
    for (long n = 0; n < group.count; ++n) {
      model::NodeFacts facts = group.facts;
      facts.name = group.NodeName(n);
      auto info = factory.Build(std::move(facts));
      if (!info) return MakeError(group.where_mig + ": " + info.error().message);
      cache.UpsertNode(std::move(*info));
      ++stats.nodes;
    }
  }
  plan.groups.clear();
  for (std::size_t i = 0; i < plan.allocations.size(); ++i) {
    const PlannedAllocation& planned = plan.allocations[i];
    if (auto added = cache.AddBound(planned.assignment); !added) {
      return MakeError(Where(path, planned.position) + ": allocations[" + std::to_string(i) +
                       "]: " + added.error().message);
    }
    ++stats.allocations;
  }
  if (!plan.problem) return tl::unexpected(plan.problem.error());
  return stats;
}

}  // namespace linkfit::standalone
