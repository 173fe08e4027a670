#include "linkfit/state/group_rails.h"

namespace linkfit::state {

alloc::NicMask GroupRails::RailsOf(const Assignment& assignment, const NodeState& node) {
  alloc::NicMask rails;
  const std::vector<topology::NicSpec>& nics = node.table().topology().nics();
  for (const Assignment::NicSlot& slot : assignment.nics) {
    if (slot.nic < 0 || static_cast<std::size_t>(slot.nic) >= nics.size()) continue;
    const int rail = nics[static_cast<std::size_t>(slot.nic)].rail;
    if (rail >= 0 && rail < topology::kMaxNics) rails.set(static_cast<std::size_t>(rail));
  }
  return rails;
}

void GroupRails::Add(const std::string& group, std::string_view uid, alloc::NicMask rails) {
  if (group.empty() || rails.none()) return;
  members_[group].insert_or_assign(std::string(uid), rails);
}

void GroupRails::Remove(const std::string& group, std::string_view uid) {
  if (group.empty()) return;
  const auto found = members_.find(group);
  if (found == members_.end()) return;
  if (const auto member = found->second.find(uid); member != found->second.end()) {
    found->second.erase(member);
  }
  if (found->second.empty()) members_.erase(found);
}

alloc::NicMask GroupRails::Of(std::string_view group) const {
  alloc::NicMask rails;
  const auto found = members_.find(group);
  if (found == members_.end()) return rails;
  for (const auto& [uid, held] : found->second) rails |= held;
  return rails;
}

}  // namespace linkfit::state
