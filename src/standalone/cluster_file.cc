#include "linkfit/standalone/standalone.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

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

// Parses one allocation against the cache's nodes (for GPU counts and MIG profile names).
Result<state::Assignment> ParseAllocation(const YAML::Node& item, const std::string& source,
                                          const std::string& path, const state::Snapshot& snap) {
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
  const state::NodeState* node = snap.Find(a.node);
  if (node == nullptr) {
    return MakeError(Where(source, item["node"]) + ": " + path + ".node: unknown node " + a.node);
  }
  const int gpu_count = node->info().gpu_count();
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
    if (node->info().mig == nullptr) {
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
      const int index = node->info().mig->set().FindProfile(profile);
      if (index < 0) {
        return MakeError(Where(source, slot["profile"]) + ": " + path +
                         ".mig[].profile: " + profile + " is not a MIG profile of " +
                         node->info().topology().gpu(0).model);
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

Result<int> ApplyAllocations(const YAML::Node& list, const std::string& source,
                             state::ClusterCache& cache) {
  if (!list || list.IsNull()) return 0;
  if (!list.IsSequence()) return MakeError(Where(source, list) + ": allocations: expected a list");
  int count = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = "allocations[" + std::to_string(i) + "]";
    const state::SnapshotPtr snap = cache.Snapshot();
    auto assignment = ParseAllocation(list[i], source, path, *snap);
    if (!assignment) return tl::unexpected(assignment.error());
    if (auto added = cache.AddBound(*assignment); !added) {
      return MakeError(Where(source, list[i]) + ": " + path + ": " + added.error().message);
    }
    ++count;
  }
  return count;
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

}  // namespace

Result<ClusterLoadStats> LoadClusterFile(const std::string& path, source::NodeModelFactory& factory,
                                         state::ClusterCache& cache) {
  YAML::Node root;
  LINKFIT_ASSIGN_OR_RETURN(root, ParseYamlFile(path));
  if (auto keys = CheckKeys(root, path, "$", {"nodes", "allocations"}); !keys) {
    return tl::unexpected(keys.error());
  }
  const std::string base = fs::path(path).parent_path().string();
  const YAML::Node nodes = root["nodes"];
  if (!nodes || !nodes.IsSequence() || nodes.size() == 0) {
    return MakeError(Where(path, root) + ": nodes: expected a non-empty list");
  }
  ClusterLoadStats stats;
  std::map<std::string, topology::TopologyPtr> topologies;
  std::set<std::string> names;
  try {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const YAML::Node entry = nodes[i];
      const std::string where = "nodes[" + std::to_string(i) + "]";
      if (auto keys = CheckKeys(
              entry, path, where,
              {"name", "name_prefix", "count", "topology", "labels", "mig", "cpu", "memory"});
          !keys) {
        return tl::unexpected(keys.error());
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
      }
      const topology::TopologyPtr& topo = cached->second;
      std::map<std::string, std::string> labels;
      if (const YAML::Node label_map = entry["labels"]) {
        if (!label_map.IsMap())
          return MakeError(Where(path, label_map) + ": " + where + ".labels: expected a mapping");
        for (const auto& label : label_map)
          labels[label.first.as<std::string>()] = label.second.as<std::string>();
      }
      topology::GpuMask mig_enabled = 0;
      LINKFIT_ASSIGN_OR_RETURN(mig_enabled,
                               ParseMigGpus(entry["mig"], path, where + ".mig", topo->gpu_count()));
      std::int64_t cpu_milli = 0;
      std::int64_t memory_milli = 0;
      LINKFIT_ASSIGN_OR_RETURN(cpu_milli,
                               OptionalQuantityMilli(entry, "cpu", path, where + ".cpu"));
      LINKFIT_ASSIGN_OR_RETURN(memory_milli,
                               OptionalQuantityMilli(entry, "memory", path, where + ".memory"));
      std::vector<std::string> node_names;
      if (entry["name"]) {
        if (entry["name_prefix"] || entry["count"]) {
          return MakeError(Where(path, entry) + ": " + where +
                           ": give name, or name_prefix with count");
        }
        std::string name;
        LINKFIT_ASSIGN_OR_RETURN(name, ScalarString(entry, "name", path, where + ".name"));
        node_names.push_back(name);
      } else {
        std::string prefix;
        long count = 0;
        LINKFIT_ASSIGN_OR_RETURN(prefix,
                                 ScalarString(entry, "name_prefix", path, where + ".name_prefix"));
        LINKFIT_ASSIGN_OR_RETURN(count,
                                 ScalarInt(entry, "count", path, where + ".count", 1, 100000));
        for (long n = 0; n < count; ++n) node_names.push_back(prefix + std::to_string(n));
      }
      for (const std::string& name : node_names) {
        if (!names.insert(name).second) {
          const char* key = entry["name"] ? "name" : "name_prefix";
          return MakeError(Where(path, entry[key]) + ": " + where + "." + key +
                           ": duplicate node name " + name);
        }
        auto info =
            factory.Build({name, labels, topo, mig_enabled, cpu_milli, MilliToBytes(memory_milli)});
        if (!info) {
          return MakeError(Where(path, entry["mig"]) + ": " + where +
                           ".mig: " + info.error().message);
        }
        cache.UpsertNode(std::move(*info));
        ++stats.nodes;
      }
    }
    LINKFIT_ASSIGN_OR_RETURN(stats.allocations, ApplyAllocations(root["allocations"], path, cache));
  } catch (const YAML::Exception& e) {
    return MakeError(path + ": " + e.what());
  }
  stats.topologies = static_cast<int>(topologies.size());
  return stats;
}

}  // namespace linkfit::standalone
