#include "linkfit/alloc/placement_table_cache.h"

namespace linkfit::alloc {

PlacementTablePtr PlacementTableCache::Get(const topology::TopologyPtr& topology) {
  const std::string& key = topology->fingerprint();
  {
    MutexLock lock(mutex_);
    const auto it = tables_.find(key);
    if (it != tables_.end()) return it->second;
  }
  PlacementTablePtr built = PlacementTable::Build(topology);
  MutexLock lock(mutex_);
  // Another thread may have built the same table meanwhile; keep the first one.
  return tables_.emplace(key, std::move(built)).first->second;
}

std::size_t PlacementTableCache::size() const {
  MutexLock lock(mutex_);
  return tables_.size();
}

std::size_t PlacementTableCache::MemoryBytes() const {
  MutexLock lock(mutex_);
  std::size_t total = 0;
  for (const auto& entry : tables_) total += entry.second->MemoryBytes();
  return total;
}

}  // namespace linkfit::alloc
