#pragma once

// GpuRequest: what a pod asks of linkfit, read from its resources and its linkfit.io/
// annotations (the product's public API, documented in README.md):
//
//   resources (requests or limits of containers / init containers):
//     nvidia.com/gpu: K               K whole GPUs
//     nvidia.com/mig-<profile>: N     N MIG instances of <profile> (mixed strategy)
//     <shared resource>: M            M thousandths of one GPU (default linkfit.io/gpu-share)
//   annotations:
//     linkfit.io/gpus                 count of GPUs when not in resources (whole, or the number of
//                                     distinct GPUs for shares, or MIG instances)
//     linkfit.io/closeness            nvlink | pcie-switch | numa | socket | node
//     linkfit.io/closeness-policy     required | preferred (default preferred)
//     linkfit.io/mig-profile          a MIG profile, e.g. 3g.40gb
//     linkfit.io/gpu-share            thousandths of one GPU, 1..1000
//     linkfit.io/gpu-model            allowed GPU models, '|' or ',' separated, matched as
//                                     case-insensitive substrings of the node's GPU model
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
  alloc::NicRequest nics;               // RDMA NICs asked for with the GPUs (none by default)
  // The pod's CPU (thousandths of a core) and memory (bytes) requests: never checked by linkfit
  // (kube-scheduler's in-tree filters own them), recorded at bind and used by scoring.
  std::int64_t cpu_milli = 0;
  std::int64_t memory_bytes = 0;

  // "4 GPUs, nvlink required", "1x 3g.40gb", "2 GPUs x 300/1000 shared".
  std::string Describe() const;
  // Whole-GPU equivalents requested (for packing scores).
  double GpuEquivalents() const;
  friend bool operator==(const GpuRequest&, const GpuRequest&) = default;
};

struct RequestDefaults {
  std::string shared_gpu_resource = "linkfit.io/gpu-share";
  alloc::Closeness closeness = alloc::Closeness::kNode;
  alloc::ClosenessPolicy policy = alloc::ClosenessPolicy::kPreferred;
};

Result<GpuRequest> ParseGpuRequest(const kube::PodView& pod, const RequestDefaults& defaults);

// Whether a node's GPU model satisfies the request's model constraint.
bool ModelAllowed(const GpuRequest& request, const std::string& node_gpu_model);

}  // namespace linkfit::extender
