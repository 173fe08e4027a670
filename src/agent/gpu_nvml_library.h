#pragma once

// NvmlLibrary: libnvidia-ml.so.1 opened with dlopen, its functions resolved with dlsym, NVML
// initialised and its version checked. Required functions missing (device identity, memory, PCI,
// PCIe relations, the version), nvmlInit failing, or an NVML older than 11 are errors naming what
// is wrong; optional functions (NVLinks and their versions, PCIe link generation and width, the
// MIG API, NUMA node, MIG device handles, events, error strings) may be null, and missing() says
// which parts are absent. The destructor shuts NVML
// down and closes the library.
//
// Thread-safety: NVML itself is thread-safe; one NvmlLibrary may be used from several threads
// once loaded.

#include <memory>
#include <string>
#include <vector>

#include "agent/gpu_nvml_api.h"
#include "linkfit/common/result.h"

namespace linkfit::agent::nvml {

struct Functions {
  InitFn init = nullptr;
  ShutdownFn shutdown = nullptr;
  ErrorStringFn error_string = nullptr;
  SystemStringFn driver_version = nullptr;
  SystemStringFn nvml_version = nullptr;
  DeviceGetCountFn device_count = nullptr;
  DeviceGetHandleByIndexFn handle_by_index = nullptr;
  DeviceStringFn uuid = nullptr;
  DeviceStringFn name = nullptr;
  DeviceGetMemoryInfoFn memory = nullptr;
  DeviceGetPciInfoFn pci = nullptr;
  DeviceGetCommonAncestorFn common_ancestor = nullptr;
  DeviceGetNvLinkStateFn nvlink_state = nullptr;
  DeviceGetNvLinkRemotePciInfoFn nvlink_remote_pci = nullptr;
  DeviceGetMigModeFn mig_mode = nullptr;
  DeviceGetGpuInstanceProfileInfoFn gi_profile_info = nullptr;
  DeviceGetGpuInstancesFn gpu_instances = nullptr;
  GpuInstanceGetInfoFn gi_info = nullptr;
  // Optional.
  DeviceGetUintFn numa_node = nullptr;
  DeviceGetAffinityFn memory_affinity = nullptr;
  // What the machine says about its links (older drivers lack them: the agent then falls back to
  // its table of GPU models, with a warning).
  DeviceGetLinkUintFn nvlink_version = nullptr;
  DeviceGetUintFn max_pcie_generation = nullptr;
  DeviceGetUintFn max_pcie_width = nullptr;
  DeviceGetNvLinkRemoteDeviceTypeFn nvlink_remote_type = nullptr;
  DeviceGetUintFn max_mig_devices = nullptr;
  DeviceGetMigDeviceHandleByIndexFn mig_device = nullptr;
  DeviceGetUintFn gpu_instance_id = nullptr;
  EventSetCreateFn event_set_create = nullptr;
  DeviceRegisterEventsFn register_events = nullptr;
  EventSetWaitFn event_set_wait = nullptr;
  EventSetFreeFn event_set_free = nullptr;
};

class NvmlLibrary {
 public:
  static Result<std::unique_ptr<NvmlLibrary>> Load(const std::string& library);
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  const Functions& f() const { return functions_; }
  // "NVML_ERROR_..." text of a return code, e.g. "GPU is lost".
  std::string ErrorText(nvmlReturn_t code) const;
  const std::string& version() const { return version_; }
  const std::string& driver_version() const { return driver_version_; }
  // Optional parts the library lacks, for warnings ("the MIG API (...)").
  const std::vector<std::string>& missing() const { return missing_; }

 private:
  NvmlLibrary() = default;

  void* handle_ = nullptr;
  bool initialised_ = false;
  Functions functions_;
  std::string version_;
  std::string driver_version_;
  std::vector<std::string> missing_;
};

}  // namespace linkfit::agent::nvml
