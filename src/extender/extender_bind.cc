// Extender bind and release (extender.h): the one commit point, and its undoing.

#include "linkfit/extender/extender.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "extender/verb_cache.h"
#include "extender/verb_steps.h"
#include "linkfit/common/log.h"
#include "linkfit/common/strings.h"

namespace linkfit::extender {

namespace {

std::string PodKeyOf(const BindTarget& target) {
  return target.pod_namespace + "/" + target.pod_name;
}

// Bind's answer (empty: bound) once the lifecycle took `step` on the Binder's `reply`.
std::string BindAnswer(const BindTarget& target, const BindReply& reply,
                       const Result<state::BindStep>& step) {
  const std::string what = "bind of " + PodKeyOf(target) + " to " + target.node;
  if (!step) {
    log::Error(what + ": " + step.error().message);
    return what + " lost track of its own state: " + step.error().message;
  }
  switch (step->stage) {
    case state::BindStage::kAccepted:
    case state::BindStage::kConfirmed:
    case state::BindStage::kReplaced:
      if (reply.event == state::BindEvent::kConflictOtherRecord)
        log::Warning(what + ": " + reply.detail);
      // Bound where kube-scheduler asked is a success, whatever devices the record names; bound
      // elsewhere (the API's object may have ended the bind first) is not.
      return reply.bound_node.empty() || reply.bound_node == target.node ? "" : reply.detail;
    case state::BindStage::kUnknown:
      log::Warning(what +
                   ": outcome unknown, devices stay reserved until the API server settles it: " +
                   reply.detail);
      return "the outcome of binding pod " + PodKeyOf(target) + " to " + target.node +
             " is unknown (" + reply.detail +
             "); its devices stay reserved until the API server's state settles it";
    case state::BindStage::kForgotten:
      break;
    case state::BindStage::kAssumed:
    case state::BindStage::kWriting:
      return what + ": the binder answered " + std::string(state::EventName(reply.event)) +
             ", which does not end a write";
  }
  const std::string why =
      reply.detail.empty() ? "the pod is gone or its devices were taken meanwhile" : reply.detail;
  log::Warning(what + " failed, devices released: " + why);
  return why;
}

}  // namespace

std::string Extender::Bind(const BindTarget& target) {
  // A repeated bind of a pod already on `target.node` is a success once the first bind is
  // recorded. While the first is still in the binder its outcome is unknown (it may fail and be
  // forgotten), so a repeat must not claim success; kube-scheduler retries.
  const auto repeated = [&]() -> std::string {
    if (cache_.Phase(target.pod_uid) == state::PodPhase::kAdded) return "";
    if (cache_.BindDone(target.pod_uid)) return "";
    return "a bind of pod " + target.pod_namespace + "/" + target.pod_name + " to " + target.node +
           " is still in progress";
  };
  const std::optional<KnownPod> pending =
      pods_.ResolveForBind(target.pod_namespace, target.pod_name, target.pod_uid);
  if (!pending) {
    if (const auto existing = cache_.Find(target.pod_uid)) {
      return existing->node == target.node
                 ? repeated()
                 : "pod " + target.pod_uid + " is already bound to node " + existing->node;
    }
    return "linkfit has not seen pod " + target.pod_namespace + "/" + target.pod_name + " (" +
           target.pod_uid + ") " + pods_.where_pods_are_seen() + "; cannot bind it";
  }
  const bool device_less = !pending->request.WantsDevices();
  // The rails of the pod's group as they are now (read before Assume takes the cache's lock).
  GpuRequest request = pending->request;
  WithGroupRails(request);
  if (device_less && cache_.Snapshot()->Find(target.node) == nullptr) {
    // A pod without GPUs or NICs on a node linkfit does not model: nothing to count, so the
    // lifecycle's step is looked up here rather than carried out on the cache.
    const BindReply reply = binder_.Bind(BindRequest{target, {}, nullptr, nullptr});
    const Result<state::BindStep> step =
        state::NextBindStep(state::BindStage::kWriting, reply.event);
    if (step && !step->outcome.empty()) metrics_.CountBindOutcome(step->outcome);
    return BindAnswer(target, reply, step);
  }
  // A pod without devices is still recorded (an assignment holding none) so that its CPU and
  // memory count against the node when scoring; it never fails for lack of them. A pod asking
  // NICs (with or without GPUs) gets them from FitOnNode.
  state::NodeInfoPtr placed_on;
  auto assumed = cache_.Assume(
      target.pod_uid, target.node, [&](const state::NodeState& node) -> Result<state::Assignment> {
        state::Assignment assignment;
        if (device_less) {
          assignment.pod_uid = target.pod_uid;
          assignment.node = node.name();
        } else {
          NodeFit fit = FitOnNode(request, node, options_.fit);
          if (!fit.fits) {
            return MakeError("pod no longer fits on " + target.node + ": " + fit.reason);
          }
          assignment = std::move(fit.assignment);
        }
        assignment.pod_namespace = target.pod_namespace;
        assignment.pod_name = target.pod_name;
        assignment.group = request.group;
        assignment.cpu_milli = pending->request.cpu_milli;
        assignment.memory_bytes = pending->request.memory_bytes;
        placed_on = node.info_ptr();
        return assignment;
      });
  if (!assumed) return assumed.error().message;
  if (assumed->already) return repeated();
  if (auto writing = cache_.Advance(target.pod_uid, state::BindEvent::kWrite);
      !writing || writing->late) {
    // The bind ended before it was written: the watch showed the pod bound (by an earlier
    // write), or a committed record took the devices.
    if (const auto bound = cache_.Find(target.pod_uid); bound && writing) {
      return bound->node == target.node
                 ? ""
                 : "pod " + target.pod_uid + " is already bound to node " + bound->node;
    }
    return "the devices planned for pod " + PodKeyOf(target) +
           " were taken by a pod whose committed record names them; not sent";
  }
  const BindReply reply = binder_.Bind(BindRequest{target, std::move(assumed->assignment),
                                                   std::move(placed_on), pending->containers});
  return BindAnswer(target, reply, cache_.Advance(target.pod_uid, reply.event));
}

state::RemoveOutcome Extender::Release(const std::string& pod_uid) {
  const state::RemoveOutcome outcome = cache_.RemoveBound(pod_uid);
  if (outcome == state::RemoveOutcome::kRemoved) binder_.Released(pod_uid);
  // A pod released without devices (never bound) leaves as well; one whose bind is in flight
  // stays.
  if (outcome != state::RemoveOutcome::kBindInFlight) pods_.PodLeft(pod_uid);
  return outcome;
}

}  // namespace linkfit::extender
