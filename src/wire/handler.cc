#include "linkfit/wire/handler.h"

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "linkfit/common/json_string.h"
#include "linkfit/wire/bind_preempt.h"
#include "linkfit/wire/codec.h"
#include "linkfit/wire/inspect_json.h"
#include "linkfit/wire/verb_calls.h"

namespace linkfit::wire {
namespace {

static_assert(server::kBodyPadding >= kDecodePadding,
              "the server's body padding must let the decoder read a body where it lies");

server::HttpReply BadRequest(const std::string& message) {
  return server::HttpReply{400, json::ErrorBody(message)};
}

// How a request's NodeNames are read: as sent (NameCheck::kByCaller) while every node name
// linkfit knows is written as it is, so that the names it knows are found by their bytes and a
// request of 5,000 names is not looked at twice (Candidates::Find looks at the others: none in
// kube-scheduler's requests). Otherwise every name is decoded at once.
NameCheck NameCheckFor(const state::Snapshot& snapshot) {
  return KnownNamesWrittenAsIs(snapshot) ? NameCheck::kByCaller : NameCheck::kAtDecode;
}

}  // namespace

std::string Handler::NotReadyReason() const {
  if (not_ready_reason_) return not_ready_reason_();
  return ready_.load() ? "" : "linkfit is still loading its state";
}

server::HttpReply Handler::Filter(server::Body body) {
  const state::SnapshotPtr snapshot = extender_.cache().Snapshot();  // the call's one snapshot
  const auto args = DecodeExtenderArgs(body.text, NameCheckFor(*snapshot), body.readable_after);
  if (!args) return BadRequest(args.error().message);
  if (const std::string reason = NotReadyReason(); !reason.empty()) {
    return server::HttpReply{200, EncodeFilterError(reason)};
  }
  const Result<FilterDecision> decision = DecideFilter(extender_, *snapshot, *args, memo_);
  if (!decision) return BadRequest(decision.error().message);
  return server::HttpReply{200,
                           EncodeFilterVerdicts(*args, decision->candidates, decision->verdicts)};
}

server::HttpReply Handler::Prioritize(server::Body body) {
  const state::SnapshotPtr snapshot = extender_.cache().Snapshot();
  const auto args = DecodeExtenderArgs(body.text, NameCheckFor(*snapshot), body.readable_after);
  if (!args) return BadRequest(args.error().message);
  // Prioritize answers for exactly the request's names, in its order: before linkfit is ready,
  // each scored zero. It changes nothing, demand included: kube-scheduler filters every pod
  // before it prioritizes it, and filter made the pod known.
  if (!NotReadyReason().empty()) {
    const auto candidates = Candidates::Find(*snapshot, *args);
    if (!candidates) return BadRequest(candidates.error().message);
    const std::vector<std::uint32_t> zeros(candidates->names().size());
    return server::HttpReply{
        200, EncodeHostScores(candidates->names(), zeros, candidates->names_escape_free())};
  }
  const Result<PrioritizeDecision> decision = DecidePrioritize(extender_, *snapshot, *args);
  if (!decision) return BadRequest(decision.error().message);
  const Candidates& candidates = decision->candidates;
  return server::HttpReply{
      200, EncodeHostScores(candidates.names(), decision->scores, candidates.names_escape_free())};
}

server::HttpReply Handler::Bind(std::string_view body) {
  auto args = DecodeBindingArgs(body);
  if (!args) return BadRequest(args.error().message);
  if (const std::string reason = NotReadyReason(); !reason.empty()) {
    return server::HttpReply{200, EncodeBindingResult(reason)};
  }
  return server::HttpReply{200, EncodeBindingResult(extender_.Bind(BindTargetOf(*args)))};
}

server::HttpReply Handler::Preempt(std::string_view body) {
  auto args = DecodePreemptionArgs(body);
  if (!args) return BadRequest(args.error().message);
  if (!NotReadyReason().empty()) return server::HttpReply{200, EncodePreemptionResult({})};
  return server::HttpReply{200, EncodePreemptionResult(KeptVictims(extender_, *args))};
}

server::HttpReply Handler::Inspect(std::string_view node) {
  const state::SnapshotPtr snapshot = extender_.cache().Snapshot();
  if (!node.empty()) {
    const state::NodeState* found = snapshot->Find(node);
    if (found == nullptr) {
      return server::HttpReply{404, json::ErrorBody("unknown node " + std::string(node))};
    }
    return server::HttpReply{200, InspectNodeJson(*found).dump()};
  }
  nlohmann::json nodes = nlohmann::json::array();
  for (const state::NodeStatePtr& state : snapshot->nodes())
    nodes.push_back(InspectNodeJson(*state));
  const state::ClusterCache::Sizes sizes = extender_.cache().sizes();
  nlohmann::json reply = {{"nodes", nodes},
                          {"pods", {{"assumed", sizes.assumed}, {"bound", sizes.added}}}};
  if (const auto& problems = snapshot->problems(); problems && !problems->empty()) {
    nlohmann::json unusable = nlohmann::json::object();
    for (const auto& [name, problem] : *problems) unusable[name] = problem;
    reply["unusable_nodes"] = unusable;
  }
  if (binding_status_) reply["binding"] = binding_status_();
  return server::HttpReply{200, reply.dump()};
}

server::HttpReply Handler::Explain(std::string_view pod_json) {
  // The body is a Pod; reuse the request decoder by wrapping it in an ExtenderArgs envelope.
  std::string envelope = R"({"Pod":)";
  envelope.append(pod_json);
  envelope.append(R"(,"Nodes":null,"NodeNames":[]})");
  auto args = DecodeExtenderArgs(envelope);
  if (!args) return BadRequest("explain expects a Pod object: " + args.error().message);
  return server::HttpReply{200, nlohmann::json{{"lines", extender_.Explain(args->pod)}}.dump()};
}

server::HttpReply Handler::Release(std::string_view body) {
  if (memo_ == nullptr) {
    return server::HttpReply{
        404, json::ErrorBody("release is only available in standalone mode; in a "
                             "cluster linkfit learns departures from the pod watch")};
  }
  const auto json = nlohmann::json::parse(body.begin(), body.end(), nullptr, false);
  if (json.is_discarded() || !json.is_object() || !json.contains("PodUID") ||
      !json["PodUID"].is_string()) {
    return BadRequest(R"(release expects {"PodUID":"..."})");
  }
  const std::string uid = json["PodUID"].get<std::string>();
  switch (extender_.Release(uid)) {
    case state::RemoveOutcome::kRemoved:
      return server::HttpReply{200, R"({"Error":""})"};
    case state::RemoveOutcome::kUnknown:
      return server::HttpReply{404, json::ErrorBody("pod " + uid + " holds no devices")};
    case state::RemoveOutcome::kBindInFlight:
      break;
  }
  return server::HttpReply{
      409, json::ErrorBody("pod " + uid +
                           " is still being bound; nothing was released, retry after the "
                           "bind returns")};
}

}  // namespace linkfit::wire
