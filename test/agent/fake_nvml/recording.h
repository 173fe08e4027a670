#pragma once

// Recording: what the fake libnvidia-ml.so.1 (fake_nvml.cc) answers, parsed and checked in full
// from the JSON form described in test/data/nvml/README.md. Every field the fake's NVML functions
// read is validated here, once, so that a recording either loads completely (and no later NVML
// call can meet a missing or mistyped field) or is refused with a message naming the field,
// e.g. "devices[3].nvlinks[2].remote_type: \"nvswitch\" is not gpu, switch or ibmnpu".
//
// Thread-safety: plain values; ParseRecording touches no shared state.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/result.h"

namespace fake_nvml {

enum class RemoteType { kGpu, kSwitch, kIbmNpu };

struct NvLink {  // one active link
  std::string remote_bus_id;
  RemoteType remote_type = RemoteType::kGpu;
  // nvmlDeviceGetNvLinkVersion's answer (an nvmlNvlinkVersion_t: 4 is NVLink 3.0); none: the
  // call answers NVML_ERROR_NOT_SUPPORTED.
  std::optional<unsigned> version;
};

struct PcieLink {  // nvmlDeviceGetMaxPcieLinkGeneration / ...Width
  unsigned max_generation = 0;
  unsigned max_width = 0;
};

struct GpuInstance {
  unsigned id = 0;       // the GPU instance id (nvmlGpuInstanceInfo_t.id)
  unsigned profile = 0;  // NVML profile index (NVML_GPU_INSTANCE_PROFILE_*), one of mig_profiles
  unsigned start = 0;    // first memory slice
  unsigned size = 0;     // memory slices
  std::string uuid;      // of its MIG device ("MIG-...")
};

struct Mig {             // a MIG-capable GPU
  unsigned current = 0;  // NVML_DEVICE_MIG_DISABLE / _ENABLE
  unsigned pending = 0;
  std::vector<GpuInstance> instances;  // only when current is enabled
};

struct MigProfile {      // nvmlDeviceGetGpuInstanceProfileInfo's answer
  unsigned profile = 0;  // NVML profile index asked for
  unsigned id = 0;       // profile id (nvidia-smi's "ID" column)
  unsigned slices = 0;
  unsigned instance_count = 0;
  unsigned long long memory_mb = 0;
};

struct Device {
  std::string name;
  std::string uuid;
  std::string bus_id;          // "00000000:07:00.0"
  unsigned pci_device_id = 0;  // nvmlPciInfo_t.pciDeviceId ((device << 16) | vendor); 0: unset
  unsigned long long memory_mib = 0;
  std::optional<unsigned> numa_node;  // none: nvmlDeviceGetNumaNodeId is not supported
  // nvmlDeviceGetMemoryAffinity(NVML_AFFINITY_SCOPE_NODE): the NUMA nodes of the CPU memory
  // nearest the GPU; none: not supported.
  std::optional<std::vector<unsigned>> memory_affinity;
  std::optional<PcieLink> pcie;       // none: the PCIe link calls are not supported
  bool lost = false;                  // nvmlDeviceGetHandleByIndex_v2: NVML_ERROR_GPU_IS_LOST
  std::map<std::string, int> errors;  // NVML function name -> the nvmlReturn_t it returns
  std::vector<NvLink> nvlinks;
  std::vector<unsigned long long> xids;  // pending critical Xid events
  std::optional<Mig> mig;                // none: not MIG-capable
};

struct Recording {
  std::string nvml_version;
  std::string driver_version;
  std::vector<MigProfile> mig_profiles;
  std::vector<Device> devices;
  std::vector<std::vector<int>> ancestors;  // [a][b]: nvmlGpuTopologyLevel_t
};

// The device functions whose result a recording may replace with an error ("errors" of a device).
const std::vector<std::string>& InjectableFunctions();

// Parses and checks a recording; errors name the field and what is wrong with it.
linkfit::Result<Recording> ParseRecording(std::string_view json_text);

// Splits "00000000:07:00.0" (or "0000:07:00.0") into its numbers; false if it is not a bus id.
bool SplitBusId(std::string_view bus_id, unsigned& domain, unsigned& bus, unsigned& device,
                unsigned& function);

}  // namespace fake_nvml
