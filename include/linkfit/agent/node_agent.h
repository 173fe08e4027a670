#pragma once

// NodeAgent: the node agent's loop. It tells the control plane the truth about its node:
//
//   every discover_interval   discovery (NVML, else nvidia-smi): the topology document with
//                             per-GPU health, MIG mode and MIG instances -> linkfit.io/topology
//   every devices_interval    the kubelet's PodResources: the devices each pod really holds
//                             -> linkfit.io/devices-in-use
//   (a figure the machine did not tell, taken from the GPU model table, is logged once per figure
//   and model, and counted in AgentMetrics every discovery)
//   on an Xid event           the GPU is marked unhealthy (sticky until the agent restarts, as
//                             NVIDIA's device plugin does) and the document republished at once
//
// Each round publishes through NodePublisher, which patches only what changed. Errors back off
// exponentially (1 s doubling to max_backoff) and are logged; a failed discovery keeps the last
// good document, a failed PodResources read keeps the last published devices (the kubelet
// restarting must not make every pod look device-less).
//
// Thread-safety: RunRound() and Run() on one thread; MarkUnhealthy() and Stop() from any thread.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "linkfit/agent/agent_metrics.h"
#include "linkfit/agent/discovery.h"
#include "linkfit/agent/node_publisher.h"
#include "linkfit/common/mutex.h"
#include "linkfit/common/result.h"
#include "linkfit/kube/annotations.h"

namespace linkfit::agent {

struct AgentOptions {
  std::chrono::milliseconds discover_interval{std::chrono::seconds(60)};
  std::chrono::milliseconds devices_interval{std::chrono::seconds(10)};
  std::chrono::milliseconds max_backoff{std::chrono::seconds(60)};
};

class NodeAgent {
 public:
  using DiscoverFn = std::function<Result<Discovery>()>;
  // The devices pods hold, given the node's current spec; an error when they cannot be read.
  using DevicesFn = std::function<Result<kube::DevicesInUse>(const topology::TopologySpec&)>;

  // `publisher` must outlive the agent; `devices` may be empty (no PodResources socket: the
  // devices-in-use annotation is then left alone).
  NodeAgent(AgentOptions options, DiscoverFn discover, DevicesFn devices, NodePublisher& publisher);

  // One round: discovers and reads devices when due (or now, when forced), publishes.
  // Returns whether anything was patched; an error when discovery never succeeded, or
  // publishing failed.
  Result<bool> RunRound(bool force = false);

  // Counts guessed figures (Discovery::guessed) of every discovery in `metrics` (may be null;
  // must outlive the agent). Call before the first round.
  void SetMetrics(AgentMetrics* metrics) { metrics_ = metrics; }

  // Runs rounds until Stop(), sleeping between them (backing off after errors).
  void Run();
  void Stop();

  // A GPU turned unhealthy (an Xid event): published in the next round, which starts at once.
  void MarkUnhealthy(int gpu, const std::string& problem);

  // How this node hands devices to containers (topology::kHandoffModes), published in the
  // topology document; a change is published in a round that starts at once.
  void SetHandoffMode(const std::string& mode);
  // The same for the node's RDMA NICs (TopologySpec::nic_handoff_mode), published only while
  // discovery finds NICs.
  void SetNicHandoffMode(const std::string& mode);

  // The node's GPUs as last discovered, with the GPUs Xid events made unhealthy and the hand-off
  // mode (nullopt before the first successful discovery). For the NRI plugin's decisions.
  std::optional<topology::TopologySpec> current_spec() const;

 private:
  topology::TopologySpec WithHealthLocked(topology::TopologySpec spec) const
      LINKFIT_REQUIRES(mutex_);
  // Logs a discovery's warnings; a guessed figure once per (figure, model) and process.
  void LogWarnings(const Discovery& found);

  const AgentOptions options_;
  const DiscoverFn discover_;
  const DevicesFn devices_;
  NodePublisher& publisher_;

  mutable Mutex mutex_;
  CondVar wake_;
  bool stop_ LINKFIT_GUARDED_BY(mutex_) = false;
  bool urgent_ LINKFIT_GUARDED_BY(mutex_) = false;
  std::map<int, std::string> xid_problems_ LINKFIT_GUARDED_BY(mutex_);
  std::string handoff_mode_ LINKFIT_GUARDED_BY(mutex_);
  std::string nic_handoff_mode_ LINKFIT_GUARDED_BY(mutex_);
  std::optional<Discovery> discovery_ LINKFIT_GUARDED_BY(mutex_);
  std::optional<std::string> topology_json_ LINKFIT_GUARDED_BY(mutex_);
  std::optional<std::string> devices_json_ LINKFIT_GUARDED_BY(mutex_);

  // Loop-thread only.
  AgentMetrics* metrics_ = nullptr;
  std::set<std::pair<std::string, std::string>> guesses_logged_;  // (figure, model)
  std::chrono::steady_clock::time_point next_discovery_{};
  std::chrono::steady_clock::time_point next_devices_{};
};

}  // namespace linkfit::agent
