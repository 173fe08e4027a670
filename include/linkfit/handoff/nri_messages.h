#pragma once

// The NRI API messages linkfit's plugin reads and writes (containerd/nri pkg/api/api.proto,
// package nri.pkg.api.v1alpha1) as linkfit's own values; the bytes are libprotobuf's, generated
// from the subset in src/handoff/proto/nri_api.proto (only the fields linkfit uses;
// ../shared/design/node-handoff.md §6 lists their numbers). Unknown fields are skipped on reading;
// proto3 defaults are left out on writing, map entries are written sorted by key.
//
// Thread-safety: plain values and pure functions.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/result.h"

namespace linkfit::handoff {

inline constexpr const char* kPluginService = "nri.pkg.api.v1alpha1.Plugin";
inline constexpr const char* kRuntimeService = "nri.pkg.api.v1alpha1.Runtime";

// NRI events (pkg/api/api.proto Event, as of NRI v0.12); a plugin subscribes with the bit
// 1 << (event - 1) (pkg/api/event.go EventMask.Set).
enum class NriEvent : int {
  kRunPodSandbox = 1,
  kStopPodSandbox = 2,
  kRemovePodSandbox = 3,
  kCreateContainer = 4,
  kPostCreateContainer = 5,
  kStartContainer = 6,
  kPostStartContainer = 7,
  kUpdateContainer = 8,
  kPostUpdateContainer = 9,
  kStopContainer = 10,
  kRemoveContainer = 11,
  kUpdatePodSandbox = 12,
  kPostUpdatePodSandbox = 13,
  kValidateContainerAdjustment = 14,
};
constexpr std::int32_t EventBit(NriEvent event) {
  return static_cast<std::int32_t>(1u << (static_cast<int>(event) - 1));
}

struct PodSandbox {  // id = 1, name = 2, uid = 3, namespace = 4, labels = 5, annotations = 6
  std::string id;
  std::string name;
  std::string uid;
  std::string pod_namespace;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  friend bool operator==(const PodSandbox&, const PodSandbox&) = default;
};

struct Container {  // id = 1, pod_sandbox_id = 2, name = 3, annotations = 6, env = 8
  std::string id;
  std::string pod_sandbox_id;
  std::string name;
  std::map<std::string, std::string> annotations;
  std::vector<std::string> env;  // "KEY=value"
  friend bool operator==(const Container&, const Container&) = default;
};

// RegisterPluginRequest {plugin_name = 1, plugin_idx = 2}.
std::string EncodeRegisterPlugin(std::string_view name, std::string_view index);

struct ConfigureRequest {  // config = 1, runtime_name = 2, runtime_version = 3
  std::string config;
  std::string runtime_name;
  std::string runtime_version;
};
Result<ConfigureRequest> DecodeConfigureRequest(std::string_view bytes);
std::string EncodeConfigureRequest(const ConfigureRequest& request);  // the runtime's side
// ConfigureResponse {events = 2}.
std::string EncodeConfigureResponse(std::int32_t events);

struct SynchronizeRequest {  // pods = 1, containers = 2, more = 3
  std::vector<PodSandbox> pods;
  std::vector<Container> containers;
  bool more = false;
};
Result<SynchronizeRequest> DecodeSynchronizeRequest(std::string_view bytes);
// SynchronizeResponse {update = 1, more = 2}: linkfit updates nothing; `more` echoes the
// request's, as the runtime expects for chunked synchronisation.
std::string EncodeSynchronizeResponse(bool more);

// CreateContainerRequest / RemoveContainerRequest / StopContainerRequest {pod = 1, container = 2}.
// The answers to RemoveContainer and StopContainer without updates (RemoveContainerResponse {},
// StopContainerResponse {}) are empty messages: no bytes.
struct ContainerEvent {
  PodSandbox pod;
  Container container;
};
Result<ContainerEvent> DecodeContainerEvent(std::string_view bytes);

// RemovePodSandboxRequest (and Run/StopPodSandboxRequest) {pod = 1}; an error without the pod.
// The answer, RemovePodSandboxResponse {}, is empty.
Result<PodSandbox> DecodePodSandboxEvent(std::string_view bytes);
std::string EncodePodSandboxEvent(const PodSandbox& pod);  // the runtime's side

// StateChangeEvent {event = 1, pod = 2, container = 3}: how runtimes before NRI v0.12.0 report
// the events without a method of their own there (RemoveContainer, RemovePodSandbox, ...).
// `container` may be empty (a pod event).
struct StateChange {
  int event = 0;
  PodSandbox pod;
  Container container;
};
Result<StateChange> DecodeStateChange(std::string_view bytes);
std::string EncodeStateChange(const StateChange& change);

// LinuxDevice {path = 1, type = 2, major = 3, minor = 4, file_mode = 5 (OptionalFileMode
// {value = 1})}: a device node the runtime creates in the container, with a cgroup rule for it.
struct LinuxDevice {
  std::string path;
  std::string type = "c";
  std::int64_t major = 0;
  std::int64_t minor = 0;
  std::uint32_t file_mode = 0;  // 0: not set
  friend bool operator==(const LinuxDevice&, const LinuxDevice&) = default;
};

// ContainerAdjustment {annotations = 2, env = 4 (KeyValue {key = 1, value = 2}),
// linux = 6 (LinuxContainerAdjustment {devices = 1}), CDI_devices = 8 (CDIDevice {name = 1})},
// inside CreateContainerResponse {adjust = 1}.
struct ContainerAdjustment {
  std::map<std::string, std::string> annotations;
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<LinuxDevice> devices;
  std::vector<std::string> cdi_devices;
};
std::string EncodeCreateContainerResponse(const ContainerAdjustment& adjust);
Result<ContainerAdjustment> DecodeCreateContainerResponse(std::string_view bytes);  // tests, fakes

// Encoders of the runtime's side, for tests and the fake runtime.
std::string EncodePodSandbox(const PodSandbox& pod);
std::string EncodeContainer(const Container& container);
std::string EncodeContainerEvent(const ContainerEvent& event);
std::string EncodeSynchronizeRequest(const SynchronizeRequest& request);

}  // namespace linkfit::handoff
