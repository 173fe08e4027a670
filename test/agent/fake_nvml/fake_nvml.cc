// A fake libnvidia-ml.so.1 for the node agent's tests: it exports, with C linkage and the
// signatures of NVIDIA's nvml.h (src/agent/gpu_nvml_api.h), the NVML functions the agent calls,
// and answers from a recording: a JSON file named by the environment variable LINKFIT_FAKE_NVML,
// read and checked in full at nvmlInit_v2 (recording.h, test/data/nvml/README.md). A missing file
// makes nvmlInit_v2 return NVML_ERROR_DRIVER_NOT_LOADED and a malformed one NVML_ERROR_UNKNOWN
// (the reason goes to stderr), as a node without a working driver would fail. Only the NVML
// functions are exported (the library is built with hidden visibility).
//
// Variants (compile definitions) lack one function each, as an older or broken library would:
//   FAKE_NVML_WITHOUT_MIG          nvmlDeviceGetMigMode (no MIG API)
//   FAKE_NVML_WITHOUT_TOPOLOGY     nvmlDeviceGetTopologyCommonAncestor (a required function)
//   FAKE_NVML_WITHOUT_REMOTE_TYPE  nvmlDeviceGetNvLinkRemoteDeviceType (older drivers)
//   FAKE_NVML_WITHOUT_LINK_FACTS   nvmlDeviceGetNvLinkVersion, nvmlDeviceGetMaxPcieLinkGeneration
//                                  and ...Width (a library that cannot tell link versions and
//                                  PCIe generations: the agent then falls back to its table)
//
// Thread-safety: one mutex around the state, as NVML is thread-safe.
//
// This file: initialisation, versions, device identity, PCIe relations and NVLinks;
// fake_nvml_mig_events.cc: the MIG API and Xid events.

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "fake_state.h"

namespace fake_nvml {

std::mutex g_mutex;
State g_state;

const Device* Gpu(nvmlDevice_t device) {
  if (!g_state.initialised || device == nullptr || device->mig_device) return nullptr;
  for (const auto& handle : g_state.devices) {
    if (handle.get() == device) return &g_state.recording.devices[device->gpu];
  }
  return nullptr;
}

nvmlReturn_t Injected(const Device& gpu, const char* function) {
  const auto error = gpu.errors.find(function);
  return error == gpu.errors.end() ? NVML_SUCCESS : static_cast<nvmlReturn_t>(error->second);
}

const Device* Answering(nvmlDevice_t device, const char* function, nvmlReturn_t& rc) {
  const Device* gpu = Gpu(device);
  rc = gpu == nullptr ? NVML_ERROR_INVALID_ARGUMENT : Injected(*gpu, function);
  return rc == NVML_SUCCESS ? gpu : nullptr;
}

}  // namespace fake_nvml

using fake_nvml::Answering;
using fake_nvml::Device;
using fake_nvml::g_mutex;
using fake_nvml::g_state;
using fake_nvml::Gpu;
using fake_nvml::Injected;
using fake_nvml::Recording;
using fake_nvml::State;

namespace {

// Handles of earlier initialisations stay valid memory (a real NVML would invalidate them).
std::vector<State> g_retired;

nvmlReturn_t CopyString(const std::string& value, char* out, unsigned length) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (value.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, value.c_str(), value.size() + 1);
  return NVML_SUCCESS;
}

void FillPci(const std::string& bus_id, nvmlPciInfo_t* pci, unsigned device_id = 0) {
  std::memset(pci, 0, sizeof(*pci));
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  fake_nvml::SplitBusId(bus_id, domain, bus, device, function);  // checked at init
  std::snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.%X", domain, bus, device, function);
  std::snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.%X", domain & 0xffff,
                bus, device, function);
  pci->domain = domain;
  pci->bus = bus;
  pci->device = device;
  pci->pciDeviceId = device_id;
}

State Load(Recording recording) {
  State state;
  state.recording = std::move(recording);
  for (std::size_t g = 0; g < state.recording.devices.size(); ++g) {
    const Device& gpu = state.recording.devices[g];
    auto handle = std::make_unique<nvmlDevice_st>();
    handle->gpu = g;
    handle->uuid = gpu.uuid;
    state.devices.push_back(std::move(handle));
    if (!gpu.mig) continue;
    for (const fake_nvml::GpuInstance& instance : gpu.mig->instances) {
      auto gi = std::make_unique<nvmlGpuInstance_st>();
      gi->gpu = g;
      gi->instance = instance;
      for (const auto& profile : state.recording.mig_profiles) {
        if (profile.profile == instance.profile) gi->profile_id = profile.id;
      }
      state.instances.push_back(std::move(gi));
      auto mig = std::make_unique<nvmlDevice_st>();
      mig->mig_device = true;
      mig->gpu = g;
      mig->gi_id = instance.id;
      mig->uuid = instance.uuid;
      state.mig_devices.push_back(std::move(mig));
    }
  }
  state.initialised = true;
  return state;
}

}  // namespace

extern "C" {

// Reference counted as NVML's: only the first initialisation reads the recording.
FAKE_NVML_EXPORT nvmlReturn_t nvmlInit_v2() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_state.initialised) {
    ++g_state.references;
    return NVML_SUCCESS;
  }
  const char* path = std::getenv("LINKFIT_FAKE_NVML");
  if (path == nullptr) return NVML_ERROR_DRIVER_NOT_LOADED;
  std::ifstream in(path);
  if (!in) return NVML_ERROR_DRIVER_NOT_LOADED;
  std::stringstream text;
  text << in.rdbuf();
  auto recording = fake_nvml::ParseRecording(text.str());
  if (!recording) {
    std::fprintf(stderr, "fake NVML: %s: %s\n", path, recording.error().message.c_str());
    return NVML_ERROR_UNKNOWN;
  }
  g_retired.push_back(std::move(g_state));
  g_state = Load(std::move(*recording));
  g_state.references = 1;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlShutdown() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_state.initialised) return NVML_ERROR_UNINITIALIZED;
  if (--g_state.references == 0) g_state.initialised = false;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS:
      return "Success";
    case NVML_ERROR_UNINITIALIZED:
      return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
      return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
      return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
      return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND:
      return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
      return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
      return "Timeout";
    case NVML_ERROR_GPU_IS_LOST:
      return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED:
      return "GPU requires restart";
    default:
      return "Unknown Error";
  }
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_state.initialised) return NVML_ERROR_UNINITIALIZED;
  return CopyString(g_state.recording.driver_version, version, length);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_state.initialised) return NVML_ERROR_UNINITIALIZED;
  return CopyString(g_state.recording.nvml_version, version, length);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_state.initialised) return NVML_ERROR_UNINITIALIZED;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned>(g_state.devices.size());
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                            nvmlDevice_t* device) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_state.initialised) return NVML_ERROR_UNINITIALIZED;
  if (index >= g_state.devices.size() || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const Device& gpu = g_state.recording.devices[index];
  if (gpu.lost) return NVML_ERROR_GPU_IS_LOST;
  if (const nvmlReturn_t rc = Injected(gpu, "nvmlDeviceGetHandleByIndex_v2"); rc != NVML_SUCCESS) {
    return rc;
  }
  *device = g_state.devices[index].get();
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid,
                                                unsigned int length) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_state.initialised || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (device->mig_device) return CopyString(device->uuid, uuid, length);
  nvmlReturn_t rc = NVML_SUCCESS;
  const Device* gpu = Answering(device, "nvmlDeviceGetUUID", rc);
  return gpu == nullptr ? rc : CopyString(gpu->uuid, uuid, length);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name,
                                                unsigned int length) {
  std::lock_guard<std::mutex> lock(g_mutex);
  nvmlReturn_t rc = NVML_SUCCESS;
  const Device* gpu = Answering(device, "nvmlDeviceGetName", rc);
  return gpu == nullptr ? rc : CopyString(gpu->name, name, length);
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  std::lock_guard<std::mutex> lock(g_mutex);
  nvmlReturn_t rc = NVML_SUCCESS;
  const Device* gpu = Answering(device, "nvmlDeviceGetMemoryInfo", rc);
  if (gpu == nullptr) return rc;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  memory->total = gpu->memory_mib << 20;
  memory->used = 0;
  memory->free = memory->total;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  std::lock_guard<std::mutex> lock(g_mutex);
  nvmlReturn_t rc = NVML_SUCCESS;
  const Device* gpu = Answering(device, "nvmlDeviceGetPciInfo_v3", rc);
  if (gpu == nullptr) return rc;
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  FillPci(gpu->bus_id, pci, gpu->pci_device_id);
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int* node) {
  std::lock_guard<std::mutex> lock(g_mutex);
  nvmlReturn_t rc = NVML_SUCCESS;
  const Device* gpu = Answering(device, "nvmlDeviceGetNumaNodeId", rc);
  if (gpu == nullptr) return rc;
  if (!gpu->numa_node) return NVML_ERROR_NOT_SUPPORTED;
  *node = *gpu->numa_node;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device,
                                                          unsigned int node_set_size,
                                                          unsigned long* node_set,
                                                          nvmlAffinityScope_t scope) {
  std::lock_guard<std::mutex> lock(g_mutex);
  nvmlReturn_t rc = NVML_SUCCESS;
  const Device* gpu = Answering(device, "nvmlDeviceGetMemoryAffinity", rc);
  if (gpu == nullptr) return rc;
  if (node_set == nullptr || node_set_size == 0) return NVML_ERROR_INVALID_ARGUMENT;
  if (scope != NVML_AFFINITY_SCOPE_NODE && scope != NVML_AFFINITY_SCOPE_SOCKET) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!gpu->memory_affinity) return NVML_ERROR_NOT_SUPPORTED;
  constexpr unsigned kBits = sizeof(unsigned long) * 8;
  std::memset(node_set, 0, node_set_size * sizeof(unsigned long));
  for (const unsigned node : *gpu->memory_affinity) {
    if (node / kBits < node_set_size) node_set[node / kBits] |= 1ul << (node % kBits);
  }
  return NVML_SUCCESS;
}

#ifndef FAKE_NVML_WITHOUT_TOPOLOGY
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b,
                                                                  nvmlGpuTopologyLevel_t* level) {
  std::lock_guard<std::mutex> lock(g_mutex);
  nvmlReturn_t rc = NVML_SUCCESS;
  if (Answering(a, "nvmlDeviceGetTopologyCommonAncestor", rc) == nullptr) return rc;
  if (Answering(b, "nvmlDeviceGetTopologyCommonAncestor", rc) == nullptr) return rc;
  *level = static_cast<nvmlGpuTopologyLevel_t>(g_state.recording.ancestors[a->gpu][b->gpu]);
  return NVML_SUCCESS;
}
#endif

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                                       nvmlEnableState_t* active) {
  std::lock_guard<std::mutex> lock(g_mutex);
  nvmlReturn_t rc = NVML_SUCCESS;
  const Device* gpu = Answering(device, "nvmlDeviceGetNvLinkState", rc);
  if (gpu == nullptr) return rc;
  if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  if (gpu->nvlinks.empty()) return NVML_ERROR_NOT_SUPPORTED;  // a GPU without NVLink
  *active = link < gpu->nvlinks.size() ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device,
                                                                  unsigned int link,
                                                                  nvmlPciInfo_t* pci) {
  std::lock_guard<std::mutex> lock(g_mutex);
  nvmlReturn_t rc = NVML_SUCCESS;
  const Device* gpu = Answering(device, "nvmlDeviceGetNvLinkRemotePciInfo_v2", rc);
  if (gpu == nullptr) return rc;
  if (link >= gpu->nvlinks.size()) return NVML_ERROR_NOT_SUPPORTED;
  FillPci(gpu->nvlinks[link].remote_bus_id, pci);
  return NVML_SUCCESS;
}

#ifndef FAKE_NVML_WITHOUT_LINK_FACTS
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link,
                                                         unsigned int* version) {
  std::lock_guard<std::mutex> lock(g_mutex);
  nvmlReturn_t rc = NVML_SUCCESS;
  const Device* gpu = Answering(device, "nvmlDeviceGetNvLinkVersion", rc);
  if (gpu == nullptr) return rc;
  if (version == nullptr || link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  if (link >= gpu->nvlinks.size() || !gpu->nvlinks[link].version) return NVML_ERROR_NOT_SUPPORTED;
  *version = *gpu->nvlinks[link].version;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device,
                                                                 unsigned int* generation) {
  std::lock_guard<std::mutex> lock(g_mutex);
  nvmlReturn_t rc = NVML_SUCCESS;
  const Device* gpu = Answering(device, "nvmlDeviceGetMaxPcieLinkGeneration", rc);
  if (gpu == nullptr) return rc;
  if (generation == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!gpu->pcie) return NVML_ERROR_NOT_SUPPORTED;
  *generation = gpu->pcie->max_generation;
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device,
                                                            unsigned int* width) {
  std::lock_guard<std::mutex> lock(g_mutex);
  nvmlReturn_t rc = NVML_SUCCESS;
  const Device* gpu = Answering(device, "nvmlDeviceGetMaxPcieLinkWidth", rc);
  if (gpu == nullptr) return rc;
  if (width == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!gpu->pcie) return NVML_ERROR_NOT_SUPPORTED;
  *width = gpu->pcie->max_width;
  return NVML_SUCCESS;
}
#endif

#ifndef FAKE_NVML_WITHOUT_REMOTE_TYPE
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device,
                                                                  unsigned int link,
                                                                  nvmlIntNvLinkDeviceType_t* type) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const Device* gpu = Gpu(device);
  if (gpu == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (link >= gpu->nvlinks.size()) return NVML_ERROR_NOT_SUPPORTED;
  switch (gpu->nvlinks[link].remote_type) {
    case fake_nvml::RemoteType::kGpu:
      *type = NVML_NVLINK_DEVICE_TYPE_GPU;
      break;
    case fake_nvml::RemoteType::kSwitch:
      *type = NVML_NVLINK_DEVICE_TYPE_SWITCH;
      break;
    case fake_nvml::RemoteType::kIbmNpu:
      *type = NVML_NVLINK_DEVICE_TYPE_IBMNPU;
      break;
  }
  return NVML_SUCCESS;
}
#endif

}  // extern "C"
