#include "agent/fake_kubelet.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

#include "podresources.grpc.pb.h"

namespace linkfit::testing {
namespace {

class Service final : public v1::PodResourcesLister::Service {
 public:
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* response) override {
    ++lists_;
    std::chrono::milliseconds delay;
    std::vector<agent::PodDeviceUse> pods;
    int code = 0;
    std::string message;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      delay = delay_;
      pods = pods_;
      code = code_;
      message = message_;
    }
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    if (code != 0) return grpc::Status(static_cast<grpc::StatusCode>(code), message);
    for (const agent::PodDeviceUse& pod : pods) {
      v1::PodResources* out = response->add_pod_resources();
      out->set_name(pod.name);
      out->set_namespace_(pod.pod_namespace);
      for (const agent::ContainerDeviceUse& container : pod.containers) {
        v1::ContainerResources* c = out->add_containers();
        c->set_name(container.name);
        for (const auto& devices : container.devices) {
          v1::ContainerDevices* d = c->add_devices();
          d->set_resource_name(devices.resource_name);
          for (const std::string& id : devices.device_ids) d->add_device_ids(id);
        }
      }
    }
    return grpc::Status::OK;
  }

  std::mutex mutex_;
  std::vector<agent::PodDeviceUse> pods_;
  std::chrono::milliseconds delay_{0};
  int code_ = 0;
  std::string message_;
  std::atomic<int> lists_{0};
};

class FakeKubeletImpl final : public FakeKubelet {
 public:
  Result<void> Start() {
    dir_ = std::filesystem::temp_directory_path() /
           ("linkfit-kubelet-" + std::to_string(getpid()) + "-" + std::to_string(++counter_));
    std::filesystem::create_directories(dir_);
    socket_ = (dir_ / "kubelet.sock").string();
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    if (!server_) return MakeError("fake kubelet: cannot listen on " + socket_);
    return {};
  }
  ~FakeKubeletImpl() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
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
  static inline std::atomic<int> counter_{0};
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
