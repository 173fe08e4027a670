#include "linkfit/agent/pod_resources.h"

#include <grpcpp/grpcpp.h>

#include "podresources.grpc.pb.h"

namespace linkfit::agent {

Result<std::vector<PodDeviceUse>> ListPodResources(const std::string& socket_path,
                                                   std::chrono::milliseconds timeout) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(16 << 20);  // the kubelet's own limit is 16 MiB
  const auto channel = grpc::CreateCustomChannel("unix://" + socket_path,
                                                 grpc::InsecureChannelCredentials(), arguments);
  auto stub = v1::PodResourcesLister::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::ListPodResourcesRequest request;
  v1::ListPodResourcesResponse response;
  const grpc::Status status = stub->List(&context, request, &response);
  if (!status.ok()) {
    return MakeError("kubelet PodResources List on " + socket_path + ": gRPC status " +
                     std::to_string(static_cast<int>(status.error_code())) + ": " +
                     status.error_message());
  }
  std::vector<PodDeviceUse> pods;
  pods.reserve(static_cast<std::size_t>(response.pod_resources_size()));
  for (const v1::PodResources& pod : response.pod_resources()) {
    PodDeviceUse& use = pods.emplace_back();
    use.pod_namespace = pod.namespace_();
    use.name = pod.name();
    for (const v1::ContainerResources& container : pod.containers()) {
      ContainerDeviceUse& entry = use.containers.emplace_back();
      entry.name = container.name();
      for (const v1::ContainerDevices& devices : container.devices()) {
        ContainerDeviceUse::Devices& held = entry.devices.emplace_back();
        held.resource_name = devices.resource_name();
        held.device_ids.assign(devices.device_ids().begin(), devices.device_ids().end());
      }
    }
  }
  return pods;
}

}  // namespace linkfit::agent
