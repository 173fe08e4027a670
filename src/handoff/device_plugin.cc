// linkfit's device plugin over gRPC (device_plugin.h).

#include "linkfit/handoff/device_plugin.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <set>

#include "deviceplugin.grpc.pb.h"
#include "handoff/node_lookup.h"
#include "linkfit/common/log.h"
#include "linkfit/common/mutex.h"
#include "linkfit/handoff/handoff.h"

namespace linkfit::handoff {
namespace {

constexpr const char* kApiVersion = "v1beta1";

struct FileId {
  dev_t device = 0;
  ino_t inode = 0;
  bool operator==(const FileId&) const = default;
};

std::optional<FileId> IdentifyFile(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;
  return FileId{info.st_dev, info.st_ino};
}

// Verify mode: what the container is given, as the NRI plugin would hand it over
// (AdjustmentFor): the devices the kubelet chose, replicas of the share resource counted as
// thousandths of their GPU.
std::vector<std::pair<std::string, std::string>> VisibleDevicesEnv(
    const std::string& resource, const std::vector<std::string>& ids,
    const PluginOptions& options) {
  HandoffDecision decision;
  decision.kind = HandoffDecision::Kind::kInject;
  for (const std::string& id : ids) {
    if (!options.share_resource.empty() && resource == options.share_resource) {
      const std::string uuid = id.substr(0, id.find("::"));
      auto& shares = decision.devices.shares;
      const auto held = std::find_if(shares.begin(), shares.end(),
                                     [&](const auto& share) { return share.first == uuid; });
      if (held == shares.end()) {
        shares.emplace_back(uuid, 1);
      } else {
        ++held->second;
      }
    } else if (resource.rfind(kube::kMigResourcePrefix, 0) == 0) {
      decision.devices.mig.push_back(id);
    } else {
      decision.devices.gpus.push_back(id);
    }
  }
  return AdjustmentFor(decision, /*cdi=*/false).env;
}

bool IsNicResource(const std::string& resource, const PluginOptions& options) {
  return (!options.nic_resource.empty() && resource == options.nic_resource) ||
         (!options.nic_share_resource.empty() && resource == options.nic_share_resource);
}

// Verify mode, a NIC resource: the NICs the kubelet chose (replicas by their NIC, once each, in
// the order chosen) get their verbs device and rdma_cm (where the node has it), and, with
// `nic_env`, NCCL's and UCX's environment. A NIC whose verbs device is unknown gets none (the
// container cannot use it).
void InjectNics(const std::vector<std::string>& ids, const topology::TopologySpec& node,
                const DevicePluginConfig& config, v1beta1::ContainerAllocateResponse& answer) {
  std::vector<std::string> names;
  for (const std::string& id : ids) {
    const std::string name = id.substr(0, id.find("::"));
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  const auto add = [&answer](const std::string& path) {
    v1beta1::DeviceSpec* device = answer.add_devices();
    device->set_container_path(path);
    device->set_host_path(path);
    device->set_permissions("rw");
  };
  if (config.rdma_cm) add(std::string(kRdmaCmPath));
  for (const std::string& name : names) {
    const topology::NicSpec* nic = NicByName(node, name);
    if (nic != nullptr && !nic->uverbs.empty()) add(kInfinibandDir + nic->uverbs);
  }
  if (!config.nic_env) return;
  std::vector<std::pair<std::string, int>> ports;
  for (const std::string& name : names) ports.emplace_back(name, NicPortOf(node, name));
  for (const auto& [key, value] : NicEnvironment(ports)) (*answer.mutable_envs())[key] = value;
}

// One resource's devices and the version that ListAndWatch streams follow.
class ResourceState {
 public:
  explicit ResourceState(std::string name) : name_(std::move(name)) {}
  const std::string& name() const { return name_; }

  void Set(std::vector<PluginDevice> devices) {
    MutexLock lock(mutex_);
    if (devices == devices_ && version_ != 0) return;
    devices_ = std::move(devices);
    ++version_;
    changed_.NotifyAll();
  }
  void Stop() {
    MutexLock lock(mutex_);
    stopping_ = true;
    changed_.NotifyAll();
  }
  // Waits (at most `wait`) for a version newer than `seen`; false when stopping.
  bool Next(std::uint64_t* seen, std::vector<PluginDevice>* devices,
            std::chrono::milliseconds wait) {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    MutexLock lock(mutex_);
    while (!stopping_ && version_ == *seen && changed_.WaitUntil(mutex_, deadline)) {
    }
    if (stopping_) return false;
    if (version_ != *seen) {
      *seen = version_;
      *devices = devices_;
    }
    return true;
  }
  // `ids` in the order this resource lists its devices (GPU index order), unknown ones last.
  std::vector<std::string> InListOrder(std::vector<std::string> ids) const {
    std::map<std::string, std::size_t> position;
    for (const std::string& id : ids) position[id] = SIZE_MAX;
    {
      MutexLock lock(mutex_);
      for (std::size_t i = 0; i < devices_.size(); ++i) {
        if (const auto it = position.find(devices_[i].id); it != position.end()) it->second = i;
      }
    }
    std::stable_sort(ids.begin(), ids.end(), [&](const std::string& a, const std::string& b) {
      return position[a] < position[b];
    });
    return ids;
  }
  bool Serves(const std::string& id) const {
    MutexLock lock(mutex_);
    return std::any_of(devices_.begin(), devices_.end(),
                       [&](const PluginDevice& device) { return device.id == id; });
  }

 private:
  const std::string name_;
  mutable Mutex mutex_;
  CondVar changed_;
  std::vector<PluginDevice> devices_ LINKFIT_GUARDED_BY(mutex_);
  std::uint64_t version_ LINKFIT_GUARDED_BY(mutex_) = 0;
  bool stopping_ LINKFIT_GUARDED_BY(mutex_) = false;
};

struct Shared {
  DevicePluginConfig config;
  SteeringSource steering;
  Mutex node_mutex;
  topology::TopologySpec node LINKFIT_GUARDED_BY(node_mutex);
  std::atomic<std::uint64_t> preferred{0}, no_preference{0}, allocations{0}, list_updates{0};
  std::atomic<std::uint64_t> verified{0}, refused{0};
  topology::TopologySpec Node() {
    MutexLock lock(node_mutex);
    return node;
  }
};

class ResourceService final : public v1beta1::DevicePlugin::Service {
 public:
  ResourceService(Shared& shared, ResourceState& state) : shared_(shared), state_(state) {}

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* options) override {
    options->set_get_preferred_allocation_available(true);
    options->set_pre_start_required(shared_.config.verify);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    std::uint64_t seen = 0;
    std::vector<PluginDevice> devices;
    while (!context->IsCancelled()) {
      const std::uint64_t before = seen;
      if (!state_.Next(&seen, &devices, std::chrono::milliseconds(500))) break;
      if (seen == before) continue;
      v1beta1::ListAndWatchResponse response;
      for (const PluginDevice& device : devices) {
        v1beta1::Device* out = response.add_devices();
        out->set_id(device.id);
        out->set_health(device.healthy ? "Healthy" : "Unhealthy");
        if (device.numa_node >= 0) out->mutable_topology()->add_nodes()->set_id(device.numa_node);
      }
      if (!writer->Write(response)) break;
      ++shared_.list_updates;
    }
    return grpc::Status::OK;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* request,
                                      v1beta1::PreferredAllocationResponse* response) override {
    Result<SteeringView> view =
        shared_.steering ? shared_.steering() : Result<SteeringView>(SteeringView{});
    const topology::TopologySpec node = shared_.Node();
    for (const auto& asked : request->container_requests()) {
      auto* answer = response->add_container_responses();
      if (!view) {
        ++shared_.no_preference;
        log::Warning("device plugin " + state_.name() +
                     ": no preference, the steering view is unreadable: " + view.error().message);
        continue;
      }
      PreferenceRequest query;
      query.resource = state_.name();
      query.available.assign(asked.available_deviceids().begin(),
                             asked.available_deviceids().end());
      query.must_include.assign(asked.must_include_deviceids().begin(),
                                asked.must_include_deviceids().end());
      query.size = asked.allocation_size();
      const Preference preference =
          PreferredAllocation(query, view->plans, view->kubelet, node, shared_.config.devices);
      if (preference.ids.empty()) {
        ++shared_.no_preference;
        log::Info("device plugin " + state_.name() + ": no preference: " + preference.explanation);
        continue;
      }
      ++shared_.preferred;
      for (const std::string& id : preference.ids) answer->add_deviceids(id);
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* response) override {
    for (const auto& container : request->container_requests()) {
      std::vector<std::string> ids(container.devices_ids().begin(), container.devices_ids().end());
      for (const std::string& id : ids) {
        if (!state_.Serves(id)) {
          return {grpc::StatusCode::INVALID_ARGUMENT,
                  "linkfit device plugin: " + state_.name() + " has no device " + id};
        }
      }
      auto* answer = response->add_container_responses();
      for (const auto& [key, value] : KubeletIdsAnnotation(state_.name(), ids)) {
        (*answer->mutable_annotations())[key] = value;
      }
      if (shared_.config.verify && IsNicResource(state_.name(), shared_.config.devices)) {
        InjectNics(ids, shared_.Node(), shared_.config, *answer);
      } else if (shared_.config.verify) {
        for (const auto& [key, value] :
             VisibleDevicesEnv(state_.name(), state_.InListOrder(ids), shared_.config.devices)) {
          (*answer->mutable_envs())[key] = value;
        }
      }
      ++shared_.allocations;
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*,
                                 const v1beta1::PreStartContainerRequest* request,
                                 v1beta1::PreStartContainerResponse*) override {
    if (!shared_.config.verify) return grpc::Status::OK;
    const std::vector<std::string> ids(request->devices_ids().begin(),
                                       request->devices_ids().end());
    Result<SteeringView> view =
        shared_.steering ? shared_.steering() : Result<SteeringView>(SteeringView{});
    Result<std::string> verdict =
        view ? VerifyPreStart(state_.name(), ids, view->plans, view->kubelet, shared_.Node(),
                              shared_.config.devices, shared_.config.exempt_namespaces)
             : Result<std::string>(
                   MakeError("the kubelet's view is unreadable: " + view.error().message));
    if (!verdict) {
      ++shared_.refused;
      log::Warning("device plugin " + state_.name() +
                   ": refusing a container start: " + verdict.error().message);
      return {grpc::StatusCode::FAILED_PRECONDITION, "linkfit: " + verdict.error().message};
    }
    ++shared_.verified;
    return grpc::Status::OK;
  }

 private:
  Shared& shared_;
  ResourceState& state_;
};

struct Served {
  std::unique_ptr<ResourceState> state;
  std::unique_ptr<ResourceService> service;
  std::unique_ptr<grpc::Server> server;
  std::string socket_path;
  std::optional<FileId> socket_id;
};

class DevicePluginsImpl final : public DevicePlugins {
 public:
  DevicePluginsImpl(const DevicePluginConfig& config, SteeringSource steering) {
    shared_.config = config;
    shared_.steering = std::move(steering);
  }

  ~DevicePluginsImpl() override {
    for (auto& [name, served] : served_) served.state->Stop();
    for (auto& [name, served] : served_) {
      served.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
      served.server->Wait();
      ::unlink(served.socket_path.c_str());
    }
  }

  Result<void> Update(const topology::TopologySpec& node) override {
    MutexLock lock(update_mutex_);
    {
      MutexLock node_lock(shared_.node_mutex);
      shared_.node = node;
    }
    std::set<std::string> present;
    for (PluginResource& resource : PluginInventory(node, shared_.config.devices)) {
      present.insert(resource.name);
      auto it = served_.find(resource.name);
      if (it == served_.end()) {
        Result<Served> started = Serve(resource.name);
        if (!started) return tl::unexpected(started.error());
        it = served_.emplace(resource.name, std::move(*started)).first;
        it->second.state->Set(std::move(resource.devices));
        if (auto registered = Register(it->second); !registered) return registered;
        continue;
      }
      it->second.state->Set(std::move(resource.devices));
    }
    for (auto& [name, served] : served_) {
      if (present.count(name) == 0) served.state->Set({});
    }
    return {};
  }

  bool KubeletRestarted() const override {
    MutexLock lock(update_mutex_);
    if (IdentifyFile(KubeletSocket()) != kubelet_id_) return true;
    return std::any_of(served_.begin(), served_.end(), [](const auto& entry) {
      return IdentifyFile(entry.second.socket_path) != entry.second.socket_id;
    });
  }

  std::vector<std::string> resources() const override {
    MutexLock lock(update_mutex_);
    std::vector<std::string> names;
    for (const auto& [name, served] : served_) names.push_back(name);
    return names;
  }

  DevicePluginStats stats() const override {
    return {shared_.preferred.load(),    shared_.no_preference.load(), shared_.allocations.load(),
            shared_.list_updates.load(), shared_.verified.load(),      shared_.refused.load()};
  }

 private:
  std::string KubeletSocket() const {
    return shared_.config.directory + "/" + shared_.config.kubelet_socket;
  }

  Result<Served> Serve(const std::string& resource) {
    Served served;
    served.state = std::make_unique<ResourceState>(resource);
    served.service = std::make_unique<ResourceService>(shared_, *served.state);
    served.socket_path = shared_.config.directory + "/" + PluginSocketName(resource);
    ::unlink(served.socket_path.c_str());  // a socket left by an earlier run
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + served.socket_path, grpc::InsecureServerCredentials());
    builder.RegisterService(served.service.get());
    served.server = builder.BuildAndStart();
    if (!served.server) {
      return MakeError("device plugin " + resource + ": cannot serve on unix://" +
                       served.socket_path);
    }
    served.socket_id = IdentifyFile(served.socket_path);
    return served;
  }

  Result<void> Register(const Served& served) LINKFIT_REQUIRES(update_mutex_) {
    const std::string where = "device plugin " + served.state->name() +
                              ": registering with the kubelet on unix://" + KubeletSocket();
    const auto channel =
        grpc::CreateChannel("unix://" + KubeletSocket(), grpc::InsecureChannelCredentials());
    const auto stub = v1beta1::Registration::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + shared_.config.register_timeout);
    v1beta1::RegisterRequest request;
    request.set_version(kApiVersion);
    request.set_endpoint(PluginSocketName(served.state->name()));
    request.set_resource_name(served.state->name());
    request.mutable_options()->set_get_preferred_allocation_available(true);
    request.mutable_options()->set_pre_start_required(shared_.config.verify);
    v1beta1::Empty empty;
    const grpc::Status status = stub->Register(&context, request, &empty);
    if (!status.ok()) {
      return MakeError(where + ": gRPC code " +
                       std::to_string(static_cast<int>(status.error_code())) + ": " +
                       status.error_message());
    }
    kubelet_id_ = IdentifyFile(KubeletSocket());
    log::Info("device plugin " + served.state->name() + " registered (" + served.socket_path + ")");
    return {};
  }

  Shared shared_;
  mutable Mutex update_mutex_;
  std::map<std::string, Served> served_ LINKFIT_GUARDED_BY(update_mutex_);
  std::optional<FileId> kubelet_id_ LINKFIT_GUARDED_BY(update_mutex_);
};

}  // namespace

std::string PluginSocketName(const std::string& resource) {
  std::string name = "linkfit-";
  for (const char c : resource) name += (c == '/' ? '-' : c);
  return name + ".sock";
}

Result<std::unique_ptr<DevicePlugins>> StartDevicePlugins(const DevicePluginConfig& config,
                                                          const topology::TopologySpec& node,
                                                          SteeringSource steering) {
  auto plugins = std::make_unique<DevicePluginsImpl>(config, std::move(steering));
  if (auto updated = plugins->Update(node); !updated) return tl::unexpected(updated.error());
  return std::unique_ptr<DevicePlugins>(std::move(plugins));
}

}  // namespace linkfit::handoff
