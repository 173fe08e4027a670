// The kubelet's PodResources List over gRPC on a unix socket (pod_resources.h).

#include "linkfit/agent/pod_resources.h"

#include <grpcpp/grpcpp.h>

#include <array>
#include <string_view>

#include "podresources.grpc.pb.h"

namespace linkfit::agent {
namespace {

// The kubelet's own limit on PodResources messages (podresources.DefaultMaxMsgSize).
constexpr int kMaxResponseBytes = 16 << 20;

// grpc::StatusCode's names, by value (0..16, grpcpp/impl/codegen/status_code_enum.h).
constexpr std::array<std::string_view, 17> kStatusNames = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

std::string_view StatusName(grpc::StatusCode code) {
  const auto index = static_cast<std::size_t>(code);
  return index < kStatusNames.size() ? kStatusNames[index] : "status";
}

PodDeviceUse FromProto(const v1::PodResources& pod) {
  PodDeviceUse use;
  use.pod_namespace = pod.namespace_();
  use.name = pod.name();
  use.containers.reserve(static_cast<std::size_t>(pod.containers_size()));
  for (const v1::ContainerResources& container : pod.containers()) {
    ContainerDeviceUse& entry = use.containers.emplace_back();
    entry.name = container.name();
    for (const v1::ContainerDevices& devices : container.devices()) {
      ContainerDeviceUse::Devices& held = entry.devices.emplace_back();
      held.resource_name = devices.resource_name();
      held.device_ids.assign(devices.device_ids().begin(), devices.device_ids().end());
    }
  }
  return use;
}

}  // namespace

Result<std::vector<PodDeviceUse>> ListPodResources(const std::string& socket_path,
                                                   std::chrono::milliseconds timeout) {
  const std::string where = "kubelet PodResources List on unix://" + socket_path;
  if (socket_path.empty()) return MakeError("kubelet PodResources: no socket path given");
  if (timeout <= std::chrono::milliseconds::zero()) {
    return MakeError(where + ": the timeout must be positive");
  }
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(kMaxResponseBytes);
  const auto channel = grpc::CreateCustomChannel("unix://" + socket_path,
                                                 grpc::InsecureChannelCredentials(), arguments);
  const auto stub = v1::PodResourcesLister::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  const v1::ListPodResourcesRequest request;
  v1::ListPodResourcesResponse response;
  const grpc::Status status = stub->List(&context, request, &response);
  if (!status.ok()) {
    return MakeError(where + ": gRPC " + std::string(StatusName(status.error_code())) + " (" +
                     std::to_string(static_cast<int>(status.error_code())) +
                     "): " + status.error_message());
  }
  std::vector<PodDeviceUse> pods;
  pods.reserve(static_cast<std::size_t>(response.pod_resources_size()));
  for (const v1::PodResources& pod : response.pod_resources()) pods.push_back(FromProto(pod));
  return pods;
}

}  // namespace linkfit::agent
