#pragma once

// Prioritize scores. For each node where the pod fits, four terms in [0, 1]:
//
//   T  topology: whole-GPU pods of 2+ GPUs: 0.8 * ring / best ring + 0.2 * sum / best sum, the
//      best taken over the candidate nodes, so the node with the fastest set gets 1; less 0.2
//      (not below 0) for a set whose ring has a PCIe hop while another candidate offers an
//      all-NVLink ring at least as fast (an NVLink ring's bandwidth is the GPUs' own; a PCIe ring
//      shares switches and root complex with NICs and host traffic, and NCCL may not run P2P
//      across a root complex at all): at equal nominal bandwidth the NVLink set wins, also
//      against a partly used PCIe node's packing band. Other pods: 1.
//   P  packing, in bands (the Packing baseline of the FGD paper, made continuous):
//      (band + tightness) / 3 with band 2 when a share lands only on GPUs already shared, 1 when
//      the node is already partly used, 0 when the pod opens an idle node; tightness = 1 - the
//      whole-GPU equivalents left free on the node afterwards / 8 (clamped). Partly used nodes
//      fill up first (best fit) and idle nodes stay whole for large pods. Pods without GPUs:
//      1 - free whole-GPU equivalents / 8, so they fill nodes whose GPUs are already in use.
//   F  fragmentation: sigmoid(-growth), growth = the rise of the node's FGD-style fragmentation
//      (Weng et al., ATC'23) in whole GPUs under the request shapes linkfit has seen (ShapeStats):
//      for each shape, the free GPU capacity that can no longer serve it, weighted by how often
//      the shape occurs. A shape is served only if the node's free CPU, memory, GPU model and
//      GPUs all fit it (FGD's definition), so GPUs stranded by exhausted CPU or memory count as
//      fragment, and a shape without GPUs counts every free GPU. A shape that asks RDMA NICs is
//      served only if as many of the node's NICs have its share free (NICs count like CPU:
//      GPUs left beside exhausted NICs are fragment for it). 0.5 = no change; the same
//      absolute scale for every request and node (no min-max over candidates). Whole GPUs
//      average it with the topology look-ahead kept: 1 - (best rings still available in the
//      free set, lost by this choice) / (those rings on the best idle candidate node), one
//      bandwidth scale for every candidate.
//      MIG instances: FGD's measure over the memory slices of MIG-mode GPUs (mig_fragmentation.h):
//      for each profile, weighted by how often it is requested (MigProfileStats; uniform over
//      the node's profile set before any is seen), the free slices no instance of it can cover;
//      F = 1 / (1 + exp(growth in whole GPUs of 8 slices)), 0.5 = no change. Their packing
//      tightness is per GPU: 1 - free slices left on the GPUs the instances land on / 8 per GPU.
//
//   B  balance: keeps each node's CPU and memory use in step with its GPU use, so that GPUs are
//      not stranded next to exhausted cores (or cores next to exhausted GPUs). Per resource
//      whose allocatable is known, gap = |share of GPUs used - share of the resource used|:
//        B = rho x (1 - gap after) + (1 - rho) x (0.5 + (gap before - gap after) / 2),
//      averaged over CPU and memory, 1 where nothing can be stranded (a node without GPUs, or
//      whose CPU and memory are unknown). rho = (what GPU requests bring per GPU, the learned
//      shapes' weighted mean / the candidate nodes' median allocatable per GPU)^2, in [0, 1]:
//      where pods use CPU about as fast as GPUs (openb, rho ~0.8) the level counts and GPU
//      pods keep off CPU-rich nodes, which stay for CPU-heavy pods; where GPU pods ask for
//      little CPU (rho ~0) only the change counts, which is the same on every node of a
//      homogeneous cluster, so B does not spread pods and packing keeps whole nodes for
//      multi-GPU pods (why both parts: bench/RESULTS.md, "What got linkfit from 95.23 %").
//
//   W  whole machines (whole_machines.h): 1 when the candidate loses the whole-machine points,
//      i.e. its placement breaks a keeper (an idle whole machine, an intact NVLink island, the
//      last free all-NVLink set of 2, 4, 8 ... GPUs of a partly used machine, a free MIG GPU; for
//      a pod asking NICs, only the NVLink sets that whole free NICs back) while another candidate
//      that breaks less serves the pod as well (under policy.whole_machines `ring`, the default:
//      one with a ring at least as fast; under `keep`: any such candidate for a pod without a
//      closeness hint, one with a ring at least as fast for a pod with a hint; `off`: never);
//      also 1, where the ring decides, when the candidate's ring has a PCIe hop while another
//      candidate offers an all-NVLink ring at least as fast (the T term's 0.2 alone lost to
//      packing and fragmentation there: whole_machines.h, LosesNvlinkPoints);
//      else 0.
//
//   N  NICs (pods that ask for NICs, alloc/nic_choice.h): 1 when the candidate cannot give every
//      GPU of the pod a NIC at the asked closeness while another candidate can; else 0. A pod
//      whose closeness is preferred thus lands where GPUDirect RDMA works whenever some node
//      offers it, and elsewhere only when none does. Under policy.nic_alignment `rate`
//      (NodeFit::nics_aligned, FitOptions::nic_alignment) a farther NIC counts as close when the
//      GPU's path through host memory carries the pod's share of it at the NIC's rate (a
//      quarter of a 100 Gb/s NIC on PCIe gen 3): such pods may then take a machine whose NICs
//      never align, and leave the aligned NICs to the pods that need them whole.
//
//   score = round(score_range * max(0, (wt*T + wp*P + wf*F + wb*B) / (wt + wp + wf + wb)
//                                        - penalty*(W + N))),  penalty = whole_machine_penalty
//                                                        (0.5, policy.whole_machine_penalty)
//
// The penalty is half the range: a candidate that loses it scores below every candidate that
// keeps the machine whole unless the terms differ by more than half the range between the two
// (at equal ring they differ by far less: packing and fragmentation already lean the same way),
// so a small pod does not break an idle machine a partly used node can take, however few pods
// of the big shapes linkfit has seen.
//
// CPU and memory: linkfit never filters on them (kube-scheduler's in-tree plugins own that);
// it learns a node's allocatable from the cluster file (NodeInfo) and every bound pod's requests
// (pods without GPUs included) and uses them only here. A node without allocatable figures is
// treated as having unlimited CPU and memory.
//
// The weights and score_range come from the config (policy.weights, policy.score_range);
// kube-scheduler multiplies the score by the extender's weight x 10 and does not clamp it, so a
// score_range of 100 gives ten times the resolution of the nominal 0-10.
//
// Thread-safety: ShapeStats is safe to update and read concurrently (a mutex held for a map
// update; Typical() hands out an immutable list rebuilt when the counts have grown by 0.5 %, so
// a score may see a slightly stale distribution). ScoreNodes is a pure function.

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "linkfit/common/mutex.h"
#include "linkfit/extender/gpu_request.h"
#include "linkfit/extender/mig_fragmentation.h"
#include "linkfit/extender/node_fit.h"
#include "linkfit/extender/whole_machines.h"
#include "linkfit/state/node_state.h"

namespace linkfit::extender {

// Defaults: the setting measured in bench/RESULTS.md (score_range 140, extender weight 1).
struct ScoreWeights {
  double topology = 3.0;
  double packing = 1.0;
  double fragmentation = 3.0;
  double balance = 3.0;
  // The whole-machines rule (W above): who serves a pod as well, and the share of the score
  // range a candidate loses for breaking a keeper while one serves it as well.
  WholeMachinePolicy whole_machines = WholeMachinePolicy::kRing;
  double whole_machine_penalty = 0.5;
};

// A request shape for fragmentation: `gpus` whole GPUs (milli == 1000), `gpus` GPU shares of
// `milli` thousandths each, or no GPU (gpus == 0), with the CPU and memory it asks for.
struct Shape {
  int gpus = 1;
  int milli = 1000;
  double weight = 0;  // share of requests with this shape
  std::int64_t cpu_milli = 0;
  std::int64_t memory_bytes = 0;
  std::vector<std::string> gpu_models;  // lower-case substrings (linkfit.io/gpu-model); empty = any
  // RDMA NICs the shape holds (0: none), each with `nic_milli` thousandths free (1000: whole).
  int nics = 0;
  int nic_milli = 0;
};
using ShapeList = std::shared_ptr<const std::vector<Shape>>;

class ShapeStats {
 public:
  // With `power_of_two_prior`, whole 1, 2, 4 and 8 GPUs always count as one request each (so
  // that, with little history, an idle 8-GPU node is not broken up for a 2-GPU pod when a
  // partly used node offers the same ring); Demand (pod_source.h) uses it in both modes.
  explicit ShapeStats(bool power_of_two_prior = false) : prior_(power_of_two_prior) {}

  // Counts one request: one pod a PodSource knows (pod_source.h: each pod once, retries never
  // again). CPU is bucketed by whole cores up to 32 (then 8 cores), memory by powers of two GiB,
  // NIC shares by 50 thousandths; a bucket's shape carries the mean request of its members.
  void Record(const GpuRequest& request);
  // Uncounts a request counted before (a pod that left).
  void Remove(const GpuRequest& request);
  // The most frequent shapes covering 95% of requests (at most kMaxShapes), weights summing to
  // 1. Before any request is seen: whole 1, 2, 4 and 8 GPUs and (without the prior) half a GPU,
  // equally weighted, no CPU or memory.
  ShapeList Typical() const;

  static constexpr std::size_t kMaxShapes = 64;

 private:
  struct Key {
    int gpus = 0;
    int milli = 0;
    int cpu_bucket = 0;
    int memory_bucket = 0;
    std::string models;
    int nics = 0;
    int nic_milli = 0;
    auto operator<=>(const Key&) const = default;
  };
  struct Tally {
    std::uint64_t count = 0;
    double cpu_sum = 0;
    double memory_sum = 0;
    std::vector<std::string> models;
  };
  // Returns the key of a request, or nullopt for requests outside whole/share fragmentation.
  static std::optional<Key> KeyOf(const GpuRequest& request);

  const bool prior_;
  mutable Mutex mutex_;
  std::map<Key, Tally> tallies_ LINKFIT_GUARDED_BY(mutex_);
  std::uint64_t total_ LINKFIT_GUARDED_BY(mutex_) = 0;
  std::uint64_t changes_ LINKFIT_GUARDED_BY(mutex_) = 0;  // : records and removals
  mutable ShapeList typical_ LINKFIT_GUARDED_BY(mutex_);
  mutable std::uint64_t typical_total_ LINKFIT_GUARDED_BY(mutex_) = 0;
  mutable std::uint64_t typical_changes_ LINKFIT_GUARDED_BY(mutex_) = 0;
};

// FGD fragmentation of a node for the given shapes, in thousandths of a GPU.
double Fragmentation(const state::NodeState& node, const std::vector<Shape>& shapes);

// A node where the pod fits, and how. Nodes alike in their GPUs may share one NodeFit (its
// assignment then names no node); both outlive the ScoreNodes call.
struct Candidate {
  Candidate(const state::NodeState* on, const NodeFit* how) : node(on), fit(how) {}
  // May be left null by a caller that sets it before scoring this candidate (Score reads it;
  // figures gathered by the caller do not): Extender::Prioritize looks it up only for candidates
  // without a kept score.
  const state::NodeState* node = nullptr;
  const NodeFit* fit = nullptr;  // fits == true
};

// What every candidate's score depends on besides the candidate itself (the best ring and sum,
// the largest idle look-ahead, the CPU and memory per GPU whose median sets the scarcity),
// gathered one candidate at a time and in any order: a caller that finds its candidates in a
// pass of its own gathers them there (Extender::Prioritize), and the scorer makes no second pass
// over every candidate's fit and node.
//
// A candidate is added by its machine kind, or by the kind's number in the list the figures were
// made with (state::Snapshot::kinds(): 4 bytes a node read, not the kind's 24; the numbers are
// counted and the kinds they stand for folded in once, when the scorer takes the figures).
//
// Thread-safety: one thread's.
class CandidateFigures {
 public:
  // `kinds` (may be null when no candidate is added by number) must outlive the figures.
  explicit CandidateFigures(const state::MachineKinds* kinds = nullptr);
  ~CandidateFigures();
  CandidateFigures(CandidateFigures&&) noexcept;
  CandidateFigures& operator=(CandidateFigures&&) noexcept;
  // A candidate whose fit's quality is `quality` (NodeFit::quality), of machine kind `kind`.
  void Add(const alloc::SetQuality& quality, const state::MachineKind& kind);
  // A candidate's fit, as Add above, with its break level (NodeFit::keeper_gpus_broken).
  void Add(const NodeFit& fit, const state::MachineKind& kind) {
    Add(fit.quality, kind);
    AddKept(fit.keeper_gpus_broken, RingRankOf(fit));
    if (fit.ring_all_nvlink) AddNvlinkRing(fit.quality.ring_mbps);
    if (fit.nics_aligned) AddNicsAligned();
  }
  // A distinct fit's break level and ring rank (RingRank; like AddQuality: once or many times
  // counts the same).
  void AddKept(int level, std::uint32_t ring_rank) { kept_.Add(level, ring_rank); }
  // A candidate's two parts apart, for a caller that has many candidates of few distinct fits:
  // `count` candidates of the kind numbered `kind` in `kinds`, and each distinct quality among
  // the candidates' fits once (the figures take the best ring and sum, maxima, so a quality added
  // once or many times counts the same).
  void AddKind(std::uint32_t kind, std::uint32_t count) { counts_[kind] += count; }
  void AddQuality(const alloc::SetQuality& quality) {
    best_ring_ = std::max(best_ring_, static_cast<double>(quality.ring_mbps));
    best_sum_ = std::max(best_sum_, static_cast<double>(quality.sum_mbps));
  }
  // The ring of a candidate's fit whose every hop is NVLink (NodeFit::ring_all_nvlink; a maximum,
  // like AddQuality).
  void AddNvlinkRing(std::uint32_t ring_mbps) {
    best_nvlink_ring_ = std::max(best_nvlink_ring_, static_cast<double>(ring_mbps));
  }
  // A candidate whose fit gives every GPU a NIC at the asked closeness (NodeFit::nics_aligned).
  void AddNicsAligned() { nics_aligned_ = true; }

 private:
  friend class CandidateScorer;
  struct Supply;      // CPU and memory per GPU (extender/balance.h)
  void FoldCounts();  // the kinds counted by number into supply_

  double best_ring_ = 0;
  double best_sum_ = 0;
  double best_nvlink_ring_ = 0;  // 0: no candidate's ring is all NVLink
  bool nics_aligned_ = false;    // some candidate's fit is NIC-aligned
  KeptAlternatives kept_;
  const state::MachineKinds* kinds_ = nullptr;
  std::vector<std::uint32_t> counts_;  // candidates by kind number
  std::unique_ptr<Supply> supply_;     // also knows the distinct tables, for the idle look-ahead
};

// Scores candidates one at a time, after a pass over all of them for what every score depends
// on (the best ring and sum, the largest idle look-ahead, the CPU and memory scarcity), or with
// those gathered by the caller (CandidateFigures, every candidate added). Two candidates in the
// same GPU state, with the same fit, CPU and memory, score the same under the same figures(),
// request, shapes, MIG weights, weights and range: callers may keep scores across calls keyed by
// these. The arguments must outlive the scorer.
class CandidateScorer {
 public:
  CandidateScorer(const GpuRequest& request, const std::vector<Candidate>& candidates,
                  const std::vector<Shape>& shapes, const ScoreWeights& weights, int score_range,
                  const MigProfileWeightsPtr& mig_weights);
  CandidateScorer(const GpuRequest& request, const std::vector<Candidate>& candidates,
                  const std::vector<Shape>& shapes, const ScoreWeights& weights, int score_range,
                  const MigProfileWeightsPtr& mig_weights, CandidateFigures gathered);
  ~CandidateScorer();
  CandidateScorer(const CandidateScorer&) = delete;
  CandidateScorer& operator=(const CandidateScorer&) = delete;

  struct Figures {
    double best_ring = 0;
    double best_sum = 0;
    double best_nvlink_ring = 0;  // the best all-NVLink ring among the candidates, 0 = none
    double nics_aligned = 0;      // 1: some candidate gives every GPU a close NIC
    double idle_ahead_max = 0;
    double scarcity_cpu = 0;
    double scarcity_memory = 0;
    // By break level, the best ring rank + 1 of the candidates that break less (0 = none), all zero
    // under policy `off`: whole_machines.h.
    KeptAlternatives::Rings kept_below{};
  };
  Figures figures() const;

  // Whether candidate `i` loses the whole-machine points (W = 1).
  bool LosesWholeMachinePoints(std::size_t i) const;
  // Whether candidate `i` loses the NIC points (N = 1).
  bool LosesNicPoints(std::size_t i) const;

  // The score of candidate `i`, in [0, score_range].
  std::int64_t Score(std::size_t i);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Scores every candidate (pods without GPUs included: every node is a candidate); returns
// integers in [0, score_range], in candidate order.
std::vector<std::int64_t> ScoreNodes(const GpuRequest& request,
                                     const std::vector<Candidate>& candidates,
                                     const std::vector<Shape>& shapes, const ScoreWeights& weights,
                                     int score_range,
                                     const MigProfileWeightsPtr& mig_weights = nullptr);

}  // namespace linkfit::extender
