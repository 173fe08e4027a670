#include "agent/gpu_nvml_library.h"

#include <dlfcn.h>

#include <cstdlib>

namespace linkfit::agent::nvml {
namespace {

template <typename Fn>
Result<void> Resolve(void* handle, const char* symbol, bool required, Fn* out) {
  void* address = dlsym(handle, symbol);
  if (address == nullptr && required) {
    return MakeError(std::string("the NVML library lacks ") + symbol +
                     " (too old, or not NVIDIA's libnvidia-ml)");
  }
  *out = reinterpret_cast<Fn>(address);
  return {};
}

}  // namespace

std::string NvmlLibrary::ErrorText(nvmlReturn_t code) const {
  const char* text = functions_.error_string != nullptr ? functions_.error_string(code) : nullptr;
  return (text != nullptr ? std::string(text) : std::string("NVML error")) + " (" +
         std::to_string(static_cast<int>(code)) + ")";
}

Result<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Load(const std::string& library) {
  std::unique_ptr<NvmlLibrary> nvml(new NvmlLibrary());
  nvml->handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (nvml->handle_ == nullptr) {
    const char* why = dlerror();
    return MakeError("cannot load NVML (" + library + "): " + (why != nullptr ? why : "unknown"));
  }
  Functions& f = nvml->functions_;
  void* h = nvml->handle_;
  // Required: what a coherent discovery needs. Optional: what degrades with a warning (no
  // NVLink or MIG facts, no NUMA node from NVML, no health events). Older entry points stand in
  // for the versioned ones where their signatures are the same.
  const auto either = [&](const char* name, const char* older, auto* out) {
    if (Resolve(h, name, false, out) && *out != nullptr) return Result<void>{};
    return Resolve(h, older, true, out);
  };
  const Result<void> resolved[] = {
      either("nvmlInit_v2", "nvmlInit", &f.init),
      Resolve(h, "nvmlShutdown", true, &f.shutdown),
      Resolve(h, "nvmlSystemGetNVMLVersion", true, &f.nvml_version),
      either("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount", &f.device_count),
      either("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex", &f.handle_by_index),
      Resolve(h, "nvmlDeviceGetUUID", true, &f.uuid),
      Resolve(h, "nvmlDeviceGetName", true, &f.name),
      Resolve(h, "nvmlDeviceGetMemoryInfo", true, &f.memory),
      either("nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", &f.pci),
      Resolve(h, "nvmlDeviceGetTopologyCommonAncestor", true, &f.common_ancestor),
      Resolve(h, "nvmlErrorString", false, &f.error_string),
      Resolve(h, "nvmlSystemGetDriverVersion", false, &f.driver_version),
      Resolve(h, "nvmlDeviceGetNvLinkState", false, &f.nvlink_state),
      Resolve(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2", false, &f.nvlink_remote_pci),
      Resolve(h, "nvmlDeviceGetMigMode", false, &f.mig_mode),
      Resolve(h, "nvmlDeviceGetGpuInstanceProfileInfo", false, &f.gi_profile_info),
      Resolve(h, "nvmlDeviceGetGpuInstances", false, &f.gpu_instances),
      Resolve(h, "nvmlGpuInstanceGetInfo", false, &f.gi_info),
      Resolve(h, "nvmlDeviceGetNumaNodeId", false, &f.numa_node),
      Resolve(h, "nvmlDeviceGetMemoryAffinity", false, &f.memory_affinity),
      Resolve(h, "nvmlDeviceGetNvLinkVersion", false, &f.nvlink_version),
      Resolve(h, "nvmlDeviceGetMaxPcieLinkGeneration", false, &f.max_pcie_generation),
      Resolve(h, "nvmlDeviceGetMaxPcieLinkWidth", false, &f.max_pcie_width),
      Resolve(h, "nvmlDeviceGetNvLinkRemoteDeviceType", false, &f.nvlink_remote_type),
      Resolve(h, "nvmlDeviceGetMaxMigDeviceCount", false, &f.max_mig_devices),
      Resolve(h, "nvmlDeviceGetMigDeviceHandleByIndex", false, &f.mig_device),
      Resolve(h, "nvmlDeviceGetGpuInstanceId", false, &f.gpu_instance_id),
      Resolve(h, "nvmlEventSetCreate", false, &f.event_set_create),
      Resolve(h, "nvmlDeviceRegisterEvents", false, &f.register_events),
      Resolve(h, "nvmlEventSetWait_v2", false, &f.event_set_wait),
      Resolve(h, "nvmlEventSetFree", false, &f.event_set_free),
  };
  if (f.nvlink_state == nullptr || f.nvlink_remote_pci == nullptr) {
    nvml->missing_.push_back("NVLink state/remote PCI info (NVLinks unknown: taken as none)");
  }
  if (f.nvlink_version == nullptr || f.max_pcie_generation == nullptr ||
      f.max_pcie_width == nullptr) {
    nvml->missing_.push_back(
        "NVLink versions or PCIe link generation/width (guessed from the GPU model)");
  }
  if (f.mig_mode == nullptr || f.gi_profile_info == nullptr || f.gpu_instances == nullptr ||
      f.gi_info == nullptr) {
    nvml->missing_.push_back("the MIG API (MIG modes and instances unknown)");
  }
  for (const Result<void>& result : resolved) {
    if (!result) return WithContext(result.error(), library);
  }
  if (const nvmlReturn_t rc = f.init(); rc != NVML_SUCCESS) {
    return MakeError("nvmlInit_v2 failed: " + nvml->ErrorText(rc));
  }
  nvml->initialised_ = true;
  char text[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE] = {};
  if (const nvmlReturn_t rc = f.nvml_version(text, sizeof(text)); rc != NVML_SUCCESS) {
    return MakeError("nvmlSystemGetNVMLVersion failed: " + nvml->ErrorText(rc));
  }
  nvml->version_ = text;
  char* end = nullptr;
  const long major = std::strtol(nvml->version_.c_str(), &end, 10);
  if (end == nvml->version_.c_str()) {
    return MakeError("NVML reports an unreadable version " + nvml->version_);
  }
  if (major < 11) {
    return MakeError("NVML " + nvml->version_ +
                     " is too old: linkfit's agent needs NVML 11 or later (driver R450+, the MIG "
                     "API)");
  }
  char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  if (f.driver_version != nullptr && f.driver_version(driver, sizeof(driver)) == NVML_SUCCESS) {
    nvml->driver_version_ = driver;
  }
  return nvml;
}

NvmlLibrary::~NvmlLibrary() {
  if (initialised_ && functions_.shutdown != nullptr) functions_.shutdown();
  if (handle_ != nullptr) dlclose(handle_);
}

}  // namespace linkfit::agent::nvml
