#pragma once

// The device files a container needs for its GPUs, for runtimes that do not inject CDI devices
// (the NRI adjustment then lists them as LinuxDevice entries, and the runtime adds a cgroup rule
// for each: ../shared/design/node-handoff.md §4.3). Read from the driver's files under /proc,
// which every mount namespace of the node sees:
//
//   /proc/devices                              the char majors of nvidia-frontend (195),
//                                              nvidia-uvm and nvidia-caps
//   /proc/driver/nvidia/gpus/<bus>/information  "GPU UUID: GPU-..." and "Device Minor: N"
//                                              -> /dev/nvidiaN (major 195)
//   /proc/driver/nvidia/capabilities/gpu<N>/mig/gi<G>/access and .../gi<G>/ci<C>/access
//                                              "DeviceFileMinor: M" -> /dev/nvidia-caps/nvidia-capM
//
// Every GPU container also gets /dev/nvidiactl (195:255), /dev/nvidia-uvm and
// /dev/nvidia-uvm-tools (minors 0 and 1). A MIG instance needs its parent GPU's file and the
// capability files of its GPU instance and of its one compute instance (an instance split into
// several compute instances is ambiguous: an error).
//
// Thread-safety: plain values; ReadDeviceFiles reads files and may run on any thread.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "linkfit/common/result.h"
#include "linkfit/handoff/handoff.h"
#include "linkfit/topology/spec.h"

namespace linkfit::handoff {

struct DeviceFile {
  std::string path;
  std::int64_t major = 0;
  std::int64_t minor = 0;
  std::uint32_t file_mode = 0666;  // character device, read-write for the container
  friend bool operator==(const DeviceFile&, const DeviceFile&) = default;
};

struct NodeDeviceFiles {
  std::vector<DeviceFile> control;                         // nvidiactl, nvidia-uvm, -uvm-tools
  std::map<std::string, std::vector<DeviceFile>> by_uuid;  // GPU or MIG UUID -> its files
};

// Reads the files above under `proc_root` ("/proc" on a node) for the GPUs and MIG instances of
// `node`. An error names the file or the device it could not resolve.
Result<NodeDeviceFiles> ReadDeviceFiles(const std::string& proc_root,
                                        const topology::TopologySpec& node);

// The files for what a container is handed (whole GPUs, MIG instances, the GPUs of shares), the
// control files first, each once; an error names a device without files.
Result<std::vector<DeviceFile>> DeviceFilesFor(const HandedDevices& devices,
                                               const NodeDeviceFiles& files);

}  // namespace linkfit::handoff
