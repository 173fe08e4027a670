// The fake kubelet's PodResources server (fake_kubelet.h).

#include "agent/fake_kubelet.h"

#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/grpcpp.h>
#include <stdlib.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "podresources.grpc.pb.h"

namespace linkfit::testing {
namespace {

// Field numbers of the kubelet's api.proto that linkfit's subset leaves out.
constexpr int kContainerCpuIdsField = 3;     // ContainerResources.cpu_ids (repeated int64)
constexpr int kDevicesTopologyField = 3;     // ContainerDevices.topology (TopologyInfo)
// TopologyInfo{nodes: [NUMANode{ID: 1}]} on the wire: field 1 (length 2) holding field 1 = 1.
constexpr char kTopologyNumaNodeOne[] = {0x0a, 0x02, 0x08, 0x01};

void AddKubeletOnlyFields(v1::ContainerResources& container) {
  google::protobuf::UnknownFieldSet* unknown =
      container.GetReflection()->MutableUnknownFields(&container);
  unknown->AddVarint(kContainerCpuIdsField, 2);
  unknown->AddVarint(kContainerCpuIdsField, 3);
  for (v1::ContainerDevices& devices : *container.mutable_devices()) {
    devices.GetReflection()
        ->MutableUnknownFields(&devices)
        ->AddLengthDelimited(kDevicesTopologyField,
                             std::string(kTopologyNumaNodeOne, sizeof(kTopologyNumaNodeOne)));
  }
}

class Service final : public v1::PodResourcesLister::Service {
 public:
  grpc::Status List(grpc::ServerContext* /*context*/, const v1::ListPodResourcesRequest* /*request*/,
                    v1::ListPodResourcesResponse* response) override {
    ++lists_;
    std::vector<agent::PodDeviceUse> pods;
    int code = 0;
    std::string message;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (delay_.count() > 0) {
        stopped_changed_.wait_for(lock, delay_, [this] { return stopping_; });
        if (stopping_) return grpc::Status(grpc::StatusCode::CANCELLED, "fake kubelet stopping");
      }
      pods = pods_;
      code = code_;
      message = message_;
    }
    if (code != 0) return grpc::Status(static_cast<grpc::StatusCode>(code), message);
    for (const agent::PodDeviceUse& pod : pods) {
      v1::PodResources* out = response->add_pod_resources();
      out->set_name(pod.name);
      out->set_namespace_(pod.pod_namespace);
      for (const agent::ContainerDeviceUse& container : pod.containers) {
        v1::ContainerResources* entry = out->add_containers();
        entry->set_name(container.name);
        for (const agent::ContainerDeviceUse::Devices& devices : container.devices) {
          v1::ContainerDevices* held = entry->add_devices();
          held->set_resource_name(devices.resource_name);
          for (const std::string& id : devices.device_ids) held->add_device_ids(id);
        }
        AddKubeletOnlyFields(*entry);
      }
    }
    return grpc::Status::OK;
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    stopped_changed_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable stopped_changed_;
  bool stopping_ = false;                         // GUARDED_BY(mutex_)
  std::vector<agent::PodDeviceUse> pods_;         // GUARDED_BY(mutex_)
  std::chrono::milliseconds delay_{0};            // GUARDED_BY(mutex_)
  int code_ = 0;                                  // GUARDED_BY(mutex_)
  std::string message_;                           // GUARDED_BY(mutex_)
  std::atomic<int> lists_{0};
};

class FakeKubeletImpl final : public FakeKubelet {
 public:
  Result<void> Start() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "linkfit-kubelet-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      return MakeError("fake kubelet: mkdtemp " + pattern + ": " + std::strerror(errno));
    }
    dir_ = pattern;
    socket_ = (dir_ / "kubelet.sock").string();
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    if (!server_) return MakeError("fake kubelet: cannot listen on unix://" + socket_);
    return {};
  }

  ~FakeKubeletImpl() override {
    service_.Stop();
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
      server_->Wait();
    }
    if (!dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }

  const std::string& socket_path() const override { return socket_; }
  void SetPods(std::vector<agent::PodDeviceUse> pods) override {
    std::lock_guard<std::mutex> lock(service_.mutex_);
    service_.pods_ = std::move(pods);
  }
  void SetDelay(std::chrono::milliseconds delay) override {
    std::lock_guard<std::mutex> lock(service_.mutex_);
    service_.delay_ = delay;
  }
  void SetFailure(int grpc_code, std::string message) override {
    std::lock_guard<std::mutex> lock(service_.mutex_);
    service_.code_ = grpc_code;
    service_.message_ = std::move(message);
  }
  int lists() const override { return service_.lists_.load(); }

 private:
  std::filesystem::path dir_;
  std::string socket_;
  Service service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace

Result<std::unique_ptr<FakeKubelet>> StartFakeKubelet() {
  auto kubelet = std::make_unique<FakeKubeletImpl>();
  if (auto started = kubelet->Start(); !started) return tl::unexpected(started.error());
  return std::unique_ptr<FakeKubelet>(std::move(kubelet));
}

}  // namespace linkfit::testing
