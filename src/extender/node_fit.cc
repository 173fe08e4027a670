#include "linkfit/extender/node_fit.h"

#include <vector>

#include "extender/mig_layout.h"
#include "linkfit/common/strings.h"
#include "linkfit/extender/whole_machines.h"

namespace linkfit::extender {
namespace {

NodeFit NotFit(std::string reason, bool unresolvable) {
  NodeFit fit;
  fit.reason = std::move(reason);
  fit.unresolvable = unresolvable;
  return fit;
}

constexpr auto kEveryGpu = static_cast<topology::GpuMask>(~0u);

// Whether `allowed` holds every GPU of the node (the pod's model constraint excludes none).
bool AllOf(const state::NodeState& node, topology::GpuMask allowed) {
  const topology::GpuMask all = node.info().topology().all_gpus();
  return (allowed & all) == all;
}

// The GPUs that can ever serve whole or shared pods: healthy, not configured in MIG mode.
topology::GpuMask NonMigGpus(const state::NodeState& node) {
  return static_cast<topology::GpuMask>(node.info().topology().all_gpus() &
                                        ~(node.info().mig_enabled | node.info().unhealthy));
}

// What the node's NICs can take now, as the NIC choice reads them.
alloc::NicAvailability NicsOf(const state::NodeState& node) {
  alloc::NicAvailability nics;
  const int count = node.nic_count();
  nics.free_milli.assign(static_cast<std::size_t>(count), 0);
  const alloc::NicMask usable = node.nic_usable();
  for (int n = 0; n < count; ++n) {
    const auto at = static_cast<std::size_t>(n);
    if (usable.test(at)) {
      nics.free_milli[at] = alloc::NicRequest::kWhole - node.nic_used_milli(n);
    } else {
      nics.excluded.set(at);
    }
  }
  return nics;
}

// The NIC slots of a choice.
std::vector<state::Assignment::NicSlot> SlotsOf(const alloc::NicChoice& choice) {
  std::vector<state::Assignment::NicSlot> slots;
  for (const alloc::NicPick& pick : choice.nics) slots.push_back({pick.nic, pick.milli, pick.gpu});
  return slots;
}

// NodeFit::nics_aligned of a NIC choice under `alignment`.
bool ServedWell(const alloc::NicChoice& choice, NicAlignment alignment) {
  return choice.aligned || (alignment == NicAlignment::kRate && choice.staged_at_rate);
}

// Adds the NICs of `request` to a fit whose GPUs are chosen (GPU shares, MIG instances, no GPU):
// the NIC side of the objective for those GPUs (alloc/nic_choice.h).
void AddNics(const GpuRequest& request, const state::NodeState& node, NicAlignment alignment,
             NodeFit& fit) {
  const alloc::NicChoice choice =
      alloc::ChooseNics(node.table().topology(), fit.assignment.gpus,
                        static_cast<topology::GpuMask>(node.whole_free() & ~fit.assignment.gpus),
                        NicsOf(node), request.nics);
  fit.nics_aligned = ServedWell(choice, alignment);
  if (!choice.fits) {
    fit.fits = false;
    fit.unresolvable = choice.unresolvable;
    fit.reason = choice.reason;
    fit.assignment = state::Assignment();
    return;
  }
  fit.assignment.nics = SlotsOf(choice);
  if (!choice.reason.empty()) fit.reason += (fit.reason.empty() ? "" : "; ") + choice.reason;
}

// Whole GPUs and NICs chosen together (alloc/nic_choice.h) among the `free` GPUs the pod accepts.
// Not fitting for want of GPUs is reported as FitWhole reports it (without its notes on MIG
// and health); for want of NICs with the NIC choice's reason.
NodeFit FitWholeWithNics(const GpuRequest& request, const state::NodeState& node,
                         const alloc::WholeGpuRequest& whole, topology::GpuMask allowed,
                         NicAlignment alignment) {
  const auto free = static_cast<topology::GpuMask>(node.whole_free() & allowed);
  const alloc::JointPlacement joint =
      alloc::PlaceWholeGpusWithNics(*node.info().table, free, NicsOf(node), whole, request.nics);
  if (!joint.gpus.fits) {
    const bool never =
        joint.gpus.unresolvable ||
        !alloc::PlaceWholeGpus(*node.info().table,
                               static_cast<topology::GpuMask>(NonMigGpus(node) & allowed), whole)
             .fits;
    return NotFit(joint.gpus.reason, never);
  }
  if (!joint.nics.fits) return NotFit(joint.nics.reason, joint.nics.unresolvable);
  NodeFit fit;
  fit.fits = true;
  fit.nics_aligned = ServedWell(joint.nics, alignment);
  fit.reason = joint.gpus.closeness_met ? "" : joint.gpus.reason;
  if (!joint.nics.reason.empty()) {
    fit.reason += (fit.reason.empty() ? "" : "; ") + joint.nics.reason;
  }
  fit.quality = joint.gpus.quality;
  fit.assignment.kind = state::Assignment::Kind::kWhole;
  fit.assignment.gpus = joint.gpus.gpus;
  fit.assignment.nics = SlotsOf(joint.nics);
  fit.assignment.node = node.name();
  return fit;
}

// `allowed`: the GPUs of a model the pod accepts (every GPU when it names none).
NodeFit FitWhole(const GpuRequest& request, const state::NodeState& node, const FitOptions& options,
                 topology::GpuMask allowed) {
  const alloc::WholeGpuRequest whole{request.count, request.closeness, request.policy,
                                     options.explain};
  if (request.nics.wanted()) {
    return FitWholeWithNics(request, node, whole, allowed, options.nic_alignment);
  }
  const alloc::WholeGpuPlacement placement = alloc::PlaceWholeGpus(
      *node.info().table, static_cast<topology::GpuMask>(node.whole_free() & allowed), whole);
  if (!placement.fits) {
    // Unresolvable also when it would not fit even with every pod gone: GPUs in MIG mode never
    // serve whole-GPU pods, nor GPUs of another model, so evicting pods (preemption) cannot help.
    const bool never =
        placement.unresolvable ||
        !alloc::PlaceWholeGpus(*node.info().table,
                               static_cast<topology::GpuMask>(NonMigGpus(node) & allowed), whole)
             .fits;
    std::string reason = placement.reason;
    if (!options.explain) return NotFit(std::move(reason), never);
    if (!AllOf(node, allowed)) {
      reason +=
          " (of the GPUs " + JoinInts(alloc::MaskToIndexes(allowed)) + " of the requested model)";
    }
    if (never && !placement.unresolvable && node.info().mig_enabled != 0) {
      reason +=
          " (GPUs " + JoinInts(alloc::MaskToIndexes(node.info().mig_enabled)) + " are in MIG mode)";
    }
    if (!placement.unresolvable && node.info().unhealthy != 0) {
      reason +=
          " (GPUs " + JoinInts(alloc::MaskToIndexes(node.info().unhealthy)) + " are unhealthy)";
    }
    return NotFit(std::move(reason), never);
  }
  NodeFit fit;
  fit.fits = true;
  fit.reason = placement.closeness_met ? "" : placement.reason;
  fit.quality = placement.quality;
  fit.assignment.kind = state::Assignment::Kind::kWhole;
  fit.assignment.gpus = placement.gpus;
  fit.assignment.node = node.name();
  return fit;
}

// The request on the GPUs that plan with `planner` (whose set has `profile`).
NodeFit FitMigWith(const alloc::MigPlanner& planner, int profile, const GpuRequest& request,
                   const state::NodeState& node, topology::GpuMask allowed) {
  const state::NodeInfo& info = node.info();
  std::vector<alloc::MigGpuView> views;
  for (int g = 0; g < info.gpu_count(); ++g) {
    if (info.MigPlannerOf(g) != &planner) continue;  // another model's profiles, or none
    if (((info.unhealthy >> g) & 1) != 0) continue;  // never placed on
    if (((allowed >> g) & 1) == 0) continue;         // a model the pod does not accept
    alloc::MigGpuView view;
    view.index = g;
    view.mig_enabled = ((info.mig_enabled >> g) & 1) != 0;
    view.pods = node.pods_on_gpu(g);
    view.state = node.mig_state(g);
    views.push_back(view);
  }
  const std::vector<int> profiles(static_cast<std::size_t>(request.count), profile);
  auto decision = planner.ChooseRequest(views, profiles);
  if (!decision) return NotFit(decision.error().message, true);
  if (!decision->fits) {
    // Freeing instances (preemption) can help only if the request fits the MIG-mode GPUs once
    // they are empty; reconfiguring GPUs is an operator's action, not a preemption.
    bool never = (info.mig_enabled & info.GpusOfPlanner(&planner)) == 0;
    if (!never) {
      std::vector<alloc::MigGpuView> empty = views;
      for (alloc::MigGpuView& view : empty) {
        view.pods = 0;
        view.state = alloc::MigGpuState();
      }
      const auto when_empty = planner.ChooseRequest(empty, profiles);
      never = !when_empty || !when_empty->fits;
    }
    return NotFit(decision->reason, never);
  }
  NodeFit fit;
  fit.fits = true;
  fit.assignment.kind = state::Assignment::Kind::kMig;
  fit.assignment.node = node.name();
  for (const alloc::MigDecision& instance : decision->instances) {
    fit.assignment.mig.push_back({instance.gpu, alloc::MigInstance{profile, instance.start}});
    fit.assignment.gpus =
        static_cast<topology::GpuMask>(fit.assignment.gpus | (1u << instance.gpu));
  }
  return fit;
}

// "NVIDIA A100-SXM4-40GB (GPUs 0,1)": the model and GPUs of a planner.
std::string PlannerGpus(const state::NodeState& node, const alloc::MigPlanner& planner) {
  const topology::GpuMask gpus = node.info().GpusOfPlanner(&planner);
  return node.info().own_topology().gpu(__builtin_ctz(gpus)).model + " (GPUs " +
         JoinInts(alloc::MaskToIndexes(gpus)) + ")";
}

std::string OfferedProfiles(const alloc::MigPlanner& planner) {
  std::string known;
  for (const alloc::MigProfile& p : planner.set().profiles) {
    known += (known.empty() ? "" : ", ") + p.name;
  }
  return known;
}

// Each GPU plans with its own model's profiles (NodeInfo::MigPlannerOf): the request goes to the
// GPUs of a model that offers its profile, tried model by model in order of their first GPU, and
// never spans two models. On a reported layout it takes free existing instances of the profile's
// name on any GPU whose model's set has it.
NodeFit FitMig(const GpuRequest& request, const state::NodeState& node, topology::GpuMask allowed) {
  const state::NodeInfo& info = node.info();
  if (info.mig_planners.empty()) {
    return NotFit("node's GPUs (" + NodeGpuModel(node) + ") are not MIG-capable", true);
  }
  std::vector<std::pair<const alloc::MigPlanner*, int>> offering;
  for (const alloc::MigPlanner* planner : info.mig_planners) {
    const int profile = planner->set().FindProfile(request.mig_profile);
    if (profile >= 0) offering.emplace_back(planner, profile);
  }
  if (offering.empty()) {
    if (info.mig_planners.size() == 1) {
      return NotFit("node's GPUs (" + NodeGpuModel(node) + ") have no MIG profile " +
                        request.mig_profile + " (they offer " +
                        OfferedProfiles(*info.mig_planners.front()) + ")",
                    true);
    }
    std::string offers;
    for (const alloc::MigPlanner* planner : info.mig_planners) {
      offers += (offers.empty() ? "" : "; ") + PlannerGpus(node, *planner) + " offer " +
                OfferedProfiles(*planner);
    }
    return NotFit("no GPU model of the node has MIG profile " + request.mig_profile + ": " + offers,
                  true);
  }
  if (info.mig_layout_reported) return FitMigOnReportedLayout(request, node, allowed);
  std::string reasons;
  bool never = true;
  for (const auto& [planner, profile] : offering) {
    NodeFit fit = FitMigWith(*planner, profile, request, node, allowed);
    if (fit.fits) return fit;
    never = never && fit.unresolvable;
    reasons += (reasons.empty() ? "" : "; ") +
               (offering.size() > 1 ? PlannerGpus(node, *planner) + ": " : std::string()) +
               fit.reason;
  }
  return NotFit(std::move(reasons), never);
}

NodeFit FitShared(const GpuRequest& request, const state::NodeState& node,
                  const FitOptions& options, topology::GpuMask allowed) {
  const int usable = __builtin_popcount(NonMigGpus(node) & allowed);
  if (request.count > usable) {
    const bool of_model = !AllOf(node, allowed);
    return NotFit("node has " + std::to_string(usable) + " GPUs" +
                      (of_model ? " of the requested model" : "") + " that can be shared (" +
                      std::to_string(node.info().gpu_count()) + " in all), shares on " +
                      std::to_string(request.count) + " distinct GPUs requested",
                  true);
  }
  std::vector<alloc::SharedGpuView> views;
  const topology::GpuMask eligible =
      static_cast<topology::GpuMask>(node.share_eligible() & allowed);
  for (int g = 0; g < node.info().gpu_count(); ++g) {
    alloc::SharedGpuView view;
    view.index = g;
    view.eligible = ((eligible >> g) & 1) != 0;
    if (node.shared_milli(g) > 0) view.state.Take(0, node.shared_milli(g));
    views.push_back(view);
  }
  alloc::ShareRequest share;
  share.count = request.count;
  share.milli = request.share_milli;
  auto decision = alloc::ChooseShares(views, share, options.share_policy);
  if (!decision) return NotFit(decision.error().message, true);
  if (!decision->fits) return NotFit(decision->reason, false);
  NodeFit fit;
  fit.fits = true;
  fit.assignment.kind = state::Assignment::Kind::kShared;
  fit.assignment.node = node.name();
  for (std::size_t i = 0; i < decision->gpus.size(); ++i) {
    fit.assignment.shares.push_back({decision->gpus[i], decision->milli[i]});
    fit.assignment.gpus =
        static_cast<topology::GpuMask>(fit.assignment.gpus | (1u << decision->gpus[i]));
  }
  return fit;
}

// Why no GPU of the node serves a pod that accepts only `request.gpu_models`: the node's models
// and their GPUs ("GPU model NVIDIA A10 is not one of a100" on a node of one model).
std::string DescribeModelMiss(const GpuRequest& request, const state::NodeState& node,
                              topology::GpuMask allowed) {
  std::string wanted;
  for (const std::string& model : request.gpu_models) wanted += (wanted.empty() ? "" : "|") + model;
  const topology::GpuMask unhealthy = node.info().unhealthy;
  if (allowed != 0) {  // every GPU of an accepted model is unhealthy
    return "the GPUs of model " + wanted + " (" + JoinInts(alloc::MaskToIndexes(allowed)) +
           ") are unhealthy";
  }
  const auto& groups = node.info().own_topology().model_groups();
  if (groups.size() == 1) return "GPU model " + groups[0].model + " is not one of " + wanted;
  std::string models;
  for (const topology::Topology::ModelGroup& group : groups) {
    const auto sick = static_cast<topology::GpuMask>(group.gpus & unhealthy);
    models += (models.empty() ? "" : ", ") + group.model + " (GPUs " +
              JoinInts(alloc::MaskToIndexes(group.gpus)) +
              (sick == 0            ? ""
               : sick == group.gpus ? ", unhealthy"
                                    : "; " + JoinInts(alloc::MaskToIndexes(sick)) + " unhealthy") +
              ")";
  }
  return "GPU models " + models + ": none is one of " + wanted;
}

}  // namespace

Result<NicAlignment> ParseNicAlignment(std::string_view text) {
  if (text == "aligned") return NicAlignment::kAligned;
  if (text == "rate") return NicAlignment::kRate;
  return MakeError("nic_alignment must be aligned or rate, not \"" + std::string(text) + "\"");
}

std::string_view ToString(NicAlignment alignment) {
  return alignment == NicAlignment::kRate ? "rate" : "aligned";
}

const std::string& NodeGpuModel(const state::NodeState& node) {
  return node.info().own_topology().summary_model();
}

NodeFit FitOnNode(const GpuRequest& request, const state::NodeState& node,
                  const FitOptions& options) {
  if (request.kind == GpuRequest::Kind::kNone) {
    NodeFit fit;
    fit.fits = true;
    if (request.nics.wanted()) {  // NICs only (the 2025 trace's CPU pods with NIC shares)
      fit.assignment.node = node.name();
      AddNics(request, node, options.nic_alignment, fit);
    }
    return fit;
  }
  // The GPUs of an accepted model (grouped per topology when it is loaded: a node of one model
  // costs one substring test per accepted model); every bit, and no look at the node's
  // NodeInfo, when the pod names no model.
  topology::GpuMask allowed = kEveryGpu;
  if (!request.gpu_models.empty()) {
    allowed = node.info().topology().GpusOfModels(request.gpu_models);
    if ((allowed & ~node.info().unhealthy) == 0) {
      return NotFit(DescribeModelMiss(request, node, allowed), true);
    }
  }
  NodeFit fit;
  switch (request.kind) {
    case GpuRequest::Kind::kWhole:
      fit = FitWhole(request, node, options, allowed);
      break;
    case GpuRequest::Kind::kMig:
      fit = FitMig(request, node, allowed);
      break;
    case GpuRequest::Kind::kShared:
      fit = FitShared(request, node, options, allowed);
      break;
    case GpuRequest::Kind::kNone:
      return NotFit("unknown request kind", true);
  }
  if (fit.fits && request.nics.wanted() && request.kind != GpuRequest::Kind::kWhole) {
    AddNics(request, node, options.nic_alignment, fit);
  }
  if (fit.fits) {
    fit.keeper_gpus_broken =
        static_cast<std::uint8_t>(BrokenKeeperGpus(node, fit.assignment, request.nics));
    fit.ring_all_nvlink = request.kind == GpuRequest::Kind::kWhole &&
                          node.table().Meets(fit.assignment.gpus, alloc::Closeness::kNvlink) &&
                          fit.quality.ring_mbps > 0;
  }
  return fit;
}

}  // namespace linkfit::extender
