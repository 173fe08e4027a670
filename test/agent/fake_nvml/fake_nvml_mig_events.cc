// The fake libnvidia-ml.so.1's MIG API and Xid events (see fake_nvml.cc).
//
// Thread-safety: every function holds fake_nvml::g_mutex while it reads the state.

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "fake_state.h"

namespace {

using fake_nvml::Answering;
using fake_nvml::Device;
using fake_nvml::g_mutex;
using fake_nvml::g_state;
using fake_nvml::Gpu;

const fake_nvml::MigProfile* ProfileByIndex(unsigned profile) {
  for (const auto& entry : g_state.recording.mig_profiles) {
    if (entry.profile == profile) return &entry;
  }
  return nullptr;
}

}  // namespace

extern "C" {

#ifndef FAKE_NVML_WITHOUT_MIG
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                                   unsigned int* pending) {
  std::lock_guard<std::mutex> lock(g_mutex);
  nvmlReturn_t rc = NVML_SUCCESS;
  const Device* gpu = Answering(device, "nvmlDeviceGetMigMode", rc);
  if (gpu == nullptr) return rc;
  if (!gpu->mig) return NVML_ERROR_NOT_SUPPORTED;
  *current = gpu->mig->current;
  *pending = gpu->mig->pending;
  return NVML_SUCCESS;
}
#endif

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(
    nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_t* info) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const Device* gpu = Gpu(device);
  if (gpu == nullptr || info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!gpu->mig) return NVML_ERROR_NOT_SUPPORTED;
  const fake_nvml::MigProfile* entry = ProfileByIndex(profile);
  if (entry == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  std::memset(info, 0, sizeof(*info));
  info->id = entry->id;
  info->sliceCount = entry->slices;
  info->instanceCount = entry->instance_count;
  info->memorySizeMB = entry->memory_mb;
  return NVML_SUCCESS;
}

// `instances` has room for the profile's instanceCount, as NVML's callers size it.
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device,
                                                        unsigned int profile_id,
                                                        nvmlGpuInstance_t* instances,
                                                        unsigned int* count) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const Device* gpu = Gpu(device);
  if (gpu == nullptr || count == nullptr || instances == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!gpu->mig) return NVML_ERROR_NOT_SUPPORTED;
  if (gpu->mig->current != NVML_DEVICE_MIG_ENABLE) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned found = 0;
  for (const auto& gi : g_state.instances) {
    if (gi->gpu != device->gpu || gi->profile_id != profile_id) continue;
    instances[found++] = gi.get();
  }
  *count = found;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t instance,
                                                     nvmlGpuInstanceInfo_t* info) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_state.initialised || instance == nullptr || info == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  info->device = g_state.devices[instance->gpu].get();
  info->id = instance->instance.id;
  info->profileId = instance->profile_id;
  info->placement.start = instance->instance.start;
  info->placement.size = instance->instance.size;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device,
                                                             unsigned int* count) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const Device* gpu = Gpu(device);
  if (gpu == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!gpu->mig) return NVML_ERROR_NOT_SUPPORTED;
  *count = 7;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device,
                                                                  unsigned int index,
                                                                  nvmlDevice_t* mig) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (Gpu(device) == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned seen = 0;
  for (const auto& candidate : g_state.mig_devices) {
    if (candidate->gpu != device->gpu) continue;
    if (seen++ == index) {
      *mig = candidate.get();
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_state.initialised || device == nullptr || !device->mig_device) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  *id = device->gi_id;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *set = new nvmlEventSet_st();
  return NVML_SUCCESS;
}

// The recorded Xids of a device become pending on the set when the device registers for them.
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device,
                                                       unsigned long long types,
                                                       nvmlEventSet_t set) {
  std::lock_guard<std::mutex> lock(g_mutex);
  nvmlReturn_t rc = NVML_SUCCESS;
  const Device* gpu = Answering(device, "nvmlDeviceRegisterEvents", rc);
  if (gpu == nullptr) return rc;
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if ((types & nvmlEventTypeXidCriticalError) == 0) return NVML_SUCCESS;
  for (const unsigned long long xid : gpu->xids) set->pending.emplace_back(device, xid);
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                                  unsigned int timeout_ms) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (set == nullptr || data == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!set->pending.empty()) {
      std::memset(data, 0, sizeof(*data));
      data->device = set->pending.front().first;
      data->eventType = nvmlEventTypeXidCriticalError;
      data->eventData = set->pending.front().second;
      set->pending.pop_front();
      return NVML_SUCCESS;
    }
  }
  // Nothing else will arrive: wait out (a bounded part of) the timeout, as NVML would.
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(timeout_ms, 20u)));
  return NVML_ERROR_TIMEOUT;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  delete set;
  return NVML_SUCCESS;
}

}  // extern "C"
