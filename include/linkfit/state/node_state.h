#pragma once

// NodeState: one GPU node as the scheduler sees it at one moment: its immutable hardware model
// (NodeInfo: topology, placement table, MIG planner, labels) and the occupancy of every GPU:
//
//   whole   the GPU is held entirely by one pod
//   shared  pods hold thousandths of it (fractional GPUs, time-slice replicas)
//   mig     the GPU is in MIG mode; pods hold GPU instances on its 8 memory slices
//   idle    none of the above
//
// and of every RDMA NIC (topology::Topology::nics()): the thousandths of it pods hold, 1000 for a
// NIC held whole by one pod. NIC-less nodes keep no NIC figures (a null pointer).
//
// A NodeState is a value: Apply() and Remove() return a new state and never change this one, so
// snapshots handed to filter/prioritize stay valid while binds go on.
//
// Thread-safety: NodeInfo and NodeState are immutable once shared; share them as shared_ptr<const>.
// The assignments a NodeState holds are immutable records, shared between states.

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "linkfit/alloc/mig.h"
#include "linkfit/alloc/nic_choice.h"
#include "linkfit/alloc/placement_table.h"
#include "linkfit/common/result.h"
#include "linkfit/state/nic_use.h"

namespace linkfit::state {

using topology::GpuMask;

struct NodeInfo {
  std::string name;
  std::map<std::string, std::string> labels;
  alloc::PlacementTablePtr table;  // shared by nodes of identical topology
  // The distinct MIG planners of the node's GPUs in order of their first GPU; empty: no
  // MIG-capable GPU. Each GPU plans with the profile set of its own model (a node may mix A100
  // 40GB, A100 80GB and H100 GPUs); an assignment's MigInstance::profile is an index into the set
  // of its GPU's planner. Set through SetMigPlanner, read through MigPlannerOf.
  std::vector<const alloc::MigPlanner*> mig_planners;
  GpuMask mig_enabled = 0;  // GPUs configured in MIG mode
  // GPUs the node agent reports unhealthy (topology document): never placed on; pods already on
  // them still count. The reasons are in reported->gpu(g).health_problem.
  GpuMask unhealthy = 0;
  // NICs whose port the node agent reports known-down (NicSpec::state neither empty nor
  // "ACTIVE"), bit i = own_topology().nics()[i]: never placed on; pods already on them still
  // count.
  alloc::NicMask nic_down;
  // The node agent reports the MIG instances that exist (the document states MIG modes): MIG
  // pods then go only to free existing instances of their profile (the layout is the
  // operator's, as NVIDIA's device plugin serves it); otherwise linkfit plans instances itself.
  bool mig_layout_reported = false;
  // This node's own topology (UUIDs, health, MIG instances); table->topology() is an equivalent
  // one (same fingerprint) that may belong to another node. Null where the node has none apart.
  topology::TopologyPtr reported;
  // Allocatable CPU (thousandths of a core) and memory (bytes); 0 = not known, not tracked.
  // linkfit never filters on them (kube-scheduler's in-tree plugins do); scoring uses them to
  // see GPUs stranded by a node whose CPU or memory is exhausted.
  std::int64_t cpu_milli = 0;
  std::int64_t memory_bytes = 0;
  // The shared model (same fingerprint); UUIDs, health and MIG instances may be another node's.
  const topology::Topology& topology() const { return table->topology(); }
  // This node's own topology: use it for anything node-specific (UUIDs, health, MIG instances).
  const topology::Topology& own_topology() const { return reported ? *reported : topology(); }
  int gpu_count() const { return table->gpu_count(); }
  // The planner of `gpu` (nullptr: none); REQUIRES: 0 <= gpu < kMaxGpus.
  const alloc::MigPlanner* MigPlannerOf(int gpu) const {
    const std::uint8_t at = mig_planner_at_[static_cast<std::size_t>(gpu)];
    return at == 0 ? nullptr : mig_planners[at - 1u];
  }
  // Gives `gpu` `planner` (nullptr: none), adding it to mig_planners on first use.
  // REQUIRES: 0 <= gpu < kMaxGpus, each GPU set at most once.
  void SetMigPlanner(int gpu, const alloc::MigPlanner* planner);
  // The GPUs that plan with `planner`.
  GpuMask GpusOfPlanner(const alloc::MigPlanner* planner) const {
    unsigned mask = 0;
    for (int g = 0; g < gpu_count(); ++g) {
      if (planner != nullptr && MigPlannerOf(g) == planner) mask |= 1u << g;
    }
    return static_cast<GpuMask>(mask);
  }

 private:
  // Per GPU, 1 + its planner's index in mig_planners; 0: none (a byte a GPU instead of a pointer:
  // one NodeInfo per node of the cluster).
  std::array<std::uint8_t, topology::kMaxGpus> mig_planner_at_{};
};
using NodeInfoPtr = std::shared_ptr<const NodeInfo>;

// What one pod holds on one node.
struct Assignment {
  enum class Kind : std::uint8_t { kWhole, kMig, kShared };
  struct MigSlot {
    int gpu = 0;
    alloc::MigInstance instance;
    friend bool operator==(const MigSlot&, const MigSlot&) = default;
  };
  struct ShareSlot {
    int gpu = 0;
    int milli = 0;
    friend bool operator==(const ShareSlot&, const ShareSlot&) = default;
  };
  // One RDMA NIC the pod holds, with any kind of GPU assignment (or none).
  struct NicSlot {
    int nic = 0;       // index into the node's topology().nics()
    int milli = 1000;  // thousandths of the NIC, 1..1000; 1000 = the whole NIC, held alone
    int gpu = -1;      // the pod's GPU this NIC serves; -1 = none said
    friend bool operator==(const NicSlot&, const NicSlot&) = default;
  };

  std::string pod_uid;
  std::string pod_namespace;
  std::string pod_name;
  std::string node;
  // The pod's group ("namespace/name", GpuRequest::group; "" for none): the cache tracks the NIC
  // rails each group holds (ClusterCache::GroupRailsOf).
  std::string group;
  Kind kind = Kind::kWhole;
  GpuMask gpus = 0;               // every GPU the pod touches (all kinds); 0 for a pod
                                  // without GPUs (kind kWhole), kept for its CPU and memory
  std::vector<MigSlot> mig;       // kMig
  std::vector<ShareSlot> shares;  // kShared
  std::vector<NicSlot> nics;      // any kind; NICs distinct
  std::int64_t cpu_milli = 0;     // the pod's CPU request, thousandths of a core
  std::int64_t memory_bytes = 0;  // the pod's memory request
  // The devices were guessed (cluster mode: a GPU pod another scheduler placed, without an
  // allocation record), not known.
  bool estimated = false;
  // The devices come from the node agent's report of what the pod really holds
  // (linkfit.io/devices-in-use); `handoff_mismatch`: they differ from its allocation record.
  bool reported = false;
  bool handoff_mismatch = false;

  std::string PodKey() const { return pod_namespace + "/" + pod_name; }
  // Whether the pod holds devices (GPUs or NICs); a pod without is counted by CPU and memory.
  bool holds_devices() const { return gpus != 0 || !nics.empty(); }
  friend bool operator==(const Assignment&, const Assignment&) = default;
};

// An assignment as NodeState keeps it: one immutable record per pod, shared by the successive
// states of its node (Apply, Remove and WithLoad copy pointers, not assignments) and by the
// ClusterCache's pod index.
using AssignmentPtr = std::shared_ptr<const Assignment>;

// The pods on one node by UID, read like a std::map<std::string, Assignment> (iteration in UID
// order yields (uid, assignment) pairs of references); stored as a UID-sorted vector of shared
// records, a pointer per pod instead of a tree node with two copies of the UID.
class NodePods {
 public:
  using value_type = std::pair<const std::string&, const Assignment&>;
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = NodePods::value_type;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = value_type;
    // `it->second` works as on a map's iterator.
    struct Arrow {
      value_type pair;
      const value_type* operator->() const { return &pair; }
    };

    const_iterator() = default;
    value_type operator*() const { return {(*it_)->pod_uid, **it_}; }
    Arrow operator->() const { return Arrow{**this}; }
    const_iterator& operator++() {
      ++it_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator before = *this;
      ++it_;
      return before;
    }
    friend bool operator==(const const_iterator&, const const_iterator&) = default;

   private:
    friend class NodePods;
    explicit const_iterator(std::vector<AssignmentPtr>::const_iterator it) : it_(it) {}
    std::vector<AssignmentPtr>::const_iterator it_;
  };
  using iterator = const_iterator;

  const_iterator begin() const { return const_iterator(records_.begin()); }
  const_iterator end() const { return const_iterator(records_.end()); }
  std::size_t size() const { return records_.size(); }
  bool empty() const { return records_.empty(); }
  const_iterator find(std::string_view uid) const { return const_iterator(Locate(uid)); }
  std::size_t count(std::string_view uid) const { return find(uid) == end() ? 0 : 1; }
  // REQUIRES: the pod is here.
  const Assignment& at(std::string_view uid) const { return **Locate(uid); }
  // The shared records, in UID order.
  const std::vector<AssignmentPtr>& records() const { return records_; }
  // The same pods with the same assignments.
  friend bool operator==(const NodePods& a, const NodePods& b);

 private:
  friend class NodeState;
  // The record of `uid`, or end.
  std::vector<AssignmentPtr>::const_iterator Locate(std::string_view uid) const;

  std::vector<AssignmentPtr> records_;  // sorted by pod_uid, UIDs distinct
};

class NodeState;
using NodeStatePtr = std::shared_ptr<const NodeState>;

// What prioritize's cluster-wide figures read of a candidate (its placement table, CPU and memory
// allocatable): the same for every node of one machine type, so the cluster cache numbers the
// distinct kinds and a call counts its candidates by number (Snapshot::KindAt).
struct MachineKind {
  const alloc::PlacementTable* table = nullptr;
  std::int64_t cpu_allocatable_milli = 0;
  std::int64_t memory_allocatable_bytes = 0;
  bool operator==(const MachineKind&) const = default;
};
// The distinct machine kinds of a cluster, by number (a handful; one per node at most).
using MachineKinds = std::vector<MachineKind>;
// A hash of every field of `kind`, for the tables that count or number kinds.
inline std::uint64_t MachineKindHash(const MachineKind& kind) {
  return reinterpret_cast<std::uintptr_t>(kind.table) ^
         static_cast<std::uint64_t>(kind.cpu_allocatable_milli) * 0xC2B2AE3D27D4EB4Fu ^
         static_cast<std::uint64_t>(kind.memory_allocatable_bytes) * 0x165667B19E3779F9u;
}

class NodeState {
 public:
  explicit NodeState(NodeInfoPtr info);

  const NodeInfo& info() const { return *info_; }
  const NodeInfoPtr& info_ptr() const { return info_; }
  const std::string& name() const { return info_->name; }
  // info().table and its GPU count, read from the state's own record.
  const alloc::PlacementTable& table() const { return *kind_.table; }
  int gpu_count() const { return kind_.table->gpu_count(); }
  // The node's machine kind (the cluster cache numbers kinds by position, so that prioritize
  // reads 4 bytes of a node answered from what was kept, not the node).
  const MachineKind& machine_kind() const { return kind_; }

  // GPUs free for whole-GPU placement: not held, not shared, not in MIG mode, healthy.
  GpuMask whole_free() const { return whole_free_; }
  GpuMask whole_used() const { return whole_used_; }
  // GPUs that can take new shares: not held whole, not in MIG mode, healthy.
  GpuMask share_eligible() const { return share_eligible_; }
  int shared_milli(int gpu) const { return shared_milli_[Idx(gpu)]; }
  const alloc::MigGpuState& mig_state(int gpu) const { return mig_[Idx(gpu)]; }
  int pods_on_gpu(int gpu) const { return pods_per_gpu_[Idx(gpu)]; }

  // The node's RDMA NICs (info().own_topology().nics()); 0 on a NIC-less node.
  int nic_count() const { return nics_ ? static_cast<int>(nics_->per_nic.size()) : 0; }
  // NICs linkfit may place on, held or not: the port is not known-down (NodeInfo::nic_down) and
  // the NIC is not an SR-IOV virtual function (NicSpec::sriov_physfn set). Virtual functions
  // belong to the SR-IOV CNI and its device plugin, which hand them to pods themselves; linkfit
  // never places on them (a pod reported holding one still counts on it).
  alloc::NicMask nic_usable() const { return nics_ ? nics_->usable : alloc::NicMask(); }
  // Usable NICs no pod holds any of: those a whole-NIC request (1000) may take.
  alloc::NicMask nic_whole_free() const;
  // Thousandths of `nic` pods hold (1000: full or held whole) and the pods on it.
  // REQUIRES: 0 <= nic < nic_count().
  int nic_used_milli(int nic) const { return nics_->per_nic[Idx(nic)].used_milli; }
  int pods_on_nic(int nic) const { return nics_->per_nic[Idx(nic)].pods; }

  // Whole-GPU equivalents in use (whole GPUs + shares/1000 + MIG compute slices/7).
  double UsedGpuEquivalents() const { return used_gpu_equivalents_; }

  // Filter and prioritize answer alike for nodes whose GPUs are alike: same placement table
  // (topology), MIG and health configuration, the same GPUs held, shared and partitioned, and
  // the same NICs usable and held (thousandths). gpu_state_hash() is a hash of exactly that,
  // kept with the state (not computed per request); SameGpuState says whether two states are
  // alike in it. CPU and memory are not part of it.
  std::uint64_t gpu_state_hash() const { return gpu_state_hash_; }
  static bool SameGpuState(const NodeState& a, const NodeState& b);

  // CPU and memory requested by the pods on this node (never checked against allocatable: the
  // in-tree filters own that, so the sum may exceed it).
  // The node's allocatable CPU and memory (NodeInfo's, kept beside the state); 0 when unknown.
  std::int64_t cpu_allocatable_milli() const { return kind_.cpu_allocatable_milli; }
  std::int64_t memory_allocatable_bytes() const { return kind_.memory_allocatable_bytes; }
  std::int64_t cpu_used_milli() const { return cpu_used_milli_; }
  std::int64_t memory_used_bytes() const { return memory_used_bytes_; }
  // Allocatable minus used, at least 0; kUntracked when the node's allocatable is not known.
  static constexpr std::int64_t kUntracked = std::int64_t{1} << 62;
  std::int64_t cpu_free_milli() const;
  std::int64_t memory_free_bytes() const;

  // The pods on this node, by UID.
  const NodePods& pods() const { return pods_; }

  // Returns a new state with `assignment` added; an error if it collides with what is there
  // (a GPU already held, a share beyond 1000, a MIG instance that does not fit, a UID already
  // on the node) or names NICs wrongly (an index beyond the node's NICs, thousandths outside
  // 1..1000, a NIC twice, a NIC's GPU the pod does not hold, a share taking a NIC beyond 1000,
  // a whole NIC any pod uses; the error names the NIC). This is the re-check of bind: it never
  // double-allocates GPUs or NICs. Known-down NICs and virtual functions are accepted (what
  // pods hold there still counts). An assignment without devices (kWhole, gpus == 0, no NICs)
  // only adds its CPU and memory.
  Result<NodeStatePtr> Apply(const Assignment& assignment) const;
  // The same, sharing `assignment` (never null) instead of copying it.
  Result<NodeStatePtr> Apply(AssignmentPtr assignment) const;
  // Returns a new state without the pod `uid` (unchanged copy if it is not here).
  NodeStatePtr Remove(const std::string& uid) const;

  // Pods without GPUs that count only by their CPU and memory requests, without an Assignment
  // (cluster mode: most pods of a cluster; keeping a record each would cost more than the rest
  // of the state). Adds `pods` pods (negative: removes) holding `cpu_milli` and `memory_bytes`
  // in total (negative when removing).
  NodeStatePtr WithLoad(int pods, std::int64_t cpu_milli, std::int64_t memory_bytes) const;
  int load_pods() const { return load_pods_; }
  std::int64_t load_cpu_milli() const { return load_cpu_milli_; }
  std::int64_t load_memory_bytes() const { return load_memory_bytes_; }

 private:
  static std::size_t Idx(int gpu) { return static_cast<std::size_t>(gpu); }
  // Like whole_free()/share_eligible() but counting unhealthy GPUs: what Apply accepts, so that
  // pods already on a GPU that turned unhealthy still count.
  GpuMask WholeAvailable() const;
  GpuMask ShareAvailable() const;
  // Recomputes the figures below from the state; called after every change.
  void Summarize();
  Result<void> AddInPlace(AssignmentPtr assignment);
  // The NIC part of AddInPlace and Remove (node_state_nics.cc).
  Result<void> AddNicsInPlace(const Assignment& assignment);
  void RemoveNicsInPlace(const Assignment& assignment);
  // Builds nics_ from info_ (constructor); the NIC part of Summarize's hash and SameGpuState.
  void InitNics();
  std::uint64_t NicHash() const;
  static bool SameNicState(const NodeState& a, const NodeState& b);

  NodeInfoPtr info_;
  // Kept by Summarize(): info_->table, cpu_milli and memory_bytes, in the first cache lines, so
  // that scoring a node costs no visit to its NodeInfo.
  MachineKind kind_;
  std::uint64_t gpu_state_hash_ = 0;
  double used_gpu_equivalents_ = 0;
  std::int64_t cpu_used_milli_ = 0;  // assignments and loads together
  std::int64_t memory_used_bytes_ = 0;
  GpuMask whole_used_ = 0;
  GpuMask whole_free_ = 0;
  GpuMask share_eligible_ = 0;
  GpuMask mig_enabled_ = 0;  // info_->mig_enabled
  GpuMask unhealthy_ = 0;    // info_->unhealthy
  // MIG fits read the node's reported layout (info_->mig_layout_reported): SameGpuState then
  // compares the reported topologies.
  bool own_layout_ = false;
  int load_pods_ = 0;  // beside the masks and the flag: the padding before the next 8 bytes
  // FNV-1a of the GPUs' planners (info_->MigPlannerOf; 0: no planner): nodes of one table plan
  // alike iff it is equal.
  std::uint64_t mig_planners_hash_ = 0;
  std::array<std::uint16_t, topology::kMaxGpus> shared_milli_{};
  // Up to 1000 pods can share one GPU (1/1000 each), so a byte is not enough.
  std::array<std::uint16_t, topology::kMaxGpus> pods_per_gpu_{};
  std::array<alloc::MigGpuState, topology::kMaxGpus> mig_{};
  // The NICs' occupancy; null on a NIC-less node (8 bytes, where mig_ ends on a multiple of 8).
  NicUseBox nics_;
  std::int64_t load_cpu_milli_ = 0;
  std::int64_t load_memory_bytes_ = 0;
  NodePods pods_;
};

}  // namespace linkfit::state
