#include "app/wire_handler.h"

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "linkfit/kube/codec.h"

namespace linkfit::app {
namespace {

static_assert(server::kBodyPadding >= kube::kDecodePadding,
              "the server's body padding must let the decoder read a body where it lies");

server::HttpReply BadRequest(const std::string& message) {
  return server::HttpReply{400, kube::EncodeErrorBody(message)};
}

nlohmann::json GpuJson(const state::NodeState& node, int g) {
  // The node's own document (its UUIDs, health, MIG instances), not the shared model's.
  const topology::GpuSpec& spec = node.info().own_topology().gpu(g);
  nlohmann::json pods = nlohmann::json::array();
  nlohmann::json names = nlohmann::json::array();
  nlohmann::json instances = nlohmann::json::array();
  nlohmann::json shares = nlohmann::json::array();
  for (const auto& [uid, a] : node.pods()) {
    if (((a.gpus >> g) & 1) == 0) continue;
    pods.push_back(uid);
    names.push_back(a.PodKey());
    // A slot's profile is an index into its GPU's own planner's set (NodeState accepted it).
    const alloc::MigPlanner* planner = node.info().MigPlannerOf(g);
    for (const auto& slot : a.mig) {
      if (slot.gpu != g || planner == nullptr) continue;
      const alloc::MigProfile& profile =
          planner->set().profiles[static_cast<std::size_t>(slot.instance.profile)];
      instances.push_back({{"profile", profile.name},
                           {"start", slot.instance.start},
                           {"slices", {slot.instance.start, slot.instance.start + profile.size}},
                           {"pod", uid}});
    }
    for (const auto& slot : a.shares) {
      if (slot.gpu == g) shares.push_back({{"milli", slot.milli}, {"pod", uid}});
    }
  }
  const bool mig_mode = ((node.info().mig_enabled >> g) & 1) != 0;
  std::string mode = "idle";
  if (mig_mode) {
    mode = "mig";
  } else if ((node.whole_used() >> g) & 1) {
    mode = "whole";
  } else if (node.shared_milli(g) > 0) {
    mode = "shared";
  }
  nlohmann::json gpu = {{"index", g},   {"model", spec.model}, {"numa", spec.numa_node},
                        {"mode", mode}, {"pods", pods},        {"pod_names", names}};
  if (!spec.uuid.empty()) gpu["uuid"] = spec.uuid;
  if (((node.info().unhealthy >> g) & 1) != 0) {
    gpu["healthy"] = false;
    gpu["health_problem"] = spec.health_problem;
  }
  if (!spec.mig_instances.empty()) {
    nlohmann::json existing = nlohmann::json::array();
    for (const topology::MigInstanceSpec& instance : spec.mig_instances) {
      existing.push_back({{"profile", instance.profile},
                          {"start", instance.start},
                          {"size", instance.size},
                          {"uuid", instance.uuid}});
    }
    gpu["mig_instances_reported"] = std::move(existing);
  }
  if (mode == "shared") {
    gpu["shared_milli"] = node.shared_milli(g);
    gpu["shares"] = shares;
  }
  if (mig_mode) {
    gpu["mig_instances"] = instances;
    gpu["mig_slices_used"] = node.mig_state(g).slice_mask();
  }
  return gpu;
}

nlohmann::json NodeJson(const state::NodeState& node) {
  nlohmann::json gpus = nlohmann::json::array();
  for (int g = 0; g < node.info().gpu_count(); ++g) gpus.push_back(GpuJson(node, g));
  nlohmann::json json = {{"name", node.name()},
                         {"model", node.info().own_topology().summary_model()},
                         {"topology", node.info().topology().spec().id},
                         {"fingerprint", node.info().topology().fingerprint()},
                         {"labels", node.info().labels},
                         {"gpus", gpus},
                         {"free_whole_gpus", alloc::MaskToIndexes(node.whole_free())},
                         {"used_gpu_equivalents", node.UsedGpuEquivalents()}};
  // CPU and memory only where the cluster file gave the node's allocatable (else not tracked).
  if (node.info().cpu_milli > 0) {
    json["cpu_milli"] = {{"allocatable", node.info().cpu_milli},
                         {"requested", node.cpu_used_milli()}};
  }
  if (node.info().memory_bytes > 0) {
    json["memory_bytes"] = {{"allocatable", node.info().memory_bytes},
                            {"requested", node.memory_used_bytes()}};
  }
  nlohmann::json gpu_less = nlohmann::json::array();
  nlohmann::json estimated = nlohmann::json::array();
  nlohmann::json reported = nlohmann::json::array();
  nlohmann::json mismatched = nlohmann::json::array();
  for (const auto& [uid, a] : node.pods()) {
    if (a.gpus == 0) gpu_less.push_back(uid);
    if (a.estimated) estimated.push_back(uid);
    if (a.reported) reported.push_back(uid);
    if (a.handoff_mismatch) mismatched.push_back(uid);
  }
  if (!gpu_less.empty()) json["pods_without_gpus"] = gpu_less;
  // Cluster mode counts pods without GPUs by their requests only (no per-pod record).
  if (node.load_pods() > 0) json["pods_counted_by_requests"] = node.load_pods();
  // Cluster mode: GPU pods another scheduler placed without an allocation record; linkfit
  // guessed their devices, so this node's free devices are an estimate.
  if (!estimated.empty()) json["estimated_pods"] = estimated;
  // Pods counted on the devices the node's agent reports they hold (linkfit.io/devices-in-use),
  // and those among them whose report differs from their allocation record.
  if (!reported.empty()) json["reported_pods"] = reported;
  if (!mismatched.empty()) json["handoff_mismatch_pods"] = mismatched;
  if (node.info().unhealthy != 0) {
    json["unhealthy_gpus"] = alloc::MaskToIndexes(node.info().unhealthy);
  }
  // How the node hands devices to containers, as its agent reports it (topology/spec.h).
  if (const std::string& mode = node.info().own_topology().spec().handoff_mode; !mode.empty()) {
    json["handoff_mode"] = mode;
  }
  return json;
}

}  // namespace

std::string WireHandler::NotReadyReason() const {
  if (not_ready_reason_) return not_ready_reason_();
  return ready_.load() ? "" : "linkfit is still loading its state";
}

// Filter and prioritize read the request's names as sent (kube::NameCheck::kByCaller): the
// extender looks at the bytes of none it knows, and a request of 5,000 names is not looked at
// twice. Should a name hold an escape (kube-scheduler's never do), the extender says so, and the
// request is decoded again with every name decoded. (In a cluster one of whose own node names a
// reply escapes, every name is decoded at once.)
kube::NameCheck WireHandler::NameCheck() const {
  return extender_.ReadsNamesAsSent() ? kube::NameCheck::kByCaller : kube::NameCheck::kAtDecode;
}

server::HttpReply WireHandler::Filter(server::Body body) {
  auto args = kube::DecodeExtenderArgs(body.text, NameCheck(), body.readable_after);
  if (!args) return BadRequest(args.error().message);
  if (const std::string reason = NotReadyReason(); !reason.empty()) {
    return server::HttpReply{200, kube::EncodeFilterError(reason)};
  }
  if (memo_ != nullptr) memo_->Seen(args->pod);  // once per pod: retries change nothing
  std::optional<std::string> reply = extender_.FilterReplyNamesAsSent(*args);
  if (!reply) {
    args = kube::DecodeExtenderArgs(body.text, kube::NameCheck::kAtDecode, body.readable_after);
    if (!args) return BadRequest(args.error().message);
    reply = extender_.FilterReplyNamesAsSent(*args);  // always an answer now
  }
  return server::HttpReply{200, std::move(*reply)};
}

server::HttpReply WireHandler::Prioritize(server::Body body) {
  auto args = kube::DecodeExtenderArgs(body.text, NameCheck(), body.readable_after);
  if (!args) return BadRequest(args.error().message);
  if (!NotReadyReason().empty()) {  // every name written back, each looked at
    if (args->node_names_as_sent) {
      args = kube::DecodeExtenderArgs(body.text, kube::NameCheck::kAtDecode, body.readable_after);
      if (!args) return BadRequest(args.error().message);
    }
    const std::vector<std::uint32_t> zeros(args->node_names.size());
    return server::HttpReply{
        200, kube::EncodeHostScores(args->node_names, zeros, args->node_names_escape_free)};
  }
  // Prioritize changes nothing, demand included: kube-scheduler filters every pod before it
  // prioritizes it, and filter made the pod known.
  std::optional<extender::Extender::Scores> scores = extender_.PrioritizeNamesAsSent(*args);
  if (!scores) {
    args = kube::DecodeExtenderArgs(body.text, kube::NameCheck::kAtDecode, body.readable_after);
    if (!args) return BadRequest(args.error().message);
    scores = extender_.PrioritizeNamesAsSent(*args);  // always an answer now
  }
  // Prioritize answers for exactly the request's names, in its order.
  return server::HttpReply{
      200, kube::EncodeHostScores(args->node_names, scores->scores, scores->names_escape_free)};
}

server::HttpReply WireHandler::Bind(std::string_view body) {
  auto args = kube::DecodeBindingArgs(body);
  if (!args) return BadRequest(args.error().message);
  if (const std::string reason = NotReadyReason(); !reason.empty()) {
    return server::HttpReply{200, kube::EncodeBindingResult(reason)};
  }
  return server::HttpReply{200, kube::EncodeBindingResult(extender_.Bind(*args))};
}

server::HttpReply WireHandler::Preempt(std::string_view body) {
  auto args = kube::DecodePreemptionArgs(body);
  if (!args) return BadRequest(args.error().message);
  if (!NotReadyReason().empty()) return server::HttpReply{200, kube::EncodePreemptionResult({})};
  return server::HttpReply{200, kube::EncodePreemptionResult(extender_.Preempt(*args))};
}

server::HttpReply WireHandler::Inspect(std::string_view node) {
  const state::SnapshotPtr snapshot = extender_.cache().Snapshot();
  if (!node.empty()) {
    const state::NodeState* found = snapshot->Find(node);
    if (found == nullptr) {
      return server::HttpReply{404, kube::EncodeErrorBody("unknown node " + std::string(node))};
    }
    return server::HttpReply{200, NodeJson(*found).dump()};
  }
  nlohmann::json nodes = nlohmann::json::array();
  for (const state::NodeStatePtr& state : snapshot->nodes()) nodes.push_back(NodeJson(*state));
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

server::HttpReply WireHandler::Explain(std::string_view pod_json) {
  // The body is a Pod; reuse the request decoder by wrapping it in an ExtenderArgs envelope.
  std::string envelope = R"({"Pod":)";
  envelope.append(pod_json);
  envelope.append(R"(,"Nodes":null,"NodeNames":[]})");
  auto args = kube::DecodeExtenderArgs(envelope);
  if (!args) return BadRequest("explain expects a Pod object: " + args.error().message);
  return server::HttpReply{200, nlohmann::json{{"lines", extender_.Explain(args->pod)}}.dump()};
}

server::HttpReply WireHandler::Release(std::string_view body) {
  if (memo_ == nullptr) {
    return server::HttpReply{
        404, kube::EncodeErrorBody("release is only available in standalone mode; in a "
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
      return server::HttpReply{404, kube::EncodeErrorBody("pod " + uid + " holds no devices")};
    case state::RemoveOutcome::kBindInFlight:
      break;
  }
  return server::HttpReply{
      409, kube::EncodeErrorBody("pod " + uid +
                                 " is still being bound; nothing was released, retry after the "
                                 "bind returns")};
}

}  // namespace linkfit::app
