#pragma once

// The cases of `linkfit-bench whole-machines`: small random clusters of partly used machines and
// idle whole machines, a stream of small pods, then big ones, with the oracle's answer
// (whole_machines_oracle.h) of how many of the big pods could be placed beside every small pod.
//
// Families (machine kinds from config/topologies, the same documents as ../shared/topologies):
//
//   partly used machines serve the small pods as well (same GPU model, same ring for any 1 or 2
//   GPUs, NVSwitch), but can never host the big shapes:
//     mig-a100         1-3 DGX A100 with GPUs 0-3 in MIG mode (MIG instances held on them, 0-1
//                      whole GPUs of 4-7 held), 1-2 idle DGX A100 (the demo's dgx-a100-mig-0)
//     used-nvswitch    1-3 DGX A100 or DGX H100 with 1-3 whole GPUs held, 1-2 idle machines of
//                      the same model
//   partly used machines serve them worse (a slower ring for a 2-GPU pod):
//     workstations     1-3 4-GPU workstations with NVLink pairs (0-1 GPU held), 1-2 idle DGX
//                      A100 or H100
//     other-kinds      1-3 of 8x L40S PCIe, 8x A100 PCIe with NVLink bridge pairs, DGX-1 V100
//                      (hybrid cube mesh), 8x RTX 4090 (all SYS), 1-3 GPUs held; 1-2 idle DGX
//                      A100, H100 or DGX-1 V100
//     mig-a100-h100    the mig-a100 machines, idle DGX H100s (faster rings than the A100s')
//
// Pods: small ones first, in random order: 1- and 2-GPU pods (half the 2-GPU pods with a
// preferred `nvlink` closeness) about as many GPUs as the partly used machines have free (0 to
// one per machine spare; sometimes a few more, with a spare idle machine to take them), and in
// the MIG families 0-3 small MIG instances (1g.5gb, 1g.10gb, 2g.10gb, 3g.20gb); then, in random
// order, an 8-GPU pod with a required `nvlink` closeness per idle machine (sometimes one fewer),
// sometimes a 4-GPU pod with a required `nvlink` closeness, and in the MIG families sometimes a
// 7g.40gb. A draw whose small pods cannot all be placed is drawn again. Whole-GPU pods ask 4 cores
// and 32 GiB a GPU, MIG pods 2 cores and 16 GiB, on nodes of 128 cores and 1 TiB: CPU and memory
// never bind (CheckResourcesCannotBind holds; the oracle checks it on every case).
//
// Thread-safety: DrawCase reads the catalog's topologies (whose ring memos are not thread-safe).

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "harness/cluster.h"
#include "linkfit/common/result.h"

namespace linkfit::bench {

enum class WholeMachinesFamily {
  kMigA100,
  kUsedNvswitch,
  kWorkstations,
  kOtherKinds,
  kMigA100H100
};
inline constexpr WholeMachinesFamily kWholeMachinesFamilies[] = {
    WholeMachinesFamily::kMigA100, WholeMachinesFamily::kUsedNvswitch,
    WholeMachinesFamily::kWorkstations, WholeMachinesFamily::kOtherKinds,
    WholeMachinesFamily::kMigA100H100};

const char* FamilyName(WholeMachinesFamily family);
// True for the families whose partly used machines serve the small pods as well.
bool ServesAsWell(WholeMachinesFamily family);

// The machine kinds (topology, GPU model label) and the A100 40GB MIG profiles.
struct MachineCatalog {
  struct Kind {
    std::string name;
    std::string topology_file;  // absolute
    std::string model;
    NodeTopologyPtr topology;
  };
  std::map<std::string, Kind> kinds;
  std::vector<MigProfile> a100_profiles;
};
Result<MachineCatalog> LoadMachineCatalog(const std::string& repo_root);

struct WholeMachinesCase {
  Cluster cluster;  // partly used machines preloaded (Cluster::Preload)
  std::vector<PodSpec> small;
  std::vector<PodSpec> big;
  int oracle_big = 0;  // MostBigPodsPlaceable (>= 0: every small pod is placeable)
};

Result<WholeMachinesCase> DrawCase(WholeMachinesFamily family, const MachineCatalog& catalog,
                                   std::mt19937_64& rng);

}  // namespace linkfit::bench
