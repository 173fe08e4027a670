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
#include <map>
#include <memory>
#include <string>
#include <string_view>
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
  // NUMA node of a PCI device when NVML has none, the PCIe tree, RDMA NICs (--host-sys)
  std::string sysfs_root = "/sys";
  // Rails of RDMA NICs by name (--nic-rails mlx5_0=0,mlx5_3=1); the others keep the default, their
  // position among the node's NICs. Applied whichever source found the NICs.
  std::map<std::string, int> nic_rails;
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

// Parses --nic-rails: comma-separated NAME=RAIL, RAIL in 0..kMaxNics-1, each name once; the error
// names the bad entry.
Result<std::map<std::string, int>> ParseNicRails(std::string_view text);

// NVML first, nvidia-smi when NVML cannot be loaded; the error names why both failed. Through
// nvidia-smi, the NICs sysfs (`options.sysfs_root`) shows replace those of topo -m, and a
// relation the two disagree on is a warning. NIC rails from `options.nic_rails` are applied to
// either's NICs (a name the node lacks is a warning).
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
