#include "parse_only_handler.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "linkfit/common/json_string.h"
#include "linkfit/wire/codec.h"

namespace linkfit::load {
namespace {

server::HttpReply BadRequest(const std::string& message) {
  return server::HttpReply{400, json::ErrorBody(message)};
}

constexpr std::string_view kFailReason = "parse-only: every other node fails";

}  // namespace

server::HttpReply ParseOnlyHandler::Filter(server::Body body) {
  auto args = wire::DecodeExtenderArgs(body.text, wire::NameCheck::kAtDecode, body.readable_after);
  if (!args) return BadRequest(args.error().message);
  wire::FilterResult result;
  result.list = wire::ReplyListFor(*args);
  if (result.list == wire::NodeListKind::kObjects) {
    result.nodes_json.reserve(args->nodes.size());
    for (const wire::NodeItem& node : args->nodes) result.nodes_json.push_back(node.raw_json);
  } else {
    // Every other name fails. A do-nothing server writes the FailedNodes map in the request's
    // order (the order of a JSON object's keys means nothing to kube-scheduler's decoder), so
    // each failure's order is its index: the encoder then sorts nothing by name.
    result.names_escape_free = args->node_names_escape_free;
    result.node_names.reserve(args->node_names.size() / 2 + 1);
    result.failed_nodes.reserve(args->node_names.size() / 2);
    for (std::size_t i = 0; i < args->node_names.size(); ++i) {
      if (i % 2 == 0) {
        result.node_names.push_back(args->node_names[i]);
      } else {
        result.failed_nodes.push_back(
            {args->node_names[i], kFailReason, static_cast<std::uint32_t>(i)});
      }
    }
  }
  return server::HttpReply{200, wire::EncodeFilterResult(result)};
}

server::HttpReply ParseOnlyHandler::Prioritize(server::Body body) {
  auto args = wire::DecodeExtenderArgs(body.text, wire::NameCheck::kAtDecode, body.readable_after);
  if (!args) return BadRequest(args.error().message);
  std::vector<wire::HostPriority> priorities;
  priorities.reserve(args->node_names.size());
  for (std::string_view name : args->node_names) priorities.push_back({name, 0});
  return server::HttpReply{200,
                           wire::EncodeHostPriorityList(priorities, args->node_names_escape_free)};
}

server::HttpReply ParseOnlyHandler::Bind(std::string_view body) {
  auto args = wire::DecodeBindingArgs(body);
  if (!args) return BadRequest(args.error().message);
  return server::HttpReply{200, wire::EncodeBindingResult("")};
}

server::HttpReply ParseOnlyHandler::Preempt(std::string_view body) {
  auto args = wire::DecodePreemptionArgs(body);
  if (!args) return BadRequest(args.error().message);
  return server::HttpReply{200, wire::EncodePreemptionResult(args->node_meta_victims)};
}

server::HttpReply ParseOnlyHandler::Inspect(std::string_view) {
  return server::HttpReply{404, json::ErrorBody("the parse-only server has no nodes")};
}

server::HttpReply ParseOnlyHandler::Explain(std::string_view) {
  return server::HttpReply{404, json::ErrorBody("the parse-only server has no nodes")};
}

}  // namespace linkfit::load
