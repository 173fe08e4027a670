#pragma once

// What filter and prioritize keep across calls. A fit found for a request on a node holds for as
// long as the node's state does, and a score for as long as the state and the figures it was
// scored under (the request, the learned shapes, the candidates' best ring and scarcity) do.
// kube-scheduler asks about the same few pod shapes over nodes of which only the last bound one
// changed, so most nodes are answered from here: one 4-byte read at the node's position. A cache
// is brought to each call's snapshot first (VerbCache::BeginCall): what it kept for the
// positions whose node changed since its last call is dropped (state::ClusterCache::Changes),
// everything when the cluster cache cannot say which changed.
//
// Tables are keyed by a text that names everything else the answer depends on (RequestSignature,
// ScoreContext); the shapes and MIG weights a score table was built under are held by it, so
// their addresses (part of its key) cannot be reused by other lists while it lives.
//
// Thread-safety: a VerbCache is used by one call at a time; VerbCachePool hands them out (one
// lock per call, none per node).

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "linkfit/common/mutex.h"
#include "linkfit/extender/node_fit.h"
#include "linkfit/extender/scoring.h"
#include "linkfit/extender/whole_machines.h"
#include "linkfit/state/cluster_cache.h"

namespace linkfit::extender {

// Four-byte values kept per node position (state::NodeRef::position), found by indexing, never
// by hashing; Value() (whose known() is false) is "nothing kept". The owner erases the positions
// whose node changed. A request reads one slot per name, all over the table, so the slot's size
// is what a call costs from memory.
template <typename Value>
class PositionMap {
  static_assert(sizeof(Value) == 4);

 public:
  // The value kept at `position`, or Value().
  Value Find(std::uint32_t position) const {
    return position < slots_.size() ? slots_[position] : Value();
  }
  void Insert(std::uint32_t position, Value value) {
    if (position >= slots_.size()) slots_.resize(std::size_t{position} + 1);
    if (!slots_[position].known()) ++size_;
    slots_[position] = value;
  }
  void Erase(std::uint32_t position) {
    if (position >= slots_.size() || !slots_[position].known()) return;
    slots_[position] = Value();
    --size_;
  }
  // Positions in use (at most the cluster's node count).
  std::size_t size() const { return size_; }
  // Every slot by position, [0, positions()), for loops that read many (Value() where nothing is
  // kept).
  const Value* data() const { return slots_.data(); }
  std::size_t positions() const { return slots_.size(); }
  // Room for positions [0, `positions`), so that a call inserts without growing step by step.
  void Reserve(std::size_t positions) {
    if (slots_.size() < positions) slots_.resize(positions);
  }

 private:
  std::vector<Value> slots_;
  std::size_t size_ = 0;
};

// A failure reason, once per distinct text in a table (many fits fail for the same reason, e.g.
// "3 free GPUs, 4 requested"), with the copy the FilterResult of call `kept_call` keeps: filter
// copies each distinct reason once per reply, not once per distinct fit.
struct KeptReason {
  std::string text;
  std::uint64_t kept_call = 0;
  std::string_view kept;
  std::uint32_t number = 0;  // its place in FitTable::reasons
};

// A fit kept for one request signature, as the verbs read it: small and dense, apart from the
// fit itself (thousands of distinct fits of a few hundred bytes each lie far apart).
struct CachedFit {
  const NodeFit* fit = nullptr;  // in FitTable::full_fits
  KeptReason* reason = nullptr;  // set when !fit->fits, interned
};

// What prioritize's figures read of every distinct fit its candidates have (a few hundred of a
// table's thousand or more, in index order): the machine kind number (Snapshot::KindAt) of the
// nodes the fit was computed for (a fit is shared only by nodes of one kind, so that prioritize
// counts its candidates' kinds by fit), its break level (NodeFit::keeper_gpus_broken, in the
// kind's top byte) and the fit's ring and sum bandwidths. Twelve bytes, apart from the rest of the
// fit's head, so that five share a line: with the caches cold, reading these within 32-byte heads
// cost ~400 more memory reads a call at 5,000 names.
struct FitTerms {
  std::uint32_t kind : 24 = 0;               // machine kinds are far fewer than 2^24
  std::uint32_t keeper_gpus_broken : 6 = 0;  // at most topology::kMaxGpus
  std::uint32_t ring_all_nvlink : 1 = 0;     // NodeFit::ring_all_nvlink
  std::uint32_t nics_aligned : 1 = 0;        // NodeFit::nics_aligned
  std::uint32_t ring_mbps = 0;               // NodeFit::quality
  std::uint32_t sum_mbps = 0;
};
static_assert(sizeof(FitTerms) == 12);

// A kept fit as the verbs read it first, in four bytes: its index in its table
// (FitTable::fits), and whether it fits and whether a failure is unresolvable, so that a passing
// node costs no visit to its fit (the pass/fail of every name is read in a row).
class FitRef {
 public:
  // Tables hold far fewer fits than this (VerbCache::kMaxFits, plus one call's new fits).
  static constexpr std::uint32_t kMaxIndex = (std::uint32_t{1} << 30) - 2;

  FitRef() = default;
  // REQUIRES: index <= kMaxIndex.
  FitRef(std::uint32_t index, const NodeFit& fit)
      : bits_((index + 1) << 2 | (fit.fits ? kFits : 0) | (fit.unresolvable ? kUnresolvable : 0)) {}
  std::uint32_t index() const { return (bits_ >> 2) - 1; }  // REQUIRES: known()
  std::uint32_t slot() const { return bits_ >> 2; }         // index() + 1; 0: no fit
  bool known() const { return bits_ != 0; }                 // false: a default FitRef, no fit
  bool fits() const { return (bits_ & kFits) != 0; }
  bool unresolvable() const { return (bits_ & kUnresolvable) != 0; }
  // 1 for a default FitRef (no fit), else 0: counted without a branch.
  std::uint32_t unknown() const { return bits_ == 0 ? 1u : 0u; }
  // 1 where a filter lists the node as unresolvable (no fit known, or an unresolvable one).
  std::uint32_t never() const { return (bits_ == 0 ? 1u : 0u) | (bits_ >> 1 & 1u); }

 private:
  static constexpr std::uint32_t kFits = 1;
  static constexpr std::uint32_t kUnresolvable = 2;
  std::uint32_t bits_ = 0;
};

// What a prioritize call's score context (ScoreContext) is derived from, besides the request
// signature of its FitTable: the pod's CPU and memory, and the candidates as counted, before a
// CandidateScorer derives the figures from them (which takes a few microseconds: the supply by
// kind folded, the idle look-ahead of each placement table, the scarcity). Equal inputs give an
// equal context, so a call whose inputs equal the last call's reads the last call's scores
// without building a scorer. Holds what it names by address, so that no address is reused.
struct ScoreInputs {
  std::int64_t cpu_milli = 0;
  std::int64_t memory_bytes = 0;
  alloc::SetQuality best;                         // the candidates' best ring and sum
  std::uint32_t best_nvlink_ring = 0;             // their best all-NVLink ring, 0 = none
  KeptAlternatives::Rings kept_by_level{};        // their best ring + 1 by break level
  std::vector<std::uint32_t> candidates_by_kind;  // by kind number in `kinds`
  std::shared_ptr<const state::MachineKinds> kinds;
  ShapeList shapes;
  MigProfileWeightsPtr mig_weights;
  bool nics_aligned = false;  // some candidate's fit is NIC-aligned
  friend bool operator==(const ScoreInputs&, const ScoreInputs&) = default;
};

// Fits of one request signature.
struct FitTable {
  // The table's record of `text` (added the first time).
  KeptReason* Intern(const std::string& text);

  // The kept fit `ref` names. REQUIRES: ref.known(), from this table.
  const CachedFit& operator[](FitRef ref) const { return fits[ref.index()]; }
  // Keeps `fit`'s head, computed for nodes of machine kind number `kind`, and returns its
  // reference.
  FitRef Add(const NodeFit& fit, KeptReason* reason, std::uint32_t kind);

  std::deque<NodeFit> full_fits;  // stable addresses
  std::vector<CachedFit> fits;    // by FitRef::index, one per full fit
  std::vector<FitTerms> terms;    // likewise
  PositionMap<FitRef> by_position;
  // The score context of the last prioritize that used this table (ScoreContext): its scores
  // are read while the candidates are counted, on the guess that the figures did not change.
  std::string last_context;
  ScoreInputs last_inputs;  // what last_context was derived from (none: never equal to a call's)
  std::deque<KeptReason> reasons;                                  // stable addresses
  std::unordered_map<std::string_view, KeptReason*> reason_index;  // keys view `reasons`
  // By KeptReason::number: its text. And by FitRef::slot(): the number of the fit's reason (0 for
  // no fit and for a fit that passes). What filter's one pass over the names reads (FilterMarks).
  std::vector<std::string_view> reason_texts;
  std::vector<std::uint32_t> reason_by_slot{0};
  std::uint64_t last_use = 0;
};

// Filter's marks for one call (FilterVerdicts, verdicts.h): a bit per name that passes, by the
// name's index in the request; a bit per failing name by its rank (state::NameIndex::Ranks); and
// at each rank marked, how it fails (FilterVerdicts::Pack). Kept by the cache between calls so
// that a call allocates none of them.
struct FilterMarks {
  // Sized for `names` request names and `ranks` ranks: the bits cleared, at_rank left as it is
  // (read only where a bit is set).
  void Prepare(std::size_t names, std::size_t ranks);

  std::vector<std::uint64_t> passing;
  std::vector<std::uint64_t> failing;
  std::vector<std::uint64_t> at_rank;
};

// A score kept at a position (0..score_range, at most 1,000,000), or none.
class KeptScore {
 public:
  KeptScore() = default;
  explicit KeptScore(std::int64_t score) : plus_one_(static_cast<std::uint32_t>(score + 1)) {}
  bool known() const { return plus_one_ != 0; }
  std::int64_t score() const { return std::int64_t{plus_one_} - 1; }  // REQUIRES: known()

 private:
  std::uint32_t plus_one_ = 0;
};

// Scores under one context.
struct ScoreTable {
  PositionMap<KeptScore> by_position;
  ShapeList shapes;                  // held: its address is part of the context
  MigProfileWeightsPtr mig_weights;  // likewise
  std::uint64_t last_use = 0;
};

// Everything a fit depends on besides the node's state, as text (not the pod's CPU and memory:
// pods that differ only in these share their fits).
std::string RequestSignature(const GpuRequest& request, const FitOptions& options);

// Everything a score depends on besides the node's state and fit, as text: the signature, the
// pod's CPU and memory, and the figures the scorer took from all candidates.
std::string ScoreContext(const std::string& signature, const GpuRequest& request,
                         const CandidateScorer::Figures& figures, const ShapeList& shapes,
                         const MigProfileWeightsPtr& mig_weights);

class VerbCache {
 public:
  // Starts a call on `snapshot` of `cluster`: drops what the tables keep for the positions whose
  // node changed since the snapshot of the cache's last call, or every table when the cluster
  // cannot say which (or the snapshot is older than that one). The number returned identifies
  // the call (KeptReason::kept_call).
  std::uint64_t BeginCall(const state::Snapshot& snapshot, const state::ClusterCache& cluster);
  // Likewise, for tests of the cache alone: `generation` stands for the snapshot, and
  // `changed(from, to, positions)` for state::ClusterCache::Changes.
  using ChangesSince = std::function<bool(std::uint64_t from, std::uint64_t to,
                                          std::vector<std::uint32_t>& positions)>;
  std::uint64_t BeginCall(std::uint64_t generation, const ChangesSince& changed);
  // The table for `signature` (created empty); tables grown past their bound are emptied here,
  // at a call's start, never while a call holds pointers into them.
  FitTable& Fits(const std::string& signature);
  ScoreTable& Scores(const std::string& context, const ShapeList& shapes,
                     const MigProfileWeightsPtr& mig_weights);
  // The table for `context`, or nullptr; never creates one. The pointer holds until the next
  // Scores() for another context (which may drop the least recently used table).
  ScoreTable* FindScores(std::string_view context);
  // Scratch for filter's marks, this cache's alone.
  FilterMarks& filter_marks() { return filter_marks_; }

  // Bounds: at most kMaxTables tables of each kind (the least recently used goes); a table holds
  // one slot per node position (4 bytes) and is emptied at a call's start once it holds more than
  // kMaxFits fits (a fit is a few hundred bytes; distinct fits per call are the distinct GPU
  // states, a few thousand at most), so a cache stays within a few tens of MB in the worst case.
  static constexpr std::size_t kMaxTables = 16;
  static constexpr std::size_t kMaxFits = std::size_t{1} << 14;

 private:
  std::map<std::string, FitTable, std::less<>> fits_;
  std::map<std::string, ScoreTable, std::less<>> scores_;
  std::uint64_t calls_ = 0;
  std::uint64_t generation_ = 0;  // of the last call's snapshot; 0 before the first
  std::vector<std::uint32_t> changed_;
  FilterMarks filter_marks_;
};

class VerbCachePool {
 public:
  // A cache for the caller alone until the lease ends.
  class Lease {
   public:
    Lease(VerbCachePool& pool, std::unique_ptr<VerbCache> cache)
        : pool_(pool), cache_(std::move(cache)) {}
    ~Lease() { pool_.Return(std::move(cache_)); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    VerbCache& operator*() const { return *cache_; }
    VerbCache* operator->() const { return cache_.get(); }

   private:
    VerbCachePool& pool_;
    std::unique_ptr<VerbCache> cache_;
  };

  Lease Acquire();
  // The same without a scope: a cache for the caller alone until it gives it back (Return). Filter
  // hands its cache to the FilterVerdicts it answers, which read its marks.
  std::unique_ptr<VerbCache> Take();
  void Return(std::unique_ptr<VerbCache> cache);

 private:
  Mutex mutex_;
  std::vector<std::unique_ptr<VerbCache>> idle_ LINKFIT_GUARDED_BY(mutex_);
};

}  // namespace linkfit::extender
