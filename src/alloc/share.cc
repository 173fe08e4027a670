// Fractional and time-sliced GPU shares (see share.h).

#include "linkfit/alloc/share.h"

#include <algorithm>
#include <cstddef>
#include <exception>
#include <string>
#include <tuple>
#include <vector>

namespace linkfit::alloc {
namespace {

bool ValidReplicas(int replicas) { return replicas >= 0 && replicas <= kMilliPerGpu; }

// Returns an error message for a view whose state cannot be, or an empty string.
std::string CheckView(const SharedGpuView& gpu) {
  const std::string name = "GPU " + std::to_string(gpu.index);
  if (!ValidReplicas(gpu.replicas)) {
    return name + ": time-slicing replicas " + std::to_string(gpu.replicas) + " is outside 0..1000";
  }
  const int used = gpu.state.used_milli();
  const int pods = gpu.state.pods();
  if (used > kMilliPerGpu) return name + ": " + std::to_string(used) + " milli used of 1000";
  if (gpu.replicas == 0) {
    if ((pods == 0) != (used == 0)) {
      return name + ": " + std::to_string(pods) + " sharing pods but " + std::to_string(used) +
             " milli used";
    }
  } else if (pods > gpu.replicas || used != TimeSliceMilli(gpu.replicas, pods)) {
    return name + ": " + std::to_string(pods) + " pods and " + std::to_string(used) +
           " milli used do not match " + std::to_string(gpu.replicas) + " time-slicing replicas";
  }
  return {};
}

std::string JoinIndexes(const std::vector<int>& indexes) {
  std::string out;
  for (std::size_t i = 0; i < indexes.size(); ++i) {
    if (i > 0) out += (i + 1 == indexes.size()) ? " and " : ", ";
    out += std::to_string(indexes[i]);
  }
  return out;
}

}  // namespace

int TimeSliceMilli(int replicas, int slots) {
  if (replicas < 1 || replicas > kMilliPerGpu || slots < 0 || slots > replicas) return -1;
  return slots * kMilliPerGpu / replicas;
}

int SharedGpuState::NextShareMilli(int replicas, int milli) const {
  if (!ValidReplicas(replicas)) return -1;
  if (replicas == 0) {
    if (milli < 1 || milli > kMilliPerGpu) return -1;
    return milli <= free_milli() ? milli : -1;
  }
  if (pods_ >= replicas) return -1;
  const int next = TimeSliceMilli(replicas, pods_ + 1) - TimeSliceMilli(replicas, pods_);
  return next <= free_milli() ? next : -1;
}

int SharedGpuState::Take(int replicas, int milli) {
  const int taken = NextShareMilli(replicas, milli);
  if (taken < 0 || pods_ == UINT16_MAX) return -1;
  used_milli_ = static_cast<std::uint16_t>(used_milli_ + taken);
  pods_ = static_cast<std::uint16_t>(pods_ + 1);
  return taken;
}

bool SharedGpuState::Release(int replicas, int milli) {
  if (!ValidReplicas(replicas) || pods_ == 0) return false;
  int used_after = 0;
  if (replicas == 0) {
    if (milli < 1 || milli > used_milli_) return false;
    used_after = used_milli_ - milli;
    if (pods_ == 1 && used_after != 0) return false;
  } else {
    used_after = TimeSliceMilli(replicas, pods_ - 1);
    if (used_after < 0) return false;
  }
  used_milli_ = static_cast<std::uint16_t>(used_after);
  pods_ = static_cast<std::uint16_t>(pods_ - 1);
  return true;
}

Result<ShareDecision> ChooseShares(std::span<const SharedGpuView> gpus, const ShareRequest& request,
                                   SharePolicy policy) {
  const bool fraction = request.kind == ShareKind::kFraction;
  if (fraction && (request.milli < 1 || request.milli > kMilliPerGpu)) {
    return MakeError("share of " + std::to_string(request.milli) +
                     " milli is outside 1..1000 thousandths of a GPU");
  }
  if (request.count < 1 || static_cast<std::size_t>(request.count) > gpus.size()) {
    return MakeError("share count " + std::to_string(request.count) + " is outside 1.." +
                     std::to_string(gpus.size()) +
                     " (the node's GPUs; shares go to distinct GPUs)");
  }
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    std::string problem = CheckView(gpus[i]);
    if (!problem.empty()) return MakeError(problem);
    for (std::size_t j = 0; j < i; ++j) {
      if (gpus[j].index == gpus[i].index) {
        return MakeError("GPU " + std::to_string(gpus[i].index) + " is listed twice");
      }
    }
  }
  try {
    struct Option {
      int free_after;
      int index;
      int milli;
    };
    std::vector<Option> options;
    int matching_kind = 0;
    for (const SharedGpuView& gpu : gpus) {
      if (!gpu.eligible || (gpu.replicas == 0) != fraction) continue;
      ++matching_kind;
      const int taken = gpu.state.NextShareMilli(gpu.replicas, request.milli);
      if (taken < 0) continue;
      options.push_back(Option{gpu.state.free_milli() - taken, gpu.index, taken});
    }
    ShareDecision decision;
    const std::string what =
        fraction ? std::to_string(request.milli) + " free milli" : "a free time-slice slot";
    if (options.size() < static_cast<std::size_t>(request.count)) {
      std::vector<int> have;
      for (const Option& option : options) have.push_back(option.index);
      std::sort(have.begin(), have.end());
      decision.reason = "needs " + std::to_string(request.count) + " GPU" +
                        (request.count == 1 ? "" : "s") + " with " + what +
                        (request.count == 1 ? "" : " each") + "; ";
      if (have.empty()) {
        decision.reason += "none has";
      } else {
        decision.reason += "only GPU" + std::string(have.size() == 1 ? " " : "s ") +
                           JoinIndexes(have) + (have.size() == 1 ? " has" : " have");
      }
      if (matching_kind == 0) {
        decision.reason += fraction ? " (no eligible GPU takes fractional shares)"
                                    : " (no eligible GPU is time-sliced)";
      }
      return decision;
    }
    std::sort(options.begin(), options.end(), [policy](const Option& a, const Option& b) {
      if (policy == SharePolicy::kPack) {
        return std::tie(a.free_after, a.index) < std::tie(b.free_after, b.index);
      }
      return std::make_tuple(-a.free_after, a.index) < std::make_tuple(-b.free_after, b.index);
    });
    decision.fits = true;
    for (std::size_t i = 0; i < static_cast<std::size_t>(request.count); ++i) {
      decision.gpus.push_back(options[i].index);
      decision.milli.push_back(options[i].milli);
    }
    return decision;
  } catch (const std::exception& e) {
    return MakeError(std::string("share planning failed: ") + e.what());
  }
}

}  // namespace linkfit::alloc
