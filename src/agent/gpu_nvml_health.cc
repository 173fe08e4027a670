// WatchHealthWithNvml (discovery.h): critical Xid events through an NVML event set.

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "agent/gpu_nvml_library.h"
#include "linkfit/agent/discovery.h"

namespace linkfit::agent {
namespace {

using nvml::NvmlLibrary;

// What an Xid means (NVIDIA's Xid catalogue), for the health_problem text.
std::string XidText(unsigned long long xid) {
  static const std::map<unsigned long long, const char*> kNames = {
      {13, "graphics engine exception"},
      {31, "GPU memory page fault"},
      {43, "GPU stopped processing"},
      {45, "preemptive cleanup"},
      {48, "double-bit ECC error"},
      {61, "internal micro-controller breakpoint"},
      {62, "internal micro-controller halt"},
      {63, "ECC page retirement or row remapping event"},
      {64, "ECC page retirement or row remapping failure"},
      {68, "video decoder exception"},
      {69, "graphics engine class error"},
      {74, "NVLink error"},
      {79, "GPU has fallen off the bus"},
      {92, "high single-bit ECC error rate"},
      {94, "contained ECC error"},
      {95, "uncontained ECC error"},
      {109, "context switch timeout"},
  };
  const auto it = kNames.find(xid);
  return "Xid " + std::to_string(xid) + ": " + (it != kNames.end() ? it->second : "critical error");
}

// Xids that an application causes (a bad kernel, a killed job) and that leave the GPU healthy,
// skipped as NVIDIA's device plugin skips them by default.
bool CausedByApplication(unsigned long long xid) {
  return xid == 13 || xid == 31 || xid == 43 || xid == 45 || xid == 68 || xid == 109;
}

class NvmlHealthWatch final : public HealthWatch {
 public:
  NvmlHealthWatch(std::unique_ptr<NvmlLibrary> nvml, nvmlEventSet_t set,
                  std::map<nvmlDevice_t, int> gpu_of)
      : nvml_(std::move(nvml)), set_(set), gpu_of_(std::move(gpu_of)) {}
  ~NvmlHealthWatch() override { nvml_->f().event_set_free(set_); }

  std::vector<Event> Wait(int timeout_ms) override {
    std::vector<Event> events;
    nvmlEventData_t data{};
    unsigned timeout = static_cast<unsigned>(std::max(0, timeout_ms));
    // Drain what is pending: the first wait may block, the rest only collect.
    while (nvml_->f().event_set_wait(set_, &data, timeout) == NVML_SUCCESS) {
      timeout = 0;
      if ((data.eventType & nvmlEventTypeXidCriticalError) == 0) continue;
      if (CausedByApplication(data.eventData)) continue;
      const auto gpu = gpu_of_.find(data.device);
      if (gpu == gpu_of_.end()) continue;
      events.push_back({gpu->second, XidText(data.eventData)});
    }
    return events;
  }

 private:
  std::unique_ptr<NvmlLibrary> nvml_;
  nvmlEventSet_t set_;
  std::map<nvmlDevice_t, int> gpu_of_;
};

}  // namespace

Result<std::unique_ptr<HealthWatch>> WatchHealthWithNvml(const NvmlOptions& options) {
  std::unique_ptr<NvmlLibrary> nvml;
  LINKFIT_ASSIGN_OR_RETURN(nvml, NvmlLibrary::Load(options.library));
  const nvml::Functions& f = nvml->f();
  if (f.event_set_create == nullptr || f.register_events == nullptr ||
      f.event_set_wait == nullptr || f.event_set_free == nullptr) {
    return MakeError("this NVML has no event API (nvmlEventSetWait_v2)");
  }
  nvmlEventSet_t set = nullptr;
  if (const nvmlReturn_t rc = f.event_set_create(&set); rc != NVML_SUCCESS) {
    return MakeError("nvmlEventSetCreate failed: " + nvml->ErrorText(rc));
  }
  unsigned count = 0;
  if (const nvmlReturn_t rc = f.device_count(&count); rc != NVML_SUCCESS) {
    f.event_set_free(set);
    return MakeError("nvmlDeviceGetCount_v2 failed: " + nvml->ErrorText(rc));
  }
  std::map<nvmlDevice_t, int> gpu_of;
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    if (f.handle_by_index(i, &device) != NVML_SUCCESS) continue;
    if (f.register_events(device, nvmlEventTypeXidCriticalError, set) != NVML_SUCCESS) continue;
    gpu_of.emplace(device, static_cast<int>(i));
  }
  if (gpu_of.empty()) {
    f.event_set_free(set);
    return MakeError("no GPU accepts Xid event registration");
  }
  return std::unique_ptr<HealthWatch>(
      std::make_unique<NvmlHealthWatch>(std::move(nvml), set, std::move(gpu_of)));
}

}  // namespace linkfit::agent
