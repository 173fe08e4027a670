#include "linkfit/wire/bind_preempt.h"

#include <cstddef>
#include <string_view>
#include <vector>

namespace linkfit::wire {

extender::BindTarget BindTargetOf(const BindingArgs& args) {
  return extender::BindTarget{args.pod_name, args.pod_namespace, args.pod_uid, args.node};
}

std::vector<NodeVictims> KeptVictims(const extender::Extender& extender,
                                     const PreemptionArgs& args) {
  const std::vector<NodeVictims>& offered =
      args.meta_victims_given ? args.node_meta_victims : args.node_victims;
  std::vector<extender::PreemptionCandidate> candidates;
  candidates.reserve(offered.size());
  for (const NodeVictims& node : offered) {
    extender::PreemptionCandidate& candidate = candidates.emplace_back();
    candidate.node = node.node;
    candidate.victim_uids.reserve(node.pods.size());
    for (const Victim& victim : node.pods) candidate.victim_uids.push_back(victim.uid);
  }
  std::vector<NodeVictims> kept;
  for (const std::size_t index : extender.Preempt(args.pod, candidates)) {
    kept.push_back(offered[index]);
  }
  return kept;
}

}  // namespace linkfit::wire
