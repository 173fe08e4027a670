#pragma once

// The device files a container needs for its RDMA NICs (the NRI adjustment lists them as
// LinuxDevice entries, and the runtime adds a cgroup rule for each): each NIC's verbs device
// /dev/infiniband/uverbsN and the connection manager /dev/infiniband/rdma_cm. Their device numbers
// are the host's, read once per change of the node's NICs (never per container):
//
//   <dev_root>/infiniband/<file>               a character device: its own numbers (the node's
//                                              /dev, mounted into the agent)
//   <sysfs_root>/class/infiniband_verbs/uverbsN/dev   otherwise the kernel's "MAJOR:MINOR", which
//   <sysfs_root>/class/misc/rdma_cm/dev               udev creates /dev from
//
// rdma_cm exists only where the rdma_ucm module is loaded; without it the NICs still work for
// NCCL and UCX verbs, so it is left out (with no error) rather than refusing every NIC container.
//
// Thread-safety: plain values; ReadNicDeviceFiles reads files and may run on any thread.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "linkfit/common/result.h"
#include "linkfit/handoff/device_files.h"
#include "linkfit/handoff/handoff.h"
#include "linkfit/topology/spec.h"

namespace linkfit::handoff {

struct NicDeviceFiles {
  std::optional<DeviceFile> rdma_cm;         // absent where the node has none
  std::map<std::string, DeviceFile> by_nic;  // NIC name -> its verbs device
  friend bool operator==(const NicDeviceFiles&, const NicDeviceFiles&) = default;
};

// Reads the files above for the NICs of `node` that have a verbs device. An error names the NIC
// whose verbs device has no readable numbers, or a malformed `dev` file.
Result<NicDeviceFiles> ReadNicDeviceFiles(const std::string& dev_root,
                                          const std::string& sysfs_root,
                                          const topology::TopologySpec& node);

// The files for the NICs a container is handed: rdma_cm (where the node has it), then each NIC's
// verbs device in the order handed, each once; an error names a NIC without a verbs device.
Result<std::vector<DeviceFile>> NicDeviceFilesFor(const HandedDevices& devices,
                                                  const NicDeviceFiles& files);
// The same for the NICs `nics` of a container (the others come by CDI), with rdma_cm only where
// `rdma_cm` says the container needs it as a file (it still gets it where it has no NIC here).
Result<std::vector<DeviceFile>> NicDeviceFilesFor(const std::vector<std::string>& nics,
                                                  const NicDeviceFiles& files, bool rdma_cm);

}  // namespace linkfit::handoff
