#pragma once

// The state of the fake libnvidia-ml.so.1 (fake_nvml.cc, fake_nvml_mig_events.cc): the recording
// loaded at nvmlInit_v2 and the handles NVML gives out for it, shared by the exported functions.
//
// Thread-safety: every access holds g_mutex.

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "agent/gpu_nvml_api.h"
#include "recording.h"

#define FAKE_NVML_EXPORT __attribute__((visibility("default")))

struct nvmlDevice_st {
  bool mig_device = false;
  std::size_t gpu = 0;  // the GPU (for a MIG device: its parent)
  unsigned gi_id = 0;   // a MIG device's GPU instance
  std::string uuid;
};
struct nvmlGpuInstance_st {
  std::size_t gpu = 0;
  fake_nvml::GpuInstance instance;
  unsigned profile_id = 0;
};
struct nvmlEventSet_st {
  std::deque<std::pair<nvmlDevice_t, unsigned long long>> pending;
};

namespace fake_nvml {

struct State {
  bool initialised = false;
  int references = 0;  // nvmlInit_v2 calls not yet matched by nvmlShutdown
  Recording recording;
  std::vector<std::unique_ptr<nvmlDevice_st>> devices;      // one per GPU
  std::vector<std::unique_ptr<nvmlDevice_st>> mig_devices;  // one per GPU instance
  std::vector<std::unique_ptr<nvmlGpuInstance_st>> instances;
};

extern std::mutex g_mutex;
extern State g_state;

// The recorded GPU behind a whole-GPU handle of the current initialisation, or nullptr.
const Device* Gpu(nvmlDevice_t device);
// NVML_SUCCESS, or the error the recording makes `function` return for `gpu`.
nvmlReturn_t Injected(const Device& gpu, const char* function);
// The GPU behind `device` when `function` may answer for it; `rc` says why not otherwise.
const Device* Answering(nvmlDevice_t device, const char* function, nvmlReturn_t& rc);

}  // namespace fake_nvml
