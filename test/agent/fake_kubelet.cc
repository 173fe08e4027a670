// The fake kubelet's PodResources server (fake_kubelet.h).

#include "agent/fake_kubelet.h"

#include <grpcpp/grpcpp.h>
#include <stdlib.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string_view>

#include "podresources.grpc.pb.h"

namespace linkfit::testing {
namespace {

// The kubelet's answer in protobuf's wire format, written by hand from the published api.proto
// (k8s.io/kubelet/pkg/apis/podresources/v1) rather than with linkfit's generated subset, so that
// the subset's field numbers are checked against the kubelet's and not against themselves. It
// carries what a real kubelet sends besides: cpu_ids, memory, device topology, DRA claims.
class Wire {
 public:
  Wire& Varint(int field, std::uint64_t value) {
    Tag(field, kVarint);
    AppendVarint(value);
    return *this;
  }
  Wire& Bytes(int field, std::string_view bytes) {
    Tag(field, kLengthDelimited);
    AppendVarint(bytes.size());
    out_.append(bytes);
    return *this;
  }
  Wire& Message(int field, const Wire& message) { return Bytes(field, message.out_); }
  const std::string& bytes() const { return out_; }

 private:
  static constexpr int kVarint = 0;
  static constexpr int kLengthDelimited = 2;
  void Tag(int field, int wire_type) {
    AppendVarint(static_cast<std::uint64_t>(field) << 3 | static_cast<std::uint64_t>(wire_type));
  }
  void AppendVarint(std::uint64_t value) {
    while (value >= 0x80) {
      out_ += static_cast<char>((value & 0x7f) | 0x80);
      value >>= 7;
    }
    out_ += static_cast<char>(value);
  }
  std::string out_;
};

Wire NumaTopology(std::uint64_t node) {  // TopologyInfo{nodes: [NUMANode{ID}]}
  return Wire().Message(1, Wire().Varint(1, node));
}

Wire ContainerDevicesWire(const agent::ContainerDeviceUse::Devices& devices) {
  Wire wire;
  wire.Bytes(1, devices.resource_name);                                // resource_name
  for (const std::string& id : devices.device_ids) wire.Bytes(2, id);  // device_ids
  return wire.Message(3, NumaTopology(1));                             // topology
}

Wire ContainerWire(const agent::ContainerDeviceUse& container) {
  Wire wire;
  wire.Bytes(1, container.name);  // name
  for (const auto& devices : container.devices) wire.Message(2, ContainerDevicesWire(devices));
  wire.Bytes(3, std::string{'\x02', '\x03'});  // cpu_ids [2, 3], packed
  wire.Message(4, Wire().Bytes(1, "memory").Varint(2, 1 << 30).Message(3, NumaTopology(0)));
  return wire.Message(5, Wire().Bytes(1, "gpu.example.com").Bytes(2, "claim").Bytes(3, "ns"));
}

std::string ResponseWire(const std::vector<agent::PodDeviceUse>& pods) {
  Wire response;
  for (const agent::PodDeviceUse& pod : pods) {
    Wire wire;
    wire.Bytes(1, pod.name).Bytes(2, pod.pod_namespace);  // name, namespace
    for (const auto& container : pod.containers) wire.Message(3, ContainerWire(container));
    response.Message(1, wire);  // pod_resources
  }
  return response.bytes();
}

class Service final : public v1::PodResourcesLister::Service {
 public:
  grpc::Status List(grpc::ServerContext* /*context*/,
                    const v1::ListPodResourcesRequest* /*request*/,
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
    if (!response->ParseFromString(ResponseWire(pods))) {
      return grpc::Status(grpc::StatusCode::INTERNAL,
                          "fake kubelet: its own answer does not parse");
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
  bool stopping_ = false;                  // GUARDED_BY(mutex_)
  std::vector<agent::PodDeviceUse> pods_;  // GUARDED_BY(mutex_)
  std::chrono::milliseconds delay_{0};     // GUARDED_BY(mutex_)
  int code_ = 0;                           // GUARDED_BY(mutex_)
  std::string message_;                    // GUARDED_BY(mutex_)
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
