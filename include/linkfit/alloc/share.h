#pragma once

// Shared GPUs: fractional shares and time-slicing, accounted per physical GPU.
//
// Units. A share is measured in thousandths of a GPU ("milli", 1..1000), as the Alibaba openb
// trace's `gpu_milli`. A GPU takes either kind of share, chosen by its configuration:
//
//   * fractional (replicas == 0): each pod takes the milli it asks for; the GPU is full at 1000.
//   * time-sliced (replicas == N >= 1, the NVIDIA device plugin's `replicas`): the GPU offers N
//     slots and each pod takes one. Slots are modelled in milli with the rounding chosen so that N
//     slots fill the GPU exactly: k slots use floor(k * 1000 / N) milli, so the (k+1)-th slot
//     costs floor((k+1) * 1000 / N) - floor(k * 1000 / N), i.e. 1000 / N rounded down or up
//     (N = 3: 333, 333, 334). Slots are interchangeable, so the milli used is a function of the
//     slot count alone and releasing any slot restores floor((k-1) * 1000 / N).
//
// A GPU held whole by a pod, or in MIG mode, cannot take shares, and a GPU with shares cannot be
// given whole; the caller (the state module) knows which GPUs are which and marks the ones that
// may take shares as eligible.
//
// A request is `count` shares on `count` *distinct* GPUs. kPack chooses the GPUs left with the
// least free milli after placement (best fit, so untouched GPUs stay whole for whole-GPU pods);
// kSpread the ones left with the most. Ties go to the lowest GPU index. No topology is used.
//
// Thread-safety: plain values and pure functions.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "linkfit/common/result.h"

namespace linkfit::alloc {

inline constexpr int kMilliPerGpu = 1000;

// Returns the milli that `slots` slots of a GPU time-sliced into `replicas` use:
// floor(slots * 1000 / replicas). REQUIRES: 1 <= replicas <= 1000, 0 <= slots <= replicas.
int TimeSliceMilli(int replicas, int slots);

// The share accounting of one GPU (4 bytes).
class SharedGpuState {
 public:
  SharedGpuState() = default;

  int used_milli() const { return used_milli_; }
  int free_milli() const { return kMilliPerGpu - used_milli_; }
  int pods() const { return pods_; }

  // Milli one more pod would take: `milli` on a fractional GPU (replicas == 0), the next slot on
  // a time-sliced one (where `milli` is ignored). Returns -1 if it does not fit or the input is
  // out of range.
  int NextShareMilli(int replicas, int milli) const;

  // Adds one pod's share if it fits; returns the milli taken, or -1 (state unchanged).
  int Take(int replicas, int milli);

  // Removes one pod's share (`milli` as taken; ignored on a time-sliced GPU). Returns false,
  // leaving the state unchanged, if the state holds no such share.
  bool Release(int replicas, int milli);

  friend bool operator==(const SharedGpuState&, const SharedGpuState&) = default;

 private:
  std::uint16_t used_milli_ = 0;
  std::uint16_t pods_ = 0;
};

// One physical GPU as the share planner sees it.
struct SharedGpuView {
  int index = 0;          // the GPU's index on the node (reported back)
  bool eligible = false;  // may take shares: not held whole, not in MIG mode, right model, ...
  int replicas = 0;       // 0: fractional; N >= 1: time-sliced into N slots
  SharedGpuState state;
};

enum class ShareKind : std::uint8_t {
  kFraction,   // `milli` thousandths of a GPU on each of `count` fractional GPUs
  kTimeSlice,  // one slot on each of `count` time-sliced GPUs
};

enum class SharePolicy : std::uint8_t { kPack, kSpread };

struct ShareRequest {
  ShareKind kind = ShareKind::kFraction;
  int count = 1;  // distinct GPUs, 1..number of GPUs passed
  int milli = 0;  // 1..1000 for kFraction; ignored for kTimeSlice
};

struct ShareDecision {
  bool fits = false;
  std::vector<int> gpus;   // when fits: GPU indexes, best first
  std::vector<int> milli;  // when fits: the milli taken on each of `gpus`
  std::string reason;      // when !fits: why, in plain words
};

// Chooses `request.count` distinct GPUs for the request. Bad input (milli outside 1..1000 for a
// fraction, count outside 1..gpus.size(), a GPU view with replicas outside 0..1000 or an
// inconsistent state) is an error; "does not fit" is a decision with a reason.
Result<ShareDecision> ChooseShares(std::span<const SharedGpuView> gpus, const ShareRequest& request,
                                   SharePolicy policy);

}  // namespace linkfit::alloc
