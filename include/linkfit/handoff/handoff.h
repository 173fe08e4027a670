#pragma once

// The node side's decision (../shared/design/node-handoff.md §4.3): when the runtime creates a
// container, which devices it gets. Keyed by (pod UID, container name), both from the NRI event;
// the plan is the pod's linkfit.io/allocation (sandbox annotation, written with the Binding);
// the node's facts are the agent's discovery; the Ledger holds what live containers were given.
//
//   plan for the key          kubelet label   decision
//   valid, no ledger conflict equal           inject the plan
//   valid, no ledger conflict differs/absent  inject the plan, mark a mismatch (kStrict: refuse)
//   invalid, stale, another node or pod,      any             refuse, with the reason
//     a device missing or unhealthy, a
//     ledger conflict
//   MIG instance not there yet                any             refuse (the kubelet retries)
//   no plan for the pod       present         kAdoptIfFree: the kubelet's devices if no live
//                                             container holds them; else refuse. kRefuse: refuse
//   no plan for the container absent          no GPU: NVIDIA_VISIBLE_DEVICES=void, no RDMA device
//
// Shares are compared by physical GPU (UUID), MIG instances by their UUID resolved from parent
// GPU and placement. RDMA NICs go with the plan like GPUs: by name, each present on the node
// (with the PCI bus id the plan names, if it names one) with its port up; a whole NIC (1000
// thousandths) is held by one pod, shares of one NIC by several up to 1000 in all. The kubelet's
// NIC IDs (a NIC's name, "<name>::<k>" for a share replica) are compared with the plan's NICs
// only where the kubelet gave some: a pod that asks NICs by annotation alone requests no NIC
// resource, and its containers carry no NIC label.
//
// Thread-safety: Decide is a pure function; a Ledger is used by one thread (the NRI handler).

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "linkfit/common/result.h"
#include "linkfit/topology/spec.h"

namespace linkfit::handoff {

struct ContainerKey {
  std::string pod_uid;
  std::string container;
  friend auto operator<=>(const ContainerKey&, const ContainerKey&) = default;
};

// What one container is given: physical devices by UUID.
struct HandedDevices {
  std::vector<std::string> gpus;                       // whole GPU UUIDs
  std::vector<std::string> mig;                        // MIG instance UUIDs
  std::vector<std::pair<std::string, int>> shares;     // GPU UUID, thousandths
  std::vector<std::pair<std::string, int>> nics = {};  // RDMA NIC name, thousandths (1000: whole)
  bool empty() const { return gpus.empty() && mig.empty() && shares.empty() && nics.empty(); }
  friend bool operator==(const HandedDevices&, const HandedDevices&) = default;
};

// The devices live containers hold, with share units. Rebuilt from the runtime's Synchronize at
// every (re)connect, so it never outlives the truth.
class Ledger {
 public:
  // The first holder (another pod) that `devices` would collide with, or nullopt: a whole GPU or
  // MIG instance held by another pod, a whole GPU shared by another pod, or shares beyond 1000;
  // a NIC held by other pods beyond 1000 thousandths (a whole NIC counts 1000).
  std::optional<std::string> Conflict(const ContainerKey& key, const HandedDevices& devices) const;
  // Records the container's devices (replacing what the key held).
  void Hold(const ContainerKey& key, HandedDevices devices);
  void Release(const ContainerKey& key);
  void ReleasePod(const std::string& pod_uid);
  std::size_t containers() const { return held_.size(); }
  const std::map<ContainerKey, HandedDevices>& held() const { return held_; }

 private:
  std::map<ContainerKey, HandedDevices> held_;
};

struct HandoffRequest {
  std::string node_name;
  std::string pod_uid;
  std::string container;
  std::optional<std::string> plan;  // the sandbox's linkfit.io/allocation annotation
  // The device IDs the kubelet allocated (the device plugin's label), when there is one.
  std::optional<std::vector<std::string>> kubelet_ids;
};

enum class MismatchPolicy { kPlanWins, kStrict };
enum class UnplannedPolicy { kAdoptIfFree, kRefuse };

struct HandoffDecision {
  enum class Kind { kInject, kRefuse, kNoGpu };
  Kind kind = Kind::kNoGpu;
  HandedDevices devices;  // kInject
  std::string reason;     // kRefuse: why (what `kubectl describe` shows); kInject: a note
  bool mismatch = false;  // the kubelet's label differs from the plan
  // kInject: the port of each of devices.nics that NCCL and UCX are pointed at, from the node's
  // facts (NicPortOf); a NIC missing here is used through port 1.
  std::map<std::string, int> nic_ports = {};
};

HandoffDecision Decide(const HandoffRequest& request, const topology::TopologySpec& node,
                       const Ledger& ledger, MismatchPolicy mismatch = MismatchPolicy::kPlanWins,
                       UnplannedPolicy unplanned = UnplannedPolicy::kAdoptIfFree);

// How the NICs a container is handed reach it, besides their device files (nri_plugin.h).
struct NicHandoffOptions {
  // The environment NCCL and UCX read (NicEnvironment); off: none is set.
  bool env = true;
  // The CDI kind of the node's RDMA devices ("vendor/class", e.g. "nvidia.com/rdma"), where a CDI
  // spec names each NIC by its RDMA device name; "" = the NICs have no CDI names.
  std::string cdi_kind;
  // The NICs whose CDI device `cdi_kind=<name>` the node's CDI specs declare, each with whether
  // injecting it brings /dev/infiniband/rdma_cm (cdi_specs.h); the others go as device files.
  // nullopt: not known, every NIC is taken as declared with what it needs.
  std::optional<std::map<std::string, bool>> cdi_declared = std::nullopt;
  // Whether NIC `name` goes by its CDI name (given a runtime that injects CDI).
  bool ByCdi(const std::string& name) const {
    return !cdi_kind.empty() && (!cdi_declared || cdi_declared->count(name) != 0);
  }
  // Whether one of `nics` (name, thousandths) going by its CDI name brings rdma_cm, so the
  // container needs no rdma_cm device file; with cdi_declared unknown, any NIC going by CDI.
  bool CdiBringsRdmaCm(const std::vector<std::pair<std::string, int>>& nics) const;
};

// What the runtime is told (NRI ContainerAdjustment): CDI device names where the runtime injects
// CDI (containerd >= 2.1, CRI-O >= 1.34; NVIDIA's CDI spec with UUID names, and for NICs
// `nics.cdi_kind=<name>` where the NICs have CDI names), and always NVIDIA_VISIBLE_DEVICES with
// the UUIDs ("void" for a container without GPUs), plus the share limits for an isolation layer,
// and the NICs' environment (NicEnvironment) where `nics.env`.
struct Adjustment {
  std::vector<std::string> cdi_devices;
  std::vector<std::pair<std::string, std::string>> env;
};
Adjustment AdjustmentFor(const HandoffDecision& decision, bool cdi,
                         const NicHandoffOptions& nics = {});

// The port of an RDMA device that NCCL and UCX are pointed at: the port discovery keeps for it
// (topology::NicSpec::port: its lowest-numbered ACTIVE port, else its lowest), port 1 for a NIC
// the node does not list.
int NicPortOf(const topology::TopologySpec& node, const std::string& nic);
// The environment of a container handed `nics` (RDMA device name and port, in plan order):
//   NCCL_IB_HCA      "=mlx5_0:1,mlx5_3:2"  exactly these HCAs and ports (the leading '=' makes
//                                          NCCL match names exactly: mlx5_1 never means mlx5_10)
//   UCX_NET_DEVICES  "mlx5_0:1,mlx5_3:2"
// Empty for no NICs.
std::vector<std::pair<std::string, std::string>> NicEnvironment(
    const std::vector<std::pair<std::string, int>>& nics);

// Whether a runtime, as its NRI Configure names it ("containerd" "v2.1.0", "cri-o" "1.34.1"),
// injects the CDI devices of an NRI adjustment: containerd >= 2.1, CRI-O >= 1.34. Older ones
// ignore them, and the container gets its devices through NVIDIA_VISIBLE_DEVICES alone.
bool RuntimeInjectsCdi(std::string_view runtime_name, std::string_view runtime_version);

// The hand-off modes a node can report are topology::kHandoffModes (topology/spec.h).

}  // namespace linkfit::handoff
