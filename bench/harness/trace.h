#pragma once

// Loaders for the traces the harness replays (read from ../shared/traces, never copied):
//
//   - Alibaba openb node list (`sn,cpu_milli,memory_mib,gpu,model`) and pod lists
//     (`name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...]`); columns are found by header
//     name, so the five-column multigpu files load too.
//   - the Philly per-job digest (`timestamp,duration,num_gpus,gpu_time,cluster`).
//   - the GPU instances (role HN) of Alibaba's 2025 trace (`disaggregated_DLRM_trace.csv`:
//     cpu_request, memory_request in GiB, gpu_request, rdma_request in percent of one NIC,
//     creation_time and deletion_time in seconds, empty outside the trace window).
//
// Every malformed row is an error naming the file, the line and the column.
//
// Thread-safety: pure functions.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/files.h"
#include "linkfit/common/result.h"

namespace linkfit::bench {

struct NodeRecord {
  std::string name;
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  int gpu_count = 0;
  std::string gpu_model;  // empty for CPU-only nodes
};

struct PodRecord {
  std::string name;
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  int num_gpu = 0;
  int gpu_milli = 0;                    // share of each requested GPU, 1000 = whole GPU
  std::vector<std::string> gpu_models;  // allowed models (gpu_spec split on '|'); empty = any
};

struct PhillyJob {
  std::int64_t submit_s = 0;  // seconds since the Unix epoch (timestamps read as UTC)
  double duration_s = 0;
  int num_gpus = 0;
};

struct RdmaPodRecord {
  std::string name;  // instance_sn
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  int num_gpu = 0;
  int rdma_percent = 0;    // of one NIC
  double creation_s = -1;  // -1: before the trace window
  double deletion_s = -1;  // -1: after it
};

// `source` names the text in error messages (usually the path).
Result<std::vector<NodeRecord>> ParseOpenbNodes(std::string_view csv, const std::string& source);
Result<std::vector<PodRecord>> ParseOpenbPods(std::string_view csv, const std::string& source);
Result<std::vector<PhillyJob>> ParsePhillyJobs(std::string_view csv, const std::string& source);
// The rows of role HN only.
Result<std::vector<RdmaPodRecord>> ParseAlibaba2025GpuPods(std::string_view csv,
                                                           const std::string& source);

Result<std::vector<NodeRecord>> LoadOpenbNodes(const std::string& path);
Result<std::vector<PodRecord>> LoadOpenbPods(const std::string& path);
Result<std::vector<PhillyJob>> LoadPhillyJobs(const std::string& path);
Result<std::vector<RdmaPodRecord>> LoadAlibaba2025GpuPods(const std::string& path);

// Reads a whole file; the error names the path (common/files.h).
using ::linkfit::ReadFile;

}  // namespace linkfit::bench
