// A fake libnvidia-ml.so.1 for the node agent's tests: it exports the NVML functions the agent
// calls (src/agent/gpu_nvml_api.h, the signatures of NVIDIA's nvml.h) and answers from a
// recording, a JSON file named by the environment variable LINKFIT_FAKE_NVML and read at
// nvmlInit_v2 (test/data/nvml/README.md). A missing or malformed recording makes nvmlInit_v2 fail,
// as a node without a working driver would. Built with FAKE_NVML_WITHOUT_MIG it lacks
// nvmlDeviceGetMigMode (a library without the MIG API), with FAKE_NVML_WITHOUT_TOPOLOGY it lacks
// nvmlDeviceGetTopologyCommonAncestor (not a usable NVML).
//
// Thread-safety: one mutex around the state, as NVML is thread-safe.

#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/gpu_nvml_api.h"

struct nvmlDevice_st {
  bool mig_device = false;
  int index = -1;      // the GPU (for a MIG device: its parent)
  unsigned gi_id = 0;  // a MIG device's GPU instance
  std::string uuid;
};
struct nvmlGpuInstance_st {
  int gpu = -1;
  unsigned id = 0;
  unsigned profile_id = 0;
  unsigned start = 0;
  unsigned size = 0;
};
struct nvmlEventSet_st {
  std::deque<std::pair<nvmlDevice_t, unsigned long long>> pending;
};

namespace {

using nlohmann::json;

struct State {
  bool initialised = false;
  json recording;
  std::vector<std::unique_ptr<nvmlDevice_st>> devices;      // one per GPU
  std::vector<std::unique_ptr<nvmlDevice_st>> mig_devices;  // one per MIG instance
  std::vector<std::unique_ptr<nvmlGpuInstance_st>> instances;
};

std::mutex g_mutex;
State g_state;

const json& Device(int index) { return g_state.recording["devices"][static_cast<size_t>(index)]; }

nvmlReturn_t CopyString(const std::string& value, char* out, unsigned length) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (value.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, value.c_str(), value.size() + 1);
  return NVML_SUCCESS;
}

void FillPci(const std::string& bus_id, nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof(*pci));
  std::snprintf(pci->busId, sizeof(pci->busId), "%s", bus_id.c_str());
  // The legacy form has a 4-digit domain.
  const std::string legacy = bus_id.size() > 12 ? bus_id.substr(bus_id.size() - 12) : bus_id;
  std::snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%s", legacy.c_str());
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  std::sscanf(bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function);
  pci->domain = domain;
  pci->bus = bus;
  pci->device = device;
}

// A device handle that is a GPU the recording has and that is not lost, or nullptr.
const json* Gpu(nvmlDevice_t device) {
  if (!g_state.initialised || device == nullptr || device->mig_device) return nullptr;
  return &Device(device->index);
}

const json* ProfileByIndex(unsigned profile) {
  for (const json& entry : g_state.recording["mig_profiles"]) {
    if (entry["profile"].get<unsigned>() == profile) return &entry;
  }
  return nullptr;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2() {
  std::lock_guard<std::mutex> lock(g_mutex);
  const char* path = std::getenv("LINKFIT_FAKE_NVML");
  if (path == nullptr) return NVML_ERROR_DRIVER_NOT_LOADED;
  std::ifstream in(path);
  if (!in) return NVML_ERROR_DRIVER_NOT_LOADED;
  std::stringstream text;
  text << in.rdbuf();
  State state;
  try {
    state.recording = json::parse(text.str());
    const json& devices = state.recording.at("devices");
    for (size_t i = 0; i < devices.size(); ++i) {
      auto gpu = std::make_unique<nvmlDevice_st>();
      gpu->index = static_cast<int>(i);
      gpu->uuid = devices[i].at("uuid").get<std::string>();
      state.devices.push_back(std::move(gpu));
      const json& mig = devices[i].at("mig");
      if (mig.is_null()) continue;
      for (const json& instance : mig.at("instances")) {
        auto gi = std::make_unique<nvmlGpuInstance_st>();
        gi->gpu = static_cast<int>(i);
        gi->id = instance.at("id").get<unsigned>();
        gi->start = instance.at("start").get<unsigned>();
        gi->size = instance.at("size").get<unsigned>();
        const unsigned profile = instance.at("profile").get<unsigned>();
        bool known = false;
        for (const json& entry : state.recording.at("mig_profiles")) {
          if (entry.at("profile").get<unsigned>() != profile) continue;
          gi->profile_id = entry.at("id").get<unsigned>();
          known = true;
        }
        if (!known) return NVML_ERROR_UNKNOWN;
        state.instances.push_back(std::move(gi));
        auto mig_device = std::make_unique<nvmlDevice_st>();
        mig_device->mig_device = true;
        mig_device->index = static_cast<int>(i);
        mig_device->gi_id = instance.at("id").get<unsigned>();
        mig_device->uuid = instance.at("uuid").get<std::string>();
        state.mig_devices.push_back(std::move(mig_device));
      }
    }
    state.recording.at("ancestors");
    state.recording.at("nvml_version").get<std::string>();
  } catch (const std::exception&) {
    return NVML_ERROR_UNKNOWN;
  }
  state.initialised = true;
  g_state = std::move(state);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_state.initialised) return NVML_ERROR_UNINITIALIZED;
  // Handles stay valid memory (a real NVML would invalidate them); state is dropped at the next
  // init.
  g_state.initialised = false;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_state.initialised) return NVML_ERROR_UNINITIALIZED;
  return CopyString(g_state.recording.value("driver_version", ""), version, length);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_state.initialised) return NVML_ERROR_UNINITIALIZED;
  return CopyString(g_state.recording["nvml_version"].get<std::string>(), version, length);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_state.initialised) return NVML_ERROR_UNINITIALIZED;
  *count = static_cast<unsigned>(g_state.devices.size());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_state.initialised) return NVML_ERROR_UNINITIALIZED;
  if (index >= g_state.devices.size()) return NVML_ERROR_INVALID_ARGUMENT;
  if (Device(static_cast<int>(index)).value("lost", false)) return NVML_ERROR_GPU_IS_LOST;
  *device = g_state.devices[index].get();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_state.initialised || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return CopyString(device->uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const json* gpu = Gpu(device);
  if (gpu == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return CopyString((*gpu)["name"].get<std::string>(), name, length);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const json* gpu = Gpu(device);
  if (gpu == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  memory->total = (*gpu)["memory_mib"].get<unsigned long long>() << 20;
  memory->used = 0;
  memory->free = memory->total;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const json* gpu = Gpu(device);
  if (gpu == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  FillPci((*gpu)["bus_id"].get<std::string>(), pci);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int* node) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const json* gpu = Gpu(device);
  if (gpu == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if ((*gpu)["numa_node"].is_null()) return NVML_ERROR_NOT_SUPPORTED;
  *node = (*gpu)["numa_node"].get<unsigned>();
  return NVML_SUCCESS;
}

#ifndef FAKE_NVML_WITHOUT_TOPOLOGY
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b,
                                                 nvmlGpuTopologyLevel_t* level) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (Gpu(a) == nullptr || Gpu(b) == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const json& row = g_state.recording["ancestors"][static_cast<size_t>(a->index)];
  *level = static_cast<nvmlGpuTopologyLevel_t>(row[static_cast<size_t>(b->index)].get<int>());
  return NVML_SUCCESS;
}
#endif

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t* active) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const json* gpu = Gpu(device);
  if (gpu == nullptr || link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  const json& links = (*gpu)["nvlinks"];
  if (links.empty()) return NVML_ERROR_NOT_SUPPORTED;
  *active = link < links.size() ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t* pci) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const json* gpu = Gpu(device);
  if (gpu == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const json& links = (*gpu)["nvlinks"];
  if (link >= links.size()) return NVML_ERROR_NOT_SUPPORTED;
  FillPci(links[link]["remote_bus_id"].get<std::string>(), pci);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                 nvmlIntNvLinkDeviceType_t* type) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const json* gpu = Gpu(device);
  if (gpu == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const json& links = (*gpu)["nvlinks"];
  if (link >= links.size()) return NVML_ERROR_NOT_SUPPORTED;
  *type = links[link]["remote_type"] == "switch" ? NVML_NVLINK_DEVICE_TYPE_SWITCH
                                                 : NVML_NVLINK_DEVICE_TYPE_GPU;
  return NVML_SUCCESS;
}

#ifndef FAKE_NVML_WITHOUT_MIG
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                  unsigned int* pending) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const json* gpu = Gpu(device);
  if (gpu == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const json& mig = (*gpu)["mig"];
  if (mig.is_null()) return NVML_ERROR_NOT_SUPPORTED;
  *current = mig["current"].get<unsigned>();
  *pending = mig["pending"].get<unsigned>();
  return NVML_SUCCESS;
}
#endif

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t* info) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const json* gpu = Gpu(device);
  if (gpu == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if ((*gpu)["mig"].is_null()) return NVML_ERROR_NOT_SUPPORTED;
  const json* entry = ProfileByIndex(profile);
  if (entry == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  std::memset(info, 0, sizeof(*info));
  info->id = (*entry)["id"].get<unsigned>();
  info->sliceCount = (*entry)["slices"].get<unsigned>();
  info->instanceCount = (*entry)["instance_count"].get<unsigned>();
  info->memorySizeMB = (*entry)["memory_mb"].get<unsigned long long>();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profile_id,
                                       nvmlGpuInstance_t* instances, unsigned int* count) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const json* gpu = Gpu(device);
  if (gpu == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const json& mig = (*gpu)["mig"];
  if (mig.is_null()) return NVML_ERROR_NOT_SUPPORTED;
  if (mig["current"].get<unsigned>() != NVML_DEVICE_MIG_ENABLE) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned found = 0;
  for (const auto& gi : g_state.instances) {
    if (gi->gpu != device->index || gi->profile_id != profile_id) continue;
    instances[found++] = gi.get();
  }
  *count = found;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t instance, nvmlGpuInstanceInfo_t* info) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_state.initialised || instance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  info->device = g_state.devices[static_cast<size_t>(instance->gpu)].get();
  info->id = instance->id;
  info->profileId = instance->profile_id;
  info->placement.start = instance->start;
  info->placement.size = instance->size;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const json* gpu = Gpu(device);
  if (gpu == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if ((*gpu)["mig"].is_null()) return NVML_ERROR_NOT_SUPPORTED;
  *count = 7;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t* mig) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (Gpu(device) == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned seen = 0;
  for (const auto& candidate : g_state.mig_devices) {
    if (candidate->index != device->index) continue;
    if (seen++ == index) {
      *mig = candidate.get();
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_state.initialised || device == nullptr || !device->mig_device) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  *id = device->gi_id;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  *set = new nvmlEventSet_st();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                      nvmlEventSet_t set) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const json* gpu = Gpu(device);
  if (gpu == nullptr || set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if ((types & nvmlEventTypeXidCriticalError) == 0) return NVML_SUCCESS;
  for (const json& xid : (*gpu)["xid"])
    set->pending.emplace_back(device, xid.get<unsigned long long>());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                 unsigned int timeout_ms) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!set->pending.empty()) {
      std::memset(data, 0, sizeof(*data));
      data->device = set->pending.front().first;
      data->eventType = nvmlEventTypeXidCriticalError;
      data->eventData = set->pending.front().second;
      set->pending.pop_front();
      return NVML_SUCCESS;
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(timeout_ms, 20u)));
  return NVML_ERROR_TIMEOUT;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  delete set;
  return NVML_SUCCESS;
}

}  // extern "C"
