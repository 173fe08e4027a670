#pragma once

// NriPlugin: linkfit's NRI plugin, the only place devices are given (design §4.3), as a handler of
// the runtime's calls on the Plugin service; ServeNri (nri_connection.h) is the socket loop.
//
//   Configure        subscribes to CreateContainer, StopContainer, RemoveContainer and
//                    RemovePodSandbox (api.proto's Event numbers 4, 10, 11, 3)
//   Synchronize      rebuilds the ledger from the live containers (chunked with `more`): each
//                    container linkfit gave devices carries them in its linkfit.io/handed
//                    annotation, so a restarted plugin knows every holder without a checkpoint
//   CreateContainer  Decide() (handoff.h) on the event's pod UID, container name, the sandbox's
//                    linkfit.io/allocation and the kubelet's label (linkfit.io/kubelet-ids.*):
//                    inject (CDI names where the runtime injects them, else device files; env and
//                    the linkfit.io/handed annotation always) or refuse with the reason as the
//                    call's error (the runtime fails the creation and the kubelet shows it); a
//                    container without a plan gets NVIDIA_VISIBLE_DEVICES=void and no RDMA
//                    device. Planned RDMA NICs come as their CDI names where the runtime injects
//                    CDI and a CDI spec declares them (NicHandoffOptions::cdi_kind,
//                    nic_cdi_declared), else as device files (/dev/infiniband/uverbsN of each;
//                    nic_device_files.h); rdma_cm comes once, as a device file unless a CDI
//                    device handed to the container brings it; NCCL_IB_HCA / UCX_NET_DEVICES
//                    name exactly them (NicEnvironment) unless the operator turned that off or
//                    exempted the pod's namespace
//   StopContainer, RemoveContainer
//                    release what the container held
//   RemovePodSandbox releases what every container of the pod held
//   StateChange      the same events from runtimes older than NRI v0.12.0, which have no
//                    RemoveContainer / RemovePodSandbox calls (a newer runtime falls back to it
//                    only for a plugin that answers them Unimplemented, and flags it as deprecated)
//
// Every answer comes from the event and local state: no I/O, well inside the runtime's 2 s.
//
// Thread-safety: one thread (the connection's reader) calls Handle / HandleFrames.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "linkfit/handoff/device_files.h"
#include "linkfit/handoff/handoff.h"
#include "linkfit/handoff/nic_device_files.h"
#include "linkfit/handoff/nri_frames.h"
#include "linkfit/handoff/nri_messages.h"
#include "linkfit/handoff/plugin_devices.h"

namespace linkfit::handoff {

inline constexpr const char* kAnnotationHanded = "linkfit.io/handed";

struct NriPluginOptions {
  std::string node_name;
  // The operator's switch for CDI names (nvidia.com/gpu=<UUID>) in adjustments. They go only to
  // a runtime that injects them (RuntimeInjectsCdi: containerd >= 2.1, CRI-O >= 1.34, as its
  // Configure names it), whatever this says; false sends them to none (a node without a CDI spec
  // for nvidia.com/gpu, where a CDI name would fail the container's creation): every runtime then
  // gets device files and NVIDIA_VISIBLE_DEVICES, and the node reports "nri-env". The agent's
  // --no-cdi flag.
  bool cdi = true;
  MismatchPolicy mismatch = MismatchPolicy::kPlanWins;
  UnplannedPolicy unplanned = UnplannedPolicy::kAdoptIfFree;
  // Called after every change of the ledger (a container given or releasing devices, a
  // completed Synchronize) with what live containers hold: the agent publishes it as
  // linkfit.io/devices-in-use, the truth of what was handed over.
  std::function<void(const Ledger&)> on_ledger_change = nullptr;
  // Called when the runtime configures the plugin, with the hand-off mode in use ("nri-cdi" when
  // CDI names are sent, else "nri-env"; handoff.h) and the runtime's name and version.
  std::function<void(const std::string& mode, const std::string& runtime)> on_configured = nullptr;
  // Where no CDI names are sent (a runtime that does not inject them, or `cdi` off), the device
  // files of what a container is handed go into the adjustment as LinuxDevice entries
  // (device_files.h). Called on every such hand-over: it must answer from memory (the agent caches
  // what it read). Unset: no device files (NVIDIA_VISIBLE_DEVICES alone, for the NVIDIA toolkit's
  // legacy hook).
  std::function<Result<NodeDeviceFiles>()> device_files = nullptr;
  // Namespaces of GPU system daemons (the GPU operator's DCGM exporter, validators) whose
  // containers carry neither a plan nor a kubelet label and rely on NVIDIA_VISIBLE_DEVICES=all:
  // left unchanged instead of getting "void". Only namespaces an administrator controls belong
  // here: any pod in them may reach every GPU.
  std::set<std::string> exempt_namespaces = {};
  // How planned NICs reach containers: NCCL's and UCX's environment (the agent's --no-nic-env
  // turns it off) and the NICs' CDI kind (--nic-cdi-kind).
  NicHandoffOptions nics = {};
  // Namespaces whose containers get their NICs without NCCL_IB_HCA / UCX_NET_DEVICES (their own
  // NCCL configuration wins): --nic-env-exempt-namespace.
  std::set<std::string> nic_env_exempt_namespaces = {};
  // The device files of NICs (nic_device_files.h), where no CDI names are sent for NICs; must
  // answer from memory like device_files. A NIC whose files are unknown makes the creation fail
  // (a container must not silently run without the NIC it was planned). Unset: no NIC files.
  std::function<Result<NicDeviceFiles>()> nic_device_files = nullptr;
  // Called with the NIC hand-off mode when the runtime configures the plugin: "nri-cdi" where NIC
  // CDI names are sent (to NICs a CDI spec declares; the node's NICs may not be known yet), else
  // "nri-env" (device files and environment).
  std::function<void(const std::string& nic_mode)> on_nic_configured = nullptr;
  // The NICs whose CDI device `nics.cdi_kind=<name>` the node's CDI specs declare, each with
  // whether it brings rdma_cm (cdi_specs.h DeclaredNicCdi); asked on every hand-over of NICs
  // where CDI names are sent, it must answer from memory (the agent reads the specs when the NICs
  // change). A NIC not declared goes as device files. Unset: every NIC is taken as declared.
  std::function<std::map<std::string, bool>()> nic_cdi_declared = nullptr;
};

// The devices of a container as its linkfit.io/handed annotation holds them (and back).
std::string EncodeHanded(const HandedDevices& devices);
Result<HandedDevices> DecodeHanded(std::string_view text);

class NriPlugin {
 public:
  using NodeFacts = std::function<topology::TopologySpec()>;
  NriPlugin(NriPluginOptions options, NodeFacts node);

  TtrpcResponse Handle(const TtrpcRequest& request);
  // Feeds bytes read from the runtime's socket; returns the bytes to write back (responses on
  // the Plugin connection, each framed by EncodeMuxMessage). A framing error is final: the
  // connection must be closed.
  Result<std::string> HandleFrames(std::string_view incoming);
  // The same one layer down: ttrpc bytes of the Plugin connection in (a message may come in
  // pieces), the responses out, one whole ttrpc message (header and payload) each.
  Result<std::vector<std::string>> HandleStream(std::string_view ttrpc_bytes);

  const Ledger& ledger() const { return ledger_; }
  std::uint64_t mismatches() const { return mismatches_; }

 private:
  TtrpcResponse Dispatch(const TtrpcRequest& request);
  TtrpcResponse CreateContainer(std::string_view payload);
  TtrpcResponse Synchronize(std::string_view payload);
  TtrpcResponse RemoveContainer(std::string_view payload);
  TtrpcResponse RemovePodSandbox(std::string_view payload);
  TtrpcResponse HandleStateChange(std::string_view payload);
  // The NIC options for one hand-over: no CDI names where the runtime takes none, the NICs' CDI
  // declarations as they are now where `decision` hands NICs, the environment off for an exempt
  // namespace.
  NicHandoffOptions NicOptions(const std::string& pod_namespace,
                               const HandoffDecision& decision) const;
  // Adds the device files of the handed NICs that go without CDI names to `adjust` (and rdma_cm
  // where no CDI device brings it); an error says which NIC has none.
  Result<void> AddNicFiles(const HandoffDecision& decision, const NicHandoffOptions& nics,
                           ContainerAdjustment& adjust) const;
  bool SendsNicCdi() const { return sends_cdi_ && !options_.nics.cdi_kind.empty(); }

  NriPluginOptions options_;
  NodeFacts node_;
  Ledger ledger_;
  Ledger syncing_;  // the ledger being rebuilt by a chunked Synchronize
  std::map<std::string, std::string> sandbox_uid_;  // sandbox id -> pod UID, during a sync
  std::uint64_t mismatches_ = 0;
  bool sends_cdi_ = false;  // options_.cdi and RuntimeInjectsCdi of what Configure named
  MuxReader mux_;
  std::map<std::uint32_t, TtrpcReader> ttrpc_;
};

}  // namespace linkfit::handoff
