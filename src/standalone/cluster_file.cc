#include "linkfit/standalone/standalone.h"

#include <filesystem>
#include <map>
#include <unordered_map>

#include "linkfit/common/yaml_reader.h"
#include "linkfit/kube/quantity.h"
#include "linkfit/topology/topology.h"

namespace linkfit::standalone {
namespace {

namespace fs = std::filesystem;

// An optional Kubernetes quantity (`64`, `500m`, `256Gi`) under `key`, in thousandths of its
// unit; 0 when the key is absent.
Result<std::int64_t> OptionalQuantityMilli(const yaml::Reader& reader, const YAML::Node& parent,
                                           const char* key, const std::string& path) {
  const YAML::Node node = parent[key];
  if (!node) return std::int64_t{0};
  auto milli = node.IsScalar() ? kube::ParseQuantityMilli(node.Scalar())
                               : Result<std::int64_t>(MakeError("expected a quantity"));
  if (!milli || *milli < 0) {
    return reader.Fail(node, yaml::Join(path, key),
                       "expected a non-negative Kubernetes quantity" +
                           (milli ? std::string() : " (" + milli.error().message + ")"));
  }
  return *milli;
}

// Memory quantities are bytes: thousandths rounded up.
std::int64_t MilliToBytes(std::int64_t milli) { return (milli + 999) / 1000; }

Result<topology::GpuMask> ParseMigGpus(const yaml::Reader& reader, const YAML::Node& node,
                                       const std::string& path, int gpu_count) {
  const auto all = static_cast<topology::GpuMask>((1u << gpu_count) - 1u);
  if (!node) return topology::GpuMask{0};
  if (node.IsScalar()) {
    if (node.Scalar() == "all") return all;
    if (node.Scalar() == "none") return topology::GpuMask{0};
  }
  if (!node.IsSequence()) return reader.Fail(node, path, "expected all, none or a list of GPUs");
  unsigned mask = 0;
  for (const YAML::Node& item : node) {
    std::int64_t gpu = 0;
    LINKFIT_ASSIGN_OR_RETURN(gpu, reader.Integer(item, path + "[]", 0, gpu_count - 1));
    mask |= 1u << gpu;
  }
  return static_cast<topology::GpuMask>(mask);
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
  YAML::Mark position;  // of the list item, for a collision found after the tree is gone
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
Result<state::Assignment> ParseAllocation(const yaml::Reader& reader, const YAML::Node& item,
                                          const std::string& path, const KnownNodes& nodes) {
  if (auto keys = reader.CheckMapping(
          item, path, {"pod", "uid", "node", "gpus", "mig", "shares", "cpu", "memory"});
      !keys) {
    return tl::unexpected(keys.error());
  }
  constexpr auto kNonEmpty = yaml::Empty::kRefused;
  state::Assignment a;
  std::string pod;
  LINKFIT_ASSIGN_OR_RETURN(pod, reader.String(item, "pod", path, kNonEmpty));
  const auto slash = pod.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == pod.size()) {
    return reader.Fail(item["pod"], path + ".pod", "expected namespace/name");
  }
  a.pod_namespace = pod.substr(0, slash);
  a.pod_name = pod.substr(slash + 1);
  LINKFIT_ASSIGN_OR_RETURN(a.pod_uid, reader.String(item, "uid", path, kNonEmpty));
  LINKFIT_ASSIGN_OR_RETURN(a.node, reader.String(item, "node", path, kNonEmpty));
  const state::NodeInfo* node = nodes.Find(a.node);
  if (node == nullptr) return reader.Fail(item["node"], path + ".node", "unknown node " + a.node);
  const int gpu_count = node->gpu_count();
  LINKFIT_ASSIGN_OR_RETURN(a.cpu_milli, OptionalQuantityMilli(reader, item, "cpu", path));
  std::int64_t memory_milli = 0;
  LINKFIT_ASSIGN_OR_RETURN(memory_milli, OptionalQuantityMilli(reader, item, "memory", path));
  a.memory_bytes = MilliToBytes(memory_milli);
  const int kinds = (item["gpus"] ? 1 : 0) + (item["mig"] ? 1 : 0) + (item["shares"] ? 1 : 0);
  const bool gpu_less = kinds == 0 && (item["cpu"] || item["memory"]);
  if (kinds != 1 && !gpu_less) {
    return reader.Fail(item, path,
                       "give exactly one of gpus, mig, shares (or only cpu/memory for a pod "
                       "without GPUs)");
  }
  unsigned mask = 0;
  if (gpu_less) {
    a.kind = state::Assignment::Kind::kWhole;
  } else if (const YAML::Node gpus = item["gpus"]) {
    a.kind = state::Assignment::Kind::kWhole;
    if (!gpus.IsSequence() || gpus.size() == 0) {
      return reader.Fail(gpus, path + ".gpus", "expected a list of GPUs");
    }
    for (const YAML::Node& g : gpus) {
      std::int64_t gpu = 0;
      LINKFIT_ASSIGN_OR_RETURN(gpu, reader.Integer(g, path + ".gpus[]", 0, gpu_count - 1));
      mask |= 1u << gpu;
    }
  } else if (const YAML::Node mig = item["mig"]) {
    a.kind = state::Assignment::Kind::kMig;
    if (node->mig_planners.empty()) {
      return reader.Fail(mig, path + ".mig", "node " + a.node + " has no MIG-capable GPUs");
    }
    if (!mig.IsSequence() || mig.size() == 0) {
      return reader.Fail(mig, path + ".mig", "expected a list of instances");
    }
    const std::string slot_path = path + ".mig[]";
    for (const YAML::Node& slot : mig) {
      if (auto keys = reader.CheckMapping(slot, slot_path, {"gpu", "profile", "start"}); !keys) {
        return tl::unexpected(keys.error());
      }
      std::int64_t gpu = 0;
      std::int64_t start = 0;
      std::string profile;
      LINKFIT_ASSIGN_OR_RETURN(gpu, reader.Integer(slot, "gpu", slot_path, 0, gpu_count - 1));
      LINKFIT_ASSIGN_OR_RETURN(start, reader.Integer(slot, "start", slot_path, 0, 7));
      LINKFIT_ASSIGN_OR_RETURN(profile, reader.String(slot, "profile", slot_path, kNonEmpty));
      // A profile of the GPU's own model's set (a node may mix models).
      const alloc::MigPlanner* planner = node->MigPlannerOf(static_cast<int>(gpu));
      const int index = planner == nullptr ? -1 : planner->set().FindProfile(profile);
      if (index < 0) {
        return reader.Fail(slot["profile"], slot_path + ".profile",
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
      return reader.Fail(shares, path + ".shares", "expected a list of shares");
    }
    const std::string slot_path = path + ".shares[]";
    for (const YAML::Node& slot : shares) {
      if (auto keys = reader.CheckMapping(slot, slot_path, {"gpu", "milli"}); !keys) {
        return tl::unexpected(keys.error());
      }
      std::int64_t gpu = 0;
      std::int64_t milli = 0;
      LINKFIT_ASSIGN_OR_RETURN(gpu, reader.Integer(slot, "gpu", slot_path, 0, gpu_count - 1));
      LINKFIT_ASSIGN_OR_RETURN(milli, reader.Integer(slot, "milli", slot_path, 1, 1000));
      a.shares.push_back({static_cast<int>(gpu), static_cast<int>(milli)});
      mask |= 1u << gpu;
    }
  }
  a.gpus = static_cast<topology::GpuMask>(mask);
  return a;
}

// Reads the allocations into `plan` until the first bad one.
Result<void> ReadAllocations(const yaml::Reader& reader, const YAML::Node& list,
                             const KnownNodes& nodes, ClusterPlan& plan) {
  if (!list || list.IsNull()) return {};
  if (!list.IsSequence()) return reader.Fail(list, "allocations", "expected a list");
  plan.allocations.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = list[i];
    auto assignment =
        ParseAllocation(reader, item, "allocations[" + std::to_string(i) + "]", nodes);
    if (!assignment) return tl::unexpected(assignment.error());
    plan.allocations.push_back({std::move(*assignment), yaml::MarkOf(item)});
  }
  return {};
}

// Reads the entries of `nodes` into `plan` until the first bad one. Each group's model is built
// once here (its errors do not depend on the node's name) so that allocations can be checked
// against it; the nodes themselves are built after the YAML tree is gone.
Result<void> ReadNodes(const yaml::Reader& reader, const YAML::Node& nodes,
                       model::NodeModelFactory& factory, KnownNodes& known, ClusterPlan& plan) {
  constexpr auto kNonEmpty = yaml::Empty::kRefused;
  std::map<std::string, topology::TopologyPtr> topologies;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const YAML::Node entry = nodes[i];
    const std::string where = "nodes[" + std::to_string(i) + "]";
    if (auto keys = reader.CheckMapping(
            entry, where,
            {"name", "name_prefix", "count", "topology", "labels", "mig", "cpu", "memory"});
        !keys) {
      return keys;
    }
    std::string topology_path;
    LINKFIT_ASSIGN_OR_RETURN(topology_path, reader.String(entry, "topology", where, kNonEmpty));
    topology_path = reader.Resolve(topology_path);
    auto cached = topologies.find(topology_path);
    if (cached == topologies.end()) {
      auto text = topology::ReadTopologyFile(topology_path);
      if (!text) return reader.Fail(entry["topology"], where + ".topology", text.error().message);
      auto topo = factory.TopologyFromText(*text, topology_path);
      if (!topo) {
        return reader.Fail(entry["topology"], where + ".topology",
                           topology_path + ": " + topo.error().message);
      }
      cached = topologies.emplace(topology_path, *topo).first;
      plan.topologies = static_cast<int>(topologies.size());
    }
    NodeGroup group;
    model::NodeFacts& facts = group.facts;
    facts.topology = cached->second;
    if (auto labels = reader.ReadEntries(entry["labels"], where + ".labels",
                                         [&](const std::string& key, const YAML::Node& value,
                                             const std::string& path) -> Result<void> {
                                           LINKFIT_ASSIGN_OR_RETURN(facts.labels[key],
                                                                    reader.String(value, path));
                                           return {};
                                         });
        !labels) {
      return labels;
    }
    LINKFIT_ASSIGN_OR_RETURN(facts.mig_enabled, ParseMigGpus(reader, entry["mig"], where + ".mig",
                                                             facts.topology->gpu_count()));
    std::int64_t memory_milli = 0;
    LINKFIT_ASSIGN_OR_RETURN(facts.cpu_milli, OptionalQuantityMilli(reader, entry, "cpu", where));
    LINKFIT_ASSIGN_OR_RETURN(memory_milli, OptionalQuantityMilli(reader, entry, "memory", where));
    facts.memory_bytes = MilliToBytes(memory_milli);
    if (entry["name"]) {
      if (entry["name_prefix"] || entry["count"]) {
        return reader.Fail(entry, where, "give name, or name_prefix with count");
      }
      LINKFIT_ASSIGN_OR_RETURN(group.name, reader.String(entry, "name", where, kNonEmpty));
    } else {
      group.prefixed = true;
      LINKFIT_ASSIGN_OR_RETURN(group.name, reader.String(entry, "name_prefix", where, kNonEmpty));
      LINKFIT_ASSIGN_OR_RETURN(group.count, reader.Integer(entry, "count", where, 1, 100000));
    }
    group.where_mig = reader.Where(entry["mig"]) + ": " + where + ".mig";
    known.AddGroup();
    const long count = group.count;
    for (long n = 0; n < count; ++n) {
      const std::string name = group.NodeName(n);
      if (!known.Add(name)) {
        const char* key = entry["name"] ? "name" : "name_prefix";
        group.count = n;  // the nodes before the duplicate are still built
        if (n > 0) plan.groups.push_back(std::move(group));
        return reader.Fail(entry[key], where + "." + key, "duplicate node name " + name);
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
ClusterPlan ReadClusterFile(const yaml::Reader& reader, model::NodeModelFactory& factory,
                            const state::ClusterCache& cache) {
  ClusterPlan plan;
  plan.problem = [&]() -> Result<void> {
    std::string text;
    LINKFIT_ASSIGN_OR_RETURN(text, yaml::ReadFile(reader.source()));
    YAML::Node root;
    LINKFIT_ASSIGN_OR_RETURN(root, reader.Load(text));
    if (auto keys = reader.CheckMapping(root, "$", {"nodes", "allocations"}); !keys) return keys;
    const YAML::Node nodes = root["nodes"];
    if (!nodes || !nodes.IsSequence() || nodes.size() == 0) {
      return reader.Fail(root, "nodes", "expected a non-empty list");
    }
    try {
      KnownNodes known(cache.Snapshot());
      if (auto read = ReadNodes(reader, nodes, factory, known, plan); !read) return read;
      return ReadAllocations(reader, root["allocations"], known, plan);
    } catch (const YAML::Exception& e) {
      return MakeError(reader.source() + ": " + e.what());
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
  const yaml::Reader reader(path, fs::path(path).parent_path().string(),
                            {.quoted_is_string = false});
  ClusterPlan plan = ReadClusterFile(reader, factory, cache);
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
      return MakeError(reader.Where(planned.position) + ": allocations[" + std::to_string(i) +
                       "]: " + added.error().message);
    }
    ++stats.allocations;
  }
  if (!plan.problem) return tl::unexpected(plan.problem.error());
  return stats;
}

}  // namespace linkfit::standalone
