// Extender preempt and explain (extender.h): read-only answers beside filter and prioritize.

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

// "NICs mlx5_0, mlx5_1 (250/1000)": the NICs of `a` on `node`, by name.
std::string DescribeNics(const state::Assignment& a, const state::NodeState& node) {
  std::string out;
  const std::vector<topology::NicSpec>& specs = node.info().own_topology().nics();
  for (const state::Assignment::NicSlot& slot : a.nics) {
    const auto i = static_cast<std::size_t>(slot.nic);
    out += out.empty() ? (a.nics.size() > 1 ? "NICs " : "NIC ") : ", ";
    out += i < specs.size() ? specs[i].name : std::to_string(slot.nic);
    if (slot.milli < 1000) out += " (" + std::to_string(slot.milli) + "/1000)";
  }
  return out;
}

std::string DescribeGpus(const state::Assignment& a) {
  switch (a.kind) {
    case state::Assignment::Kind::kWhole:
      return "GPUs " + JoinInts(alloc::MaskToIndexes(a.gpus));
    case state::Assignment::Kind::kShared: {
      std::string out;
      for (const auto& slot : a.shares) {
        out += (out.empty() ? "" : ", ") + std::string("GPU ") + std::to_string(slot.gpu) + " (" +
               std::to_string(slot.milli) + "/1000)";
      }
      return out;
    }
    case state::Assignment::Kind::kMig: {
      std::string out;
      for (const auto& slot : a.mig) {
        out += (out.empty() ? "" : ", ") + std::string("GPU ") + std::to_string(slot.gpu) +
               " slice " + std::to_string(slot.instance.start);
      }
      return out;
    }
  }
  return "";
}

std::string DescribeDevices(const state::Assignment& a, const state::NodeState& node) {
  if (a.nics.empty()) return DescribeGpus(a);
  if (a.gpus == 0) return DescribeNics(a, node);
  return DescribeGpus(a) + " and " + DescribeNics(a, node);
}

// Why `fit` loses the whole-machine points for its ring's PCIe hop (whole_machines.h,
// LosesNvlinkPoints): the first node whose ring is all NVLink and at least as fast.
std::string NvlinkLoss(const NodeFit& fit, const std::vector<NodeFit>& fits,
                       const state::Snapshot& snapshot, const ExtenderOptions& options) {
  std::string nvlink;
  for (std::size_t n = 0; n < fits.size() && nvlink.empty(); ++n) {
    const NodeFit& other = fits[n];
    if (other.fits && other.ring_all_nvlink && other.quality.ring_mbps >= fit.quality.ring_mbps) {
      nvlink = snapshot.nodes()[n]->name();
    }
  }
  const auto points = std::lround(options.weights.whole_machine_penalty * options.score_range);
  return "; loses " + std::to_string(points) + " of " + std::to_string(options.score_range) +
         " points: its ring has a PCIe hop while " + nvlink +
         " offers an all-NVLink ring as fast (policy.whole_machines: " +
         std::string(ToString(options.weights.whole_machines)) + ")";
}

}  // namespace

std::vector<std::size_t> Extender::Preempt(const kube::PodView& pod,
                                           std::span<const PreemptionCandidate> candidates) const {
  std::vector<std::size_t> kept;
  const auto request = ParseRequest(pod);
  if (!request) {
    return kept;
  }
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const PreemptionCandidate& candidate = candidates[i];
    if (candidate.victim_uids.empty()) continue;  // never keep a node without victims
    if (!request->WantsDevices()) {
      kept.push_back(i);
      continue;
    }
    const state::NodeState* node = snapshot->Find(candidate.node);
    if (node == nullptr) continue;
    state::NodeStatePtr freed = std::make_shared<state::NodeState>(*node);
    for (const std::string_view uid : candidate.victim_uids)
      freed = freed->Remove(std::string(uid));
    if (FitOnNode(*request, *freed, options_.fit).fits) kept.push_back(i);
  }
  return kept;
}

std::string Extender::WholeMachineLoss(const state::NodeState& node, const NodeFit& fit,
                                       const std::vector<NodeFit>& fits,
                                       const state::Snapshot& snapshot, bool ring_decides) const {
  const int level = fit.keeper_gpus_broken;
  std::string what = "a free all-NVLink set of " + std::to_string(level) + " GPUs";
  if (!fit.assignment.mig.empty()) {
    what = "a MIG GPU whose slices are all free (the largest MIG profile)";
  } else if (level == node.gpu_count()) {
    what = "an idle whole machine (" + std::to_string(level) + " GPUs)";
  }
  // The first node that breaks less and serves the pod as well: the one the rule keeps to.
  std::string keeper;
  for (std::size_t n = 0; n < fits.size() && keeper.empty(); ++n) {
    const NodeFit& other = fits[n];
    if (other.fits && other.keeper_gpus_broken < level &&
        (!ring_decides || RingRankOf(other) >= RingRankOf(fit))) {
      keeper = snapshot.nodes()[n]->name();
    }
  }
  const auto points = std::lround(options_.weights.whole_machine_penalty * options_.score_range);
  return "loses " + std::to_string(points) + " of " + std::to_string(options_.score_range) +
         " points: it would break " + what + " while " + keeper + " serves the pod " +
         (ring_decides ? "with a ring as fast" : "without breaking one") +
         " (policy.whole_machines: " + std::string(ToString(options_.weights.whole_machines)) + ")";
}

std::string Extender::NicLoss(const NodeFit& fit, const std::vector<NodeFit>& fits,
                              const state::Snapshot& snapshot) const {
  if (fit.nics_aligned) return "";
  std::string aligned;  // the first node whose NICs serve the pod well: the one the term keeps to
  for (std::size_t n = 0; n < fits.size() && aligned.empty(); ++n) {
    if (fits[n].fits && fits[n].nics_aligned) aligned = snapshot.nodes()[n]->name();
  }
  if (aligned.empty()) return "";
  const auto points = std::lround(options_.weights.whole_machine_penalty * options_.score_range);
  const bool rate = options_.fit.nic_alignment == NicAlignment::kRate;
  return "; loses " + std::to_string(points) + " of " + std::to_string(options_.score_range) +
         " points: its NICs are not at the asked closeness" +
         (rate ? " nor carried at their rate through host memory" : "") + " while " + aligned +
         " gives every GPU one (policy.nic_alignment: " +
         std::string(ToString(options_.fit.nic_alignment)) + ")";
}

std::vector<std::string> Extender::Explain(const kube::PodView& pod) const {
  std::vector<std::string> lines;
  const auto request = ParseRequest(pod);
  if (!request) {
    lines.push_back("pod cannot be placed anywhere: " + request.error().message);
    return lines;
  }
  lines.push_back("pod " + pod.pod_namespace + "/" + pod.name + " asks for " + request->Describe());
  const state::SnapshotPtr snapshot = cache_.Snapshot();
  std::vector<NodeFit> fits;
  fits.reserve(snapshot->nodes().size());
  KeptAlternatives kept;
  double best_nvlink_ring = 0;
  for (const state::NodeStatePtr& node : snapshot->nodes()) {
    const NodeFit& fit = fits.emplace_back(FitOnNode(*request, *node, options_.fit));
    if (fit.fits) {
      kept.Add(fit.keeper_gpus_broken, RingRankOf(fit));
      if (fit.ring_all_nvlink) {
        best_nvlink_ring = std::max(best_nvlink_ring, static_cast<double>(fit.quality.ring_mbps));
      }
    }
  }
  const KeptAlternatives::Rings below = kept.Below();
  const WholeMachinePolicy policy = options_.weights.whole_machines;
  const bool ring_decides = RingDecides(*request, policy);
  const bool nvlink_rule = NvlinkRuleApplies(*request, policy);
  for (std::size_t n = 0; n < fits.size(); ++n) {
    const state::NodeState& node = *snapshot->nodes()[n];
    const NodeFit& fit = fits[n];
    std::string line = node.name() + ": ";
    if (fit.fits) {
      line += "fits on " + DescribeDevices(fit.assignment, node);
      if (fit.quality.ring_mbps > 0) {
        line += " (ring " + std::to_string(fit.quality.ring_mbps / 1000) + " GB/s)";
      }
      if (!fit.reason.empty()) line += "; preferred closeness missed: " + fit.reason;
      if (policy != WholeMachinePolicy::kOff &&
          LosesWholeMachinePoints(fit.keeper_gpus_broken, RingRankOf(fit), below, ring_decides)) {
        line += "; " + WholeMachineLoss(node, fit, fits, *snapshot, ring_decides);
      } else if (LosesNvlinkPoints(fit.quality.ring_mbps, fit.ring_all_nvlink, best_nvlink_ring,
                                   nvlink_rule)) {
        line += NvlinkLoss(fit, fits, *snapshot, options_);
      }
      if (request->nics.wanted()) line += NicLoss(fit, fits, *snapshot);
    } else {
      line += std::string(fit.unresolvable ? "never fits: " : "does not fit now: ") + fit.reason;
    }
    lines.push_back(std::move(line));
  }
  if (const auto& problems = snapshot->problems()) {
    for (const auto& [name, problem] : *problems)
      lines.push_back(name + ": never fits: " + problem);
  }
  return lines;
}

}  // namespace linkfit::extender
