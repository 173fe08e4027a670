#include "linkfit/extender/gpu_request.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "linkfit/common/strings.h"
#include "linkfit/topology/spec.h"

namespace linkfit::extender {
namespace {

const std::string* Annotation(const kube::PodView& pod, const char* key) {
  const auto it = pod.annotations.find(key);
  return it == pod.annotations.end() ? nullptr : &it->second;
}

Result<int> ParseCount(const std::string& text, const char* what, int min, int max) {
  const auto value = ParseInt(text);
  if (!value || *value < min || *value > max) {
    return MakeError(std::string(what) + " must be an integer from " + std::to_string(min) +
                     " to " + std::to_string(max) + ", got " + QuoteForMessage(text));
  }
  return static_cast<int>(*value);
}

// A whole number of devices from a resource quantity in thousandths.
Result<int> DeviceCount(std::int64_t milli, const std::string& resource) {
  if (milli <= 0 || milli % 1000 != 0 || milli / 1000 > 64) {
    return MakeError("resource " + resource +
                     " must be a whole number of devices from 1 to 64, got " +
                     std::to_string(static_cast<double>(milli) / 1000.0));
  }
  return static_cast<int>(milli / 1000);
}

// A share resource's quantity: a whole number of thousandths, at least one. It is the pod's
// thousandths in all, over every device of that kind it shares (SharePerDevice spreads it).
Result<std::int64_t> ShareTotal(std::int64_t milli, const std::string& resource,
                                const char* device) {
  if (milli % 1000 != 0 || milli / 1000 < 1) {
    return MakeError("resource " + resource + " must be a whole number of thousandths of a " +
                     device + " (at least 1), got " +
                     std::to_string(static_cast<double>(milli) / 1000.0));
  }
  return milli / 1000;
}

// The thousandths of each device that a share resource asks for. The kubelet allocates one
// replica ID per thousandth, so the resource is the pod's thousandths in all (`total`), spread
// evenly over its `count` devices; `annotated` (0: none) is the per-device annotation, which
// must agree. Errors name the resource, the total and the count.
Result<int> SharePerDevice(std::int64_t total, int count, const std::string& resource,
                           const char* device, int annotated, const std::string& annotation) {
  const std::string devices = std::to_string(count) + " " + device + (count == 1 ? "" : "s");
  const std::string asked =
      "resource " + resource + " asks " + std::to_string(total) + " thousandths in all over ";
  if (total % count != 0) {
    return MakeError(asked + devices + ", not the same share of each (the resource counts the " +
                     "pod's thousandths of all its " + device + "s together)");
  }
  const std::int64_t each = total / count;
  if (each > 1000) {
    return MakeError(asked + devices + ": " + std::to_string(each) + " of each is more than a " +
                     "whole " + device + " (1000)");
  }
  if (annotated != 0 && annotated != each) {
    return MakeError("annotation " + annotation + " (" + std::to_string(annotated) + " of each " +
                     device + ") disagrees with resource " + resource + " (" +
                     std::to_string(total) + " in all over " + devices + ", " +
                     std::to_string(each) + " of each)");
  }
  return static_cast<int>(each);
}

// What the pod's resources and GPU annotations ask for, and where each kind was asked for (the
// *_source strings, for error messages).
struct GpuSources {
  int whole = 0;
  int share_milli = 0;           // thousandths of each GPU, once settled (SettleGpuShare)
  std::int64_t share_total = 0;  // the share resource: thousandths of all the pod's GPUs
  int annotated_share = 0;       // linkfit.io/gpu-share: thousandths of each GPU
  int mig_resource_count = 0;
  int annotated_count = 0;
  std::string whole_source;
  std::string mig_source;
  std::string share_source;
  std::string share_resource;  // the share resource's name where the pod requests it
};

Result<void> ReadGpuResources(const kube::PodView& pod, const RequestDefaults& defaults,
                              GpuRequest& request, GpuSources& gpus) {
  for (const auto& [name, milli] : pod.requests) {
    if (milli == 0) continue;
    if (name == kGpuResource) {
      LINKFIT_ASSIGN_OR_RETURN(gpus.whole, DeviceCount(milli, name));
      if (gpus.whole > topology::kMaxGpus) {
        return MakeError("resource " + name + " asks for " + std::to_string(gpus.whole) +
                         " GPUs; no node has more than " + std::to_string(topology::kMaxGpus));
      }
      gpus.whole_source = "resource " + name;
    } else if (StartsWith(name, kMigResourcePrefix)) {
      if (!request.mig_profile.empty()) {
        return MakeError("pod requests two MIG profiles (" + request.mig_profile + " and " +
                         name.substr(std::string_view(kMigResourcePrefix).size()) +
                         "); linkfit places one profile per pod");
      }
      request.mig_profile = name.substr(std::string_view(kMigResourcePrefix).size());
      LINKFIT_ASSIGN_OR_RETURN(gpus.mig_resource_count, DeviceCount(milli, name));
      request.count = gpus.mig_resource_count;
      gpus.mig_source = "resource " + name;
    } else if (name == defaults.shared_gpu_resource) {
      LINKFIT_ASSIGN_OR_RETURN(gpus.share_total, ShareTotal(milli, name, "GPU"));
      gpus.share_source = "resource " + name;
      gpus.share_resource = name;
    }
  }
  return {};
}

Result<void> ReadGpuAnnotations(const kube::PodView& pod, GpuRequest& request, GpuSources& gpus) {
  if (const std::string* text = Annotation(pod, kAnnotationGpus)) {
    LINKFIT_ASSIGN_OR_RETURN(gpus.annotated_count, ParseCount(*text, "annotation linkfit.io/gpus",
                                                              1, topology::kMaxGpus));
  }
  if (const std::string* text = Annotation(pod, kAnnotationGpuShare)) {
    LINKFIT_ASSIGN_OR_RETURN(gpus.annotated_share,
                             ParseCount(*text, "annotation linkfit.io/gpu-share", 1, 1000));
    if (gpus.share_source.empty()) gpus.share_source = "annotation linkfit.io/gpu-share";
  }
  if (const std::string* text = Annotation(pod, kAnnotationMigProfile)) {
    if (text->empty()) return MakeError("annotation linkfit.io/mig-profile is empty");
    if (!request.mig_profile.empty() && request.mig_profile != *text) {
      return MakeError("annotation linkfit.io/mig-profile (" + *text +
                       ") disagrees with resource " + kMigResourcePrefix + request.mig_profile);
    }
    request.mig_profile = *text;
    if (gpus.mig_source.empty()) gpus.mig_source = "annotation linkfit.io/mig-profile";
  }
  if (const std::string* text = Annotation(pod, kAnnotationCloseness)) {
    auto level = alloc::ParseCloseness(*text);
    if (!level) return WithContext(level.error(), "annotation linkfit.io/closeness");
    request.closeness = *level;
  }
  if (const std::string* text = Annotation(pod, kAnnotationClosenessPolicy)) {
    auto policy = alloc::ParseClosenessPolicy(*text);
    if (!policy) return WithContext(policy.error(), "annotation linkfit.io/closeness-policy");
    request.policy = *policy;
  }
  if (const std::string* text = Annotation(pod, kAnnotationGpuModel)) {
    const char separator = text->find('|') != std::string::npos ? '|' : ',';
    for (std::string_view part : Split(*text, separator)) {
      const std::string model = ToLower(Trim(part));
      if (model.empty()) {
        return MakeError("annotation linkfit.io/gpu-model has an empty model in " +
                         QuoteForMessage(*text));
      }
      request.gpu_models.push_back(model);
    }
  }
  return {};
}

// The thousandths of each GPU: the annotation's, or the share resource spread over the pod's
// GPUs (linkfit.io/gpus, else one).
Result<void> SettleGpuShare(GpuSources& gpus) {
  if (gpus.share_total == 0) {
    gpus.share_milli = gpus.annotated_share;
    return {};
  }
  const int count = gpus.annotated_count == 0 ? 1 : gpus.annotated_count;
  LINKFIT_ASSIGN_OR_RETURN(gpus.share_milli,
                           SharePerDevice(gpus.share_total, count, gpus.share_resource, "GPU",
                                          gpus.annotated_share, kAnnotationGpuShare));
  return {};
}

// The request's kind and count from what resources and annotations asked for.
Result<void> SettleGpuKind(GpuSources& gpus, GpuRequest& request) {
  if (auto settled = SettleGpuShare(gpus); !settled) return settled;
  const int kinds = (gpus.whole > 0) + (!request.mig_profile.empty()) + (gpus.share_milli > 0);
  if (kinds > 1) {
    std::string mixed;
    for (const std::string* source : {&gpus.whole_source, &gpus.mig_source, &gpus.share_source}) {
      if (!source->empty()) mixed += (mixed.empty() ? "" : ", ") + *source;
    }
    return MakeError("pod mixes whole GPUs, MIG instances and GPU shares (" + mixed +
                     "); ask for one kind");
  }
  const int annotated = gpus.annotated_count;
  if (gpus.whole > 0) {
    if (annotated != 0 && annotated != gpus.whole) {
      return MakeError("annotation linkfit.io/gpus (" + std::to_string(annotated) +
                       ") disagrees with resource nvidia.com/gpu (" + std::to_string(gpus.whole) +
                       ")");
    }
    request.kind = GpuRequest::Kind::kWhole;
    request.count = gpus.whole;
  } else if (!request.mig_profile.empty()) {
    request.kind = GpuRequest::Kind::kMig;
    if (gpus.mig_resource_count != 0 && annotated != 0 && annotated != gpus.mig_resource_count) {
      return MakeError("annotation linkfit.io/gpus (" + std::to_string(annotated) +
                       ") disagrees with " + gpus.mig_source + " (" +
                       std::to_string(gpus.mig_resource_count) + ")");
    }
    if (request.count == 0) request.count = annotated == 0 ? 1 : annotated;
  } else if (gpus.share_milli > 0) {
    request.kind = GpuRequest::Kind::kShared;
    request.share_milli = gpus.share_milli;
    request.count = annotated == 0 ? 1 : annotated;
  } else if (annotated > 0) {
    request.kind = GpuRequest::Kind::kWhole;
    request.count = annotated;
  }
  if (request.kind == GpuRequest::Kind::kWhole && request.count > topology::kMaxGpus) {
    return MakeError("pod requests " + std::to_string(request.count) +
                     " GPUs; no node has more than " + std::to_string(topology::kMaxGpus));
  }
  return {};
}

// What the pod's NIC resources and annotations ask for, and where (for error messages).
struct NicSources {
  int whole = 0;  // whole NICs from a resource
  std::string whole_source;
  std::int64_t share_total = 0;  // the share resource: thousandths of all the pod's NICs
  std::string share_resource;    // its name where the pod requests it
  int annotated_share = 0;       // linkfit.io/nic-share: thousandths of each NIC
  std::string share_source;
  const std::string* nics = nullptr;  // linkfit.io/nics as written
  bool per_gpu = false;
  int annotated_count = 0;
};

bool IsNicResource(const std::string& name, const RequestDefaults& defaults) {
  return name == defaults.nic_resource ||
         std::find(defaults.nic_resources.begin(), defaults.nic_resources.end(), name) !=
             defaults.nic_resources.end();
}

Result<void> ReadNicResources(const kube::PodView& pod, const RequestDefaults& defaults,
                              NicSources& nics) {
  for (const auto& [name, milli] : pod.requests) {
    if (milli == 0) continue;
    if (IsNicResource(name, defaults)) {
      if (!nics.whole_source.empty()) {
        return MakeError("pod asks for whole NICs through two resources (" + nics.whole_source +
                         " and resource " + name + "); ask through one");
      }
      if (milli % 1000 != 0 || milli / 1000 < 1 || milli / 1000 > topology::kMaxNics) {
        return MakeError("resource " + name + " must be a whole number of NICs from 1 to " +
                         std::to_string(topology::kMaxNics) + ", got " +
                         std::to_string(static_cast<double>(milli) / 1000.0));
      }
      nics.whole = static_cast<int>(milli / 1000);
      nics.whole_source = "resource " + name;
    } else if (name == defaults.nic_share_resource) {
      LINKFIT_ASSIGN_OR_RETURN(nics.share_total, ShareTotal(milli, name, "NIC"));
      nics.share_source = "resource " + name;
      nics.share_resource = name;
    }
  }
  return {};
}

Result<void> ReadNicAnnotations(const kube::PodView& pod, NicSources& nics,
                                alloc::NicRequest& out) {
  if (const std::string* text = Annotation(pod, kAnnotationNics)) {
    nics.nics = text;
    if (*text == kube::kNicsPerGpu) {
      nics.per_gpu = true;
    } else {
      const auto value = ParseInt(*text);
      if (!value || *value < 1 || *value > topology::kMaxNics) {
        return MakeError("annotation linkfit.io/nics must be per-gpu or an integer from 1 to " +
                         std::to_string(topology::kMaxNics) + ", got " + QuoteForMessage(*text));
      }
      nics.annotated_count = static_cast<int>(*value);
    }
  }
  if (const std::string* text = Annotation(pod, kAnnotationNicShare)) {
    LINKFIT_ASSIGN_OR_RETURN(nics.annotated_share,
                             ParseCount(*text, "annotation linkfit.io/nic-share", 1, 1000));
    if (nics.share_source.empty()) nics.share_source = "annotation linkfit.io/nic-share";
  }
  if (const std::string* text = Annotation(pod, kAnnotationNicCloseness)) {
    auto level = alloc::ParseNicCloseness(*text);
    if (!level) return WithContext(level.error(), "annotation linkfit.io/nic-closeness");
    out.closeness = *level;
  }
  if (const std::string* text = Annotation(pod, kAnnotationNicClosenessPolicy)) {
    auto policy = alloc::ParseClosenessPolicy(*text);
    if (!policy) return WithContext(policy.error(), "annotation linkfit.io/nic-closeness-policy");
    out.policy = *policy;
  }
  return {};
}

// The GPUs a pod holds, as far as its request says (-1 for MIG instances: they may share GPUs).
int GpusHeld(const GpuRequest& request) {
  switch (request.kind) {
    case GpuRequest::Kind::kNone:
      return 0;
    case GpuRequest::Kind::kWhole:
    case GpuRequest::Kind::kShared:
      return request.count;
    case GpuRequest::Kind::kMig:
      break;
  }
  return -1;
}

// The NICs a pod's NIC share resource is spread over: linkfit.io/nics as a count, else one per
// GPU (one for a pod without GPUs, or with one MIG instance). Several MIG instances may lie on one
// GPU or several, known only once placed: such a pod names its count.
Result<int> NicsSharing(const NicSources& nics, const GpuRequest& gpus) {
  if (nics.annotated_count > 0) return nics.annotated_count;
  const int held = gpus.kind == GpuRequest::Kind::kMig && gpus.count == 1 ? 1 : GpusHeld(gpus);
  if (held < 0) {
    return MakeError("resource " + nics.share_resource + " (" + std::to_string(nics.share_total) +
                     " thousandths in all) on a pod of " + std::to_string(gpus.count) +
                     " MIG instances needs annotation linkfit.io/nics as a count: whether they " +
                     "lie on one GPU or several is known only once placed");
  }
  return std::max(held, 1);
}

// The pod's group ("namespace/name", "" for none) from the first of linkfit.io/group (annotation,
// then label) and the coscheduling pod-group labels. A name must be a label value: 1-63
// characters, alphanumerics and '-', '_', '.' (the annotation is held to the same rule).
Result<std::string> ParseGroup(const kube::PodView& pod) {
  const std::pair<const kube::StringMap*, const char*> sources[] = {
      {&pod.annotations, kube::kGroup},
      {&pod.labels, kube::kGroup},
      {&pod.labels, kube::kCoschedulingPodGroup},
      {&pod.labels, kube::kCoschedulingPodGroupLegacy}};
  for (const auto& [map, key] : sources) {
    const auto found = map->find(key);
    if (found == map->end()) continue;
    const std::string& name = found->second;
    const bool valid =
        !name.empty() && name.size() <= 63 && std::all_of(name.begin(), name.end(), [](char ch) {
          return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '-' || ch == '_' ||
                 ch == '.';
        });
    if (!valid) {
      return MakeError(std::string(map == &pod.labels ? "label " : "annotation ") + key + " \"" +
                       name + "\": expected 1-63 letters, digits, '-', '_' or '.'");
    }
    return pod.pod_namespace + "/" + name;
  }
  return std::string();
}

// The NICs a pod asks for (NicRequest{} for none); `gpus` is its GPU request, already parsed.
Result<alloc::NicRequest> ParseNicRequest(const kube::PodView& pod, const RequestDefaults& defaults,
                                          const GpuRequest& gpus) {
  NicSources nics;
  alloc::NicRequest request;
  request.closeness = defaults.nic_closeness;
  if (auto read = ReadNicResources(pod, defaults, nics); !read) return tl::unexpected(read.error());
  if (auto read = ReadNicAnnotations(pod, nics, request); !read) {
    return tl::unexpected(read.error());
  }
  const bool shared = nics.share_total > 0 || nics.annotated_share > 0;
  if (nics.whole == 0 && !shared && nics.nics == nullptr) {
    return alloc::NicRequest{};  // no NIC: a NIC closeness alone is checked, not kept
  }
  if (nics.whole > 0 && shared) {
    return MakeError("pod asks for whole NICs (" + nics.whole_source + ") and a share of a NIC (" +
                     nics.share_source + "); ask for one");
  }
  request.milli = nics.annotated_share > 0 ? nics.annotated_share : alloc::NicRequest::kWhole;
  if (nics.share_total > 0) {
    int count = 0;
    LINKFIT_ASSIGN_OR_RETURN(count, NicsSharing(nics, gpus));
    LINKFIT_ASSIGN_OR_RETURN(request.milli,
                             SharePerDevice(nics.share_total, count, nics.share_resource, "NIC",
                                            nics.annotated_share, kAnnotationNicShare));
  }
  request.count = alloc::NicRequest::kPerGpu;
  if (nics.annotated_count > 0) request.count = nics.annotated_count;
  if (nics.whole > 0) {
    const int held = GpusHeld(gpus);
    const bool agrees = nics.nics == nullptr || nics.annotated_count == nics.whole ||
                        (nics.per_gpu && held >= 0 && std::max(held, 1) == nics.whole);
    if (!agrees) {
      return MakeError("annotation linkfit.io/nics (" + *nics.nics + ") disagrees with " +
                       nics.whole_source + " (" + std::to_string(nics.whole) + ")");
    }
    request.count = nics.whole;
  }
  return request;
}

}  // namespace

std::string GpuRequest::Describe() const {
  if (!nics.wanted()) return DescribeGpus();
  alloc::NicRequest shown = nics;
  // One NIC per GPU of a pod without GPUs is one NIC.
  if (kind == Kind::kNone && shown.count == alloc::NicRequest::kPerGpu) shown.count = 1;
  return DescribeGpus() + "; " + shown.Describe();
}

std::string GpuRequest::DescribeGpus() const {
  switch (kind) {
    case Kind::kNone:
      return "no GPUs";
    case Kind::kWhole: {
      std::string out = std::to_string(count) + (count == 1 ? " GPU" : " GPUs");
      if (closeness != alloc::Closeness::kNode) {
        out += ", " + std::string(alloc::ToString(closeness)) + " " +
               std::string(alloc::ToString(policy));
      }
      return out;
    }
    case Kind::kMig:
      return std::to_string(count) + "x MIG " + mig_profile;
    case Kind::kShared:
      return std::to_string(count) + (count == 1 ? " GPU" : " GPUs") + " x " +
             std::to_string(share_milli) + "/1000 shared";
  }
  return "";
}

double GpuRequest::GpuEquivalents() const {
  switch (kind) {
    case Kind::kWhole:
      return count;
    case Kind::kShared:
      return count * share_milli / 1000.0;
    case Kind::kMig:
      return count / 7.0;
    case Kind::kNone:
      break;
  }
  return 0;
}

Result<GpuRequest> ParseGpuRequest(const kube::PodView& pod, const RequestDefaults& defaults) {
  if (!pod.problems.empty()) {
    std::string joined;
    for (const std::string& problem : pod.problems)
      joined += (joined.empty() ? "" : "; ") + problem;
    return MakeError("pod " + pod.pod_namespace + "/" + pod.name + ": " + joined);
  }
  GpuRequest request;
  request.closeness = defaults.closeness;
  request.policy = defaults.policy;
  if (const auto cpu = pod.requests.find("cpu"); cpu != pod.requests.end()) {
    request.cpu_milli = std::max<std::int64_t>(0, cpu->second);
  }
  if (const auto memory = pod.requests.find("memory"); memory != pod.requests.end()) {
    request.memory_bytes = std::max<std::int64_t>(0, (memory->second + 999) / 1000);
  }
  GpuSources gpus;
  if (auto read = ReadGpuResources(pod, defaults, request, gpus); !read) {
    return tl::unexpected(read.error());
  }
  if (auto read = ReadGpuAnnotations(pod, request, gpus); !read) {
    return tl::unexpected(read.error());
  }
  if (auto settled = SettleGpuKind(gpus, request); !settled) {
    return tl::unexpected(settled.error());
  }
  LINKFIT_ASSIGN_OR_RETURN(request.nics, ParseNicRequest(pod, defaults, request));
  LINKFIT_ASSIGN_OR_RETURN(request.group, ParseGroup(pod));
  return request;
}

bool ModelAllowed(const GpuRequest& request, const std::string& node_gpu_model) {
  if (request.gpu_models.empty()) return true;
  const std::string model = ToLower(node_gpu_model);
  for (const std::string& allowed : request.gpu_models) {
    if (model.find(allowed) != std::string::npos) return true;
  }
  return false;
}

}  // namespace linkfit::extender
