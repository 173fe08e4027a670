#include "linkfit/handoff/nri_plugin.h"

#include "linkfit/common/log.h"
#include "linkfit/common/strings.h"
#include "linkfit/kube/annotations.h"

namespace linkfit::handoff {
namespace {

constexpr std::int32_t kStatusUnknown = 2;  // google.rpc.Code UNKNOWN
constexpr std::int32_t kStatusInvalidArgument = 3;
constexpr std::int32_t kStatusUnimplemented = 12;

TtrpcResponse Ok(std::string payload = "") { return {0, "", std::move(payload)}; }
TtrpcResponse Failed(std::int32_t code, std::string message) {
  return {code, std::move(message), ""};
}

std::vector<std::string> Amounts(const std::vector<std::pair<std::string, int>>& entries) {
  std::vector<std::string> out;
  for (const auto& [name, milli] : entries) out.push_back(name + ":" + std::to_string(milli));
  return out;
}

// "NAME:THOUSANDTHS,..." back into entries; `what` names the list in errors.
Result<std::vector<std::pair<std::string, int>>> ParseAmounts(const std::vector<std::string>& items,
                                                              const char* what) {
  std::vector<std::pair<std::string, int>> out;
  for (const std::string& item : items) {
    const std::size_t colon = item.rfind(':');
    const auto milli = colon == std::string::npos || colon == 0
                           ? std::nullopt
                           : ParseInt(std::string_view(item).substr(colon + 1));
    if (!milli || *milli < 1 || *milli > 1000) {
      return MakeError(std::string(kAnnotationHanded) + ": " + what + " " + QuoteForMessage(item) +
                       " is not NAME:thousandths (1..1000)");
    }
    out.emplace_back(item.substr(0, colon), static_cast<int>(*milli));
  }
  return out;
}

}  // namespace

std::string EncodeHanded(const HandedDevices& devices) {
  std::string text = "gpus=" + JoinStrings(devices.gpus) + ";mig=" + JoinStrings(devices.mig) +
                     ";shares=" + JoinStrings(Amounts(devices.shares));
  if (!devices.nics.empty()) text += ";nics=" + JoinStrings(Amounts(devices.nics));
  return text;
}

Result<HandedDevices> DecodeHanded(std::string_view text) {
  HandedDevices devices;
  const std::vector<std::string_view> parts = Split(text, ';');
  if ((parts.size() != 3 && parts.size() != 4) || !StartsWith(parts[0], "gpus=") ||
      !StartsWith(parts[1], "mig=") || !StartsWith(parts[2], "shares=") ||
      (parts.size() == 4 && !StartsWith(parts[3], "nics="))) {
    return MakeError(std::string(kAnnotationHanded) + " " + QuoteForMessage(text) +
                     ": expected gpus=...;mig=...;shares=...[;nics=...]");
  }
  const auto list = [](std::string_view value) {
    std::vector<std::string> out;
    if (value.empty()) return out;
    for (std::string_view item : Split(value, ',')) out.emplace_back(item);
    return out;
  };
  devices.gpus = list(parts[0].substr(5));
  devices.mig = list(parts[1].substr(4));
  LINKFIT_ASSIGN_OR_RETURN(devices.shares, ParseAmounts(list(parts[2].substr(7)), "share"));
  if (parts.size() == 4) {
    LINKFIT_ASSIGN_OR_RETURN(devices.nics, ParseAmounts(list(parts[3].substr(5)), "NIC"));
  }
  return devices;
}

NriPlugin::NriPlugin(NriPluginOptions options, NodeFacts node)
    : options_(std::move(options)), node_(std::move(node)) {}

TtrpcResponse NriPlugin::Handle(const TtrpcRequest& request) {
  const std::size_t before = ledger_.containers();
  TtrpcResponse response = Dispatch(request);
  // Every handled change reaches the observer (counts alone would miss a replaced entry).
  if (options_.on_ledger_change &&
      (request.method == "CreateContainer" || request.method == "StopContainer" ||
       request.method == "RemoveContainer" || request.method == "RemovePodSandbox" ||
       request.method == "StateChange" ||
       (request.method == "Synchronize" && syncing_.containers() == 0) ||
       before != ledger_.containers())) {
    options_.on_ledger_change(ledger_);
  }
  return response;
}

TtrpcResponse NriPlugin::Dispatch(const TtrpcRequest& request) {
  if (request.service != kPluginService) {
    return Failed(kStatusUnimplemented, "unknown service " + request.service);
  }
  if (request.method == "Configure") {
    auto configure = DecodeConfigureRequest(request.payload);
    if (!configure) return Failed(kStatusInvalidArgument, configure.error().message);
    sends_cdi_ =
        options_.cdi && RuntimeInjectsCdi(configure->runtime_name, configure->runtime_version);
    if (options_.on_configured) {
      options_.on_configured(sends_cdi_ ? "nri-cdi" : "nri-env",
                             configure->runtime_name + " " + configure->runtime_version);
    }
    if (options_.on_nic_configured) {
      options_.on_nic_configured(SendsNicCdi() ? "nri-cdi" : "nri-env");
    }
    return Ok(EncodeConfigureResponse(
        EventBit(NriEvent::kCreateContainer) | EventBit(NriEvent::kStopContainer) |
        EventBit(NriEvent::kRemoveContainer) | EventBit(NriEvent::kRemovePodSandbox)));
  }
  if (request.method == "Synchronize") return Synchronize(request.payload);
  if (request.method == "CreateContainer") return CreateContainer(request.payload);
  // A stopped container uses no device any more; a removed one has stopped (or never ran).
  if (request.method == "StopContainer" || request.method == "RemoveContainer") {
    return RemoveContainer(request.payload);
  }
  if (request.method == "RemovePodSandbox") return RemovePodSandbox(request.payload);
  if (request.method == "StateChange") return HandleStateChange(request.payload);
  if (request.method == "Shutdown") return Ok();
  return Failed(kStatusUnimplemented, "linkfit's NRI plugin does not handle " + request.method);
}

TtrpcResponse NriPlugin::RemoveContainer(std::string_view payload) {
  auto event = DecodeContainerEvent(payload);
  if (!event) return Failed(kStatusInvalidArgument, event.error().message);
  ledger_.Release({event->pod.uid, event->container.name});
  return Ok();  // StopContainerResponse {} (no updates), RemoveContainerResponse {}
}

TtrpcResponse NriPlugin::RemovePodSandbox(std::string_view payload) {
  auto pod = DecodePodSandboxEvent(payload);
  if (!pod) return Failed(kStatusInvalidArgument, pod.error().message);
  ledger_.ReleasePod(pod->uid);
  return Ok();  // RemovePodSandboxResponse {}
}

TtrpcResponse NriPlugin::HandleStateChange(std::string_view payload) {
  auto change = DecodeStateChange(payload);
  if (!change) return Failed(kStatusInvalidArgument, change.error().message);
  if (change->event == static_cast<int>(NriEvent::kRemoveContainer)) {
    ledger_.Release({change->pod.uid, change->container.name});
  } else if (change->event == static_cast<int>(NriEvent::kRemovePodSandbox)) {
    ledger_.ReleasePod(change->pod.uid);
  }
  return Ok();  // Empty
}

TtrpcResponse NriPlugin::Synchronize(std::string_view payload) {
  auto sync = DecodeSynchronizeRequest(payload);
  if (!sync) return Failed(kStatusInvalidArgument, sync.error().message);
  for (const PodSandbox& pod : sync->pods) sandbox_uid_[pod.id] = pod.uid;
  for (const Container& container : sync->containers) {
    const auto handed = container.annotations.find(kAnnotationHanded);
    if (handed == container.annotations.end()) continue;
    const auto uid = sandbox_uid_.find(container.pod_sandbox_id);
    auto devices = DecodeHanded(handed->second);
    if (uid == sandbox_uid_.end() || !devices) continue;  // not ours to account
    syncing_.Hold({uid->second, container.name}, std::move(*devices));
  }
  if (!sync->more) {
    ledger_ = std::move(syncing_);
    syncing_ = Ledger();
    sandbox_uid_.clear();
  }
  return Ok(EncodeSynchronizeResponse(sync->more));
}

TtrpcResponse NriPlugin::CreateContainer(std::string_view payload) {
  auto event = DecodeContainerEvent(payload);
  if (!event) return Failed(kStatusInvalidArgument, event.error().message);
  HandoffRequest request;
  request.node_name = options_.node_name;
  request.pod_uid = event->pod.uid;
  request.container = event->container.name;
  if (const auto plan = event->pod.annotations.find(kube::kAnnotationAllocation);
      plan != event->pod.annotations.end()) {
    request.plan = plan->second;
  }
  for (const auto& [key, value] : event->container.annotations) {
    if (!StartsWith(key, kAnnotationKubeletIdsPrefix)) continue;
    if (!request.kubelet_ids) request.kubelet_ids.emplace();
    for (std::string_view id : Split(value, ',')) {
      if (!Trim(id).empty()) request.kubelet_ids->emplace_back(Trim(id));
    }
  }
  const HandoffDecision decision =
      Decide(request, node_(), ledger_, options_.mismatch, options_.unplanned);
  if (decision.kind == HandoffDecision::Kind::kNoGpu && !request.plan &&
      options_.exempt_namespaces.count(event->pod.pod_namespace) != 0) {
    return Ok(EncodeCreateContainerResponse({}));  // a GPU system daemon: left as it asked
  }
  ContainerAdjustment adjust;
  const NicHandoffOptions nics = NicOptions(event->pod.pod_namespace, decision);
  if (auto added = AddNicFiles(decision, nics, adjust); !added) {
    return Failed(kStatusUnknown,
                  "linkfit: the plan's NICs cannot be handed over: " + added.error().message);
  }
  if (decision.mismatch) {
    ++mismatches_;
    log::Warning("NRI: pod " + request.pod_uid + " container " + request.container + ": " +
                 decision.reason);
  }
  if (decision.kind == HandoffDecision::Kind::kRefuse) {
    return Failed(kStatusUnknown, "linkfit: " + decision.reason);
  }
  const Adjustment adjustment = AdjustmentFor(decision, sends_cdi_, nics);
  adjust.env = adjustment.env;
  adjust.cdi_devices = adjustment.cdi_devices;
  if (decision.kind == HandoffDecision::Kind::kInject && !sends_cdi_ && options_.device_files) {
    auto files = options_.device_files();
    auto needed = files ? DeviceFilesFor(decision.devices, *files)
                        : Result<std::vector<DeviceFile>>(tl::unexpected(files.error()));
    if (!needed) {
      // The container still gets NVIDIA_VISIBLE_DEVICES: right devices through the NVIDIA
      // toolkit's hook, none without it; never another pod's.
      log::Warning("NRI: pod " + request.pod_uid + " container " + request.container +
                   ": no device files added: " + needed.error().message);
    } else {
      for (const DeviceFile& file : *needed) {
        adjust.devices.push_back({file.path, "c", file.major, file.minor, file.file_mode});
      }
    }
  }
  if (decision.kind == HandoffDecision::Kind::kInject) {
    adjust.annotations[kAnnotationHanded] = EncodeHanded(decision.devices);
    ledger_.Hold({request.pod_uid, request.container}, decision.devices);
  }
  return Ok(EncodeCreateContainerResponse(adjust));
}

NicHandoffOptions NriPlugin::NicOptions(const std::string& pod_namespace,
                                        const HandoffDecision& decision) const {
  NicHandoffOptions nics = options_.nics;
  if (options_.nic_env_exempt_namespaces.count(pod_namespace) != 0) nics.env = false;
  if (!sends_cdi_) {
    nics.cdi_kind.clear();
  } else if (!nics.cdi_kind.empty() && options_.nic_cdi_declared &&
             !decision.devices.nics.empty()) {
    nics.cdi_declared = options_.nic_cdi_declared();
  }
  return nics;
}

Result<void> NriPlugin::AddNicFiles(const HandoffDecision& decision, const NicHandoffOptions& nics,
                                    ContainerAdjustment& adjust) const {
  if (decision.kind != HandoffDecision::Kind::kInject || decision.devices.nics.empty() ||
      !options_.nic_device_files) {
    return {};
  }
  std::vector<std::string> by_files;
  for (const auto& [name, milli] : decision.devices.nics) {
    if (!nics.ByCdi(name)) by_files.push_back(name);
  }
  const bool rdma_cm = !nics.CdiBringsRdmaCm(decision.devices.nics);
  if (by_files.empty() && !rdma_cm) return {};
  auto files = options_.nic_device_files();
  if (!files) return tl::unexpected(files.error());
  std::vector<DeviceFile> needed;
  LINKFIT_ASSIGN_OR_RETURN(needed, NicDeviceFilesFor(by_files, *files, rdma_cm));
  for (const DeviceFile& file : needed) {
    adjust.devices.push_back({file.path, "c", file.major, file.minor, file.file_mode});
  }
  return {};
}

Result<std::vector<std::string>> NriPlugin::HandleStream(std::string_view ttrpc_bytes) {
  TtrpcReader& reader = ttrpc_[kPluginConn];
  if (auto fed = reader.Feed(ttrpc_bytes); !fed) return tl::unexpected(fed.error());
  std::vector<std::string> replies;
  while (auto message = reader.Next()) {
    if (message->type != TtrpcType::kRequest) continue;
    TtrpcResponse response;
    if (auto request = DecodeTtrpcRequest(message->payload)) {
      response = Handle(*request);
    } else {
      response = Failed(kStatusInvalidArgument, request.error().message);
    }
    auto reply =
        EncodeTtrpcFrame({message->stream, TtrpcType::kResponse, 0, EncodeTtrpcResponse(response)});
    if (!reply) return tl::unexpected(reply.error());
    replies.push_back(std::move(*reply));
  }
  return replies;
}

Result<std::string> NriPlugin::HandleFrames(std::string_view incoming) {
  if (auto fed = mux_.Feed(incoming); !fed) return tl::unexpected(fed.error());
  std::string outgoing;
  while (auto frame = mux_.Next()) {
    if (frame->conn != kPluginConn) continue;  // replies to linkfit's own calls: not here
    std::vector<std::string> replies;
    LINKFIT_ASSIGN_OR_RETURN(replies, HandleStream(frame->payload));
    for (const std::string& reply : replies) outgoing += EncodeMuxMessage(kPluginConn, reply);
  }
  return outgoing;
}

}  // namespace linkfit::handoff
