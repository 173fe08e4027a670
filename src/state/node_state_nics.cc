// NodeState's RDMA NICs (node_state.h): which NICs linkfit may place on, what pods hold of each,
// and the checks that keep a NIC from being given twice.

#include <string>

#include "linkfit/common/check.h"
#include "linkfit/state/node_state.h"

namespace linkfit::state {

void NodeState::InitNics() {
  const std::vector<topology::NicSpec>& specs = info_->own_topology().nics();
  if (specs.empty()) return;
  NicUse use;
  use.per_nic.resize(specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    // A virtual function (sriov_physfn set) is the SR-IOV CNI's to hand out, not linkfit's.
    use.usable[i] = !info_->nic_down[i] && specs[i].sriov_physfn.empty();
  }
  nics_ = NicUseBox(std::move(use));
}

alloc::NicMask NodeState::nic_whole_free() const {
  alloc::NicMask free;
  if (!nics_) return free;
  for (std::size_t i = 0; i < nics_->per_nic.size(); ++i) {
    free[i] = nics_->usable[i] && nics_->per_nic[i].used_milli == 0;
  }
  return free;
}

Result<void> NodeState::AddNicsInPlace(const Assignment& a) {
  if (a.nics.empty()) return {};
  const int count = nic_count();
  const std::vector<topology::NicSpec>& specs = info_->own_topology().nics();
  alloc::NicMask seen;
  for (const Assignment::NicSlot& slot : a.nics) {
    if (slot.nic < 0 || slot.nic >= count) {
      return MakeError("pod " + a.pod_uid + ": NIC " + std::to_string(slot.nic) +
                       " does not exist on " + info_->name + " (" + std::to_string(count) +
                       " NICs)");
    }
    const std::string nic = "NIC " + specs[Idx(slot.nic)].name + " of " + info_->name;
    if (seen[Idx(slot.nic)]) return MakeError("pod " + a.pod_uid + " holds " + nic + " twice");
    seen[Idx(slot.nic)] = true;
    if (slot.milli < 1 || slot.milli > 1000) {
      return MakeError("pod " + a.pod_uid + ": " + std::to_string(slot.milli) + " thousandths of " +
                       nic + " (expected 1..1000)");
    }
    if (slot.gpu != -1 &&
        (slot.gpu < 0 || slot.gpu >= topology::kMaxGpus || ((a.gpus >> slot.gpu) & 1) == 0)) {
      return MakeError("pod " + a.pod_uid + ": " + nic + " serves GPU " + std::to_string(slot.gpu) +
                       ", which the pod does not hold");
    }
    NicUse::PerNic& held = nics_->per_nic[Idx(slot.nic)];
    if (slot.milli == 1000 && held.used_milli > 0) {
      return MakeError(nic + " is in use (" + std::to_string(held.used_milli) + "/1000 held by " +
                       std::to_string(held.pods) + " pods); it cannot be held whole");
    }
    if (held.used_milli + slot.milli > 1000) {
      return MakeError(nic + " has " + std::to_string(1000 - held.used_milli) + " milli free, " +
                       std::to_string(slot.milli) + " requested");
    }
    held.used_milli = static_cast<std::uint16_t>(held.used_milli + slot.milli);
    ++held.pods;
  }
  return {};
}

void NodeState::RemoveNicsInPlace(const Assignment& a) {
  for (const Assignment::NicSlot& slot : a.nics) {
    // Added only within the node's NICs (AddNicsInPlace); a NodeState's info never changes.
    if (!nics_ || slot.nic < 0 || slot.nic >= nic_count()) continue;
    NicUse::PerNic& held = nics_->per_nic[Idx(slot.nic)];
    LINKFIT_CHECK(held.used_milli >= slot.milli && held.pods > 0,
                  "pod " + a.pod_uid + " releases more of NIC " + std::to_string(slot.nic) +
                      " than " + info_->name + " holds");
    held.used_milli = static_cast<std::uint16_t>(held.used_milli - slot.milli);
    --held.pods;
  }
}

std::uint64_t NodeState::NicHash() const {
  // FNV-1a over what SameNicState compares.
  std::uint64_t hash = 1469598103934665603u;
  const auto mix = [&hash](std::uint64_t value) { hash = (hash ^ value) * 1099511628211u; };
  mix(nics_->per_nic.size());
  for (std::size_t i = 0; i < nics_->per_nic.size(); ++i) {
    mix(std::uint64_t{nics_->per_nic[i].used_milli} << 1 | (nics_->usable[i] ? 1u : 0u));
  }
  return hash;
}

bool NodeState::SameNicState(const NodeState& a, const NodeState& b) {
  if (!a.nics_ || !b.nics_) return !a.nics_ && !b.nics_;
  if (a.nics_->usable != b.nics_->usable || a.nics_->per_nic.size() != b.nics_->per_nic.size()) {
    return false;
  }
  // Fits read the thousandths held, not how many pods hold them.
  for (std::size_t i = 0; i < a.nics_->per_nic.size(); ++i) {
    if (a.nics_->per_nic[i].used_milli != b.nics_->per_nic[i].used_milli) return false;
  }
  return true;
}

}  // namespace linkfit::state
