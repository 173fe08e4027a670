// Feeds arbitrary bytes to every extender wire decoder (module `wire`), then re-encodes what
// decoded: nothing may crash, hang or read out of bounds, and the raw node JSON echoed in a
// non-cache reply must lie inside the request body. Names read as sent (NameCheck::kByCaller)
// must lie inside the body, and be the decoded names wherever CheckNameAsSent says they need no
// decoding; a body they refuse, decoding refuses too. A decoded pod goes through ParseGpuRequest
// as filter reads it (GPU and NIC resources and annotations): a request, or an error with a
// message.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/json_string.h"
#include "linkfit/extender/gpu_request.h"
#include "linkfit/kube/quantity.h"
#include "linkfit/wire/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace linkfit::wire;  // NOLINT: a fuzz harness
  using linkfit::kube::ParseQuantityMilli;
  using linkfit::kube::ParseQuantityValue;
  namespace json = linkfit::json;
  using linkfit::Result;
  const std::string body(reinterpret_cast<const char*>(data), size);

  const Result<ExtenderArgs> decoded = DecodeExtenderArgs(body, NameCheck::kAtDecode);
  const Result<ExtenderArgs> as_sent = DecodeExtenderArgs(body, NameCheck::kByCaller);
  if (!as_sent && decoded) std::abort();
  if (as_sent && decoded) {
    if (as_sent->node_names.size() != decoded->node_names.size()) std::abort();
    for (std::size_t i = 0; i < as_sent->node_names.size(); ++i) {
      const std::string_view name = as_sent->node_names[i];
      if (as_sent->node_names_as_sent &&
          (name.data() < body.data() || name.data() + name.size() > body.data() + body.size())) {
        std::abort();
      }
      if (CheckNameAsSent(name) != NameAsSent::kNeedsDecoding && name != decoded->node_names[i]) {
        std::abort();
      }
    }
  }
  if (Result<ExtenderArgs> args = DecodeExtenderArgs(body)) {
    FilterResult result;
    result.list = ReplyListFor(*args);
    std::vector<HostPriority> priorities;
    for (std::string_view name : args->node_names) {
      result.node_names.push_back(name);
      result.failed_nodes.push_back({name, result.Keep(std::string(name))});
      priorities.push_back({name, static_cast<std::int64_t>(name.size())});
    }
    for (const NodeItem& node : args->nodes) {
      if (node.raw_json.size() < 2 || node.raw_json.data() < body.data() ||
          node.raw_json.data() + node.raw_json.size() > body.data() + body.size() ||
          node.raw_json.front() != '{' || node.raw_json.back() != '}') {
        std::abort();
      }
      result.nodes_json.push_back(node.raw_json);
    }
    for (const std::string& problem : args->pod.problems) result.error += problem;
    (void)EncodeFilterResult(result);
    linkfit::extender::RequestDefaults defaults;
    defaults.nic_resources = {"rdma/hca"};
    const auto request = linkfit::extender::ParseGpuRequest(args->pod, defaults);
    if (!request && request.error().message.empty()) std::abort();
    if (request &&
        (request->Describe().empty() || (request->nics.wanted() && !request->WantsDevices()))) {
      std::abort();
    }
    (void)EncodeHostPriorityList(priorities);
  }
  if (Result<BindingArgs> binding = DecodeBindingArgs(body)) {
    (void)EncodeBindingResult(binding->pod_uid + binding->node);
  }
  if (Result<PreemptionArgs> preemption = DecodePreemptionArgs(body)) {
    (void)EncodePreemptionResult(preemption->node_victims);
    (void)EncodePreemptionResult(preemption->node_meta_victims);
  }
  (void)ParseQuantityMilli(body);
  (void)ParseQuantityValue(body);
  std::string escaped;
  json::AppendString(escaped, body);
  return 0;
}
