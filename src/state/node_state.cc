#include "linkfit/state/node_state.h"

#include <algorithm>
#include <cstring>

#include "linkfit/common/check.h"

namespace linkfit::state {
namespace {
GpuMask Bit(int gpu) { return static_cast<GpuMask>(1u << gpu); }
}  // namespace

std::vector<AssignmentPtr>::const_iterator NodePods::Locate(std::string_view uid) const {
  const auto it = std::lower_bound(
      records_.begin(), records_.end(), uid,
      [](const AssignmentPtr& record, std::string_view key) { return record->pod_uid < key; });
  return it != records_.end() && (*it)->pod_uid == uid ? it : records_.end();
}

bool operator==(const NodePods& a, const NodePods& b) {
  return std::equal(a.records_.begin(), a.records_.end(), b.records_.begin(), b.records_.end(),
                    [](const AssignmentPtr& x, const AssignmentPtr& y) { return *x == *y; });
}

NodeState::NodeState(NodeInfoPtr info) : info_(std::move(info)) {
  InitNics();
  Summarize();
}

GpuMask NodeState::WholeAvailable() const {
  unsigned busy = whole_used_ | info_->mig_enabled;
  for (int g = 0; g < info_->gpu_count(); ++g) {
    if (shared_milli_[Idx(g)] > 0) busy |= Bit(g);
  }
  return static_cast<GpuMask>(info_->table->topology().all_gpus() & ~busy);
}

GpuMask NodeState::ShareAvailable() const {
  return static_cast<GpuMask>(info_->table->topology().all_gpus() &
                              ~(whole_used_ | info_->mig_enabled));
}

void NodeInfo::SetMigPlanner(int gpu, const alloc::MigPlanner* planner) {
  if (planner == nullptr) return;
  auto it = std::find(mig_planners.begin(), mig_planners.end(), planner);
  if (it == mig_planners.end()) it = mig_planners.insert(it, planner);
  mig_planner_at_[static_cast<std::size_t>(gpu)] =
      static_cast<std::uint8_t>(1 + (it - mig_planners.begin()));
}

void NodeState::Summarize() {
  kind_.table = info_->table.get();
  kind_.cpu_allocatable_milli = info_->cpu_milli;
  kind_.memory_allocatable_bytes = info_->memory_bytes;
  mig_enabled_ = info_->mig_enabled;
  unhealthy_ = info_->unhealthy;
  mig_planners_hash_ = 0;
  if (!info_->mig_planners.empty()) {
    std::uint64_t planners = 1469598103934665603u;
    for (int g = 0; g < info_->gpu_count(); ++g) {
      planners =
          (planners ^ reinterpret_cast<std::uintptr_t>(info_->MigPlannerOf(g))) * 1099511628211u;
    }
    mig_planners_hash_ = planners;
  }
  own_layout_ = info_->mig_layout_reported;
  whole_free_ = static_cast<GpuMask>(WholeAvailable() & ~info_->unhealthy);
  share_eligible_ = static_cast<GpuMask>(ShareAvailable() & ~info_->unhealthy);
  double used = __builtin_popcount(whole_used_);
  for (int g = 0; g < info_->gpu_count(); ++g) {
    used += shared_milli_[Idx(g)] / 1000.0;
    const alloc::MigPlanner* planner = info_->MigPlannerOf(g);
    if (planner != nullptr && ((info_->mig_enabled >> g) & 1)) {
      used += mig_[Idx(g)].compute_used() / static_cast<double>(planner->set().compute_slices);
    }
  }
  used_gpu_equivalents_ = used;
  // FNV-1a over what SameGpuState compares.
  std::uint64_t hash = 1469598103934665603u;
  const auto mix = [&hash](std::uint64_t value) { hash = (hash ^ value) * 1099511628211u; };
  mix(reinterpret_cast<std::uintptr_t>(kind_.table));
  mix(mig_planners_hash_);
  mix(std::uint64_t{mig_enabled_} | std::uint64_t{unhealthy_} << 16 |
      std::uint64_t{whole_used_} << 32 | std::uint64_t{own_layout_} << 48);
  for (int g = 0; g < info_->gpu_count(); ++g) {
    mix(shared_milli_[Idx(g)]);
    if ((info_->mig_enabled >> g) & 1) {
      mix(mig_[Idx(g)].slice_mask());
      mix(static_cast<std::uint64_t>(mig_[Idx(g)].compute_used()));
    }
  }
  if (nics_) mix(NicHash());
  gpu_state_hash_ = hash ^ (hash >> 29);
}

bool NodeState::SameGpuState(const NodeState& a, const NodeState& b) {
  if (a.kind_.table != b.kind_.table || a.mig_enabled_ != b.mig_enabled_ ||
      a.unhealthy_ != b.unhealthy_ || a.whole_used_ != b.whole_used_ ||
      a.own_layout_ != b.own_layout_ || a.mig_planners_hash_ != b.mig_planners_hash_) {
    return false;
  }
  const auto gpus = static_cast<std::size_t>(a.kind_.table->gpu_count());
  if (std::memcmp(a.shared_milli_.data(), b.shared_milli_.data(), gpus * sizeof(std::uint16_t)) !=
      0) {
    return false;
  }
  if (a.own_layout_ && a.info_->reported != b.info_->reported) return false;
  if (!SameNicState(a, b)) return false;
  if (a.mig_planners_hash_ == 0) return true;
  // MIG fits also read the pods per GPU (a GPU leaves MIG mode only when empty) and the MIG
  // state of the GPUs in MIG mode (the others hold no instance).
  if (std::memcmp(a.pods_per_gpu_.data(), b.pods_per_gpu_.data(), gpus * sizeof(std::uint16_t)) !=
      0) {
    return false;
  }
  for (unsigned mig = a.mig_enabled_; mig != 0; mig &= mig - 1) {
    const auto g = static_cast<std::size_t>(__builtin_ctz(mig));
    if (!(a.mig_[g] == b.mig_[g])) return false;
  }
  return true;
}

std::int64_t NodeState::cpu_free_milli() const {
  if (kind_.cpu_allocatable_milli <= 0) return kUntracked;
  return std::max<std::int64_t>(0, kind_.cpu_allocatable_milli - cpu_used_milli_);
}

std::int64_t NodeState::memory_free_bytes() const {
  if (kind_.memory_allocatable_bytes <= 0) return kUntracked;
  return std::max<std::int64_t>(0, kind_.memory_allocatable_bytes - memory_used_bytes_);
}

Result<void> NodeState::AddInPlace(AssignmentPtr record) {
  const Assignment& a = *record;
  const int n = info_->gpu_count();
  if (a.node != info_->name) {
    return MakeError("assignment for node " + a.node + " applied to " + info_->name);
  }
  std::vector<AssignmentPtr>& records = pods_.records_;
  const auto at = std::lower_bound(
      records.begin(), records.end(), a.pod_uid,
      [](const AssignmentPtr& held, const std::string& key) { return held->pod_uid < key; });
  if (at != records.end() && (*at)->pod_uid == a.pod_uid) {
    return MakeError("pod " + a.pod_uid + " already on this node");
  }
  const auto position = at - records.begin();
  if ((a.gpus & ~info_->table->topology().all_gpus()) != 0 ||
      (a.gpus == 0 && a.kind != Assignment::Kind::kWhole)) {
    return MakeError("assignment names GPUs this node does not have");
  }
  if (a.cpu_milli < 0 || a.memory_bytes < 0) {
    return MakeError("assignment of pod " + a.pod_uid + " has a negative CPU or memory request");
  }
  // The per-GPU pod counts follow `gpus`, so it must name exactly the GPUs of the slots.
  unsigned slot_gpus = 0;
  for (const Assignment::ShareSlot& slot : a.shares) slot_gpus |= 1u << (slot.gpu & 31);
  for (const Assignment::MigSlot& slot : a.mig) slot_gpus |= 1u << (slot.gpu & 31);
  const bool slots_match =
      a.kind == Assignment::Kind::kWhole
          ? a.shares.empty() && a.mig.empty()
          : slot_gpus == a.gpus &&
                (a.kind == Assignment::Kind::kShared ? a.mig.empty() : a.shares.empty());
  if (!slots_match) {
    return MakeError("assignment of pod " + a.pod_uid +
                     ": its GPU list does not match its MIG instances or shares");
  }
  switch (a.kind) {
    case Assignment::Kind::kWhole:
      if ((a.gpus & ~WholeAvailable()) != 0) {
        return MakeError("GPU already in use on " + info_->name);
      }
      whole_used_ = static_cast<GpuMask>(whole_used_ | a.gpus);
      break;
    case Assignment::Kind::kShared:
      for (const Assignment::ShareSlot& slot : a.shares) {
        if (slot.gpu < 0 || slot.gpu >= n || ((ShareAvailable() >> slot.gpu) & 1) == 0) {
          return MakeError("GPU " + std::to_string(slot.gpu) + " cannot take shares");
        }
        if (slot.milli <= 0 || shared_milli_[Idx(slot.gpu)] + slot.milli > 1000) {
          return MakeError("GPU " + std::to_string(slot.gpu) + " has " +
                           std::to_string(1000 - shared_milli_[Idx(slot.gpu)]) + " milli free, " +
                           std::to_string(slot.milli) + " requested");
        }
        shared_milli_[Idx(slot.gpu)] =
            static_cast<std::uint16_t>(shared_milli_[Idx(slot.gpu)] + slot.milli);
      }
      break;
    case Assignment::Kind::kMig:
      if (info_->mig_planners.empty()) {
        return MakeError(info_->name + " has no MIG-capable GPUs");
      }
      for (const Assignment::MigSlot& slot : a.mig) {
        if (slot.gpu < 0 || slot.gpu >= n || ((info_->mig_enabled >> slot.gpu) & 1) == 0) {
          return MakeError("GPU " + std::to_string(slot.gpu) + " is not in MIG mode");
        }
        const alloc::MigPlanner* planner = info_->MigPlannerOf(slot.gpu);
        if (planner == nullptr) {
          return MakeError("GPU " + std::to_string(slot.gpu) + " has no MIG profile set");
        }
        if (!mig_[Idx(slot.gpu)].Place(planner->set(), slot.instance.profile,
                                       slot.instance.start)) {
          return MakeError("MIG instance does not fit on GPU " + std::to_string(slot.gpu) +
                           " at slice " + std::to_string(slot.instance.start));
        }
      }
      break;
  }
  if (auto nics = AddNicsInPlace(a); !nics) return nics;
  for (int g = 0; g < n; ++g) {
    if ((a.gpus >> g) & 1) ++pods_per_gpu_[Idx(g)];
  }
  cpu_used_milli_ += a.cpu_milli;
  memory_used_bytes_ += a.memory_bytes;
  // Copied states hold exactly-sized vectors: grow by one, not by doubling.
  records.reserve(records.size() + 1);
  records.insert(records.begin() + position, std::move(record));
  Summarize();
  return {};
}

Result<NodeStatePtr> NodeState::Apply(const Assignment& assignment) const {
  return Apply(std::make_shared<const Assignment>(assignment));
}

Result<NodeStatePtr> NodeState::Apply(AssignmentPtr assignment) const {
  auto next = std::make_shared<NodeState>(*this);
  if (auto added = next->AddInPlace(std::move(assignment)); !added) {
    return tl::unexpected(added.error());
  }
  return NodeStatePtr(std::move(next));
}

// A release of more than the node holds means the bookkeeping is corrupt (every add went through
// AddInPlace's checks): the checks stop the process, as kube-scheduler exits when its cache is
// corrupted, so that a restart rebuilds the state instead of handing out devices on a wrong count.
NodeStatePtr NodeState::Remove(const std::string& uid) const {
  auto next = std::make_shared<NodeState>(*this);
  const auto found = pods_.Locate(uid);
  if (found == pods_.records_.end()) return next;
  const auto it = next->pods_.records_.begin() + (found - pods_.records_.begin());
  const Assignment& a = **it;
  switch (a.kind) {
    case Assignment::Kind::kWhole:
      LINKFIT_CHECK((next->whole_used_ & a.gpus) == a.gpus,
                    "pod " + a.pod_uid + " releases whole GPUs the node does not hold");
      next->whole_used_ = static_cast<GpuMask>(next->whole_used_ & ~a.gpus);
      break;
    case Assignment::Kind::kShared:
      for (const Assignment::ShareSlot& slot : a.shares) {
        LINKFIT_CHECK(next->shared_milli_[Idx(slot.gpu)] >= slot.milli,
                      "pod " + a.pod_uid + " releases more of GPU " + std::to_string(slot.gpu) +
                          " than the node holds");
        next->shared_milli_[Idx(slot.gpu)] =
            static_cast<std::uint16_t>(next->shared_milli_[Idx(slot.gpu)] - slot.milli);
      }
      break;
    case Assignment::Kind::kMig:
      for (const Assignment::MigSlot& slot : a.mig) {
        // Added only onto a GPU with a planner (AddInPlace); a NodeState's info never changes.
        const alloc::MigPlanner* planner = info_->MigPlannerOf(slot.gpu);
        if (planner != nullptr) {
          next->mig_[Idx(slot.gpu)].Remove(planner->set(), slot.instance.profile,
                                           slot.instance.start);
        }
      }
      break;
  }
  for (int g = 0; g < info_->gpu_count(); ++g) {
    if ((a.gpus >> g) & 1) {
      LINKFIT_CHECK(next->pods_per_gpu_[Idx(g)] > 0,
                    "GPU " + std::to_string(g) + " of " + info_->name + " counts no pod");
      --next->pods_per_gpu_[Idx(g)];
    }
  }
  next->RemoveNicsInPlace(a);
  LINKFIT_CHECK(next->cpu_used_milli_ >= a.cpu_milli && next->memory_used_bytes_ >= a.memory_bytes,
                "pod " + a.pod_uid + " releases more CPU or memory than " + info_->name + " holds");
  next->cpu_used_milli_ -= a.cpu_milli;
  next->memory_used_bytes_ -= a.memory_bytes;
  next->pods_.records_.erase(it);
  next->Summarize();
  return next;
}

NodeStatePtr NodeState::WithLoad(int pods, std::int64_t cpu_milli,
                                 std::int64_t memory_bytes) const {
  auto next = std::make_shared<NodeState>(*this);
  next->load_pods_ += pods;
  next->load_cpu_milli_ += cpu_milli;
  next->load_memory_bytes_ += memory_bytes;
  next->cpu_used_milli_ += cpu_milli;
  next->memory_used_bytes_ += memory_bytes;
  return next;
}

}  // namespace linkfit::state
