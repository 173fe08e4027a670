#pragma once

// NodeModelFactory: the one place where node facts become the scheduler's hardware model
// (state::NodeInfo), for both sources of cluster state: standalone mode's cluster file and
// cluster mode's Node objects.
//
//   facts: name, labels, topology (a document or nvidia-smi text), GPUs in MIG mode,
//          allocatable CPU and memory
//   model: NodeInfo { topology + placement table (shared by fingerprint), MIG planner, ... }
//
// Identical topology texts are parsed once (cached by content: 5,000 nodes publishing the same
// document cost one parse), and identical topologies share one placement table
// (PlacementTableCache).
//
// Thread-safety: every method is safe to call concurrently.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "linkfit/alloc/mig.h"
#include "linkfit/alloc/placement_table_cache.h"
#include "linkfit/common/mutex.h"
#include "linkfit/common/result.h"
#include "linkfit/state/node_state.h"
#include "linkfit/topology/bandwidth.h"
#include "linkfit/topology/topology.h"

namespace linkfit::model {

struct NodeFacts {
  std::string name;
  std::map<std::string, std::string> labels;
  topology::TopologyPtr topology;
  topology::GpuMask mig_enabled = 0;  // overridden where the document states MIG modes
  std::int64_t cpu_milli = 0;         // allocatable; 0 = unknown
  std::int64_t memory_bytes = 0;      // allocatable; 0 = unknown
};

class NodeModelFactory {
 public:
  // `tables` and `catalog` must outlive the factory.
  NodeModelFactory(alloc::PlacementTableCache& tables, const alloc::MigCatalog& catalog,
                   topology::BandwidthModel bandwidth);

  // Parses a topology document or nvidia-smi text and derives its model; the same text returns
  // the same TopologyPtr. Loader warnings are logged once per distinct text, prefixed by
  // `source_name`. Errors name what is wrong with the text.
  Result<topology::TopologyPtr> TopologyFromText(std::string_view text,
                                                 const std::string& source_name);

  // Builds the node's model. Errors: MIG mode on GPUs that are not MIG-capable (no profile set
  // in the catalog), MIG GPUs beyond the node's GPU count.
  Result<state::NodeInfoPtr> Build(NodeFacts facts) const;

  const alloc::MigCatalog& catalog() const { return catalog_; }
  // Distinct topology texts parsed so far.
  std::size_t topologies() const;

 private:
  alloc::PlacementTableCache& tables_;
  const alloc::MigCatalog& catalog_;
  const topology::BandwidthModel bandwidth_;
  mutable Mutex mutex_;
  std::unordered_map<std::string, topology::TopologyPtr> by_text_ LINKFIT_GUARDED_BY(mutex_);
};

// Parses the MIG-mode grammar shared by the cluster file (`mig:`) and the node annotation
// linkfit.io/mig-mode: "all", "none", or GPU indexes separated by commas ("0,1,3").
Result<topology::GpuMask> ParseMigMode(std::string_view text, int gpu_count);

}  // namespace linkfit::model
