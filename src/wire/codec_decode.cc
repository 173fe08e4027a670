// Decoders of the extender wire format (wire/codec.h), on simdjson's On-Demand API.
//
// Every value in the body is visited once: the fields linkfit reads are converted, everything
// else goes through Skip(), which still validates it (On-Demand alone would only validate what
// is read), so a body with invalid JSON anywhere is rejected as Go's decoder would reject it.
// Errors are collected in a Ctx as a message naming the place (`Nodes.items[3].status: ...`);
// simdjson error codes never escape this file. The Pod and Node objects inside are read by
// kube's object readers (linkfit/kube/object_json.h), as the API client reads them.

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "linkfit/common/json_escape.h"
#include "linkfit/common/json_reader.h"
#include "linkfit/kube/object_json.h"
#include "linkfit/wire/codec.h"

namespace linkfit::wire {
namespace {

using namespace json;  // NOLINT: the reader's vocabulary
using kube::NodeView;
using kube::PodView;

// The request decoders' parser and padded buffer, one per thread (Open gives back what a large
// body grew when a small one comes next).
Scratch& RequestScratch() {
  thread_local Scratch scratch;
  return scratch;
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
  return kube::ReadPod(c, v, where, pod);
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
      if (!kube::ReadNode(c, item, where, &node.view, &name)) return false;
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

}  // namespace linkfit::wire
