#include "harness/nic_report.h"

#include <cstdio>

namespace linkfit::bench {
namespace {

// The row of `policy`, or null.
const nlohmann::json* RowOf(const nlohmann::json& results, const std::string& policy) {
  for (const nlohmann::json& row : results) {
    const auto name = row.find("policy");
    if (name != row.end() && name->is_string() && name->get_ref<const std::string&>() == policy) {
      return &row;
    }
  }
  return nullptr;
}

int IntField(const nlohmann::json& row, const char* key) {
  const auto field = row.find(key);
  return field != row.end() && field->is_number_integer() ? field->get<int>() : 0;
}

}  // namespace

std::string FormatGbps(double gbps) {
  char text[32];
  std::snprintf(text, sizeof text, "%g GB/s", gbps);
  return text;
}

nlohmann::json NicReading(const std::vector<std::string>& machines, const double* staged_gbps) {
  std::string cluster =
      "Machines (config/topologies; NIC placement from each fixture, each NIC's rate as below, "
      "written into the documents linkfit serve reads as a node agent would publish it):";
  for (const std::string& line : machines) cluster += " " + line + ";";
  return nlohmann::json::array({
      cluster + " every node 256 cores and 2 TiB, so GPUs and NICs are the only scarce resources.",
      "Workload: inference pods = GPU instances (role HN) of Alibaba's 2025 trace "
      "(alibaba-gpu-2025), drawn uniformly: 1 GPU, the instance's CPU and memory, its "
      "rdma_request as a NIC share (percent x 10 thousandths, linkfit.io/rdma-share), a lifetime "
      "drawn from the instances created and deleted inside the trace window; max_instance_per_node "
      "is not modelled. Training pods = Philly jobs of 2-8 GPUs (philly_jobs_pollux_derived.csv) "
      "with their GPU count and duration, one whole NIC per GPU (linkfit.io/rdma = GPUs), 4 cores "
      "and 32 GiB a GPU. Training is training_share_of_gpu_time of the offered GPU-time; Poisson "
      "arrivals at offered_load of the GPUs; a pod that fits nowhere when it arrives is refused "
      "(no queue).",
      "Policies. linkfit: the real `linkfit serve` through kube-scheduler's pipeline (in-tree "
      "LeastAllocated + extender score x 1 x 10), the pods asking NICs (nic-closeness pxb, "
      "preferred: the shipped defaults); the NICs are read from each pod's allocation record "
      "(the server's state file). linkfit-rate: the same server under policy.nic_alignment rate (a "
      "node whose NIC is farther than the asked closeness loses no points when the GPU's path "
      "through host memory carries the pod's share of the NIC at its rate). gpu-only-linkfit: the "
      "same server with pods that ask no NIC "
      "(linkfit chooses the GPUs only); the kubelet then hands the NICs: NICs that can take the "
      "share, those on the NUMA nodes of the pod's GPUs first, then any, each in device order "
      "(TopologyManager best-effort). numa-only: the kubelet's TopologyManager single-numa-node "
      "with a NUMA-aware scheduler filter: GPUs and NICs from one NUMA node, first free in device "
      "order, lowest NUMA node first; a pod wider than every NUMA node of a machine (refused "
      "everywhere by single-numa-node) takes the fewest NUMA nodes that hold it (restricted's "
      "rule). pcie-root: DRA-style, every GPU paired with a free NIC under the same PCIe root "
      "complex (pcieRoot matched per GPU-NIC pair: PIX, PXB or PHB between them), the first "
      "assignment in device order, with backtracking. random: a node drawn uniformly among those "
      "where the pod fits, GPUs by the device plugin (go-gpuallocator), NICs as the kubelet hands "
      "them (as gpu-only-linkfit). Every policy sees per-NIC capacity when filtering nodes (n NICs "
      "that can take the share); the baselines score nodes with LeastAllocated, ties at random.",
      "aligned: every GPU of the pod can be paired with a NIC of the pod at PIX or PXB (NCCL's "
      "default GPUDirect RDMA level), each GPU its own NIC: a bipartite matching over the devices "
      "the pod holds, whoever chose them. aligned_choice_existed: placed pods for which, just "
      "before they were placed, some node that passed the in-tree filters had an aligned choice "
      "among its free GPUs and NICs (alloc::PlaceWholeGpusWithNics with nic-closeness pxb "
      "required, i.e. linkfit's exact joint choice); misaligned_though_aligned_existed: of those, "
      "the ones placed misaligned; misaligned_though_aligned_on_its_node: the ones whose own node "
      "had an aligned choice; aligned_rate_where_possible = 1 - the second / the first. "
      "below_nic_rate: placed pods whose estimated rate (below) is less than their NICs' share "
      "at the NIC's rate, i.e. staging cost them bandwidth; "
      "below_nic_rate_though_aligned_existed: of those, the ones with an aligned choice somewhere.",
      "Network rate model (GB/s per GPU): a GPU paired with a NIC at PIX/PXB sends at the NIC's "
      "rate times the share the pod holds (GPUDirect RDMA); any other pair is staged through host "
      "memory and gets the lesser of that and the staged path's rate, link-bandwidth.json's "
      "SYS value for the GPU's PCIe generation (" +
          FormatGbps(staged_gbps[3]) + " gen 3, " + FormatGbps(staged_gbps[4]) + " gen 4, " +
          FormatGbps(staged_gbps[5]) +
          " gen 5: 'traffic is staged through host memory'). A pod's rate is the least over its "
          "GPUs under the pairing that makes it largest: a ring all-reduce across nodes runs at "
          "its slowest member. No contention between pods beyond the shares is modelled.",
      "refused: pods that fitted no node when they arrived (refused_by_gpu_count: by GPUs "
      "asked, index = GPUs); refused_with_gpus_free: of those, the ones some node could have "
      "taken GPU-, CPU- and memory-wise (the NICs were short). broke_whole_machine: pods of "
      "fewer than 8 GPUs placed on an idle machine of 8 GPUs and at least 8 NICs (what an 8-GPU "
      "training pod needs); _though_used_aligned / _though_used_fit: of those, the ones placed "
      "while a node in use had an aligned choice for them / could take them at all.",
      "nic_free_share_without_idle_gpu: free NIC capacity on nodes with no idle GPU (no pod of "
      "this workload can use it), as a share of the cluster's NIC capacity, averaged over "
      "arrivals; nic_free_share_without_close_idle_gpu: free NIC capacity with no idle GPU at "
      "PIX/PXB (usable only staged); idle_gpus_without_nic: idle GPUs on nodes where no NIC has "
      "the smallest share of the demand free (stranded by NICs), mean count; gpu_in_use: busy "
      "GPUs over the cluster's, at arrivals (gpu_in_use_by_machine: per machine kind, in "
      "summary.json).",
  });
}

nlohmann::json NicTargetNotes(const nlohmann::json& results) {
  nlohmann::json notes = nlohmann::json::array();
  const nlohmann::json* linkfit = RowOf(results, "linkfit");
  if (linkfit == nullptr) {
    notes.push_back("Targets (issue 37) not evaluated: the linkfit policy was not run.");
    return notes;
  }
  const int missed = IntField(*linkfit, "misaligned_though_aligned_existed");
  notes.push_back(std::string("Target: 100 % of pods aligned whenever an aligned set exists: ") +
                  (missed == 0 ? "met" : "NOT met") + " (linkfit placed " + std::to_string(missed) +
                  " of the " + std::to_string(IntField(*linkfit, "aligned_choice_existed")) +
                  " pods that had an aligned choice misaligned).");
  const int misaligned = IntField(*linkfit, "misaligned");
  if (const nlohmann::json* numa = RowOf(results, "numa-only")) {
    const int numa_misaligned = IntField(*numa, "misaligned");
    notes.push_back(std::string("Target: at least 10x fewer misaligned pods than numa-only: ") +
                    (numa_misaligned >= 10 * misaligned ? "met" : "NOT met") + " (linkfit " +
                    std::to_string(misaligned) + ", numa-only " + std::to_string(numa_misaligned) +
                    ").");
  } else {
    notes.push_back("Target: 10x fewer misaligned pods than numa-only: not evaluated (not run).");
  }
  if (const nlohmann::json* gpu_only = RowOf(results, "gpu-only-linkfit")) {
    const int refused = IntField(*linkfit, "refused");
    const int gpu_only_refused = IntField(*gpu_only, "refused");
    notes.push_back(std::string("Target: no more pods refused than gpu-only-linkfit: ") +
                    (refused <= gpu_only_refused ? "met" : "NOT met") + " (linkfit " +
                    std::to_string(refused) + ", gpu-only-linkfit " +
                    std::to_string(gpu_only_refused) + ").");
  } else {
    notes.push_back("Target: no more pods refused than gpu-only-linkfit: not evaluated (not run).");
  }
  if (const nlohmann::json* rate = RowOf(results, "linkfit-rate")) {
    notes.push_back("linkfit-rate (policy.nic_alignment rate): refused " +
                    std::to_string(IntField(*rate, "refused")) + ", misaligned " +
                    std::to_string(IntField(*rate, "misaligned")) + ", below their NICs' rate " +
                    std::to_string(IntField(*rate, "below_nic_rate")) + " (linkfit " +
                    std::to_string(IntField(*linkfit, "below_nic_rate")) + ").");
  }
  return notes;
}

}  // namespace linkfit::bench
