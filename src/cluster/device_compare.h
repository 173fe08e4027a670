#pragma once

// Internal to module `cluster`: how PodStore compares the claims on one pod's devices (its
// allocation record, the node's report of what it holds, what the cache holds for it).
//
// Thread-safety: pure functions.

#include <string>

#include "linkfit/state/node_state.h"

namespace linkfit::cluster::internal {

// Whether two assignments hold the same devices (GPUs, MIG instances, shares and NICs).
bool SameDevices(const state::Assignment& a, const state::Assignment& b);

// Whether every device of `part` is one of `whole`'s: what a node reports while a pod's
// containers are still being created (those started so far hold part of its record).
bool PartOf(const state::Assignment& part, const state::Assignment& whole);

// A node's report names the NICs a pod holds, not how much of each nor which GPU each serves
// (model::AssignmentOfReport): where the record holds the same NIC, the record says; the
// reported slot takes its thousandths, and its GPU where the report holds that GPU too.
void FillReportedNics(state::Assignment& reported, const state::Assignment& recorded);

// The NICs two assignments of one pod on `node` differ in, by name ("NICs mlx5_2 held, not
// mlx5_0 as planned"); "" when they hold the same NICs.
std::string NicDifference(const state::Assignment& reported, const state::Assignment& recorded,
                          const state::NodeInfo& node);

}  // namespace linkfit::cluster::internal
