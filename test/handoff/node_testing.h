#pragma once

// Shared pieces of the node-side tests: golden bytes, a DGX H100 whose GPU i has UUID "GPU-i", and
// the plan (linkfit.io/allocation) that gives a pod's container "main" whole GPUs on node "n1";
// for messages above 4 KiB, nodes with UUIDs of full length (16 GPUs, 56 MIG instances).

#include <cstdio>
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

// A UUID as NVIDIA writes them: "GPU-" or "MIG-" and 36 characters.
inline std::string LongUuid(const std::string& prefix, int n) {
  const auto number = static_cast<unsigned>(n);
  char text[64];
  std::snprintf(text, sizeof(text), "%s-%08x-6a2b-4c1d-8e3f-%012x", prefix.c_str(),
                number * 2654435761u, number);
  return text;
}

// A DGX-2 (16 V100s) with UUIDs of full length (LongUuid("GPU", i)).
inline topology::TopologySpec SixteenGpuNode() {
  topology::TopologySpec spec = LoadFixture("dgx2-v100")->spec();
  for (topology::GpuSpec& gpu : spec.gpus) gpu.uuid = LongUuid("GPU", gpu.index);
  return spec;
}

// H100Node with every GPU cut into seven 1g.10gb MIG instances (slices 0..6, GPU instances
// 1..7), instance s of GPU i with UUID LongUuid("MIG", 7 * i + s).
inline topology::TopologySpec MigSlicedNode() {
  topology::TopologySpec spec = H100Node();
  for (topology::GpuSpec& gpu : spec.gpus) {
    gpu.mig_mode = topology::MigMode::kEnabled;
    for (int start = 0; start < 7; ++start) {
      gpu.mig_instances.push_back(
          {"1g.10gb", start, 1, LongUuid("MIG", gpu.index * 7 + start), start + 1});
    }
  }
  return spec;
}

// The plan that gives container "main" all 56 MIG instances of MigSlicedNode.
inline std::string AllMigInstancesPlan(const std::string& uid) {
  kube::AllocationRecord record;
  record.pod = "ml/" + uid;
  record.uid = uid;
  record.node = "n1";
  for (int gpu = 0; gpu < 8; ++gpu) {
    for (int start = 0; start < 7; ++start)
      record.devices.mig.push_back({gpu, "1g.10gb", start, ""});
  }
  record.containers = {{"main", false, record.devices}};
  return kube::EncodeAllocationRecord(record);
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

// A node's driver files under a fresh directory standing for /proc (handoff/device_files.h): GPU i
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
