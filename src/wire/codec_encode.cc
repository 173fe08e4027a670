// Encoders of the extender wire format (wire/codec.h): the bytes Go's encoding/json Marshal would
// produce for the same k8s.io/kube-scheduler/extender/v1 values.

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "linkfit/common/json_escape.h"
#include "linkfit/common/json_string.h"
#include "linkfit/common/json_write.h"
#include "linkfit/common/strings.h"
#include "linkfit/wire/codec.h"
#include "wire/failure_order.h"

namespace linkfit::wire {
namespace {

using namespace json_write;  // NOLINT: the writer's vocabulary, used throughout

// Writes a Go map[string]string: sorted by key bytes, the last entry winning for a repeated key.
void AppendFailures(Output& out, const std::vector<NodeFailure>& failures, bool escape_free,
                    ReasonCache& reasons) {
  if (failures.empty()) {
    out.Literal("{}");
    return;
  }
  const std::vector<SortEntry> sorted = SortFailures(failures);
  out.Literal("{");
  bool first_entry = true;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const std::string_view node = failures[sorted[i].index].node;
    // Equal names have equal keys (ranks, or the bytes past their shared prefix).
    if (i + 1 < sorted.size() && sorted[i + 1].key == sorted[i].key &&
        failures[sorted[i + 1].index].node == node) {
      continue;  // a later failure of the same node wins
    }
    if (first_entry) {
      out.Literal("\"");
      first_entry = false;
    } else {
      out.Literal(",\"");
    }
    AppendName(out, node, escape_free);
    out.Literal("\":");
    reasons.Append(out, failures[sorted[i].index].reason);
  }
  out.Literal("}");
}

}  // namespace

NodeListKind ReplyListFor(const ExtenderArgs& args) {
  if (args.node_names_given) return NodeListKind::kNames;
  if (args.nodes_given) return NodeListKind::kObjects;
  return NodeListKind::kNone;
}

std::string EncodeFilterResult(const FilterResult& result) {
  // The raw nodes of a kObjects reply, nearly all of its bytes, are appended to the string
  // directly; the rest goes through an Output, with room enough unless strings need escapes.
  std::size_t nodes_size = 64;
  if (result.list == NodeListKind::kObjects) {
    for (std::string_view node : result.nodes_json) nodes_size += node.size() + 1;
  }
  std::size_t room = 128 + result.error.size();
  if (result.list == NodeListKind::kNames) {
    for (std::string_view name : result.node_names) room += name.size() + 3;
  }
  for (const NodeFailure& f : result.failed_nodes) room += f.node.size() + f.reason.size() + 6;
  for (const NodeFailure& f : result.failed_and_unresolvable_nodes) {
    room += f.node.size() + f.reason.size() + 6;
  }
  std::string start;
  start.reserve(nodes_size + room);
  start += "{\"Nodes\":";
  if (result.list == NodeListKind::kObjects) {
    start += "{\"metadata\":{},\"items\":[";
    for (std::size_t i = 0; i < result.nodes_json.size(); ++i) {
      if (i > 0) start += ',';
      start += result.nodes_json[i];
    }
    start += "]}";
  } else {
    start += "null";
  }
  Output out(std::move(start), room);
  out.Literal(",\"NodeNames\":");
  if (result.list == NodeListKind::kNames) {
    if (result.node_names.empty()) {
      out.Literal("[]");
    } else {
      // ["a","b"]: the bytes between two names are one piece.
      out.Literal("[\"");
      for (std::size_t i = 0; i < result.node_names.size(); ++i) {
        if (i > 0) out.Literal("\",\"");
        AppendName(out, result.node_names[i], result.names_escape_free);
      }
      out.Literal("\"]");
    }
  } else {
    out.Literal("null");
  }
  ReasonCache reasons;
  out.Literal(",\"FailedNodes\":");
  AppendFailures(out, result.failed_nodes, result.names_escape_free, reasons);
  out.Literal(",\"FailedAndUnresolvableNodes\":");
  AppendFailures(out, result.failed_and_unresolvable_nodes, result.names_escape_free, reasons);
  out.Literal(",\"Error\":");
  AppendQuoted(out, result.error);
  out.Literal("}");
  return std::move(out).Take();
}

std::string EncodeFilterError(std::string_view message) {
  FilterResult result;
  result.list = NodeListKind::kNone;
  result.error.assign(message);
  return EncodeFilterResult(result);
}

namespace {

// Ends a list whose every item was written from `open` on with a comma before it: the first
// item's comma becomes `opening`, and `closing` follows; with no item, the list is empty.
void CloseCommaList(Output& out, std::size_t open, char opening, char closing) {
  if (out.size() == open) {
    const char empty[2] = {opening, closing};
    out.Append(empty, 2);
    return;
  }
  out.Set(open, opening);
  out.Append(&closing, 1);
}

// Appends the failures of `reply` that go to one map (`unresolvable`: FailedAndUnresolvableNodes,
// else FailedNodes), in rank order, as a Go map: {"name":"reason",...}. Each entry is written with
// a comma before it, and the first one's comma then becomes the brace. Each reason is quoted and
// escaped the first time it is written (its place in the reply kept in `written`, by number) and
// copied from there after that. (Whether a failure is of the map is a branch, but in rank order
// the names of one pool, alike, come together.)
void AppendRankedFailures(Output& out, const RankedFilterReply& reply, bool unresolvable,
                          std::vector<std::pair<std::size_t, std::size_t>>& written) {
  const std::size_t open = out.size();
  ForEachMarked(reply.failing, [&](std::size_t rank) {
    const std::uint64_t at = reply.at_rank[rank];
    if (((at >> 63) != 0) != unresolvable) return;
    out.Literal(",\"");
    AppendName(out, reply.names[static_cast<std::uint32_t>(at)], reply.names_escape_free);
    out.Literal("\":");
    const auto number = static_cast<std::uint32_t>(at >> 32) & 0x7FFFFFFFu;
    auto& [offset, length] = written[number];
    if (length == 0) {  // a quoted reason is never empty
      offset = out.size();
      AppendQuoted(out, reply.reasons[number]);
      length = out.size() - offset;
    } else {
      out.AppendWritten(offset, length);
    }
  });
  CloseCommaList(out, open, '{', '}');
}

}  // namespace

std::string EncodeRankedFilterReply(const RankedFilterReply& reply) {
  const std::size_t failures = CountMarked(reply.failing);
  std::size_t longest_reason = 0;
  for (const std::string_view reason : reply.reasons) {
    longest_reason = std::max(longest_reason, reason.size());
  }
  // Enough unless names or reasons need escapes: every name once with its quotes and comma (a
  // name is listed as passing or failing, a repeated one at most as often as sent), and each
  // failure's colon and reason.
  std::size_t room = 160 + failures * (longest_reason + 3);
  for (const std::string_view name : reply.names) room += name.size() + 3;
  Output out(std::string("{\"Nodes\":null,\"NodeNames\":"), room);
  // ["a","b"]: each name written with a comma before it, the first one's then the bracket.
  const std::size_t open = out.size();
  ForEachMarked(reply.passing, [&](std::size_t i) {
    out.Literal(",\"");
    AppendName(out, reply.names[i], reply.names_escape_free);
    out.Literal("\"");
  });
  CloseCommaList(out, open, '[', ']');
  std::vector<std::pair<std::size_t, std::size_t>> written(reply.reasons.size());
  out.Literal(",\"FailedNodes\":");
  AppendRankedFailures(out, reply, /*unresolvable=*/false, written);
  out.Literal(",\"FailedAndUnresolvableNodes\":");
  AppendRankedFailures(out, reply, /*unresolvable=*/true, written);
  out.Literal(",\"Error\":\"\"}");
  return std::move(out).Take();
}

namespace {

// [{"Host":"a","Score":1},{"Host":"b","Score":2}] for `count` hosts, host(i) and score(i) giving
// each: the bytes between a host and its score, and between a score and the next host, are one
// piece each.
template <typename HostOf, typename ScoreOf>
std::string EncodeHostScoreList(std::size_t count, const HostOf& host, const ScoreOf& score,
                                bool hosts_escape_free) {
  if (count == 0) return "[]";
  constexpr std::size_t kOpen = sizeof("[{\"Host\":\"") - 1;
  constexpr std::size_t kScore = sizeof("\",\"Score\":") - 1;
  constexpr std::size_t kNext = sizeof("},{\"Host\":\"") - 1;
  constexpr std::size_t kClose = sizeof("}]") - 1;
  // Exact unless a host needs escapes, plus the room AppendInt stores past its last digit.
  std::size_t size = kOpen + kClose - kNext + sizeof(SmallDecimal);
  for (std::size_t i = 0; i < count; ++i) {
    size += kNext + host(i).size() + kScore + DecimalLength(score(i));
  }
  Output out(std::string(), size);
  for (std::size_t i = 0; i < count; ++i) {
    if (i == 0) {
      out.Literal("[{\"Host\":\"");
    } else {
      out.Literal("},{\"Host\":\"");
    }
    AppendName(out, host(i), hosts_escape_free);
    out.Literal("\",\"Score\":");
    out.AppendInt(score(i));
  }
  out.Literal("}]");
  return std::move(out).Take();
}

}  // namespace

std::string EncodeHostPriorityList(const std::vector<HostPriority>& priorities,
                                   bool hosts_escape_free) {
  return EncodeHostScoreList(
      priorities.size(), [&](std::size_t i) { return priorities[i].host; },
      [&](std::size_t i) { return priorities[i].score; }, hosts_escape_free);
}

std::string EncodeHostScores(std::span<const std::string_view> hosts,
                             std::span<const std::uint32_t> scores, bool hosts_escape_free) {
  return EncodeHostScoreList(
      hosts.size(), [&](std::size_t i) { return hosts[i]; },
      [&](std::size_t i) { return std::int64_t{scores[i]}; }, hosts_escape_free);
}

std::string EncodeBindingResult(std::string_view error) { return json::ErrorBody(error); }

std::string EncodePreemptionResult(const std::vector<NodeVictims>& nodes) {
  std::vector<const NodeVictims*> sorted;
  sorted.reserve(nodes.size());
  for (const NodeVictims& node : nodes) sorted.push_back(&node);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const NodeVictims* a, const NodeVictims* b) { return a->node < b->node; });
  std::string out = "{\"NodeNameToMetaVictims\":{";
  bool first = true;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (i + 1 < sorted.size() && sorted[i + 1]->node == sorted[i]->node) continue;
    if (!first) out += ',';
    first = false;
    json::AppendString(out, sorted[i]->node);
    out += ":{\"Pods\":[";
    for (std::size_t j = 0; j < sorted[i]->pods.size(); ++j) {
      if (j > 0) out += ',';
      out += "{\"UID\":";
      json::AppendString(out, sorted[i]->pods[j].uid);
      out += '}';
    }
    out += "],\"NumPDBViolations\":";
    AppendInt(out, sorted[i]->num_pdb_violations);
    out += '}';
  }
  out += "}}";
  return out;
}

}  // namespace linkfit::wire
