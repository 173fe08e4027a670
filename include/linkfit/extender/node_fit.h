#pragma once

// FitOnNode: whether a GpuRequest fits on one node's current state, and on which devices. This
// is the single placement decision used by filter (does it fit?), prioritize (how well?), bind
// (re-check and reserve exactly these devices) and preempt (does it fit once victims are gone?).
//
// Thread-safety: pure function of its arguments.

#include <cstdint>
#include <string>
#include <string_view>

#include "linkfit/alloc/share.h"
#include "linkfit/common/result.h"
#include "linkfit/extender/gpu_request.h"
#include "linkfit/state/node_state.h"

namespace linkfit::extender {

struct NodeFit {
  bool fits = false;
  // Set when !fits and no change of occupancy can help (wrong model, too few GPUs in the node,
  // a required closeness the hardware lacks, no MIG support): FailedAndUnresolvableNodes.
  bool unresolvable = false;
  // When it fits: the GPUs of the largest keeper (whole machine, NVLink island, free MIG GPU) the
  // assignment breaks, 0 for none (whole_machines.h).
  std::uint8_t keeper_gpus_broken = 0;
  // When it fits on 2+ whole GPUs: every hop of the chosen set's best ring is NVLink or NVSwitch
  // (the whole-machines rule's RingRank).
  bool ring_all_nvlink = false;
  // When it fits and the pod asks NICs: every GPU of the pod has a NIC at the asked closeness
  // (alloc/nic_choice.h), or, under NicAlignment::kRate, loses nothing to a farther one; true
  // for a pod without NICs. Prioritize's N term and the whole-machines rank read it.
  bool nics_aligned = true;
  // Whole GPUs: the chosen set's quality. Beside `fits`, in the first cache line: prioritize
  // reads both of every candidate's fit, and nothing else of it unless it scores afresh.
  alloc::SetQuality quality;
  std::string reason;            // why not; or, when it fits, a missed preference (may be empty)
  state::Assignment assignment;  // when fits: the devices (pod identity left empty)
};

// What counts as a pod's NICs serving it well (policy.nic_alignment; NodeFit::nics_aligned):
//   aligned  every GPU of the pod has a NIC at the asked closeness
//   rate     that, or each GPU without one gets its NIC's share at the NIC's rate through host
//            memory (alloc::NicChoice::staged_at_rate): a quarter of a 100 Gb/s NIC staged on
//            PCIe gen 3 runs as fast as through GPUDirect RDMA, so it need not take a GPU beside
//            a NIC that a pod of whole NICs could use
enum class NicAlignment : std::uint8_t { kAligned, kRate };
Result<NicAlignment> ParseNicAlignment(std::string_view text);  // "aligned" | "rate"
std::string_view ToString(NicAlignment alignment);

struct FitOptions {
  alloc::SharePolicy share_policy = alloc::SharePolicy::kPack;
  // False: whole-GPU fits leave NodeFit::reason empty (prioritize, which only scores, sets it).
  bool explain = true;
  NicAlignment nic_alignment = NicAlignment::kAligned;
};

// The GPU model name of a node for messages and display: the model of most of its healthy GPUs.
// Decisions read each GPU's model (a pod that names models is placed only on GPUs of those).
const std::string& NodeGpuModel(const state::NodeState& node);

NodeFit FitOnNode(const GpuRequest& request, const state::NodeState& node,
                  const FitOptions& options);

}  // namespace linkfit::extender
