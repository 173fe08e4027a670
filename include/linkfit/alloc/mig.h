#pragma once

// MIG (Multi-Instance GPU) placement: the profile sets of MIG-capable GPU models (parsed from
// `mig-profile-set/v1` documents, see ../shared/mig/README.md), the exact occupancy of one
// MIG-enabled GPU, and the best-fit choice of (GPU, start slice) for a request of one or more GPU
// instances on a node.
//
// Geometry. A MIG-capable GPU has 8 memory slices and (on every supported model) 7 compute
// slices. A GPU instance of profile P occupies the memory slices [start, start + P.size) at one of
// P's legal starts and P.compute_slices compute slices. Instances coexist iff their memory ranges
// are disjoint, their compute slices sum to at most the geometry's compute_slices, no profile
// exceeds its max_instances, there are at most max_gpu_instances instances, and at most one
// instance is a media-extension (`+me`) profile. These rules are checked exactly with an 8-bit
// slice mask; nothing is approximated.
//
// Best fit. For every candidate (GPU, start) the planner computes two exact costs on that GPU:
//
//   stranded  the free memory slices the placement strands: slices that some instance of some
//             profile of the set could still cover before it and none can after it (every legal
//             start covering them overlaps an instance, or the profiles that could cover them are
//             out of compute slices or at an instance limit). Unweighted: a slice counts if no
//             profile of the set can use it, whatever the demand for each profile (the planner
//             does not see the demand). E.g. 1g at slice 6 strands slice 7 on a fresh A100 or
//             H100 GPU (only 1g double memory at 6, 3g at 4 and 7g cover slice 7), 1g at 0
//             strands nothing.
//   headroom  lost: the sum, over the set's profiles, of how many more instances of that profile
//             could still be placed on that GPU, before minus after.
//
// Both are table lookups per profile, precomputed per set over (slice mask, compute used). The
// planner prefers GPUs that already hold instances (classic best fit: idle GPUs stay whole for 7g
// instances and whole-GPU pods), then the candidate that strands the fewest slices, then the one
// that loses the least headroom (which also chooses the start inside a GPU, e.g. 3g at slice 4
// keeps 4g placeable at 0, 1g at 4 keeps 4g and slice 7), then the lowest GPU index, then the
// lowest start. Multi-instance requests likewise minimise the idle GPUs they open first, then the
// slices stranded, then the headroom lost.
//
// Profile names are not unique across sets: "1g.10gb" is the double-memory 1g profile (2 slices)
// of the A100-40GB but the plain 1g profile (1 slice) of the A100-80GB and H100-80GB. A request
// must therefore be resolved against the profile set of the node's GPU model
// (MigProfileSet::FindProfile); MigCatalog::FindProfile returns every match.
//
// Thread-safety: MigProfileSet, MigGpuState and the decision structs are plain values.
// MigPlanner and MigCatalog are immutable after construction and safe to share between threads;
// their const methods do not synchronise and touch no global state. The alloc module does no I/O
// except MigCatalog::LoadDirectory and LoadMigProfileSetFile, which read the named files.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "linkfit/common/result.h"

namespace linkfit::alloc {

// The mask and the per-profile counters are sized for these limits; the parser enforces them.
inline constexpr int kMigMemorySlices = 8;
inline constexpr int kMaxMigProfiles = 8;
inline constexpr int kMaxMigInstancesPerProfile = 15;

struct MigProfile {
  std::string name;               // "3g.40gb"
  int compute_slices = 0;         // 1..geometry compute_slices
  int memory_slices = 0;          // equals `size`
  int max_instances = 0;          // per GPU
  std::vector<int> starts;        // legal start slices, ascending, each in 0..7
  int size = 0;                   // memory slices one instance occupies
  bool media_extensions = false;  // the `+me` profile: at most one per GPU
};

struct MigProfileSet {
  std::string id;         // "a100-40gb"
  std::string gpu_model;  // "NVIDIA A100 40GB (SXM4 and PCIe)"
  int memory_slices = kMigMemorySlices;
  int compute_slices = 7;
  int max_gpu_instances = 7;
  std::vector<MigProfile> profiles;  // at most kMaxMigProfiles

  // Returns the index of the profile named `name` (exact match), or -1.
  int FindProfile(std::string_view name) const;
};

// Parses one `mig-profile-set/v1` document. Errors name the offending field, e.g.
// "profiles[4].placements.starts[1]: start 5 + size 4 exceeds 8 memory slices".
Result<MigProfileSet> ParseMigProfileSet(std::string_view json);

// Checks the invariants ParseMigProfileSet enforces, for sets built in code.
Result<void> ValidateMigProfileSet(const MigProfileSet& set);

// Reads and parses one file (explicit I/O).
Result<MigProfileSet> LoadMigProfileSetFile(const std::string& path);

// One GPU instance on a GPU: the profile's index in its set and its start slice.
struct MigInstance {
  int profile = 0;
  int start = 0;
  friend bool operator==(const MigInstance&, const MigInstance&) = default;
};

// The occupancy of one MIG-enabled GPU, compact (8 bytes) because it is kept per GPU per node.
// It does not remember which instance sits where (the state module keeps the instance list); it
// keeps exactly what feasibility needs: the slice mask, compute slices used, the instance count
// per profile and whether a `+me` instance exists. Every method takes the profile set the GPU
// belongs to; passing another set is a caller bug (detected only where it breaks a range check).
class MigGpuState {
 public:
  MigGpuState() = default;

  // Builds the state of a GPU holding `instances`; an error names the first one that does not fit.
  static Result<MigGpuState> FromInstances(const MigProfileSet& set,
                                           std::span<const MigInstance> instances);

  // True iff an instance of `profile` can be created at `start` (see the header comment).
  // False for an out-of-range profile or start.
  bool CanPlace(const MigProfileSet& set, int profile, int start) const;

  // Places the instance if CanPlace; returns whether it did (the state is unchanged otherwise).
  bool Place(const MigProfileSet& set, int profile, int start);

  // Removes an instance of `profile` at `start`. Returns false, leaving the state unchanged, if
  // the state cannot hold such an instance (slices free, count zero, ...).
  bool Remove(const MigProfileSet& set, int profile, int start);

  std::uint8_t slice_mask() const { return slice_mask_; }  // bit i set: memory slice i used
  int compute_used() const { return compute_used_; }
  int instance_count() const { return instances_; }
  int profile_count(int profile) const;
  bool has_media_extensions() const { return media_extensions_ != 0; }
  bool empty() const { return instances_ == 0; }

  friend bool operator==(const MigGpuState&, const MigGpuState&) = default;

 private:
  std::uint32_t counts_ = 0;  // 4 bits per profile index
  std::uint8_t slice_mask_ = 0;
  std::uint8_t compute_used_ = 0;
  std::uint8_t instances_ = 0;
  std::uint8_t media_extensions_ = 0;
};

// One physical GPU of a node as the MIG planner sees it. The caller passes only GPUs of the
// planner's model.
struct MigGpuView {
  int index = 0;             // the GPU's index on the node (reported back in decisions)
  bool mig_enabled = false;  // false: the GPU runs whole (or shared) and cannot host instances
  int pods = 0;              // pods using the GPU (whole, shared, or through its MIG instances)
  MigGpuState state;         // the instances on the GPU; meaningful when mig_enabled
};

// The answer for one instance.
struct MigDecision {
  bool fits = false;
  int gpu = -1;    // MigGpuView::index
  int start = -1;  // start memory slice
  // When !fits: why, in plain words, including the reconfiguration hints.
  std::string reason;
  // When !fits: idle GPUs (no pods; MIG disabled, or enabled with unused instances) that would fit
  // the request after being switched to MIG mode or having their instances destroyed.
  std::vector<int> reconfigurable_gpus;
};

// The answer for a request of several instances (one pod asking for several MIG devices).
struct MigRequestDecision {
  bool fits = false;
  std::vector<MigDecision> instances;  // when fits: one per requested profile, in request order
  std::string reason;                  // as MigDecision
  std::vector<int> reconfigurable_gpus;
};

// The best-fit planner for one profile set: owns the set and its two tables, headroom and
// coverable slices (each 256 slice masks x (compute_slices + 1) compute levels x profiles, one
// byte per entry).
class MigPlanner {
 public:
  // Validates the set and precomputes the tables.
  static Result<MigPlanner> Create(MigProfileSet set);

  const MigProfileSet& set() const { return set_; }

  // Returns how many more instances of `profile` fit on a GPU in `state` (exact).
  int RemainingInstances(const MigGpuState& state, int profile) const;

  // Returns the GPU's headroom: RemainingInstances summed over the set's profiles.
  int Headroom(const MigGpuState& state) const;
  // The same in memory slices: each profile's remaining instances times its memory slices, so
  // that a window for a large instance (a 3g's four slices) weighs what the small instances it
  // could hold instead weigh. The planner's measure of headroom lost (Choose, ChooseRequest).
  int SliceHeadroom(const MigGpuState& state) const;

  // Returns how many free memory slices of a GPU in `state` no instance of any profile of the set
  // can cover (exact: the same rules as MigGpuState::CanPlace). 0 on an empty GPU; every free
  // slice once the GPU's compute slices or instance limit are used up.
  int StrandedSlices(const MigGpuState& state) const;
  // The same for one profile: the free slices no legal instance of `profile` can cover (every
  // free slice when it cannot be placed at all; 0 for an out-of-range profile).
  int StrandedSlices(const MigGpuState& state, int profile) const;

  // Chooses the GPU and start for one instance of `profile` by best fit. An out-of-range profile
  // is an error; "does not fit" is a decision with a reason.
  Result<MigDecision> Choose(std::span<const MigGpuView> gpus, int profile) const;

  // Places a request of several instances (profile indexes, possibly repeated; one pod asking for
  // several MIG devices) on the node's MIG-enabled GPUs. Feasibility of the whole request is
  // exact: every way of adding instances to each GPU is enumerated (tiny: at most 7 instances
  // over 8 slices), and a dynamic program over the GPUs and the request's remaining counts finds
  // the distribution that touches the fewest empty GPUs, then strands the fewest slices in total,
  // then loses the least headroom (SliceHeadroom) in total, then uses the lowest GPU positions. A
  // single instance gives exactly Choose's answer. An empty request, an out-of-range profile, more
  // than 64 instances, or a request whose search would exceed a fixed memory budget (hundreds of
  // thousands of partial distributions; not reached by requests of a few instances) is an error.
  Result<MigRequestDecision> ChooseRequest(std::span<const MigGpuView> gpus,
                                           std::span<const int> profiles) const;

 private:
  explicit MigPlanner(MigProfileSet set) : set_(std::move(set)) {}

  // Byte offset of (mask, compute used) in the tables; REQUIRES: compute_used <= compute_slices.
  std::size_t TableRow(const MigGpuState& state) const;
  // The slices legal instances of profile p could cover in `state` (row = TableRow(state)),
  // with the per-GPU and per-profile limits of MigGpuState::CanPlace applied.
  unsigned CoverableSlices(const MigGpuState& state, std::size_t row, std::size_t p) const;

  MigProfileSet set_;
  std::vector<std::uint8_t> table_;  // [mask][compute_used][profile]: geometric maximum
  // [mask][compute_used][profile]: the slices some free legal window of the profile covers, if
  // the compute slices left allow the profile (instance limits are applied at lookup).
  std::vector<std::uint8_t> cover_;
};

// Every profile set of a directory, keyed by id. Immutable after loading.
class MigCatalog {
 public:
  MigCatalog() = default;

  // Loads every `*.json` file of `directory` (in name order); any unreadable or invalid file, or
  // a duplicate id, is an error naming the file.
  static Result<MigCatalog> LoadDirectory(const std::string& directory);

  // Builds a catalog from sets already in memory (tests, embedded defaults).
  static Result<MigCatalog> FromSets(std::vector<MigProfileSet> sets);

  // Returns the set with this id ("a100-40gb"), or nullptr.
  const MigProfileSet* FindSet(std::string_view id) const;
  const MigPlanner* FindPlanner(std::string_view id) const;

  struct ProfileRef {
    const MigPlanner* planner = nullptr;
    int profile = -1;
  };
  // Returns every (set, profile) whose profile is named `name`, in catalog order. Names collide
  // across sets with different geometry (see the header comment), so callers that know the GPU
  // model should use FindPlanner(id)->set().FindProfile(name).
  std::vector<ProfileRef> FindProfile(std::string_view name) const;

  const std::vector<MigPlanner>& planners() const { return planners_; }

 private:
  std::vector<MigPlanner> planners_;
};

}  // namespace linkfit::alloc
