#pragma once

// Whole machines are worth keeping. Each node kind has shapes that only an intact free set of it
// can host: its NVLink islands of two or more GPUs (the whole machine on an NVSwitch or hybrid
// cube-mesh machine, the pairs of a bridged workstation), intact while every GPU of the island
// is free for whole placement (none held, shared, in MIG mode or unhealthy); on a partly used
// machine, the all-NVLink sets of k = 2, 4, 8 ... GPUs (the sizes multi-GPU pods ask) that its
// free GPUs still offer; and, on a GPU in MIG mode, the largest MIG profile (the GPU's slices all
// free). A placement *breaks* such a keeper when the keeper is intact before and not after (for
// the sets: the free GPUs offer an all-NVLink k-set before and none after, k above the
// placement's own size); its break level is the size in GPUs of the largest keeper it breaks (1
// for a free MIG GPU, 0 when it breaks none). So a 1-GPU pod takes a PCIe machine's GPU before
// it breaks the last free NVLink 4-set of a DGX (topology experiment: multi-GPU pods on
// all-NVLink rings 0.948 -> 0.968, bench/RESULTS.md). A machine without
// NVLink has no keeper: any of its free GPUs serve a big pod alike, and FGD's fragmentation
// (scoring.h) already weighs how many stay free together; on the FGD paper's openb cluster (no
// NVLink) the rule never fires (counting PCIe-only whole machines too cost 0.6-1.1 points of
// openb's GPU allocation, bench/RESULTS.md).
//
// The rule (prioritize, scoring.h): a candidate whose placement breaks a keeper loses
// ScoreWeights::whole_machine_penalty of the score range while another candidate of a lower break
// level serves the pod as well:
//
//   keep             a pod without a closeness hint (closeness `node`, the loosest) is served as
//                    well by any such candidate, whatever its ring: a small pod never breaks an
//                    idle machine, an NVLink island or a free MIG GPU while a node that keeps them
//                    can take it, even for a faster ring it did not ask for. A pod with a hint:
//                    as `ring`.
//   ring  (default)  served as well = a ring at least as good for the pod's size (closeness is
//                    met on every candidate filter passed): a keeper is broken for a better ring,
//                    kept at an equal one. Rings compare by bandwidth, and at equal bandwidth an
//                    all-NVLink ring beats one with a PCIe hop (RingRank): NVLink bandwidth is the
//                    GPUs' own, a PCIe ring shares its switches and root complex with the NICs and
//                    host traffic. So a 4-GPU pod takes four NVLink-joined GPUs of an idle DGX-1
//                    (20 GB/s) rather than four PCIe-joined L40S GPUs of the same nominal 20 GB/s.
//                    The default because `keep` sent unhinted multi-GPU pods to PCIe machines in
//                    the topology experiment (NVLink ring rate 0.94 -> 0.67, bench/RESULTS.md);
//                    `ring` left it at 0.94.
//   off              no keeper counts (the scores before the rule).
//
// Pods that ask for NICs: an NVLink keeper of k GPUs counts only while k of the node's free GPUs
// could each still have a whole free NIC of their own at the pod's NIC closeness (a bipartite
// matching of free GPUs to whole free NICs; not necessarily the same k GPUs, which is looser but
// never makes a keeper of an unbacked machine). Where the pods of a cluster ask NICs, a set of
// GPUs without NICs for them serves no big pod: a DGX-1 (four NICs, each at PIX to a GPU pair) is
// no 8-GPU keeper for them, and once a share pod has one of its NICs, no 4-GPU keeper either. So a
// share pod (1 GPU and part of a NIC) takes a GPU of a partly used DGX-1 beside a NIC already
// shared instead of the free GPUs and NICs of a partly used 8-NIC machine, which then drains
// whole for the 8-GPU pods (issue 37's nic experiment: 8-GPU pods refused 740 -> 495 over ten
// seeds, bench/RESULTS.md). Counting a lost whole NIC as a keeper too (the four NICs of
// a PCIe machine as a 4-GPU keeper) sent share pods from the L40S servers onto the 8-NIC machines
// instead. A pod without NICs sees the NVLink keepers alone.
//
// Where the ring decides (`ring`; a pod with a hint under `keep`), the better ring also wins
// where no keeper is at stake: a candidate whose ring has a PCIe hop loses the same points while
// another candidate offers an all-NVLink ring at least as fast (LosesNvlinkPoints). Without it the
// topology term's NVLink preference (scoring.h's T) lost to the packing of a partly used PCIe
// node and to the fragmentation of breaking an idle NVLink machine, so a 4-GPU pod took a
// half-used L40S server's 20 GB/s PCIe ring over a DGX-1's 20 GB/s NVLink ring: in the topology
// experiment 14 multi-GPU pods went off NVLink while an all-NVLink set of their size was free,
// none with this (nvlink_ring_rate 0.968 -> 0.972; the pod's ring is as fast, the mean ring of
// multi-GPU pods 280.5 -> 279.9 GB/s as later pods find other machines free; bench/RESULTS.md).
//
// A node that can never host the big shapes (GPUs in MIG mode, fewer GPUs, NVLink islands already
// broken) breaks nothing and is where small pods go. The break level is a property of the fit (of
// the node's GPU state and the chosen devices), so it is computed with the fit and kept with it
// (verb_cache.h), never per call.
//
// Thread-safety: plain values and pure functions; KeptAlternatives is one thread's.

#include <array>
#include <cstdint>
#include <string_view>

#include "linkfit/common/result.h"
#include "linkfit/extender/gpu_request.h"
#include "linkfit/extender/node_fit.h"
#include "linkfit/state/node_state.h"

namespace linkfit::extender {

enum class WholeMachinePolicy : std::uint8_t { kKeep, kRing, kOff };
// "keep", "ring", "off".
Result<WholeMachinePolicy> ParseWholeMachinePolicy(std::string_view text);
std::string_view ToString(WholeMachinePolicy policy);

// The GPUs of the largest keeper intact on `node` that `assignment` (a fit's devices on it)
// breaks, in [0, topology::kMaxGpus]; 0 when it breaks none. `nics`: the pod's NIC request; when
// it asks NICs, only the keepers the node's whole free NICs back count (above).
int BrokenKeeperGpus(const state::NodeState& node, const state::Assignment& assignment,
                     const alloc::NicRequest& nics = {});

// A fit's ring as the rule compares rings: for a pod asking NICs, a fit giving every GPU a close
// NIC (NodeFit::nics_aligned) above one that does not; then by bandwidth, then all-NVLink above
// a ring with a PCIe hop (twice the bandwidth, plus one when every hop is NVLink or NVSwitch).
// A misaligned candidate thus never serves a pod "as well" as an aligned one.
inline std::uint32_t RingRank(std::uint32_t ring_mbps, bool all_nvlink, bool nics_aligned = true) {
  return (nics_aligned ? 1u << 30 : 0u) + ring_mbps * 2u + (all_nvlink ? 1u : 0u);
}
// RingRank of a fit.
inline std::uint32_t RingRankOf(const NodeFit& fit) {
  return RingRank(fit.quality.ring_mbps, fit.ring_all_nvlink, fit.nics_aligned);
}

// Whether the ring decides who serves a pod as well (else any candidate of a lower break level
// does): under `ring`, and for a pod with a closeness hint under `keep`.
// A pod asking NICs is a hinted pod: NIC alignment decides whether another candidate serves it
// as well.
bool RingDecides(const GpuRequest& request, WholeMachinePolicy policy);

// One prioritize call's alternatives: per break level, the best ring rank (RingRank; +1; 0 = no
// candidate) among
// the candidates of that level, gathered in any order; then, per level, the best ring among the
// candidates of every lower level (Seal).
class KeptAlternatives {
 public:
  static constexpr int kLevels = topology::kMaxGpus + 1;
  using Rings = std::array<std::uint32_t, kLevels>;

  void Add(int level, std::uint32_t ring_rank);
  // The candidates added: by level, their best ring + 1 (0 = none of that level).
  const Rings& by_level() const { return by_level_; }
  // By level, the best ring + 1 among candidates of a lower level (0 = none), from by_level().
  Rings Below() const;

 private:
  Rings by_level_{};
};

// Whether a candidate of break `level` and ring rank `ring_rank` (RingRank) loses the whole-machine
// points, given `below` (KeptAlternatives::Below of the call's candidates).
bool LosesWholeMachinePoints(int level, std::uint32_t ring_rank,
                             const KeptAlternatives::Rings& below, bool ring_decides);

// Whether a ring of `ring_mbps` has a PCIe hop (not `all_nvlink`) while another candidate offers
// an all-NVLink ring at least as fast (`best_nvlink_ring_mbps`, 0 = none does). Scoring's T term
// takes its 0.2 off such a ring; the whole-machines rule may take its points (below).
bool PcieHopBesideNvlinkRing(std::uint32_t ring_mbps, bool all_nvlink,
                             double best_nvlink_ring_mbps);
// Whether the PCIe-hop rule applies to a pod: the rule is on, the ring decides (RingDecides) and
// the pod has a ring (two or more whole GPUs). One answer per call.
bool NvlinkRuleApplies(const GpuRequest& request, WholeMachinePolicy policy);
// Whether a candidate loses the whole-machine points for its PCIe hop: the rule applies
// (NvlinkRuleApplies) and PcieHopBesideNvlinkRing.
bool LosesNvlinkPoints(std::uint32_t ring_mbps, bool all_nvlink, double best_nvlink_ring_mbps,
                       bool rule_applies);

}  // namespace linkfit::extender
