#pragma once

// Standalone mode (the embedded default): nodes, their topologies and existing allocations come
// from a cluster file instead of a Kubernetes API server, and binds are recorded in memory and,
// when configured, in a state file written atomically (so a restart keeps allocations).
//
// Cluster file (YAML; paths relative to the file, absolute paths accepted; cluster_file.h writes
// it from values):
//
//   nodes:
//     - name: dgx-h100-0
//       topology: topologies/dgx-h100.json   # topology document or nvidia-smi text
//       labels: {nvidia.com/gpu.product: H100}
//       mig: all                             # GPUs in MIG mode: all | none | [0, 1] (default none)
//       cpu: 224                             # optional allocatable CPU and memory (Kubernetes
//       memory: 2Ti                          #   quantities): scoring counts GPUs they strand
//     - name_prefix: l40s-                   # l40s-0 ... l40s-99
//       count: 100
//       topology: topologies/pcie-8x-l40s-2socket.json
//   allocations:                             # optional pre-existing assignments
//     - {pod: ml/trainer-0, uid: u1, node: dgx-h100-0, gpus: [0, 1]}
//     - {pod: ml/infer-0, uid: u2, node: a100-0, mig: [{gpu: 0, profile: 3g.40gb, start: 4}]}
//     - {pod: ml/nb-0, uid: u3, node: l40s-3, shares: [{gpu: 2, milli: 300}]}
//     - {pod: ml/etl-0, uid: u4, node: l40s-3, cpu: 16, memory: 64Gi}   # no GPUs
//   (every allocation may give `cpu` and `memory`: the pod's requests, counted for scoring)
//
// The state file is JSON, {"allocations":[...]}, each entry an allocation record in the format
// bind writes on pods in cluster mode (kube/annotations.h: "v", "pod", "uid", "node", "gpus",
// "mig", "shares", "cpu", "memory"): every allocation the service holds, the cluster file's
// included. When it exists at start-up it replaces the cluster file's allocations (so releases
// survive a restart). Unknown keys, bad values and allocations that collide are errors naming
// the file, the entry and the key.
//
// Thread-safety: loading functions are not thread-safe with respect to the cache they fill
// (call them before serving); StateFileBinder is safe for concurrent use.

#include <memory>
#include <string>
#include <vector>

#include "linkfit/common/mutex.h"
#include "linkfit/extender/binder.h"
#include "linkfit/model/node_model.h"
#include "linkfit/state/cluster_cache.h"

namespace linkfit::standalone {

struct ClusterLoadStats {
  int nodes = 0;
  int topologies = 0;  // distinct topology files
  int allocations = 0;
};

// Reads the cluster file, builds every node through `factory` (sharing models of identical
// topologies) and applies its allocations.
Result<ClusterLoadStats> LoadClusterFile(const std::string& path, model::NodeModelFactory& factory,
                                         state::ClusterCache& cache);

// Replaces the cache's allocations with those of a state file (missing file: nothing to do).
// Returns the number of allocations read.
Result<int> LoadStateFile(const std::string& path, state::ClusterCache& cache);

// Serialises assignments as {"allocations":[record,...]} (MIG profiles by name).
std::string AllocationsToJson(const std::vector<state::Assignment>& assignments,
                              const state::Snapshot& snapshot);

// The standalone Binder: records every bind in the state file (if any) before it is confirmed.
class StateFileBinder final : public extender::Binder {
 public:
  StateFileBinder(std::string path, state::ClusterCache& cache);
  extender::BindReply Bind(const extender::BindRequest& request) override;
  void Released(const std::string& pod_uid) override;

 private:
  Result<void> Save();

  std::string path_;
  state::ClusterCache& cache_;
  Mutex mutex_;  // serialises writers of the file
};

}  // namespace linkfit::standalone
