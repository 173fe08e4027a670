#pragma once

// Shared by the device plugin's tests (device_plugin_test.cc, device_plugin_server_test.cc): the
// node they serve and allocation records in brief.
//
// Thread-safety: plain functions returning values.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "handoff/node_testing.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/topology/spec.h"

namespace linkfit::handoff::plugin_testing {

// A DGX H100 (GPU i is "GPU-i"; GPUs 0-3 on NUMA 0, 4-7 on NUMA 1) with GPU 7 in MIG mode, and
// RDMA NICs mlx5_0..3 (uverbs0..3; 0-1 on NUMA 0, 2-3 on NUMA 1) and a virtual function mlx5_4.
inline topology::TopologySpec Node() {
  topology::TopologySpec spec = linkfit::testing::H100Node();
  for (topology::GpuSpec& gpu : spec.gpus) {
    gpu.mig_mode = topology::MigMode::kDisabled;
    gpu.numa_node = gpu.index < 4 ? 0 : 1;
  }
  spec.nics.clear();
  for (int i = 0; i < 5; ++i) {
    topology::NicSpec nic;
    nic.name = "mlx5_" + std::to_string(i);
    nic.pci_bus_id = "0000:1" + std::to_string(i) + ":00.0";
    nic.numa_node = i < 2 ? 0 : 1;
    nic.state = "ACTIVE";
    nic.uverbs = "uverbs" + std::to_string(i);
    if (i == 4) nic.sriov_physfn = "0000:13:00.0";
    spec.nics.push_back(nic);
  }
  spec.gpus[7].mig_mode = topology::MigMode::kEnabled;
  spec.gpus[7].mig_instances = {{"3g.40gb", 0, 4, "MIG-7-0"}, {"3g.40gb", 4, 4, "MIG-7-4"}};
  return spec;
}

inline kube::AllocationRecord Record(const std::string& uid,
                                     std::vector<kube::AllocationRecord::Container> c) {
  kube::AllocationRecord record;
  record.pod = "ml/" + uid;
  record.uid = uid;
  record.node = "n1";
  record.containers = std::move(c);
  for (const auto& container : record.containers) {
    for (int g : container.devices.gpus) {
      if (std::count(record.devices.gpus.begin(), record.devices.gpus.end(), g) == 0) {
        record.devices.gpus.push_back(g);
      }
    }
  }
  return record;
}

inline kube::AllocationRecord::Devices Gpus(std::vector<int> gpus) {
  kube::AllocationRecord::Devices devices;
  devices.gpus = std::move(gpus);
  return devices;
}

inline kube::AllocationRecord::Nic Nic(const std::string& name, int milli = 1000) {
  return {name, "", "", -1, milli, -1};
}

}  // namespace linkfit::handoff::plugin_testing
