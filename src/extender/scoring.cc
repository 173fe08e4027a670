#include "linkfit/extender/scoring.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <unordered_map>

#include "extender/balance.h"
#include "extender/gpu_state_memo.h"
#include "linkfit/common/strings.h"
#include "linkfit/extender/mig_fragmentation.h"

namespace linkfit::extender {
namespace {

// What fragmentation reads of a node: free milli of every GPU usable by shares and whole GPUs
// (not whole-held, not MIG), free CPU and memory (NodeState::kUntracked when unknown).
struct FreeView {
  std::array<int, topology::kMaxGpus> free{};
  int gpus = 0;
  std::int64_t cpu_free = state::NodeState::kUntracked;
  std::int64_t memory_free = state::NodeState::kUntracked;
};

FreeView ViewOf(const state::NodeState& node) {
  FreeView view;
  view.gpus = node.gpu_count();
  const topology::GpuMask eligible = node.share_eligible();
  for (int g = 0; g < view.gpus; ++g) {
    const int free = ((eligible >> g) & 1) ? 1000 - node.shared_milli(g) : 0;
    view.free[static_cast<std::size_t>(g)] = free;
  }
  view.cpu_free = node.cpu_free_milli();
  view.memory_free = node.memory_free_bytes();
  return view;
}

// Bit i set: shape i's GPU model constraint allows some healthy GPU of the node. On a node of
// mixed models the shape's hosts are then counted over all its GPUs, an estimate that
// fragmentation scoring accepts (filter places such a pod on its models' GPUs only).
using ShapeMask = std::uint64_t;

ShapeMask ModelMask(const state::NodeState& node, const std::vector<Shape>& shapes) {
  ShapeMask mask = 0;
  const topology::Topology& topology = node.info().topology();
  for (std::size_t i = 0; i < shapes.size() && i < 64; ++i) {
    const bool allowed =
        shapes[i].gpu_models.empty() ||
        (topology.GpusOfModels(shapes[i].gpu_models) & ~node.info().unhealthy) != 0;
    if (allowed) mask |= ShapeMask{1} << i;
  }
  return mask;
}

// Per request, what the shapes ask of a node: the distinct per-GPU needs (milli), so that the
// scan over a node's GPUs runs once per need rather than once per shape (on openb ~40 shapes
// share ~10 needs), and their CPU and memory as ascending steps, so that the shapes a node's
// free CPU and memory admit are two binary searches rather than a pass over every shape.
struct ShapeNeeds {
  std::vector<int> milli;                // distinct needs, in first-seen order
  std::array<std::uint8_t, 64> index{};  // shape i (i < 64) -> its need's position in `milli`
  ShapeMask with_gpus = 0;               // shapes that ask for GPUs at all
  ShapeMask with_nics = 0;               // shapes that ask for RDMA NICs
  // The distinct NIC shares asked (thousandths), and each shape's position among them.
  std::vector<int> nic_milli;
  std::array<std::uint8_t, 64> nic_index{};
  // (threshold, every shape asking at most that much), thresholds ascending.
  std::vector<std::pair<std::int64_t, ShapeMask>> cpu_steps;
  std::vector<std::pair<std::int64_t, ShapeMask>> memory_steps;
};

std::vector<std::pair<std::int64_t, ShapeMask>> Steps(
    std::vector<std::pair<std::int64_t, ShapeMask>> asks) {
  std::sort(asks.begin(), asks.end());
  std::vector<std::pair<std::int64_t, ShapeMask>> steps;
  ShapeMask cumulative = 0;
  for (const auto& [threshold, shape] : asks) {
    cumulative |= shape;
    if (!steps.empty() && steps.back().first == threshold) {
      steps.back().second = cumulative;
    } else {
      steps.emplace_back(threshold, cumulative);
    }
  }
  return steps;
}

// The shapes whose ask is at most `free`.
ShapeMask Within(const std::vector<std::pair<std::int64_t, ShapeMask>>& steps, std::int64_t free) {
  const auto after =
      std::upper_bound(steps.begin(), steps.end(), free,
                       [](std::int64_t value, const std::pair<std::int64_t, ShapeMask>& step) {
                         return value < step.first;
                       });
  return after == steps.begin() ? 0 : std::prev(after)->second;
}

ShapeNeeds NeedsOf(const std::vector<Shape>& shapes) {
  ShapeNeeds needs;
  std::vector<std::pair<std::int64_t, ShapeMask>> cpu, memory;
  for (std::size_t i = 0; i < shapes.size() && i < 64; ++i) {
    const auto found = std::find(needs.milli.begin(), needs.milli.end(), shapes[i].milli);
    needs.index[i] = static_cast<std::uint8_t>(found - needs.milli.begin());
    if (found == needs.milli.end()) needs.milli.push_back(shapes[i].milli);
    const ShapeMask bit = ShapeMask{1} << i;
    if (shapes[i].gpus > 0) needs.with_gpus |= bit;
    if (shapes[i].nics > 0) {
      needs.with_nics |= bit;
      const auto nic_found =
          std::find(needs.nic_milli.begin(), needs.nic_milli.end(), shapes[i].nic_milli);
      needs.nic_index[i] = static_cast<std::uint8_t>(nic_found - needs.nic_milli.begin());
      if (nic_found == needs.nic_milli.end()) needs.nic_milli.push_back(shapes[i].nic_milli);
    }
    cpu.emplace_back(shapes[i].cpu_milli, bit);
    memory.emplace_back(shapes[i].memory_bytes, bit);
  }
  needs.cpu_steps = Steps(std::move(cpu));
  needs.memory_steps = Steps(std::move(memory));
  return needs;
}

// Bit i set: shape i could land on a node with this much free CPU and memory as far as its GPU
// count, CPU, memory and GPU model go (`allowed`); whether its GPUs have room is
// FragmentationOf's question.
ShapeMask AdmittedShapes(std::int64_t cpu_free, std::int64_t memory_free, const ShapeNeeds& needs,
                         ShapeMask allowed) {
  return allowed & needs.with_gpus & Within(needs.cpu_steps, cpu_free) &
         Within(needs.memory_steps, memory_free);
}

// The shapes whose NICs the node can take: shapes without NICs, and those for which as many of
// the node's usable NICs have their share free as they ask, the NICs in `taken` (the pod's, or
// null) counted as held.
ShapeMask NicAdmitted(const state::NodeState& node, const std::vector<Shape>& shapes,
                      const ShapeNeeds& needs,
                      const std::vector<state::Assignment::NicSlot>* taken) {
  ShapeMask admitted = ~needs.with_nics;
  if (needs.with_nics == 0 || node.nic_count() == 0) return admitted;
  std::array<int, topology::kMaxNics> free{};
  const alloc::NicMask usable = node.nic_usable();
  for (int n = 0; n < node.nic_count(); ++n) {
    const auto at = static_cast<std::size_t>(n);
    free[at] = usable.test(at) ? 1000 - node.nic_used_milli(n) : 0;
  }
  if (taken != nullptr) {
    for (const state::Assignment::NicSlot& slot : *taken) {
      free[static_cast<std::size_t>(slot.nic)] -= slot.milli;
    }
  }
  std::array<int, 64> nics_with_room{};  // per distinct share: the NICs that have it free
  for (std::size_t k = 0; k < needs.nic_milli.size(); ++k) {
    for (int n = 0; n < node.nic_count(); ++n) {
      nics_with_room[k] += free[static_cast<std::size_t>(n)] >= needs.nic_milli[k] ? 1 : 0;
    }
  }
  for (std::size_t i = 0; i < shapes.size() && i < 64; ++i) {
    if (((needs.with_nics >> i) & 1) == 0) continue;
    if (nics_with_room[needs.nic_index[i]] >= shapes[i].nics) admitted |= ShapeMask{1} << i;
  }
  return admitted;
}

// What FragmentationOf reads of a node: its GPUs' free milli and the shapes it admits. Nodes
// alike in these answer alike, whatever their names, CPU and memory.
struct FragmentationKey {
  std::array<int, topology::kMaxGpus> free{};
  int gpus = 0;
  ShapeMask admitted = 0;
  bool operator==(const FragmentationKey&) const = default;
};

struct FragmentationKeyHash {
  std::size_t operator()(const FragmentationKey& key) const {
    std::uint64_t hash = 1469598103934665603u ^ key.admitted;
    for (int g = 0; g < key.gpus; ++g) {
      hash = (hash ^ static_cast<std::uint64_t>(key.free[static_cast<std::size_t>(g)])) *
             1099511628211u;
    }
    return static_cast<std::size_t>(hash ^ (hash >> 29));
  }
};

double FragmentationOf(const FragmentationKey& key, const std::vector<Shape>& shapes,
                       const ShapeNeeds& needs) {
  double total_free = 0;
  for (int g = 0; g < key.gpus; ++g) total_free += key.free[static_cast<std::size_t>(g)];
  // Per need: how many GPUs can host it, and the free capacity of the GPUs too small for it.
  std::array<int, 64> hosts{};
  std::array<double, 64> too_small{};
  for (std::size_t k = 0; k < needs.milli.size(); ++k) {
    const int milli = needs.milli[k];
    for (int g = 0; g < key.gpus; ++g) {
      const int free = key.free[static_cast<std::size_t>(g)];
      hosts[k] += free >= milli ? 1 : 0;
      if (free > 0 && free < milli) too_small[k] += free;
    }
  }
  double fragmentation = 0;
  for (std::size_t i = 0; i < shapes.size() && i < 64; ++i) {
    const Shape& shape = shapes[i];
    const std::size_t need = needs.index[i];
    // FGD: a shape without GPUs, or one the node cannot host (CPU, memory, GPU model, GPUs),
    // leaves every free GPU of the node unusable to it; one it can host loses the GPUs whose
    // free part is too small for it.
    const bool fits = ((key.admitted >> i) & 1) != 0 && hosts[need] >= shape.gpus;
    fragmentation += shape.weight * (fits ? too_small[need] : total_free);
  }
  return fragmentation;
}

FragmentationKey KeyOf(const FreeView& view, ShapeMask admitted) {
  FragmentationKey key;
  key.free = view.free;
  key.gpus = view.gpus;
  key.admitted = admitted;
  return key;
}

// One prioritize call's fragmentation figures by distinct node state: on a real cluster many
// candidates share a topology and a free pattern, and each distinct state is computed once.
class FragmentationMemo {
 public:
  FragmentationMemo(const std::vector<Shape>& shapes, const ShapeNeeds& needs)
      : shapes_(shapes), needs_(needs) {}
  double Of(const FreeView& view, ShapeMask admitted) {
    const FragmentationKey key = KeyOf(view, admitted);
    const auto [it, fresh] = figures_.try_emplace(key, 0.0);
    if (fresh) it->second = FragmentationOf(key, shapes_, needs_);
    return it->second;
  }

 private:
  const std::vector<Shape>& shapes_;
  const ShapeNeeds& needs_;
  std::unordered_map<FragmentationKey, double, FragmentationKeyHash> figures_;
};

// Packing measures free capacity left on the node up to this many whole GPUs (8-GPU nodes span
// the range; emptier 16-GPU nodes saturate at "not tight at all").
constexpr double kPackingScaleGpus = 8.0;
// Sigmoid slope of the fragmentation term per whole GPU of growth (FGD uses 1).
constexpr double kFragmentationSlope = 1.0;
// What a ring with a PCIe hop loses of the topology term where another candidate offers an
// all-NVLink ring at least as fast (scoring.h): the pair sum's share, so that it outweighs the
// packing band of a partly used node (1/3 of packing's weight) at the default weights.
constexpr double kPcieHopTopologyCost = 0.2;
// Resolution of the fragmentation term (FGD's: 100 steps of the sigmoid).
constexpr double kFragmentationSteps = 100.0;

double LookaheadRing(const alloc::PlacementTable& table, topology::GpuMask free) {
  return static_cast<double>(table.Lookahead(free) >> 35);
}

}  // namespace

double Fragmentation(const state::NodeState& node, const std::vector<Shape>& shapes) {
  const ShapeNeeds needs = NeedsOf(shapes);
  const FreeView view = ViewOf(node);
  const ShapeMask admitted =
      AdmittedShapes(view.cpu_free, view.memory_free, needs, ModelMask(node, shapes)) &
      NicAdmitted(node, shapes, needs, nullptr);
  return FragmentationOf(KeyOf(view, admitted), shapes, needs);
}

namespace {

// What one prioritize call knows of every candidate before it scores any: the best ring and sum
// among them and the largest look-ahead an idle candidate offers (the one scale for every node's
// loss).
struct CandidateBests {
  double ring = 0;
  double sum = 0;
  double nvlink_ring = 0;
  bool nics_aligned = false;  // some candidate gives every GPU a close NIC
  double idle_ahead_max = 0;
};

// The terms of one candidate that depend on its GPU state (and on which shapes its free CPU and
// memory admit before and after the pod lands), not on its name: equal for nodes alike in these.
struct GpuTerms {
  double topology = 1.0;
  double packing = 0.0;
  double fragmentation = 0.5;
};

struct TermInputs {
  const GpuRequest& request;
  const CandidateBests& bests;
  FragmentationMemo& memo;
  MigFragmentationScorer& mig_scorer;
};

GpuTerms GpuTermsOf(const TermInputs& in, const state::NodeState& node, const NodeFit& fit,
                    ShapeMask admitted_before, ShapeMask admitted_after) {
  const GpuRequest& request = in.request;
  const state::Assignment& a = fit.assignment;
  GpuTerms terms;
  if (request.kind == GpuRequest::Kind::kWhole && request.count >= 2 && in.bests.ring > 0) {
    terms.topology = 0.8 * fit.quality.ring_mbps / in.bests.ring +
                     0.2 * (in.bests.sum > 0 ? fit.quality.sum_mbps / in.bests.sum : 1.0);
    if (PcieHopBesideNvlinkRing(fit.quality.ring_mbps, fit.ring_all_nvlink, in.bests.nvlink_ring)) {
      terms.topology = std::max(0.0, terms.topology - kPcieHopTopologyCost);
    }
  }
  // Packing, by bands: 2 = the pod only uses GPUs already in use (shares on a shared GPU),
  // 1 = the node is already partly used, 0 = it opens an idle node. Within a band, the fewer
  // whole-GPU equivalents left free on the node afterwards, the better (best fit).
  const double gpus = node.gpu_count();
  const double used_before = node.UsedGpuEquivalents();
  const double free_after = std::max(0.0, gpus - used_before - request.GpuEquivalents());
  int band = used_before > 0 ? 1 : 0;
  if (request.kind == GpuRequest::Kind::kShared && !a.shares.empty()) {
    bool all_shared = true;
    for (const state::Assignment::ShareSlot& slot : a.shares) {
      all_shared = all_shared && node.shared_milli(slot.gpu) > 0;
    }
    if (all_shared) band = 2;
  }
  terms.packing = (band + 1.0 - std::min(free_after, kPackingScaleGpus) / kPackingScaleGpus) / 3.0;
  if (request.kind == GpuRequest::Kind::kNone) {
    // No GPUs: fill nodes whose GPUs are already in use, leave the rest to GPU pods.
    terms.packing = 1.0 - std::min(gpus - used_before, kPackingScaleGpus) / kPackingScaleGpus;
  }
  if (request.kind == GpuRequest::Kind::kMig) {
    // MIG: FGD's measure over memory slices (mig_fragmentation.h), and best fit per GPU: the
    // tightness of the GPUs the instance lands on, not the node's, so filling a partitioned
    // GPU beats partitioning a fresh one on a fuller node.
    const MigPlacementTerms mig = in.mig_scorer.Score(node, a);
    terms.fragmentation = mig.fragmentation;
    terms.packing = (band + mig.gpu_tightness) / 3.0;
    return terms;
  }
  const FreeView before = ViewOf(node);
  FreeView after = before;
  double look = 1.0;
  if (request.kind == GpuRequest::Kind::kWhole) {
    for (int g = 0; g < before.gpus; ++g) {
      if ((a.gpus >> g) & 1) after.free[static_cast<std::size_t>(g)] = 0;
    }
    const topology::GpuMask free = node.whole_free();
    const double lost = LookaheadRing(node.table(), free) -
                        LookaheadRing(node.table(), static_cast<topology::GpuMask>(free & ~a.gpus));
    // In ring bandwidth, on one scale for every candidate (the largest look-ahead an idle
    // candidate offers): losing an NVLink ring costs more than losing a PCIe one, and the
    // same loss costs the same on a small node as on a large one (a per-node scale made
    // every GPU of a 2-GPU node look four times as precious as one of an 8-GPU node).
    look = in.bests.idle_ahead_max > 0 ? 1.0 - std::clamp(lost / in.bests.idle_ahead_max, 0.0, 1.0)
                                       : 1.0;
  } else if (request.kind == GpuRequest::Kind::kShared) {
    for (const state::Assignment::ShareSlot& slot : a.shares) {
      after.free[static_cast<std::size_t>(slot.gpu)] -= slot.milli;
    }
  }
  // FGD's own scale: the growth of expected fragmentation in whole GPUs through a sigmoid
  // (0.5 = no change), so the term is comparable across requests and never amplifies a
  // tiny difference to the full range the way a min-max over candidates would.
  const double growth_gpus =
      (in.memo.Of(after, admitted_after) - in.memo.Of(before, admitted_before)) / 1000.0;
  // Reported at FGD's resolution (its scheduler plugin scores floor(100 x sigmoid)): growths
  // within a hundredth of the sigmoid are equal, and packing decides between them.
  const double frag =
      std::floor(kFragmentationSteps / (1.0 + std::exp(growth_gpus * kFragmentationSlope))) /
      kFragmentationSteps;
  terms.fragmentation = request.kind == GpuRequest::Kind::kWhole ? 0.5 * frag + 0.5 * look : frag;
  return terms;
}

}  // namespace

struct CandidateScorer::Impl {
  Impl(const GpuRequest& the_request, const std::vector<Candidate>& the_candidates,
       const std::vector<Shape>& the_shapes, const ScoreWeights& the_weights, int range,
       const MigProfileWeightsPtr& mig_weights)
      : request(the_request),
        candidates(the_candidates),
        shapes(the_shapes),
        weights(the_weights),
        weight_total(the_weights.topology + the_weights.packing + the_weights.fragmentation +
                     the_weights.balance),
        score_range(range),
        needs(NeedsOf(the_shapes)),
        memo(the_shapes, needs),
        mig_scorer(mig_weights),
        inputs{the_request, bests, memo, mig_scorer} {}

  const GpuRequest& request;
  const std::vector<Candidate>& candidates;
  const std::vector<Shape>& shapes;
  const ScoreWeights& weights;
  const double weight_total;
  const int score_range;
  Scarcity scarcity;
  CandidateBests bests;
  KeptAlternatives::Rings kept_below{};
  bool ring_decides = false;
  bool nvlink_rule = false;  // NvlinkRuleApplies
  // Nodes of one placement table (topology) share one GPU model: one model mask per table (a
  // handful per cluster), not per node.
  std::vector<std::pair<const alloc::PlacementTable*, ShapeMask>> masks;
  const ShapeNeeds needs;
  FragmentationMemo memo;
  MigFragmentationScorer mig_scorer;
  const TermInputs inputs;
  GpuStateMemo<GpuTerms> terms_by_state;
};

struct CandidateFigures::Supply {
  CandidateSupply supply;
};

CandidateFigures::CandidateFigures(const state::MachineKinds* kinds)
    : kinds_(kinds),
      counts_(kinds != nullptr ? kinds->size() : 0, 0),
      supply_(std::make_unique<Supply>()) {}
CandidateFigures::~CandidateFigures() = default;
CandidateFigures::CandidateFigures(CandidateFigures&&) noexcept = default;
CandidateFigures& CandidateFigures::operator=(CandidateFigures&&) noexcept = default;

void CandidateFigures::Add(const alloc::SetQuality& quality, const state::MachineKind& kind) {
  AddQuality(quality);
  supply_->supply.Add(kind);
}

void CandidateFigures::FoldCounts() {
  for (std::size_t k = 0; k < counts_.size(); ++k) {
    if (counts_[k] != 0) supply_->supply.Add((*kinds_)[k], counts_[k]);
    counts_[k] = 0;
  }
}

CandidateScorer::CandidateScorer(const GpuRequest& request,
                                 const std::vector<Candidate>& candidates,
                                 const std::vector<Shape>& shapes, const ScoreWeights& weights,
                                 int score_range, const MigProfileWeightsPtr& mig_weights)
    : CandidateScorer(request, candidates, shapes, weights, score_range, mig_weights, [&] {
        CandidateFigures figures;
        for (const Candidate& c : candidates) figures.Add(*c.fit, c.node->machine_kind());
        return figures;
      }()) {}

CandidateScorer::CandidateScorer(const GpuRequest& request,
                                 const std::vector<Candidate>& candidates,
                                 const std::vector<Shape>& shapes, const ScoreWeights& weights,
                                 int score_range, const MigProfileWeightsPtr& mig_weights,
                                 CandidateFigures gathered)
    : impl_(
          std::make_unique<Impl>(request, candidates, shapes, weights, score_range, mig_weights)) {
  gathered.FoldCounts();
  CandidateBests& bests = impl_->bests;
  bests.ring = gathered.best_ring_;
  bests.sum = gathered.best_sum_;
  bests.nvlink_ring = gathered.best_nvlink_ring_;
  bests.nics_aligned = gathered.nics_aligned_;
  if (weights.whole_machines != WholeMachinePolicy::kOff) {
    impl_->kept_below = gathered.kept_.Below();
    impl_->ring_decides = RingDecides(request, weights.whole_machines);
    impl_->nvlink_rule = NvlinkRuleApplies(request, weights.whole_machines);
  }
  // Look-aheads of idle nodes by placement table: a handful of tables serve every node.
  if (request.kind == GpuRequest::Kind::kWhole) {
    gathered.supply_->supply.ForEachTable([&](const alloc::PlacementTable* table) {
      const auto all = static_cast<topology::GpuMask>((1u << table->gpu_count()) - 1u);
      bests.idle_ahead_max = std::max(bests.idle_ahead_max, LookaheadRing(*table, all));
    });
  }
  impl_->scarcity = ScarcityOf(shapes, gathered.supply_->supply);
}

CandidateScorer::~CandidateScorer() = default;

CandidateScorer::Figures CandidateScorer::figures() const {
  return Figures{impl_->bests.ring,           impl_->bests.sum,
                 impl_->bests.nvlink_ring,    impl_->bests.nics_aligned ? 1.0 : 0.0,
                 impl_->bests.idle_ahead_max, impl_->scarcity.cpu,
                 impl_->scarcity.memory,      impl_->kept_below};
}

bool CandidateScorer::LosesWholeMachinePoints(std::size_t i) const {
  const NodeFit& fit = *impl_->candidates[i].fit;
  return extender::LosesWholeMachinePoints(fit.keeper_gpus_broken, RingRankOf(fit),
                                           impl_->kept_below, impl_->ring_decides) ||
         extender::LosesNvlinkPoints(fit.quality.ring_mbps, fit.ring_all_nvlink,
                                     impl_->bests.nvlink_ring, impl_->nvlink_rule);
}

bool CandidateScorer::LosesNicPoints(std::size_t i) const {
  return impl_->request.nics.wanted() && impl_->bests.nics_aligned &&
         !impl_->candidates[i].fit->nics_aligned;
}

std::int64_t CandidateScorer::Score(std::size_t i) {
  Impl& in = *impl_;
  const GpuRequest& request = in.request;
  const state::NodeState& node = *in.candidates[i].node;
  const NodeFit& fit = *in.candidates[i].fit;
  ShapeMask admitted_before = 0;
  ShapeMask admitted_after = 0;
  if (request.kind != GpuRequest::Kind::kMig) {
    const alloc::PlacementTable* table = &node.table();
    auto cached = std::find_if(in.masks.begin(), in.masks.end(),
                               [&](const auto& entry) { return entry.first == table; });
    if (cached == in.masks.end()) {
      in.masks.emplace_back(table, ModelMask(node, in.shapes));
      cached = in.masks.end() - 1;
    }
    const std::int64_t cpu_free = node.cpu_free_milli();
    const std::int64_t memory_free = node.memory_free_bytes();
    admitted_before = AdmittedShapes(cpu_free, memory_free, in.needs, cached->second);
    admitted_after = AdmittedShapes(cpu_free - request.cpu_milli,
                                    memory_free - request.memory_bytes, in.needs, cached->second);
    if (in.needs.with_nics != 0) {
      admitted_before &= NicAdmitted(node, in.shapes, in.needs, nullptr);
      admitted_after &= NicAdmitted(node, in.shapes, in.needs, &fit.assignment.nics);
    }
  }
  const GpuTerms& terms = in.terms_by_state.Of(node, {admitted_before, admitted_after, &fit}, [&] {
    return GpuTermsOf(in.inputs, node, fit, admitted_before, admitted_after);
  });
  const double balance = Balance(node, request, in.scarcity);
  const ScoreWeights& weights = in.weights;
  const double weight_total = in.weight_total;
  double combined =
      weight_total <= 0
          ? 0.0
          : (weights.topology * terms.topology + weights.packing * terms.packing +
             weights.fragmentation * terms.fragmentation + weights.balance * balance) /
                weight_total;
  if (LosesWholeMachinePoints(i)) combined -= weights.whole_machine_penalty;
  if (LosesNicPoints(i)) combined -= weights.whole_machine_penalty;
  return static_cast<std::int64_t>(std::lround(std::clamp(combined, 0.0, 1.0) * in.score_range));
}

std::vector<std::int64_t> ScoreNodes(const GpuRequest& request,
                                     const std::vector<Candidate>& candidates,
                                     const std::vector<Shape>& shapes, const ScoreWeights& weights,
                                     int score_range, const MigProfileWeightsPtr& mig_weights) {
  CandidateScorer scorer(request, candidates, shapes, weights, score_range, mig_weights);
  std::vector<std::int64_t> scores(candidates.size(), 0);
  for (std::size_t i = 0; i < candidates.size(); ++i) scores[i] = scorer.Score(i);
  return scores;
}

}  // namespace linkfit::extender
