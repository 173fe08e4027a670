#pragma once

// Shared pieces of the node-side tests: golden bytes, a DGX H100 whose GPU i has UUID "GPU-i", and
// the plan (linkfit.io/allocation) that gives a pod's container "main" whole GPUs on node "n1".

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "linkfit/kube/annotations.h"
#include "linkfit/topology/spec.h"
#include "testing/fixtures.h"

namespace linkfit::testing {

// Bytes from integers, for golden wire encodings.
inline std::string Bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

inline topology::TopologySpec H100Node() {
  topology::TopologySpec spec = LoadFixture("dgx-h100")->spec();
  for (topology::GpuSpec& gpu : spec.gpus) gpu.uuid = "GPU-" + std::to_string(gpu.index);
  return spec;
}

inline std::string WholeGpuPlan(const std::string& uid, std::vector<int> gpus) {
  kube::AllocationRecord record;
  record.pod = "ml/" + uid;
  record.uid = uid;
  record.node = "n1";
  record.devices.gpus = std::move(gpus);
  record.containers = {{"main", false, record.devices}};
  return kube::EncodeAllocationRecord(record);
}

// A node's driver files under a fresh directory standing for /proc (node/device_files.h): GPU i
// of `node` ("GPU-i") has device minor 10 + i, nvidia-uvm is major 510, nvidia-caps 511; each MIG
// instance with a GPU-instance id G on GPU i gets gi G (minor 100 + 10 * i + G) with one compute
// instance ci0 (minor 200 + 10 * i + G). Returns the directory.
inline std::string WriteFakeProc(const topology::TopologySpec& node, const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("linkfit-proc-" + name);
  fs::remove_all(root);
  fs::create_directories(root);
  std::ofstream(root / "devices") << "Character devices:\n  1 mem\n195 nvidia-frontend\n"
                                     "510 nvidia-uvm\n511 nvidia-caps\n\nBlock devices:\n"
                                     "  8 sd\n";
  for (const topology::GpuSpec& gpu : node.gpus) {
    const int minor = 10 + gpu.index;
    const fs::path dir =
        root / "driver/nvidia/gpus" / ("0000:0" + std::to_string(gpu.index) + ":00.0");
    fs::create_directories(dir);
    std::ofstream(dir / "information") << "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 150\n"
                                       << "GPU UUID: \t " << gpu.uuid << "\nVideo BIOS: \t ??\n"
                                       << "Device Minor: \t " << minor << "\n";
    for (const topology::MigInstanceSpec& instance : gpu.mig_instances) {
      if (instance.gpu_instance < 0) continue;
      const int g = instance.gpu_instance;
      const fs::path gi = root / "driver/nvidia/capabilities" / ("gpu" + std::to_string(minor)) /
                          "mig" / ("gi" + std::to_string(g));
      fs::create_directories(gi / "ci0");
      std::ofstream(gi / "access") << "DeviceFileMinor: " << 100 + 10 * gpu.index + g
                                   << "\nDeviceFileMode: 292\nDeviceFileModify: 1\n";
      std::ofstream(gi / "ci0" / "access") << "DeviceFileMinor: " << 200 + 10 * gpu.index + g
                                           << "\nDeviceFileMode: 292\nDeviceFileModify: 1\n";
    }
  }
  return root.string();
}

}  // namespace linkfit::testing
