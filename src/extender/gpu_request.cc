#include "linkfit/extender/gpu_request.h"

#include <algorithm>

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

}  // namespace

std::string GpuRequest::Describe() const {
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

  // Resources. The *_source strings name where each kind was asked for, for error messages.
  int whole = 0;
  int share_milli = 0;
  int mig_resource_count = 0;
  std::string whole_source;
  std::string mig_source;
  std::string share_source;
  for (const auto& [name, milli] : pod.requests) {
    if (name == kGpuResource) {
      if (milli == 0) continue;
      LINKFIT_ASSIGN_OR_RETURN(whole, DeviceCount(milli, name));
      if (whole > topology::kMaxGpus) {
        return MakeError("resource " + name + " asks for " + std::to_string(whole) +
                         " GPUs; no node has more than " + std::to_string(topology::kMaxGpus));
      }
      whole_source = "resource " + name;
    } else if (StartsWith(name, kMigResourcePrefix)) {
      if (milli == 0) continue;
      if (!request.mig_profile.empty()) {
        return MakeError("pod requests two MIG profiles (" + request.mig_profile + " and " +
                         name.substr(std::string_view(kMigResourcePrefix).size()) +
                         "); linkfit places one profile per pod");
      }
      request.mig_profile = name.substr(std::string_view(kMigResourcePrefix).size());
      LINKFIT_ASSIGN_OR_RETURN(mig_resource_count, DeviceCount(milli, name));
      request.count = mig_resource_count;
      mig_source = "resource " + name;
    } else if (name == defaults.shared_gpu_resource) {
      if (milli == 0) continue;
      if (milli % 1000 != 0 || milli / 1000 < 1 || milli / 1000 > 1000) {
        return MakeError("resource " + name + " must be 1 to 1000 thousandths of a GPU, got " +
                         std::to_string(static_cast<double>(milli) / 1000.0));
      }
      share_milli = static_cast<int>(milli / 1000);
      share_source = "resource " + name;
    }
  }

  // Annotations.
  int annotated_count = 0;
  if (const std::string* text = Annotation(pod, kAnnotationGpus)) {
    LINKFIT_ASSIGN_OR_RETURN(
        annotated_count, ParseCount(*text, "annotation linkfit.io/gpus", 1, topology::kMaxGpus));
  }
  if (const std::string* text = Annotation(pod, kAnnotationGpuShare)) {
    int annotated_share = 0;
    LINKFIT_ASSIGN_OR_RETURN(annotated_share,
                             ParseCount(*text, "annotation linkfit.io/gpu-share", 1, 1000));
    if (share_milli != 0 && share_milli != annotated_share) {
      return MakeError("annotation linkfit.io/gpu-share (" + *text + ") disagrees with resource " +
                       defaults.shared_gpu_resource);
    }
    share_milli = annotated_share;
    if (share_source.empty()) share_source = "annotation linkfit.io/gpu-share";
  }
  if (const std::string* text = Annotation(pod, kAnnotationMigProfile)) {
    if (text->empty()) return MakeError("annotation linkfit.io/mig-profile is empty");
    if (!request.mig_profile.empty() && request.mig_profile != *text) {
      return MakeError("annotation linkfit.io/mig-profile (" + *text +
                       ") disagrees with resource " + kMigResourcePrefix + request.mig_profile);
    }
    request.mig_profile = *text;
    if (mig_source.empty()) mig_source = "annotation linkfit.io/mig-profile";
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

  const int kinds = (whole > 0) + (!request.mig_profile.empty()) + (share_milli > 0);
  if (kinds > 1) {
    std::string mixed;
    for (const std::string* source : {&whole_source, &mig_source, &share_source}) {
      if (!source->empty()) mixed += (mixed.empty() ? "" : ", ") + *source;
    }
    return MakeError("pod mixes whole GPUs, MIG instances and GPU shares (" + mixed +
                     "); ask for one kind");
  }
  if (whole > 0) {
    if (annotated_count != 0 && annotated_count != whole) {
      return MakeError("annotation linkfit.io/gpus (" + std::to_string(annotated_count) +
                       ") disagrees with resource nvidia.com/gpu (" + std::to_string(whole) + ")");
    }
    request.kind = GpuRequest::Kind::kWhole;
    request.count = whole;
  } else if (!request.mig_profile.empty()) {
    request.kind = GpuRequest::Kind::kMig;
    if (mig_resource_count != 0 && annotated_count != 0 && annotated_count != mig_resource_count) {
      return MakeError("annotation linkfit.io/gpus (" + std::to_string(annotated_count) +
                       ") disagrees with " + mig_source + " (" +
                       std::to_string(mig_resource_count) + ")");
    }
    if (request.count == 0) request.count = annotated_count == 0 ? 1 : annotated_count;
  } else if (share_milli > 0) {
    request.kind = GpuRequest::Kind::kShared;
    request.share_milli = share_milli;
    request.count = annotated_count == 0 ? 1 : annotated_count;
  } else if (annotated_count > 0) {
    request.kind = GpuRequest::Kind::kWhole;
    request.count = annotated_count;
  }
  if (request.kind == GpuRequest::Kind::kWhole && request.count > topology::kMaxGpus) {
    return MakeError("pod requests " + std::to_string(request.count) +
                     " GPUs; no node has more than " + std::to_string(topology::kMaxGpus));
  }
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
