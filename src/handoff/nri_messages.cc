#include "linkfit/handoff/nri_messages.h"

#include "handoff/proto_message.h"
#include "nri_api.pb.h"

namespace linkfit::handoff {
namespace {

namespace api = nri::pkg::api::v1alpha1;

std::map<std::string, std::string> MapOf(
    const google::protobuf::Map<std::string, std::string>& in) {
  return {in.begin(), in.end()};
}

void FillMap(google::protobuf::Map<std::string, std::string>& out,
             const std::map<std::string, std::string>& in) {
  for (const auto& [key, value] : in) out[key] = value;
}

PodSandbox PodOf(const api::PodSandbox& in) {
  return PodSandbox{in.id(),         in.name(),          in.uid(),
                    in.namespace_(), MapOf(in.labels()), MapOf(in.annotations())};
}

void FillPod(api::PodSandbox& out, const PodSandbox& in) {
  out.set_id(in.id);
  out.set_name(in.name);
  out.set_uid(in.uid);
  out.set_namespace_(in.pod_namespace);
  FillMap(*out.mutable_labels(), in.labels);
  FillMap(*out.mutable_annotations(), in.annotations);
}

Container ContainerOf(const api::Container& in) {
  return Container{in.id(),
                   in.pod_sandbox_id(),
                   in.name(),
                   MapOf(in.annotations()),
                   {in.env().begin(), in.env().end()}};
}

void FillContainer(api::Container& out, const Container& in) {
  out.set_id(in.id);
  out.set_pod_sandbox_id(in.pod_sandbox_id);
  out.set_name(in.name);
  FillMap(*out.mutable_annotations(), in.annotations);
  for (const std::string& entry : in.env) out.add_env(entry);
}

}  // namespace

std::string EncodeRegisterPlugin(std::string_view name, std::string_view index) {
  api::RegisterPluginRequest request;
  request.set_plugin_name(std::string(name));
  request.set_plugin_idx(std::string(index));
  return Serialize(request);
}

Result<ConfigureRequest> DecodeConfigureRequest(std::string_view bytes) {
  api::ConfigureRequest in;
  LINKFIT_ASSIGN_OR_RETURN(in, Parse<api::ConfigureRequest>(bytes, "ConfigureRequest"));
  return ConfigureRequest{in.config(), in.runtime_name(), in.runtime_version()};
}

std::string EncodeConfigureRequest(const ConfigureRequest& request) {
  api::ConfigureRequest out;
  out.set_config(request.config);
  out.set_runtime_name(request.runtime_name);
  out.set_runtime_version(request.runtime_version);
  return Serialize(out);
}

std::string EncodeConfigureResponse(std::int32_t events) {
  api::ConfigureResponse out;
  out.set_events(events);
  return Serialize(out);
}

Result<SynchronizeRequest> DecodeSynchronizeRequest(std::string_view bytes) {
  api::SynchronizeRequest in;
  LINKFIT_ASSIGN_OR_RETURN(in, Parse<api::SynchronizeRequest>(bytes, "SynchronizeRequest"));
  SynchronizeRequest request;
  for (const api::PodSandbox& pod : in.pods()) request.pods.push_back(PodOf(pod));
  for (const api::Container& container : in.containers()) {
    request.containers.push_back(ContainerOf(container));
  }
  request.more = in.more();
  return request;
}

std::string EncodeSynchronizeResponse(bool more) {
  api::SynchronizeResponse out;
  out.set_more(more);
  return Serialize(out);
}

Result<ContainerEvent> DecodeContainerEvent(std::string_view bytes) {
  api::CreateContainerRequest in;
  LINKFIT_ASSIGN_OR_RETURN(in, Parse<api::CreateContainerRequest>(bytes, "container event"));
  if (!in.has_pod() || !in.has_container()) {
    return MakeError("container event: without pod or container");
  }
  return ContainerEvent{PodOf(in.pod()), ContainerOf(in.container())};
}

Result<PodSandbox> DecodePodSandboxEvent(std::string_view bytes) {
  api::PodSandboxRequest in;
  LINKFIT_ASSIGN_OR_RETURN(in, Parse<api::PodSandboxRequest>(bytes, "pod sandbox event"));
  if (!in.has_pod()) return MakeError("pod sandbox event: without pod");
  return PodOf(in.pod());
}

std::string EncodePodSandboxEvent(const PodSandbox& pod) {
  api::PodSandboxRequest out;
  FillPod(*out.mutable_pod(), pod);
  return Serialize(out);
}

Result<StateChange> DecodeStateChange(std::string_view bytes) {
  api::StateChangeEvent in;
  LINKFIT_ASSIGN_OR_RETURN(in, Parse<api::StateChangeEvent>(bytes, "StateChangeEvent"));
  return StateChange{in.event(), PodOf(in.pod()), ContainerOf(in.container())};
}

std::string EncodeStateChange(const StateChange& change) {
  api::StateChangeEvent out;
  out.set_event(change.event);
  FillPod(*out.mutable_pod(), change.pod);
  if (!change.container.name.empty()) FillContainer(*out.mutable_container(), change.container);
  return Serialize(out);
}

std::string EncodeCreateContainerResponse(const ContainerAdjustment& adjust) {
  api::CreateContainerResponse out;
  api::ContainerAdjustment& adjustment = *out.mutable_adjust();
  FillMap(*adjustment.mutable_annotations(), adjust.annotations);
  for (const auto& [key, value] : adjust.env) {
    api::KeyValue& pair = *adjustment.add_env();
    pair.set_key(key);
    pair.set_value(value);
  }
  for (const LinuxDevice& device : adjust.devices) {
    api::LinuxDevice& entry = *adjustment.mutable_linux()->add_devices();
    entry.set_path(device.path);
    entry.set_type(device.type);
    entry.set_major(device.major);
    entry.set_minor(device.minor);
    if (device.file_mode != 0) entry.mutable_file_mode()->set_value(device.file_mode);
  }
  for (const std::string& name : adjust.cdi_devices) adjustment.add_cdi_devices()->set_name(name);
  return Serialize(out);
}

Result<ContainerAdjustment> DecodeCreateContainerResponse(std::string_view bytes) {
  api::CreateContainerResponse in;
  LINKFIT_ASSIGN_OR_RETURN(in,
                           Parse<api::CreateContainerResponse>(bytes, "CreateContainerResponse"));
  ContainerAdjustment adjust;
  const api::ContainerAdjustment& from = in.adjust();
  adjust.annotations = MapOf(from.annotations());
  for (const api::KeyValue& pair : from.env()) adjust.env.emplace_back(pair.key(), pair.value());
  for (const api::LinuxDevice& device : from.linux().devices()) {
    adjust.devices.push_back(LinuxDevice{device.path(), device.type(), device.major(),
                                         device.minor(), device.file_mode().value()});
  }
  for (const api::CDIDevice& device : from.cdi_devices())
    adjust.cdi_devices.push_back(device.name());
  return adjust;
}

std::string EncodePodSandbox(const PodSandbox& pod) {
  api::PodSandbox out;
  FillPod(out, pod);
  return Serialize(out);
}

std::string EncodeContainer(const Container& container) {
  api::Container out;
  FillContainer(out, container);
  return Serialize(out);
}

std::string EncodeContainerEvent(const ContainerEvent& event) {
  api::CreateContainerRequest out;
  FillPod(*out.mutable_pod(), event.pod);
  FillContainer(*out.mutable_container(), event.container);
  return Serialize(out);
}

std::string EncodeSynchronizeRequest(const SynchronizeRequest& request) {
  api::SynchronizeRequest out;
  for (const PodSandbox& pod : request.pods) FillPod(*out.add_pods(), pod);
  for (const Container& container : request.containers) {
    FillContainer(*out.add_containers(), container);
  }
  out.set_more(request.more);
  return Serialize(out);
}

}  // namespace linkfit::handoff
