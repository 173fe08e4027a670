#pragma once

// The PCIe tree above the GPUs, read from sysfs (the host's /sys, or a recorded tree in tests):
// /sys/bus/pci/devices/<bus id> is a link into /sys/devices/pci<domain>:<bus>/..., whose path
// names the host bridge, the root port, and each PCIe switch as its upstream port followed by
// the downstream port below it, down to the GPU's own function:
//
//   devices/pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:00.0/0000:1b:00.0
//           host bridge root port   switch up    switch down  GPU
//
// (A port's type is in its PCIe capability, beyond the 64 bytes of config space an unprivileged
// reader sees, so upstream and downstream ports are told apart by their alternation below the
// root port.) Each switch is named after its upstream port; its figures are those of its
// upstream link: the lower of max_link_speed / max_link_width of the two ends (the switch's
// upstream port and the root port or switch port above it), or current_link_speed where the link
// trained lower. A GPU's own link figures, the lower of its function's and its port's, are
// returned for GPUs whose NVML does not state them.
//
// Thread-safety: free functions; they read files only.

#include <string>
#include <string_view>
#include <vector>

#include "linkfit/topology/spec.h"

namespace linkfit::agent {

// A PCIe link's figures; 0 = unknown.
struct PcieLinkFigures {
  int gen = 0;
  int width = 0;
};

// The PCIe generation of a sysfs link speed ("16.0 GT/s PCIe", "8 GT/s", "2.5 GT/s"): 2.5 -> 1,
// 5 -> 2, 8 -> 3, 16 -> 4, 32 -> 5, 64 -> 6; 0 for anything else ("Unknown speed").
int PcieGenerationOfSpeed(std::string_view text);

// Fills spec.pcie_tree and each GPU's pcie_path from `sysfs_root` for the GPUs whose pci_bus_id
// sysfs knows (others keep an empty path; a GPU sysfs does not know is a warning once). Returns
// each GPU's own link figures (indexed like spec.gpus). A tree sysfs does not have leaves the
// spec as it was.
std::vector<PcieLinkFigures> ReadPcieTree(const std::string& sysfs_root,
                                          topology::TopologySpec& spec,
                                          std::vector<std::string>& warnings);

}  // namespace linkfit::agent
