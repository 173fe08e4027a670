#pragma once

// The kube-scheduler extender wire codec (k8s.io/kube-scheduler/extender/v1), byte for byte as
// described in shared/spec/extender-protocol.md:
//
//   - Decoding: envelope keys (`Pod`, `Nodes`, `NodeNames`, `PodName`, ...) match
//     case-insensitively, like Go's encoding/json (which also folds U+212A KELVIN SIGN to 'k' and
//     U+017F LONG S to 's'); a repeated key overrides the earlier one; `null` means absent;
//     unknown keys are ignored. Embedded Kubernetes objects (Pod, Node) are camelCase, matched
//     case-sensitively, and read by kube's object readers (linkfit/kube/object_json.h). The whole
//     body is validated as JSON (simdjson; invalid UTF-8 and lone UTF-16 surrogates in escapes are
//     rejected, Go would replace them with U+FFFD, but kube-scheduler never sends them). Any
//     problem is an Error naming it; nothing throws.
//   - Encoding: PascalCase keys in the Go struct order, compact, no trailing newline, map keys
//     sorted by bytes, strings escaped as Go's encoding/json does (common/json_string.h).
//
// Memory: DecodeExtenderArgs does not copy node names or node objects: ExtenderArgs::node_names
// and NodeItem::raw_json are string_views into the caller's `body`, which must stay alive and
// unchanged while the ExtenderArgs is used (names that contained JSON escapes are unescaped into
// ExtenderArgs::owned_strings instead, unless NodeNames is read as sent: NameCheck::kByCaller).
// Everything else (PodView, NodeView, BindingArgs, PreemptionArgs) is owned. The encoders take
// string_views that need only live for the call.
//
// Thread-safety: all functions are safe to call concurrently; each thread keeps its own parser
// and scratch buffer (thread_local), sized by the largest body that thread has decoded.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/result.h"
#include "linkfit/kube/types.h"

namespace linkfit::wire {

using kube::NodeView;
using kube::PodView;

// Scores: kube-scheduler's nominal extender range is 0..10 (MinExtenderPriority,
// MaxExtenderPriority), but it multiplies a score by the extender's weight x 10 without clamping;
// linkfit's range is policy.score_range (extender/scoring.h).

// ---------------------------------------------------------------------------------------------
// filter and prioritize: ExtenderArgs

// One item of a non-cache-mode request's `Nodes.items`.
struct NodeItem {
  std::string_view raw_json;  // the Node object's exact bytes in the request body, `{` to `}`
  NodeView view;
};

// The ExtenderArgs of a filter or prioritize request. Move-only: its string_views point into the
// request body and into its own `owned_strings`, which moves keep in place.
struct ExtenderArgs {
  ExtenderArgs() = default;
  ExtenderArgs(ExtenderArgs&&) noexcept = default;
  ExtenderArgs& operator=(ExtenderArgs&&) noexcept = default;
  ExtenderArgs(const ExtenderArgs&) = delete;
  ExtenderArgs& operator=(const ExtenderArgs&) = delete;
  ~ExtenderArgs() = default;

  PodView pod;
  bool nodes_given = false;       // `Nodes` was a NodeList (non-cache mode)
  bool node_names_given = false;  // `NodeNames` was an array (cache mode)
  // The candidate node names, in request order: `NodeNames` when given, otherwise the
  // metadata.name of each `Nodes` item (parallel to `nodes`).
  std::vector<std::string_view> node_names;
  // True when `NodeNames` was given and none of its names has a byte a JSON reply escapes
  // (common/json_escape.h; DNS names never do): replies may write them as they are.
  bool node_names_escape_free = false;
  // True when `NodeNames` was read with NameCheck::kByCaller: each name is the bytes between its
  // quotes, not looked at (an escape is not decoded; node_names_escape_free is false). The
  // caller checks the names it does not recognise (CheckNameAsSent).
  bool node_names_as_sent = false;
  std::vector<NodeItem> nodes;  // `Nodes.items`, in request order (non-cache mode only)
  // Backing store for the few names that contained JSON escapes (stable under moves).
  std::deque<std::string> owned_strings;
};

// How DecodeExtenderArgs reads the names of `NodeNames`.
enum class NameCheck {
  // Each name is looked at: an escape is decoded, and node_names_escape_free says whether a reply
  // may write every name as it is.
  kAtDecode,
  // Each name is taken as the bytes between its quotes (ExtenderArgs::node_names_as_sent), for a
  // caller that recognises most names by their bytes and checks only the others: the extender,
  // whose known node names never hold a byte a reply escapes, checks only the unknown ones, and
  // a request of 5,000 names is not looked at twice (bench/RESULTS.md, 27 Nov 2026).
  kByCaller,
};

// How many readable bytes must follow a body in its buffer for DecodeExtenderArgs to parse it
// where it lies (simdjson's padding: it reads ahead in 64-byte blocks; their values do not matter).
inline constexpr std::size_t kDecodePadding = 64;

// Decodes a filter or prioritize request body. See the file comment for lifetime rules. Given
// `readable_after` >= kDecodePadding (bytes after `body` in the same buffer that may be read), the
// body is parsed where it lies; otherwise it is first copied into a padded buffer (~100 KB at
// 5,000 names).
Result<ExtenderArgs> DecodeExtenderArgs(std::string_view body,
                                        NameCheck names = NameCheck::kAtDecode,
                                        std::size_t readable_after = 0);

// What a name read with NameCheck::kByCaller is, by its bytes.
enum class NameAsSent {
  kWrittenAsIs,    // no byte a reply escapes: the name is what it says, and is written as it is
  kNeedsEscape,    // the name is what it says, but a reply escapes some byte of it (`<`, UTF-8)
  kNeedsDecoding,  // an escape (or a control byte, which JSON forbids): decode with kAtDecode
};
NameAsSent CheckNameAsSent(std::string_view name);
// Decodes one name read as sent (the bytes between its quotes), escapes and all: a request whose
// names need decoding (kube-scheduler's never do) has those decoded one by one rather than the
// whole body again. An error names NodeNames[index], as DecodeExtenderArgs with kAtDecode does.
Result<std::string> DecodeNameAsSent(std::string_view name, std::size_t index);

// Which node list a filter reply carries. kube-scheduler reads `NodeNames` in cache mode and
// `Nodes` otherwise; answer in the mode the request used (ReplyListFor).
enum class NodeListKind {
  kNone,     // "Nodes":null,"NodeNames":null (every node rejected, or an error reply)
  kNames,    // "Nodes":null,"NodeNames":[...]
  kObjects,  // "Nodes":{"metadata":{},"items":[<raw node JSON>...]},"NodeNames":null
};

// Returns kNames when the request carried NodeNames, else kObjects when it carried Nodes, else
// kNone.
NodeListKind ReplyListFor(const ExtenderArgs& args);

struct NodeFailure {
  static constexpr std::uint32_t kUnordered = UINT32_MAX;
  std::string_view node;
  std::string_view reason;  // a literal, or a reason the FilterResult keeps (Keep)
  // The node's rank among names in byte order, when the caller knows one (the extender's name
  // index does): equal for equal names, ordered as the names are. When every failure of a map
  // has one, the encoder sorts by it without reading the names.
  std::uint32_t order = kUnordered;
};

// Move-only: its failures may point into its own `reasons`, which a copy would not carry along.
struct FilterResult {
  FilterResult() = default;
  FilterResult(FilterResult&&) = default;
  FilterResult& operator=(FilterResult&&) = default;
  FilterResult(const FilterResult&) = delete;
  FilterResult& operator=(const FilterResult&) = delete;

  // Stores a reason for the failures to point at; one reason serves every node it applies to.
  std::string_view Keep(std::string reason) { return reasons.emplace_back(std::move(reason)); }

  NodeListKind list = NodeListKind::kNames;
  std::vector<std::string_view> node_names;  // kNames: passing names, written in this order
  std::vector<std::string_view> nodes_json;  // kObjects: raw JSON of passing nodes, as received
  // Written as JSON objects sorted by node name; if a node repeats, its last reason wins.
  std::vector<NodeFailure> failed_nodes;
  std::vector<NodeFailure> failed_and_unresolvable_nodes;
  // Every name in node_names and the failure maps is one of a request whose
  // ExtenderArgs::node_names_escape_free was true: written without a look for escapes.
  bool names_escape_free = false;
  std::string error;                // non-empty: the whole filter call failed
  std::deque<std::string> reasons;  // what Keep stored (a deque: its elements never move)
};

// Returns {"Nodes":...,"NodeNames":...,"FailedNodes":{...},"FailedAndUnresolvableNodes":{...},
// "Error":"..."}.
std::string EncodeFilterResult(const FilterResult& result);

// Returns the reply for a failed filter call: both lists null, both maps {}, Error = message.
std::string EncodeFilterError(std::string_view message);

// A cache-mode filter reply (NodeListKind::kNames, no Error) whose every name the caller found in
// its own name index, given as marks rather than lists: which request names pass, by index, and
// which fail, by their name's rank among the index's names (byte order, what Go sorts a map's keys
// by: equal for equal names). The extender's filter marks its verdicts so in one pass over the
// names (extender::FilterVerdicts; wire::EncodeFilterVerdicts hands them here), and it is written
// without a sort and without a list of views (EncodeFilterResult of the same reply,
// with each failure's order its rank, writes the same bytes).
struct RankedFilterReply {
  std::span<const std::string_view> names;  // the request's NodeNames
  bool names_escape_free = false;           // as FilterResult::names_escape_free
  // Bit i % 64 of passing[i / 64]: names[i] passes (listed in NodeNames, in request order).
  std::span<const std::uint64_t> passing;
  // Bit r % 64 of failing[r / 64]: the name ranked r fails, and at_rank[r] says how: bits 0-31
  // its index in `names` (any of them, for a name sent twice), bits 32-62 its reason's index in
  // `reasons`, bit 63 set where it goes to FailedAndUnresolvableNodes (FailedNodes otherwise).
  std::span<const std::uint64_t> failing;
  const std::uint64_t* at_rank = nullptr;
  static constexpr std::uint64_t AtRank(std::uint32_t index, std::uint32_t reason,
                                        bool unresolvable) {
    return std::uint64_t{index} | std::uint64_t{reason & 0x7FFFFFFFu} << 32 |
           std::uint64_t{unresolvable ? 1u : 0u} << 63;
  }
  std::span<const std::string_view> reasons;
};

// Returns the reply as EncodeFilterResult writes it.
std::string EncodeRankedFilterReply(const RankedFilterReply& reply);

struct HostPriority {
  std::string_view host;
  std::int64_t score = 0;
};

// Returns the bare JSON array [{"Host":"a","Score":8},...] in the given order; [] when empty.
// `hosts_escape_free`: every host is a name of a request whose
// ExtenderArgs::node_names_escape_free was true (written without a look for escapes).
std::string EncodeHostPriorityList(const std::vector<HostPriority>& priorities,
                                   bool hosts_escape_free = false);
// The same array for hosts[i] scored scores[i]. REQUIRES: scores.size() == hosts.size().
std::string EncodeHostScores(std::span<const std::string_view> hosts,
                             std::span<const std::uint32_t> scores, bool hosts_escape_free = false);

// ---------------------------------------------------------------------------------------------
// bind

struct BindingArgs {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;
  std::string node;
};

// Decodes ExtenderBindingArgs; all four fields are required non-empty strings.
Result<BindingArgs> DecodeBindingArgs(std::string_view body);

// Returns {"Error":"..."}; an empty error means success.
std::string EncodeBindingResult(std::string_view error);

// ---------------------------------------------------------------------------------------------
// preempt

struct Victim {
  std::string uid;
  std::int32_t priority = 0;   // spec.priority of a full victim pod; 0 for MetaPods
  std::optional<PodView> pod;  // the full pod (NodeNameToVictims only)
};

struct NodeVictims {
  std::string node;
  std::vector<Victim> pods;  // in request order: highest priority first; keep it
  std::int64_t num_pdb_violations = 0;
};

struct PreemptionArgs {
  PodView pod;
  bool victims_given = false;       // NodeNameToVictims was a map (non-cache mode)
  bool meta_victims_given = false;  // NodeNameToMetaVictims was a map (cache mode)
  // Map entries in request order (a repeated node keeps its first position, last value); a
  // `null` entry is an empty NodeVictims.
  std::vector<NodeVictims> node_victims;       // from NodeNameToVictims
  std::vector<NodeVictims> node_meta_victims;  // from NodeNameToMetaVictims
};

Result<PreemptionArgs> DecodePreemptionArgs(std::string_view body);

// Returns {"NodeNameToMetaVictims":{"node":{"Pods":[{"UID":"..."}],"NumPDBViolations":N},...}}
// with nodes sorted by name (the last entry wins for a repeated node) and victims in the given
// order; {"NodeNameToMetaVictims":{}} when empty. kube-scheduler rejects a kept node with no
// victims, so callers leave such nodes out.
std::string EncodePreemptionResult(const std::vector<NodeVictims>& nodes);

}  // namespace linkfit::wire
