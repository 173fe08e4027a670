#pragma once

// Shared pieces of the node-side tests: golden bytes, a DGX H100 whose GPU i has UUID "GPU-i", and
// the plan (linkfit.io/allocation) that gives a pod's container "main" whole GPUs on node "n1".

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

}  // namespace linkfit::testing
