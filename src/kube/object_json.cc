// Decoders of the Kubernetes objects linkfit reads (object_json.h): Pods and Nodes, alone (list
// items and watch events of the API server) or inside another document (the extender's
// requests, wire/codec_decode.cc), on simdjson's On-Demand API. Every value is visited once:
// what linkfit reads is converted, everything else goes through Skip(), which still validates it.

#include "linkfit/kube/object_json.h"

#include <simdjson.h>

#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kube/json_reader.h"

namespace linkfit::kube {
namespace {

using namespace json;  // NOLINT: internal helpers of this module

struct ContainerResources {
  std::string name;
  ResourceMap effective;  // requests, completed from limits
  bool restart_always = false;
};

bool ReadContainer(Ctx& c, od::value& v, const std::string& where, ContainerResources* out,
                   std::vector<std::string>* problems) {
  ResourceMap requests;
  ResourceMap limits;
  bool ok = ForEachField(c, v, where, false, [&](std::string_view key, od::value& child) {
    if (key == "name") return ReadString(c, child, where + ".name", &out->name);
    if (key == "restartPolicy") {
      std::string policy;
      if (!ReadString(c, child, where + ".restartPolicy", &policy)) return false;
      out->restart_always = policy == "Always";
      return true;
    }
    if (key == "resources") {
      return ForEachField(
          c, child, where + ".resources", true, [&](std::string_view rkey, od::value& rchild) {
            if (rkey == "requests") {
              return ReadResources(c, rchild, where + ".resources.requests", &requests, problems);
            }
            if (rkey == "limits") {
              return ReadResources(c, rchild, where + ".resources.limits", &limits, problems);
            }
            return Skip(c, rchild, 3, where);
          });
    }
    return Skip(c, child, 2, where);
  });
  if (!ok) return false;
  out->effective = std::move(requests);
  for (auto& [name, amount] : limits) out->effective.try_emplace(name, amount);
  return true;
}

std::int64_t SaturatingAdd(std::int64_t a, std::int64_t b, bool* overflow) {
  std::int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) {
    *overflow = true;
    return b > 0 ? std::numeric_limits<std::int64_t>::max()
                 : std::numeric_limits<std::int64_t>::min();
  }
  return sum;
}

void AddInto(ResourceMap& into, const ResourceMap& from, bool* overflow) {
  for (const auto& [name, amount] : from) {
    auto [it, inserted] = into.try_emplace(name, amount);
    if (!inserted) it->second = SaturatingAdd(it->second, amount, overflow);
  }
}

void MaxInto(ResourceMap& into, const ResourceMap& from) {
  for (const auto& [name, amount] : from) {
    auto [it, inserted] = into.try_emplace(name, amount);
    if (!inserted && amount > it->second) it->second = amount;
  }
}

// Mirrors Kubernetes' resource helpers (PodRequests / AggregateContainerRequests), see types.h.
void ComputeRequests(PodView* pod, const std::vector<ContainerResources>& containers,
                     const std::vector<ContainerResources>& init_containers,
                     const ResourceMap& overhead) {
  bool overflow = false;
  ResourceMap requests;
  for (const ContainerResources& container : containers) {
    AddInto(requests, container.effective, &overflow);
  }
  ResourceMap restartable;
  ResourceMap init_max;
  for (const ContainerResources& container : init_containers) {
    if (container.restart_always) {
      AddInto(requests, container.effective, &overflow);
      AddInto(restartable, container.effective, &overflow);
      MaxInto(init_max, restartable);
    } else {
      ResourceMap use = container.effective;
      AddInto(use, restartable, &overflow);
      MaxInto(init_max, use);
    }
  }
  MaxInto(requests, init_max);
  AddInto(requests, overhead, &overflow);
  if (overflow) pod->problems.push_back("Pod resource requests overflow int64");
  pod->requests = std::move(requests);
}

}  // namespace

bool ReadPod(Ctx& c, od::value& v, const std::string& where, PodView* pod) {
  std::vector<ContainerResources> containers;
  std::vector<ContainerResources> init_containers;
  ResourceMap overhead;
  auto read_containers = [&](od::value& list, const std::string& list_where,
                             std::vector<ContainerResources>* out) {
    return ForEachElement(c, list, list_where, [&](std::size_t index, od::value& element) {
      return ReadContainer(c, element, Indexed(list_where, index), &out->emplace_back(),
                           &pod->problems);
    });
  };
  const bool ok = ForEachField(c, v, where, false, [&](std::string_view key, od::value& child) {
    if (key == "metadata") {
      const std::string meta = where + ".metadata";
      return ForEachField(c, child, meta, true, [&](std::string_view mkey, od::value& mchild) {
        if (mkey == "name") return ReadString(c, mchild, meta + ".name", &pod->name);
        if (mkey == "namespace") {
          return ReadString(c, mchild, meta + ".namespace", &pod->pod_namespace);
        }
        if (mkey == "uid") return ReadString(c, mchild, meta + ".uid", &pod->uid);
        if (mkey == "deletionTimestamp") {
          std::string stamp;
          if (!ReadString(c, mchild, meta + ".deletionTimestamp", &stamp)) return false;
          pod->terminating = !stamp.empty();
          return true;
        }
        if (mkey == "labels") return ReadStringMap(c, mchild, meta + ".labels", &pod->labels);
        if (mkey == "annotations") {
          return ReadStringMap(c, mchild, meta + ".annotations", &pod->annotations);
        }
        return Skip(c, mchild, 2, meta);
      });
    }
    if (key == "spec") {
      const std::string spec = where + ".spec";
      return ForEachField(c, child, spec, true, [&](std::string_view skey, od::value& schild) {
        if (skey == "containers") {
          containers.clear();
          return read_containers(schild, spec + ".containers", &containers);
        }
        if (skey == "initContainers") {
          init_containers.clear();
          return read_containers(schild, spec + ".initContainers", &init_containers);
        }
        if (skey == "overhead") {
          overhead.clear();
          return ReadResources(c, schild, spec + ".overhead", &overhead, &pod->problems);
        }
        if (skey == "nodeName") return ReadString(c, schild, spec + ".nodeName", &pod->node_name);
        if (skey == "schedulerName") {
          return ReadString(c, schild, spec + ".schedulerName", &pod->scheduler_name);
        }
        if (skey == "priority") {
          std::int64_t priority = 0;
          if (!ReadInt(c, schild, spec + ".priority", std::numeric_limits<std::int32_t>::min(),
                       std::numeric_limits<std::int32_t>::max(), &priority, &pod->problems)) {
            return false;
          }
          pod->priority = static_cast<std::int32_t>(priority);
          return true;
        }
        return Skip(c, schild, 2, spec);
      });
    }
    if (key == "status") {
      const std::string status = where + ".status";
      return ForEachField(c, child, status, true, [&](std::string_view tkey, od::value& tchild) {
        if (tkey == "phase") return ReadString(c, tchild, status + ".phase", &pod->phase);
        if (tkey == "nominatedNodeName") {
          return ReadString(c, tchild, status + ".nominatedNodeName", &pod->nominated_node_name);
        }
        return Skip(c, tchild, 2, status);
      });
    }
    return Skip(c, child, 1, where);
  });
  if (!ok) return false;
  ComputeRequests(pod, containers, init_containers, overhead);
  pod->containers.clear();
  pod->containers.reserve(init_containers.size() + containers.size());
  const auto add = [&](std::vector<ContainerResources>& list, bool init) {
    for (ContainerResources& container : list) {
      ContainerView& view = pod->containers.emplace_back();
      view.name = std::move(container.name);
      view.init = init;
      view.restartable = init && container.restart_always;
      for (auto& [name, amount] : container.effective) {
        if (name.find('/') != std::string::npos) view.extended.emplace(name, amount);
      }
    }
  };
  add(init_containers, true);
  add(containers, false);
  return true;
}

bool ReadNode(Ctx& c, od::value& v, const std::string& where, NodeView* node,
              std::string_view* name) {
  return ForEachField(c, v, where, false, [&](std::string_view key, od::value& child) {
    if (key == "metadata") {
      const std::string meta = where + ".metadata";
      return ForEachField(c, child, meta, true, [&](std::string_view mkey, od::value& mchild) {
        if (mkey == "name") {
          od::json_type type;
          if (!GetType(c, mchild, &type, meta + ".name")) return false;
          if (type == od::json_type::null) {
            *name = {};
            return CheckScalar(c, mchild, type, meta + ".name");
          }
          return ReadStringView(c, mchild, meta + ".name", kNoIndex, name);
        }
        if (mkey == "labels") return ReadStringMap(c, mchild, meta + ".labels", &node->labels);
        if (mkey == "annotations") {
          return ReadStringMap(c, mchild, meta + ".annotations", &node->annotations);
        }
        return Skip(c, mchild, 2, meta);
      });
    }
    if (key == "spec") {
      const std::string spec = where + ".spec";
      return ForEachField(c, child, spec, true, [&](std::string_view skey, od::value& schild) {
        if (skey == "unschedulable") {
          od::json_type type;
          if (!GetType(c, schild, &type, spec + ".unschedulable")) return false;
          if (type == od::json_type::object || type == od::json_type::array ||
              type == od::json_type::string) {
            return WrongType(c, spec + ".unschedulable", "a boolean", type);
          }
          if (!CheckScalar(c, schild, type, spec + ".unschedulable")) return false;
          if (type == od::json_type::number) {
            return WrongType(c, spec + ".unschedulable", "a boolean", type);
          }
          node->unschedulable = TrimRight(schild.raw_json_token()) == "true";
          return true;
        }
        return Skip(c, schild, 2, spec);
      });
    }
    if (key == "status") {
      const std::string status = where + ".status";
      return ForEachField(c, child, status, true, [&](std::string_view tkey, od::value& tchild) {
        if (tkey == "allocatable") {
          node->allocatable.clear();
          return ReadResources(c, tchild, status + ".allocatable", &node->allocatable,
                               &node->problems);
        }
        return Skip(c, tchild, 2, status);
      });
    }
    return Skip(c, child, 1, where);
  });
}

Result<PodView> DecodePod(std::string_view json) {
  thread_local Scratch scratch;
  PodView pod;
  Ctx c;
  od::document doc;
  if (!Open(c, json, &doc, scratch, "Pod")) return MakeError(std::move(c.error));
  od::value value;
  if (auto code = doc.get_value().get(value)) {
    return MakeError(std::string("Pod is not valid JSON: ") + simdjson::error_message(code));
  }
  if (!ReadPod(c, value, "Pod", &pod)) return MakeError(std::move(c.error));
  return pod;
}

Result<NodeView> DecodeNode(std::string_view json) {
  thread_local Scratch scratch;
  NodeView node;
  std::deque<std::string> owned;
  Ctx c;
  c.owned = &owned;
  od::document doc;
  if (!Open(c, json, &doc, scratch, "Node")) return MakeError(std::move(c.error));
  od::value value;
  if (auto code = doc.get_value().get(value)) {
    return MakeError(std::string("Node is not valid JSON: ") + simdjson::error_message(code));
  }
  std::string_view name;
  if (!ReadNode(c, value, "Node", &node, &name)) return MakeError(std::move(c.error));
  if (name.empty()) return MakeError("Node has no metadata.name");
  node.name.assign(name);
  return node;
}

}  // namespace linkfit::kube
