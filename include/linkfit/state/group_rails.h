#pragma once

// GroupRails: the RDMA NIC rails (topology::NicSpec::rail) each pod group holds, for the members
// still to be placed (alloc::NicRequest::rails): pods of one training job on several nodes that
// talk rail to rail keep their traffic on one leaf switch of a rail-optimized fabric.
//
// Thread-safety: none; ClusterCache holds it under its mutex.

#include <map>
#include <string>
#include <string_view>

#include "linkfit/alloc/nic_choice.h"
#include "linkfit/state/node_state.h"

namespace linkfit::state {

class GroupRails {
 public:
  // The rails of `assignment`'s NICs on `node` (the node that holds it).
  static alloc::NicMask RailsOf(const Assignment& assignment, const NodeState& node);

  // Records or forgets a member: a pod of `group` holding NICs on `rails`. Idempotent.
  void Add(const std::string& group, std::string_view uid, alloc::NicMask rails);
  void Remove(const std::string& group, std::string_view uid);
  // Every rail a member of `group` holds (empty for an unknown group).
  alloc::NicMask Of(std::string_view group) const;
  std::size_t groups() const { return members_.size(); }

 private:
  // group -> member UID -> its rails. A group's members are few (one job's pods).
  std::map<std::string, std::map<std::string, alloc::NicMask, std::less<>>, std::less<>> members_;
};

}  // namespace linkfit::state
