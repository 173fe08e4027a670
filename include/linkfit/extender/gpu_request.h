#pragma once

// GpuRequest: what a pod asks of linkfit, read from its resources and its linkfit.io/
// annotations (the product's public API, documented in README.md):
//
//   resources (requests or limits of containers / init containers):
//     nvidia.com/gpu: K               K whole GPUs
//     nvidia.com/mig-<profile>: N     N MIG instances of <profile> (mixed strategy)
//     <shared resource>: M            M thousandths of GPUs in all, spread evenly over the
//                                     pod's GPUs (linkfit.io/gpus, else one); default
//                                     linkfit.io/gpu-share
//     <NIC resource>: N               N whole RDMA NICs (default linkfit.io/rdma; also each of
//                                     the config's nic_resources, e.g. rdma/hca)
//     <NIC share resource>: M         M thousandths of NICs in all, spread evenly over the pod's
//                                     NICs (default linkfit.io/rdma-share)
//   annotations:
//     linkfit.io/gpus                 count of GPUs when not in resources (whole, or the number of
//                                     distinct GPUs for shares, or MIG instances)
//     linkfit.io/closeness            nvlink | pcie-switch | numa | socket | node
//     linkfit.io/closeness-policy     required | preferred (default preferred)
//     linkfit.io/mig-profile          a MIG profile, e.g. 3g.40gb
//     linkfit.io/gpu-share            thousandths of each GPU, 1..1000
//     linkfit.io/gpu-model            allowed GPU models, '|' or ',' separated, matched as
//                                     case-insensitive substrings of the node's GPU model
//     linkfit.io/nics                 per-gpu | a count of NICs, 1..128
//     linkfit.io/nic-closeness        pix | pxb | numa | node (default: the config's
//                                     nic_closeness, pxb)
//     linkfit.io/nic-closeness-policy required | preferred (default preferred)
//     linkfit.io/nic-share            thousandths of each NIC, 1..1000
//
// Resources are the pod's effective request (kube::PodView::requests: app containers summed,
// init containers as Kubernetes counts them), NIC resources exactly like nvidia.com/gpu.
//
// Share resources count as the kubelet counts them: the node agent's device plugin serves one
// replica ID per thousandth of a device, and the kubelet allocates M IDs for a request of M, so
// M is the pod's thousandths of all its shared devices together. Each device gets M / count
// (count: linkfit.io/gpus for GPUs, the pod's NICs below for NICs); a total that does not divide
// evenly, or more than 1000 of each, is an error naming the resource, the total and the count.
// The annotations linkfit.io/gpu-share and linkfit.io/nic-share say thousandths of EACH device;
// given beside the resource they must agree (total == each x count). One device: both read alike.
//
// NICs (alloc::NicRequest). A pod asks for NICs when a NIC resource, the NIC share resource,
// linkfit.io/nics or linkfit.io/nic-share is there; pods without GPUs, with GPU shares or MIG
// instances may ask too. The count is the whole-NIC resource's if given, else linkfit.io/nics,
// else one per GPU (one for a pod without GPUs). The share is linkfit.io/nic-share or the share
// resource spread over that count (1000 = the whole NIC); without either, whole NICs. A pod of
// several MIG instances that asks the share resource names its count (linkfit.io/nics): how many
// GPUs its instances lie on is known only once placed. Contradictions are errors naming
// both sources: two whole-NIC resources, a whole-NIC resource with a share, linkfit.io/nics
// (per-gpu agrees when the pod's GPU count is known and equal) or linkfit.io/nic-share
// disagreeing with a resource. As linkfit.io/closeness on a pod without GPUs,
// linkfit.io/nic-closeness(-policy) on a pod that asks for no NIC is checked and then has no
// effect.
//
// A bad value is never ignored: parsing fails with a message naming the annotation or resource.
//
// Thread-safety: plain values and pure functions.

#include <cstdint>
#include <string>
#include <vector>

#include "linkfit/alloc/closeness.h"
#include "linkfit/alloc/nic_choice.h"
#include "linkfit/common/result.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/kube/types.h"

namespace linkfit::extender {

// The keys live in kube/annotations.h (the one home of the linkfit.io/ contract).
using kube::kAnnotationCloseness;
using kube::kAnnotationClosenessPolicy;
using kube::kAnnotationGpuModel;
using kube::kAnnotationGpus;
using kube::kAnnotationGpuShare;
using kube::kAnnotationMigProfile;
using kube::kAnnotationNicCloseness;
using kube::kAnnotationNicClosenessPolicy;
using kube::kAnnotationNics;
using kube::kAnnotationNicShare;
using kube::kGpuResource;
using kube::kMigResourcePrefix;

struct GpuRequest {
  enum class Kind { kNone, kWhole, kMig, kShared };
  Kind kind = Kind::kNone;
  int count = 0;  // whole GPUs, MIG instances, or distinct shared GPUs
  alloc::Closeness closeness = alloc::Closeness::kNode;
  alloc::ClosenessPolicy policy = alloc::ClosenessPolicy::kPreferred;
  std::string mig_profile;              // kMig
  int share_milli = 0;                  // kShared: per GPU
  std::vector<std::string> gpu_models;  // lower-case substrings; empty = any model
  // The pod's CPU (thousandths of a core) and memory (bytes) requests: never checked by linkfit
  // (kube-scheduler's in-tree filters own them), recorded at bind and used by scoring.
  std::int64_t cpu_milli = 0;
  std::int64_t memory_bytes = 0;
  // RDMA NICs beside the GPUs; count 0 (NicRequest{}) when the pod asks for none. `nics.rails`
  // is not the pod's to say: the extender fills it from the pod's group (ClusterCache).
  alloc::NicRequest nics;
  // The pod's group, "namespace/name": linkfit.io/group (annotation, else label), else the
  // coscheduling plugin's pod-group label (scheduling.x-k8s.io/pod-group, or the older
  // pod-group.scheduling.sigs.k8s.io); "" for none. Members prefer the NIC rails the group holds.
  std::string group;

  // Whether the pod asks linkfit for devices: GPUs or NICs. A pod that does not passes every
  // filter and holds nothing; kind == kNone alone does not say so (a pod may ask only NICs).
  bool WantsDevices() const { return kind != Kind::kNone || nics.wanted(); }
  // "4 GPUs, nvlink required", "1x 3g.40gb", "2 GPUs x 300/1000 shared", and the NICs when asked:
  // "4 GPUs, nvlink required; 1 NIC per GPU at pxb", "no GPUs; 1 NIC x 250/1000 at pxb".
  std::string Describe() const;
  // The GPU part of Describe alone.
  std::string DescribeGpus() const;
  // Whole-GPU equivalents requested (for packing scores).
  double GpuEquivalents() const;
  friend bool operator==(const GpuRequest&, const GpuRequest&) = default;
};

struct RequestDefaults {
  std::string shared_gpu_resource = "linkfit.io/gpu-share";
  alloc::Closeness closeness = alloc::Closeness::kNode;
  alloc::ClosenessPolicy policy = alloc::ClosenessPolicy::kPreferred;
  // NICs: the whole-NIC resource, other resources counted like it (a cluster's RDMA device
  // plugins: rdma/hca, rdma/rdma_shared_device_a), the share resource, and the closeness of a
  // pod that names none.
  std::string nic_resource = kube::kNicResource;
  std::vector<std::string> nic_resources;
  std::string nic_share_resource = kube::kNicShareResource;
  alloc::NicCloseness nic_closeness = alloc::NicCloseness::kPxb;
};

Result<GpuRequest> ParseGpuRequest(const kube::PodView& pod, const RequestDefaults& defaults);

// Whether a node's GPU model satisfies the request's model constraint.
bool ModelAllowed(const GpuRequest& request, const std::string& node_gpu_model);

}  // namespace linkfit::extender
