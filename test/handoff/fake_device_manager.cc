// The kubelet's device manager for tests (fake_device_manager.h).

#include "handoff/fake_device_manager.h"

#include <grpcpp/grpcpp.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

#include "deviceplugin.grpc.pb.h"

namespace linkfit::testing {
namespace {

using IdSet = std::set<std::string>;

struct Plugin {
  std::string resource;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub;
  bool preferred_available = false;
  bool pre_start_required = false;
  std::map<std::string, bool> devices;  // ID -> healthy
  std::map<std::string, int> numa;      // ID -> NUMA node (absent: no affinity)
  bool listed = false;
  grpc::ClientContext watch;
  std::thread reader;
};

struct PodState {
  FakePodSpec spec;
  // container -> resource -> IDs
  std::map<std::string, std::map<std::string, std::vector<std::string>>> held;
};

class Manager final : public FakeDeviceManager, public v1beta1::Registration::Service {
 public:
  Manager(std::string directory, unsigned seed) : directory_(std::move(directory)), random_(seed) {}

  // Stops the Registration server and drops every plugin (their ListAndWatch readers joined).
  void StopServing() {
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
      server_->Wait();
      server_.reset();
    }
    std::vector<std::unique_ptr<Plugin>> plugins;
    {
      std::lock_guard lock(mutex_);
      for (auto& [name, plugin] : plugins_) plugins.push_back(std::move(plugin));
      for (auto& plugin : retired_) plugins.push_back(std::move(plugin));
      plugins_.clear();
      retired_.clear();
    }
    for (auto& plugin : plugins) plugin->watch.TryCancel();
    for (auto& plugin : plugins) {
      if (plugin->reader.joinable()) plugin->reader.join();
    }
  }

  Result<void> Start() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + directory_ + "/kubelet.sock",
                             grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    if (!server_) return MakeError("fake device manager: cannot serve in " + directory_);
    return {};
  }

  ~Manager() override {
    StopServing();
    std::error_code ignored;
    std::filesystem::remove_all(directory_, ignored);
  }

  Result<void> Restart() override {
    StopServing();
    std::error_code error;
    for (std::filesystem::directory_iterator it(directory_, error), end; !error && it != end;
         it.increment(error)) {
      if (it->is_socket()) std::filesystem::remove(it->path(), error);
    }
    return Start();
  }

  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* request,
                        v1beta1::Empty*) override {
    if (request->version() != "v1beta1") {
      return {grpc::StatusCode::INVALID_ARGUMENT, "unsupported version " + request->version()};
    }
    auto plugin = std::make_unique<Plugin>();
    plugin->resource = request->resource_name();
    plugin->stub = v1beta1::DevicePlugin::NewStub(grpc::CreateChannel(
        "unix://" + directory_ + "/" + request->endpoint(), grpc::InsecureChannelCredentials()));
    {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
      v1beta1::DevicePluginOptions options;
      const grpc::Status status =
          plugin->stub->GetDevicePluginOptions(&context, v1beta1::Empty(), &options);
      if (!status.ok()) return {grpc::StatusCode::UNAVAILABLE, "cannot reach the plugin"};
      plugin->preferred_available = options.get_preferred_allocation_available();
      plugin->pre_start_required = options.pre_start_required();
    }
    Plugin* raw = plugin.get();
    {
      std::lock_guard lock(mutex_);
      if (auto old = plugins_.find(raw->resource); old != plugins_.end()) {
        old->second->watch.TryCancel();
        retired_.push_back(std::move(old->second));
      }
      plugins_[raw->resource] = std::move(plugin);
      ++registrations_;
    }
    raw->reader = std::thread([this, raw] { Follow(raw); });
    return grpc::Status::OK;
  }

  const std::string& directory() const override { return directory_; }

  bool WaitForDevices(const std::string& resource, std::size_t devices,
                      std::chrono::milliseconds timeout) const override {
    std::unique_lock lock(mutex_);
    return listed_.wait_for(lock, timeout, [&] {
      const auto it = plugins_.find(resource);
      return it != plugins_.end() && it->second->listed && it->second->devices.size() >= devices;
    });
  }

  std::map<std::string, bool> Devices(const std::string& resource) const override {
    std::lock_guard lock(mutex_);
    const auto it = plugins_.find(resource);
    return it == plugins_.end() ? std::map<std::string, bool>{} : it->second->devices;
  }

  Result<std::map<std::string, AdmittedContainer>> Admit(const FakePodSpec& pod) override {
    const std::string key = pod.pod_namespace + "/" + pod.name;
    {
      std::lock_guard lock(mutex_);
      if (pods_.count(key) != 0) return MakeError("pod " + key + " is already admitted");
      pods_[key].spec = pod;
      order_.push_back(key);
    }
    Notify();
    std::map<std::string, AdmittedContainer> admitted;
    std::map<std::string, IdSet> reusable;
    for (const bool init : {true, false}) {
      for (const FakePodSpec::Container& container : pod.containers) {
        if (container.init != init) continue;
        AdmittedContainer& out = admitted[container.name];
        for (const auto& [resource, count] : container.requests) {
          auto ids = DevicesToAllocate(resource, count, reusable[resource], pod.numa_hint, &out);
          if (ids) {
            if (auto allocated = Allocate(resource, *ids, &out); !allocated) {
              ids = tl::unexpected(allocated.error());
            }
          }
          if (!ids) {
            Remove(pod.pod_namespace, pod.name);
            return MakeError("pod " + key + " container " + container.name + " " + resource + ": " +
                             ids.error().message);
          }
          std::sort(ids->begin(), ids->end());
          out.ids[resource] = *ids;
          {
            std::lock_guard lock(mutex_);
            pods_[key].held[container.name][resource] = *ids;
          }
          Notify();
          if (container.init && !container.restartable) {
            reusable[resource].insert(ids->begin(), ids->end());
          } else {
            for (const std::string& id : *ids) reusable[resource].erase(id);
          }
        }
      }
    }
    return admitted;
  }

  Result<void> StartContainer(const std::string& pod_namespace, const std::string& name,
                              const std::string& container) override {
    std::vector<std::pair<v1beta1::DevicePlugin::Stub*, std::vector<std::string>>> calls;
    {
      std::lock_guard lock(mutex_);
      const auto pod = pods_.find(pod_namespace + "/" + name);
      if (pod == pods_.end()) return MakeError("pod " + name + " is not admitted");
      const auto held = pod->second.held.find(container);
      if (held == pod->second.held.end()) return {};
      for (const auto& [resource, ids] : held->second) {
        const auto plugin = plugins_.find(resource);
        if (plugin == plugins_.end() || !plugin->second->pre_start_required) continue;
        calls.emplace_back(plugin->second->stub.get(), ids);
      }
    }
    for (const auto& [stub, ids] : calls) {
      v1beta1::PreStartContainerRequest request;
      for (const std::string& id : ids) request.add_devices_ids(id);
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      v1beta1::PreStartContainerResponse response;
      const grpc::Status status = stub->PreStartContainer(&context, request, &response);
      if (!status.ok()) return MakeError(status.error_message());
    }
    return {};
  }

  void Remove(const std::string& pod_namespace, const std::string& name) override {
    {
      std::lock_guard lock(mutex_);
      const std::string key = pod_namespace + "/" + name;
      pods_.erase(key);
      order_.erase(std::remove(order_.begin(), order_.end(), key), order_.end());
    }
    Notify();
  }

  std::vector<agent::PodDeviceUse> PodResources() const override {
    std::lock_guard lock(mutex_);
    return PodResourcesLocked();
  }

  void SetListener(std::function<void(std::vector<agent::PodDeviceUse>)> listener) override {
    std::lock_guard lock(mutex_);
    listener_ = std::move(listener);
  }

  int registrations() const override {
    std::lock_guard lock(mutex_);
    return registrations_;
  }

 private:
  void Follow(Plugin* plugin) {
    auto reader = plugin->stub->ListAndWatch(&plugin->watch, v1beta1::Empty());
    v1beta1::ListAndWatchResponse response;
    while (reader->Read(&response)) {
      std::lock_guard lock(mutex_);
      plugin->devices.clear();
      plugin->numa.clear();
      for (const v1beta1::Device& device : response.devices()) {
        plugin->devices[device.id()] = device.health() == "Healthy";
        if (device.has_topology() && device.topology().nodes_size() > 0) {
          plugin->numa[device.id()] = static_cast<int>(device.topology().nodes(0).id());
        }
      }
      plugin->listed = true;
      listed_.notify_all();
    }
    reader->Finish();
  }

  std::vector<agent::PodDeviceUse> PodResourcesLocked() const {
    std::vector<agent::PodDeviceUse> out;
    for (const std::string& key : order_) {
      const PodState& pod = pods_.at(key);
      agent::PodDeviceUse& use = out.emplace_back();
      use.pod_namespace = pod.spec.pod_namespace;
      use.name = pod.spec.name;
      for (const FakePodSpec::Container& container : pod.spec.containers) {
        agent::ContainerDeviceUse& entry = use.containers.emplace_back();
        entry.name = container.name;
        const auto held = pod.held.find(container.name);
        if (held == pod.held.end()) continue;
        for (const auto& [resource, ids] : held->second) entry.devices.push_back({resource, ids});
      }
    }
    return out;
  }

  void Notify() {
    std::function<void(std::vector<agent::PodDeviceUse>)> listener;
    std::vector<agent::PodDeviceUse> view;
    {
      std::lock_guard lock(mutex_);
      if (!listener_) return;
      listener = listener_;
      view = PodResourcesLocked();
    }
    listener(std::move(view));
  }

  std::vector<std::string> Shuffled(const IdSet& ids) {
    std::vector<std::string> out(ids.begin(), ids.end());
    std::lock_guard lock(mutex_);
    std::shuffle(out.begin(), out.end(), random_);
    return out;
  }

  // The kubelet's devicesToAllocate for one container and resource (see the header).
  Result<std::vector<std::string>> DevicesToAllocate(const std::string& resource, int count,
                                                     const IdSet& reusable,
                                                     std::optional<int> numa_hint,
                                                     AdmittedContainer* out) {
    v1beta1::DevicePlugin::Stub* stub = nullptr;
    bool preferred_available = false;
    IdSet aligned, unaligned, no_affinity;
    {
      std::lock_guard lock(mutex_);
      const auto plugin = plugins_.find(resource);
      if (plugin == plugins_.end()) return MakeError("no device plugin registered");
      IdSet in_use;
      for (const auto& [key, pod] : pods_) {
        for (const auto& [container, held] : pod.held) {
          if (const auto ids = held.find(resource); ids != held.end()) {
            in_use.insert(ids->second.begin(), ids->second.end());
          }
        }
      }
      for (const auto& [id, healthy] : plugin->second->devices) {
        if (!healthy || in_use.count(id) != 0) continue;
        const auto numa = plugin->second->numa.find(id);
        if (numa == plugin->second->numa.end()) {
          no_affinity.insert(id);
        } else if (numa_hint && numa->second == *numa_hint) {
          aligned.insert(id);
        } else {
          unaligned.insert(id);
        }
      }
      if (!numa_hint) {  // no hint: every device is as good as any other
        no_affinity.insert(unaligned.begin(), unaligned.end());
        unaligned.clear();
      }
      stub = plugin->second->stub.get();
      preferred_available = plugin->second->preferred_available;
    }
    std::vector<std::string> allocated;
    int needed = count;
    const auto take_from = [&](const std::vector<std::string>& ids) {
      for (const std::string& id : ids) {
        if (needed == 0) break;
        if (std::find(allocated.begin(), allocated.end(), id) != allocated.end()) continue;
        allocated.push_back(id);
        --needed;
      }
      return needed == 0;
    };
    const auto ask = [&](const IdSet& offered) -> IdSet {
      out->asked_preferred = true;
      v1beta1::PreferredAllocationRequest request;
      auto* container = request.add_container_requests();
      IdSet with_allocated = offered;
      with_allocated.insert(allocated.begin(), allocated.end());
      for (const std::string& id : Shuffled(with_allocated)) container->add_available_deviceids(id);
      for (const std::string& id : allocated) container->add_must_include_deviceids(id);
      container->set_allocation_size(count);
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      v1beta1::PreferredAllocationResponse response;
      if (!stub->GetPreferredAllocation(&context, request, &response).ok() ||
          response.container_responses_size() == 0) {
        return {};
      }
      const auto& ids = response.container_responses(0).deviceids();
      return IdSet(ids.begin(), ids.end());
    };
    const auto intersect = [](const IdSet& a, const IdSet& b) {
      IdSet both;
      std::set_intersection(a.begin(), a.end(), b.begin(), b.end(),
                            std::inserter(both, both.begin()));
      return both;
    };
    if (take_from(Shuffled(reusable))) return allocated;
    if (numa_hint && needed < static_cast<int>(aligned.size())) {
      if (preferred_available) take_from(Shuffled(intersect(ask(aligned), aligned)));
      if (take_from(Shuffled(aligned))) return allocated;
      return MakeError("not enough aligned devices");
    }
    if (take_from(Shuffled(aligned))) return allocated;
    if (preferred_available) {
      IdSet available = aligned;
      available.insert(unaligned.begin(), unaligned.end());
      available.insert(no_affinity.begin(), no_affinity.end());
      take_from(Shuffled(intersect(ask(available), available)));
    }
    if (take_from(Shuffled(unaligned)) || take_from(Shuffled(no_affinity))) return allocated;
    return MakeError("requested " + std::to_string(count) + ", only " +
                     std::to_string(count - needed) + " available");
  }

  Result<void> Allocate(const std::string& resource, const std::vector<std::string>& ids,
                        AdmittedContainer* out) {
    v1beta1::DevicePlugin::Stub* stub = nullptr;
    {
      std::lock_guard lock(mutex_);
      stub = plugins_.at(resource)->stub.get();
    }
    v1beta1::AllocateRequest request;
    auto* container = request.add_container_requests();
    for (const std::string& id : ids) container->add_devices_ids(id);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1beta1::AllocateResponse response;
    const grpc::Status status = stub->Allocate(&context, request, &response);
    if (!status.ok()) return MakeError("Allocate failed: " + status.error_message());
    if (response.container_responses_size() < 1) return MakeError("Allocate answered nothing");
    const auto& answer = response.container_responses(0);
    out->annotations.insert(answer.annotations().begin(), answer.annotations().end());
    out->envs.insert(answer.envs().begin(), answer.envs().end());
    for (const auto& device : answer.devices()) {
      out->devices.push_back(device.container_path() + "=" + device.host_path() + ":" +
                             device.permissions());
    }
    return {};
  }

  const std::string directory_;
  std::unique_ptr<grpc::Server> server_;
  mutable std::mutex mutex_;
  mutable std::condition_variable listed_;
  std::map<std::string, std::unique_ptr<Plugin>> plugins_;  // GUARDED_BY(mutex_)
  std::vector<std::unique_ptr<Plugin>> retired_;            // GUARDED_BY(mutex_)
  std::map<std::string, PodState> pods_;                    // GUARDED_BY(mutex_)
  std::vector<std::string> order_;                          // GUARDED_BY(mutex_)
  std::function<void(std::vector<agent::PodDeviceUse>)> listener_;
  std::mt19937 random_;  // GUARDED_BY(mutex_)
  int registrations_ = 0;
};

}  // namespace

Result<std::unique_ptr<FakeDeviceManager>> StartFakeDeviceManager(unsigned seed) {
  std::string pattern = (std::filesystem::temp_directory_path() / "linkfit-dm-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) return MakeError("mkdtemp failed");
  auto manager = std::make_unique<Manager>(pattern, seed);
  if (auto started = manager->Start(); !started) return tl::unexpected(started.error());
  return std::unique_ptr<FakeDeviceManager>(std::move(manager));
}

}  // namespace linkfit::testing
