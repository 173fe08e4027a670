#include "linkfit/agent/node_agent.h"

#include <algorithm>

#include "linkfit/common/log.h"
#include "linkfit/topology/spec.h"

namespace linkfit::agent {

NodeAgent::NodeAgent(AgentOptions options, DiscoverFn discover, DevicesFn devices,
                     NodePublisher& publisher)
    : options_(options),
      discover_(std::move(discover)),
      devices_(std::move(devices)),
      publisher_(publisher) {}

topology::TopologySpec NodeAgent::WithHealthLocked(topology::TopologySpec spec) const {
  spec.handoff_mode = handoff_mode_;
  spec.nic_handoff_mode = spec.nics.empty() ? std::string() : nic_handoff_mode_;
  for (const auto& [gpu, problem] : xid_problems_) {
    for (topology::GpuSpec& entry : spec.gpus) {
      if (entry.index != gpu || !entry.healthy) continue;
      entry.healthy = false;
      entry.health_problem = problem;
    }
  }
  return spec;
}

void NodeAgent::LogWarnings(const Discovery& found) {
  std::set<std::string> guesses;
  for (const GuessedFigure& guess : found.guessed) {
    guesses.insert(guess.warning);
    if (metrics_ != nullptr) metrics_->CountGuessedFigure(guess.figure, guess.model);
    if (guesses_logged_.emplace(guess.figure, guess.model).second) {
      log::Warning("discovery: " + guess.warning + " (said once)");
    }
  }
  for (const std::string& warning : found.warnings) {
    if (guesses.count(warning) == 0) log::Warning("discovery: " + warning);
  }
}

Result<bool> NodeAgent::RunRound(bool force) {
  const auto now = std::chrono::steady_clock::now();
  bool have_discovery = false;
  {
    MutexLock lock(mutex_);
    have_discovery = discovery_.has_value();
    urgent_ = false;
  }
  if (force || !have_discovery || now >= next_discovery_) {
    auto found = discover_();
    next_discovery_ = now + options_.discover_interval;
    publisher_.Invalidate();
    if (found) {
      LogWarnings(*found);
      MutexLock lock(mutex_);
      discovery_ = std::move(*found);
    } else if (!have_discovery) {
      return WithContext(found.error(), "discovery");
    } else {
      log::Error("discovery failed, the last document stays published: " + found.error().message);
    }
  }
  topology::TopologySpec spec;
  {
    MutexLock lock(mutex_);
    spec = WithHealthLocked(discovery_->spec);
    topology_json_ = topology::ToTopologyDocument(spec);
  }
  if (devices_ && (force || now >= next_devices_)) {
    next_devices_ = now + options_.devices_interval;
    auto devices = devices_(spec);
    if (devices) {
      MutexLock lock(mutex_);
      devices_json_ = kube::EncodeDevicesInUse(*devices);
    } else {
      log::Error(
          "the kubelet's PodResources could not be read, the last devices-in-use stay "
          "published: " +
          devices.error().message);
    }
  }
  WantedAnnotations wanted;
  {
    MutexLock lock(mutex_);
    wanted[kube::kAnnotationTopology] = *topology_json_;
    if (devices_json_) wanted[kube::kAnnotationDevicesInUse] = *devices_json_;
  }
  return publisher_.Publish(wanted);
}

void NodeAgent::Run() {
  std::chrono::milliseconds backoff{0};
  for (;;) {
    auto round = RunRound();
    if (round) {
      backoff = std::chrono::milliseconds(0);
      if (*round) log::Info("node annotations published");
    } else {
      backoff = std::clamp(backoff * 2, std::chrono::milliseconds(1000), options_.max_backoff);
      log::Error(round.error().message + "; retrying in " + std::to_string(backoff.count()) +
                 " ms");
    }
    const auto wait = backoff.count() > 0
                          ? backoff
                          : std::min(options_.devices_interval, options_.discover_interval);
    const auto deadline = std::chrono::steady_clock::now() + wait;
    MutexLock lock(mutex_);
    while (!stop_ && !(urgent_ && backoff.count() == 0) && wake_.WaitUntil(mutex_, deadline)) {
    }
    if (stop_) return;
  }
}

void NodeAgent::Stop() {
  MutexLock lock(mutex_);
  stop_ = true;
  wake_.NotifyAll();
}

void NodeAgent::SetHandoffMode(const std::string& mode) {
  MutexLock lock(mutex_);
  if (mode == handoff_mode_) return;
  log::Info("hand-off mode: " + mode);
  handoff_mode_ = mode;
  urgent_ = true;
  wake_.NotifyAll();
}

void NodeAgent::SetNicHandoffMode(const std::string& mode) {
  MutexLock lock(mutex_);
  if (mode == nic_handoff_mode_) return;
  log::Info("NIC hand-off mode: " + mode);
  nic_handoff_mode_ = mode;
  urgent_ = true;
  wake_.NotifyAll();
}

void NodeAgent::MarkUnhealthy(int gpu, const std::string& problem) {
  MutexLock lock(mutex_);
  if (xid_problems_.emplace(gpu, problem).second) {
    log::Warning("GPU " + std::to_string(gpu) + " is unhealthy: " + problem);
    urgent_ = true;
    wake_.NotifyAll();
  }
}

std::optional<topology::TopologySpec> NodeAgent::current_spec() const {
  MutexLock lock(mutex_);
  if (!discovery_) return std::nullopt;
  return WithHealthLocked(discovery_->spec);
}

}  // namespace linkfit::agent
