#pragma once

// Discovery: what the node agent learns about its own node's GPUs. Two sources, tried in order:
//
//   NVML        libnvidia-ml.so.1 loaded at run time with dlopen (nothing linked at build time;
//               the NVIDIA container toolkit mounts it into the agent's pod)
//   nvidia-smi  `nvidia-smi topo -m`, `--query-gpu=index,uuid,name,memory.total,pci.bus_id
//               --format=csv` and `nvidia-smi mig -lgi`, when NVML cannot be loaded
//
// Both produce a topology::TopologySpec in the form linkfit reads from linkfit.io/topology, with
// the agent's per-GPU facts filled in (health, MIG mode current and pending, the MIG GPU
// instances that exist). Odd data is marked, not fatal: a GPU whose links are asymmetric, that
// reports an error or has fallen off the bus is published unhealthy with the reason, and the
// rest of the node stays schedulable.
//
// Thread-safety: the free functions are safe to call concurrently; HealthWatch is used by one
// thread.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "linkfit/common/result.h"
#include "linkfit/topology/spec.h"

namespace linkfit::agent {

// A figure placement uses that the machine did not tell: taken from the GPU model table, or
// assumed where the table does not know the model. One per (figure, model) and discovery.
struct GuessedFigure {
  // "nvlink" | "pcie" | "mig" (the keys of a GPU's "sources"), or "nvlink_rate": a GA102
  // board's narrow NVLink rate, which NVML cannot state
  std::string figure;
  std::string model;    // the GPU model name
  std::string warning;  // what was taken from where (also in Discovery::warnings)
};

struct Discovery {
  topology::TopologySpec spec;        // GPUs with health and MIG facts; passes BuildTopology
  std::string source;                 // "nvml" or "nvidia-smi"
  std::string driver_version;         // e.g. "550.54.15", when known
  std::vector<std::string> warnings;  // also copied into spec.warnings
  std::vector<GuessedFigure> guessed;
};

struct NvmlOptions {
  std::string library = "libnvidia-ml.so.1";  // dlopen name (found through LD_LIBRARY_PATH)
  std::string sysfs_root = "/sys";            // NUMA node of a PCI device when NVML has none
  // What the machine cannot tell, by model name (nullptr: the built-in config/gpus.json); also
  // used by the nvidia-smi fallback of Discover(). Must outlive the calls.
  const topology::GpuModelTable* gpu_models = nullptr;
};

// Loads NVML and discovers the node. An error when the library cannot be loaded or lacks a
// function the agent needs (the caller then falls back to nvidia-smi), or when NVML is too old.
Result<Discovery> DiscoverWithNvml(const NvmlOptions& options);

// Runs a command (argv[0] is the program) and returns its standard output; an error names the
// command and its exit status.
using CommandRunner = std::function<Result<std::string>(const std::vector<std::string>& argv)>;
CommandRunner SystemCommandRunner();

// Discovers through nvidia-smi (the fallback); generations and MIG capability come from `table`.
Result<Discovery> DiscoverWithNvidiaSmi(
    const CommandRunner& run,
    const topology::GpuModelTable& table = topology::GpuModelTable::Builtin());

// NVML first, nvidia-smi when NVML cannot be loaded; the error names why both failed.
Result<Discovery> Discover(const NvmlOptions& options, const CommandRunner& run);

// Critical Xid events through an NVML event set (nvmlEventTypeXidCriticalError), for the GPUs
// of one discovery. Wait() blocks up to `timeout_ms` and returns the GPUs that turned unhealthy,
// with the reason ("Xid 79: GPU has fallen off the bus").
class HealthWatch {
 public:
  struct Event {
    int gpu = -1;
    std::string problem;
  };
  virtual ~HealthWatch() = default;
  virtual std::vector<Event> Wait(int timeout_ms) = 0;
};
// An error when NVML cannot be loaded or has no event support (health then comes only from
// re-discovery).
Result<std::unique_ptr<HealthWatch>> WatchHealthWithNvml(const NvmlOptions& options);

}  // namespace linkfit::agent
