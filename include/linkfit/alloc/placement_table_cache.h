#pragma once

// PlacementTableCache: one PlacementTable per distinct topology. Nodes with identical hardware
// (equal Topology::fingerprint()) share one model and one table, so a cluster of 5,000 DGX nodes
// builds a handful of tables, not 5,000.
//
// Thread-safety: all methods are safe to call concurrently; Get() builds a missing table outside
// the cache's lock, so a slow 16-GPU build never blocks lookups of other topologies.

#include <memory>
#include <string>
#include <unordered_map>

#include "linkfit/alloc/placement_table.h"
#include "linkfit/common/mutex.h"

namespace linkfit::alloc {

class PlacementTableCache {
 public:
  // Returns the shared table for `topology`, building it on first use.
  PlacementTablePtr Get(const topology::TopologyPtr& topology);

  std::size_t size() const;
  std::size_t MemoryBytes() const;

 private:
  mutable Mutex mutex_;
  std::unordered_map<std::string, PlacementTablePtr> tables_ LINKFIT_GUARDED_BY(mutex_);
};

}  // namespace linkfit::alloc
