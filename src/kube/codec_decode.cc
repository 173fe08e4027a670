// Decoders of the extender wire format (codec.h), on simdjson's On-Demand API.
//
// Every value in the body is visited once: the fields linkfit reads are converted, everything
// else goes through Skip(), which still validates it (On-Demand alone would only validate what
// is read), so a body with invalid JSON anywhere is rejected as Go's decoder would reject it.
// Errors are collected in a Ctx as a message naming the place (`Nodes.items[3].status: ...`);
// simdjson error codes never escape this file.

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kube/json_escape.h"
#include "kube/json_reader.h"
#include "linkfit/kube/codec.h"

namespace linkfit::kube {
namespace {

using namespace json;  // NOLINT: internal helpers of this module

// The request decoders' parser and padded buffer, one per thread (Open gives back what a large
// body grew when a small one comes next).
Scratch& RequestScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// ---------------------------------------------------------------------------------------------
// Pods

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

// Reads an envelope's Pod value: an object, or null (absent).
bool ReadEnvelopePod(Ctx& c, od::value& v, const std::string& where, PodView* pod, bool* given) {
  od::json_type type;
  if (!GetType(c, v, &type, where)) return false;
  if (type == od::json_type::null) {
    *given = false;
    return CheckScalar(c, v, type, where);
  }
  if (type != od::json_type::object) return WrongType(c, where, "a Pod object", type);
  *pod = PodView{};
  *given = true;
  return ReadPod(c, v, where, pod);
}

// ---------------------------------------------------------------------------------------------
// Nodes

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

// Reads `Nodes`: a NodeList whose items are kept as raw JSON plus a NodeView each.
bool ReadNodeList(Ctx& c, od::document& doc, od::value& v, ExtenderArgs* args,
                  std::vector<std::string_view>* names) {
  return ForEachField(c, v, "Nodes", false, [&](std::string_view key, od::value& child) {
    if (key != "items") return Skip(c, child, 1, "Nodes");
    args->nodes.clear();
    names->clear();
    return ForEachElement(c, child, "Nodes.items", [&](std::size_t index, od::value& item) {
      const std::string where = Indexed("Nodes.items", index);
      const char* start = item.raw_json_token().data();
      od::json_type type;
      if (!GetType(c, item, &type, where)) return false;
      if (type != od::json_type::object) return WrongType(c, where, "a Node object", type);
      NodeItem& node = args->nodes.emplace_back();
      std::string_view name;
      if (!ReadNode(c, item, where, &node.view, &name)) return false;
      node.view.name.assign(name);
      names->push_back(name);
      if (name.empty()) node.view.problems.push_back(where + ": node has no metadata.name");
      // The object ends at the last `}` before the token the iterator now stands on.
      const char* end = nullptr;
      if (auto code = doc.current_location().get(end)) return JsonFail(c, where, code);
      while (end > start && IsSpace(end[-1])) --end;
      if (end <= start || end[-1] != '}') return Fail(c, where + ": cannot delimit the node");
      node.raw_json =
          std::string_view(c.body + (start - c.padded), static_cast<std::size_t>(end - start));
      return true;
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Documents

bool ReadVictims(Ctx& c, od::value& v, const std::string& where, bool full, NodeVictims* out) {
  return ForEachField(c, v, where, true, [&](std::string_view key, od::value& child) {
    if (KeyIs(key, "pods")) {
      out->pods.clear();
      return ForEachElement(c, child, where + ".Pods", [&](std::size_t index, od::value& pod) {
        const std::string pod_where = Indexed(where + ".Pods", index);
        od::json_type type;
        if (!GetType(c, pod, &type, pod_where)) return false;
        if (type != od::json_type::object) return WrongType(c, pod_where, "an object", type);
        Victim& victim = out->pods.emplace_back();
        if (full) {
          PodView view;
          if (!ReadPod(c, pod, pod_where, &view)) return false;
          victim.uid = view.uid;
          victim.priority = view.priority;
          victim.pod = std::move(view);
          return true;
        }
        return ForEachField(c, pod, pod_where, false, [&](std::string_view mkey, od::value& m) {
          if (KeyIs(mkey, "uid")) return ReadString(c, m, pod_where + ".UID", &victim.uid);
          return Skip(c, m, 1, pod_where);
        });
      });
    }
    if (KeyIs(key, "numpdbviolations")) {
      return ReadInt(c, child, where + ".NumPDBViolations",
                     std::numeric_limits<std::int64_t>::min(),
                     std::numeric_limits<std::int64_t>::max(), &out->num_pdb_violations, nullptr);
    }
    return Skip(c, child, 1, where);
  });
}

// Reads NodeNameToVictims / NodeNameToMetaVictims: node -> Victims, in body order; a repeated
// node keeps its first position and takes the last value (a Go map keeps the last).
bool ReadVictimsMap(Ctx& c, od::value& v, std::string_view where, bool full,
                    std::vector<NodeVictims>* out) {
  out->clear();
  std::unordered_map<std::string, std::size_t> index;
  return ForEachField(c, v, where, false, [&](std::string_view node, od::value& child) {
    NodeVictims entry;
    entry.node.assign(node);
    if (!ReadVictims(c, child, Keyed(where, node), full, &entry)) return false;
    auto [it, inserted] = index.try_emplace(entry.node, out->size());
    if (inserted) {
      out->push_back(std::move(entry));
    } else {
      (*out)[it->second] = std::move(entry);
    }
    return true;
  });
}

bool IsNull(Ctx& c, od::value& v, std::string_view where, bool* is_null) {
  od::json_type type;
  if (!GetType(c, v, &type, where)) return false;
  *is_null = type == od::json_type::null;
  return !*is_null || CheckScalar(c, v, type, where);
}

}  // namespace

static_assert(kDecodePadding >= simdjson::SIMDJSON_PADDING);

Result<ExtenderArgs> DecodeExtenderArgs(std::string_view body, NameCheck names,
                                        std::size_t readable_after) {
  ExtenderArgs args;
  Ctx c;
  c.owned = &args.owned_strings;
  od::document doc;
  bool pod_given = false;
  std::vector<std::string_view> item_names;  // metadata.name of each Nodes item
  const bool ok =
      OpenPadded(c, body, readable_after, &doc, RequestScratch()) &&
      ReadEnvelope(c, doc, [&](std::string_view key, od::value& child) {
        if (KeyIs(key, "pod")) {
          return ReadEnvelopePod(c, child, "Pod", &args.pod, &pod_given);
        }
        if (KeyIs(key, "nodes")) {
          bool is_null = false;
          if (!IsNull(c, child, "Nodes", &is_null)) return false;
          args.nodes.clear();
          args.nodes_given = !is_null;
          item_names.clear();
          return is_null || ReadNodeList(c, doc, child, &args, &item_names);
        }
        if (KeyIs(key, "nodenames")) {
          bool is_null = false;
          if (!IsNull(c, child, "NodeNames", &is_null)) return false;
          args.node_names.clear();
          args.node_names_given = !is_null;
          args.node_names_as_sent = !is_null && names == NameCheck::kByCaller;
          args.node_names_escape_free = !is_null && !args.node_names_as_sent;
          if (is_null) return true;
          if (args.node_names_as_sent) {
            return ForEachElement(c, child, "NodeNames",
                                  [&](std::size_t index, od::value& element) {
                                    return ReadStringAsSent(c, element, "NodeNames", index,
                                                            &args.node_names.emplace_back());
                                  });
          }
          return ForEachElement(c, child, "NodeNames", [&](std::size_t index, od::value& element) {
            return ReadStringView(c, element, "NodeNames", index, &args.node_names.emplace_back(),
                                  &args.node_names_escape_free);
          });
        }
        return Skip(c, child, 0, "the top level");
      });
  if (!ok) return MakeError(std::move(c.error));
  if (!pod_given) return MakeError("request has no Pod (missing or null)");
  if (!args.node_names_given && args.nodes_given) args.node_names = std::move(item_names);
  return args;
}

NameAsSent CheckNameAsSent(std::string_view name) {
  if (!NeedsJsonEscape(name)) return NameAsSent::kWrittenAsIs;
  return NeedsUnescaping(name) ? NameAsSent::kNeedsDecoding : NameAsSent::kNeedsEscape;
}

Result<std::string> DecodeNameAsSent(std::string_view name, std::size_t index) {
  thread_local simdjson::ondemand::parser parser;
  std::string quoted;
  quoted.reserve(name.size() + 2 + simdjson::SIMDJSON_PADDING);
  quoted.append(1, '"').append(name).append(1, '"');
  const simdjson::padded_string_view padded(quoted.data(), quoted.size(), quoted.capacity());
  Ctx c;
  od::document doc;
  std::string_view decoded;
  if (auto code = parser.iterate(padded).get(doc)) {
    JsonFail(c, Indexed("NodeNames", index), code);
  } else if (auto read = doc.get_string().get(decoded)) {
    JsonFail(c, Indexed("NodeNames", index), read);
  } else {
    return std::string(decoded);
  }
  return MakeError(std::move(c.error));
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

Result<BindingArgs> DecodeBindingArgs(std::string_view body) {
  BindingArgs args;
  Ctx c;
  od::document doc;
  const bool ok = Open(c, body, &doc, RequestScratch()) &&
                  ReadEnvelope(c, doc, [&](std::string_view key, od::value& child) {
                    if (KeyIs(key, "podname"))
                      return ReadString(c, child, "PodName", &args.pod_name);
                    if (KeyIs(key, "podnamespace")) {
                      return ReadString(c, child, "PodNamespace", &args.pod_namespace);
                    }
                    if (KeyIs(key, "poduid")) return ReadString(c, child, "PodUID", &args.pod_uid);
                    if (KeyIs(key, "node")) return ReadString(c, child, "Node", &args.node);
                    return Skip(c, child, 0, "the top level");
                  });
  if (!ok) return MakeError(std::move(c.error));
  std::string missing;
  auto require = [&](const std::string& value, const char* name) {
    if (value.empty()) missing += missing.empty() ? name : std::string(", ") + name;
  };
  require(args.pod_name, "PodName");
  require(args.pod_namespace, "PodNamespace");
  require(args.pod_uid, "PodUID");
  require(args.node, "Node");
  if (!missing.empty()) return MakeError("binding request lacks " + missing);
  return args;
}

Result<PreemptionArgs> DecodePreemptionArgs(std::string_view body) {
  PreemptionArgs args;
  Ctx c;
  od::document doc;
  bool pod_given = false;
  const bool ok = Open(c, body, &doc, RequestScratch()) &&
                  ReadEnvelope(c, doc, [&](std::string_view key, od::value& child) {
                    if (KeyIs(key, "pod"))
                      return ReadEnvelopePod(c, child, "Pod", &args.pod, &pod_given);
                    const bool full = KeyIs(key, "nodenametovictims");
                    if (full || KeyIs(key, "nodenametometavictims")) {
                      const char* where = full ? "NodeNameToVictims" : "NodeNameToMetaVictims";
                      std::vector<NodeVictims>* out =
                          full ? &args.node_victims : &args.node_meta_victims;
                      bool* given = full ? &args.victims_given : &args.meta_victims_given;
                      bool is_null = false;
                      if (!IsNull(c, child, where, &is_null)) return false;
                      out->clear();
                      *given = !is_null;
                      return is_null || ReadVictimsMap(c, child, where, full, out);
                    }
                    return Skip(c, child, 0, "the top level");
                  });
  if (!ok) return MakeError(std::move(c.error));
  if (!pod_given) return MakeError("request has no Pod (missing or null)");
  return args;
}

}  // namespace linkfit::kube
