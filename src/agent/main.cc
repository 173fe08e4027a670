// linkfit-agent: the node agent (DaemonSet on every GPU node). See include/linkfit/agent/*.h and
// deploy/README.md. Also reachable as `linkfit agent ...` (the linkfit CLI runs this binary).

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent_device_plugin.h"
#include "agent/agent_devices.h"
#include "agent/agent_nri.h"
#include "linkfit/agent/agent_metrics.h"
#include "linkfit/agent/discovery.h"
#include "linkfit/agent/node_agent.h"
#include "linkfit/agent/node_pods.h"
#include "linkfit/agent/node_publisher.h"
#include "linkfit/common/flags.h"
#include "linkfit/common/log.h"
#include "linkfit/handoff/cdi_specs.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/kube/api_client.h"
#include "linkfit/kube/reflector.h"

namespace linkfit::agent {
namespace {

constexpr const char* kUsage = R"(usage: linkfit-agent [flags]   (also: linkfit agent [flags])

Publishes this node's GPU topology, health and MIG layout (linkfit.io/topology) and the devices
its pods really hold (linkfit.io/devices-in-use) on its own Node object.

  --node-name NAME             this node (default: $NODE_NAME, as the DaemonSet sets it)
  --kubeconfig FILE            API server access (default: in-cluster service account)
  --context NAME               kubeconfig context (default: current-context)
  --pod-resources-socket PATH  the kubelet's PodResources socket
                               (default /var/lib/kubelet/pod-resources/kubelet.sock; "" = off)
  --nvml-library NAME          NVML to dlopen (default libnvidia-ml.so.1, via LD_LIBRARY_PATH)
  --gpu-models FILE            the GPU model table for what the machine cannot tell (NVLink and
                               PCIe generations, MIG capability where NVML does not answer, and
                               all of them through nvidia-smi); default: config/gpus.json as built
                               into the binary
  --metrics-listen HOST:PORT   serve Prometheus metrics at GET /metrics (default off), e.g.
                               linkfit_agent_guessed_figures_total{figure,model}
  --discover-interval SECONDS  re-discovery period (default 60)
  --devices-interval SECONDS   PodResources period (default 10)
  --nri-socket PATH            serve linkfit's NRI plugin on the runtime's socket
                               (e.g. /var/run/nri/nri.sock; default off): containers get exactly
                               the devices of their pod's linkfit.io/allocation
  --device-plugin-dir DIR      serve linkfit's device plugin (nvidia.com/gpu, nvidia.com/mig-*,
                               the share resource) in the kubelet's device plugin directory
                               (e.g. /var/lib/kubelet/device-plugins; default off). It replaces
                               NVIDIA's device plugin on this node: run only one of them. Where
                               the runtime offers no NRI (no --nri-socket, or no socket there at
                               start-up) it runs verify-only: it injects the kubelet's choice and
                               refuses to start a container whose devices are not its plan
  --exempt-namespace NS        (repeatable) with the NRI plugin: containers of pods in NS that have
                               no plan and no kubelet label (GPU system daemons such as the DCGM
                               exporter, relying on NVIDIA_VISIBLE_DEVICES=all) are left as they
                               are instead of getting no GPU. In verify-only mode (no NRI), where
                               only containers that request the plugin's resources are seen,
                               containers of pods in NS start on the kubelet's choice even where
                               it is not their plan (the namespace is that of the pod the
                               kubelet's PodResources shows holding the devices). Only namespaces
                               an administrator controls
  --host-sys DIR               the node's /sys (default /sys): PCIe switches, NUMA nodes and the
                               RDMA NICs (class/infiniband) the topology document then lists
  --nic-rails NAME=RAIL,...    rails of RDMA NICs by name (e.g. mlx5_0=0,mlx5_3=1); the others
                               keep their position among the node's NICs, ordered by name
  --host-proc DIR              the node's /proc, for the driver's device files (default /proc);
                               NRI runtimes without CDI get the device files of what each
                               container is handed
  --no-cdi                     with the NRI plugin: send no CDI device names, even to runtimes
                               that inject them (containerd >= 2.1, CRI-O >= 1.34; older ones
                               never get any), for nodes without a CDI spec for nvidia.com/gpu;
                               containers then get the device files, and the node reports nri-env
  --share-resource NAME        the share resource it serves (default linkfit.io/gpu-share,
                               "" = none), counted in thousandths of a GPU
  --nic-resource NAME          the whole-NIC resource it serves where the node has RDMA NICs
                               (default linkfit.io/rdma, "" = none; the scheduler's nic_resource)
  --nic-share-resource NAME    the NIC share resource (default linkfit.io/rdma-share, "" = none;
                               the scheduler's nic_share_resource), in thousandths of a NIC
  --host-dev DIR               the node's /dev, for the device numbers of the NICs'
                               /dev/infiniband/uverbsN and rdma_cm (default /dev; where they are
                               no character devices there, <host-sys>/class/*/dev is read)
  --no-nic-env                 hand NICs over without NCCL_IB_HCA / UCX_NET_DEVICES
  --nic-env-exempt-namespace NS  (repeatable) with the NRI plugin: containers of pods in NS get
                               their NICs without NCCL_IB_HCA / UCX_NET_DEVICES (their own NCCL
                               settings win). Not in verify-only mode: the kubelet's Allocate,
                               where that plugin sets them, names no pod
  --nic-cdi-kind KIND          the CDI kind under which the node's CDI spec names each RDMA
                               device by its name (e.g. nvidia.com/rdma): runtimes that inject
                               CDI then get KIND=<name> instead of the device files of each NIC
                               a CDI spec declares (read when the NICs change); the others go
                               as device files
  --cdi-spec-dir DIR           (repeatable) where the CDI specs are (JSON or YAML; default
                               /etc/cdi and /var/run/cdi, as the runtime reads them)
  --once                       one round, then exit (status 0 when it published or had nothing
                               to change)
  --print                      print what would be published instead of publishing (no API
                               server needed); with --once: discover, print, exit
)";

struct Flags {
  std::string node_name;
  std::string kubeconfig;
  std::string context;
  std::string socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string gpu_models;
  std::string metrics_listen;
  std::string nri_socket;
  std::string device_plugin_dir;
  std::string share_resource = handoff::kDefaultShareResource;
  std::string nic_resource = kube::kNicResource;
  std::string nic_share_resource = kube::kNicShareResource;
  std::string host_dev = "/dev";
  std::string nic_cdi_kind;
  std::vector<std::string> cdi_spec_dirs;  // empty: handoff::DefaultCdiSpecDirs()
  std::vector<std::string> nic_env_exempt_namespaces;
  bool nic_env = true;
  std::string host_proc = "/proc";
  std::string host_sys = "/sys";
  std::map<std::string, int> nic_rails;
  std::vector<std::string> exempt_namespaces;
  int discover_interval_s = 60;
  int devices_interval_s = 10;
  bool cdi = true;
  bool once = false;
  bool print = false;
};

// The agent's flags as common/flags.h parses them (`--name value`, `--name=value`, switches;
// unknown flags and missing values are errors naming the flag). Every flag may be given again:
// the list flags collect their values, the others take the last (a DaemonSet's args, then the
// ones a patch appends).
const std::vector<FlagSpec>& KnownFlags() {
  static const std::vector<FlagSpec> known = [] {
    std::vector<FlagSpec> flags;
    for (const char* name : {"node-name",
                             "kubeconfig",
                             "context",
                             "pod-resources-socket",
                             "nri-socket",
                             "device-plugin-dir",
                             "exempt-namespace",
                             "host-proc",
                             "host-sys",
                             "nic-rails",
                             "share-resource",
                             "nic-resource",
                             "nic-share-resource",
                             "host-dev",
                             "nic-cdi-kind",
                             "cdi-spec-dir",
                             "nic-env-exempt-namespace",
                             "nvml-library",
                             "gpu-models",
                             "metrics-listen",
                             "discover-interval",
                             "devices-interval"}) {
      flags.push_back({name, /*takes_value=*/true, /*repeatable=*/true});
    }
    for (const char* name : {"no-nic-env", "no-cdi", "once", "print"}) {
      flags.push_back({name, /*takes_value=*/false, /*repeatable=*/true});
    }
    return flags;
  }();
  return known;
}

Result<Flags> ParseFlags(const std::vector<std::string>& args) {
  Flags flags;
  if (const char* env = std::getenv("NODE_NAME"); env != nullptr) flags.node_name = env;
  linkfit::Flags given;
  LINKFIT_ASSIGN_OR_RETURN(given, linkfit::Flags::Parse(args, KnownFlags()));
  const auto text = [&given](const char* name, std::string& out) {
    if (auto value = given.Get(name)) out = std::move(*value);
  };
  text("node-name", flags.node_name);
  text("kubeconfig", flags.kubeconfig);
  text("context", flags.context);
  text("pod-resources-socket", flags.socket);
  text("nri-socket", flags.nri_socket);
  text("device-plugin-dir", flags.device_plugin_dir);
  text("host-proc", flags.host_proc);
  text("host-sys", flags.host_sys);
  text("share-resource", flags.share_resource);
  text("nic-resource", flags.nic_resource);
  text("nic-share-resource", flags.nic_share_resource);
  text("host-dev", flags.host_dev);
  text("nic-cdi-kind", flags.nic_cdi_kind);
  text("nvml-library", flags.nvml_library);
  text("gpu-models", flags.gpu_models);
  text("metrics-listen", flags.metrics_listen);
  flags.exempt_namespaces = given.GetAll("exempt-namespace");
  flags.cdi_spec_dirs = given.GetAll("cdi-spec-dir");
  flags.nic_env_exempt_namespaces = given.GetAll("nic-env-exempt-namespace");
  flags.nic_env = !given.Has("no-nic-env");
  flags.cdi = !given.Has("no-cdi");
  flags.once = given.Has("once");
  flags.print = given.Has("print");
  if (const auto rails = given.Get("nic-rails")) {
    LINKFIT_ASSIGN_OR_RETURN(flags.nic_rails, ParseNicRails(*rails));
  }
  if (given.Has("nic-cdi-kind") && flags.nic_cdi_kind.find('/') == std::string::npos) {
    return MakeError("--nic-cdi-kind " + flags.nic_cdi_kind + ": expected vendor/class");
  }
  for (auto [name, out] : {std::pair{"discover-interval", &flags.discover_interval_s},
                           std::pair{"devices-interval", &flags.devices_interval_s}}) {
    std::optional<long> seconds;
    LINKFIT_ASSIGN_OR_RETURN(seconds, given.GetInt(name, 1, 86400));
    if (seconds) *out = static_cast<int>(*seconds);
  }
  if (!flags.device_plugin_dir.empty() && flags.socket.empty()) {
    return MakeError("--device-plugin-dir needs the kubelet's PodResources socket for steering");
  }
  if (!flags.print && flags.node_name.empty()) {
    return MakeError("--node-name (or $NODE_NAME) is required to publish");
  }
  return flags;
}

// Stops the agent on SIGTERM / SIGINT (the signals are blocked in every thread; this one waits).
void StopOnSignals(NodeAgent& agent) {
  std::thread([&agent] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    int signal_number = 0;
    sigwait(&set, &signal_number);
    log::Info("signal " + std::to_string(signal_number) + ": stopping");
    agent.Stop();
  }).detach();
}

bool IsSocket(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISSOCK(info.st_mode);
}

// The GPU model table of --gpu-models (null: the built-in one), set into `nvml`.
Result<std::shared_ptr<const topology::GpuModelTable>> LoadGpuModels(const Flags& flags,
                                                                     NvmlOptions& nvml) {
  if (flags.gpu_models.empty()) return std::shared_ptr<const topology::GpuModelTable>();
  auto loaded = topology::GpuModelTable::LoadFile(flags.gpu_models);
  if (!loaded) return MakeError("--gpu-models: " + loaded.error().message);
  auto table = std::make_shared<const topology::GpuModelTable>(std::move(*loaded));
  nvml.gpu_models = table.get();
  return table;
}

// NRI where the runtime offers it; without it, the device plugin verifies instead (design §4.5).
bool UseNri(const Flags& flags) {
  if (flags.nri_socket.empty()) return false;
  if (!flags.device_plugin_dir.empty() && !IsSocket(flags.nri_socket)) {
    log::Warning("no NRI socket at " + flags.nri_socket +
                 " (the runtime runs no NRI): the device plugin runs in verify-only mode");
    return false;
  }
  return true;
}

// The API server connection and the watch of this node's pods, started.
struct ApiConnection {
  std::unique_ptr<kube::ApiClient> client;
  std::unique_ptr<kube::Reflector> pods;
};

Result<ApiConnection> Connect(const Flags& flags, NodePods& pods) {
  auto config = flags.kubeconfig.empty() ? kube::InClusterConfig()
                                         : kube::LoadKubeconfig(flags.kubeconfig, flags.context);
  if (!config) return tl::unexpected(config.error());
  config->user_agent = "linkfit-agent/0.1";
  config->qps = 5;  // one node's daemon: a handful of calls a minute in steady state
  config->burst = 10;
  auto made = kube::NewApiClient(std::move(*config));
  if (!made) return tl::unexpected(made.error());
  ApiConnection connection;
  connection.client = std::move(*made);
  kube::ReflectorOptions options;
  options.kind = "pods";
  options.path = "/api/v1/pods";
  options.field_selector = "spec.nodeName=" + flags.node_name;
  connection.pods = std::make_unique<kube::Reflector>(*connection.client, pods, options);
  connection.pods->Start();
  return connection;
}

// --print: one discovery (and one PodResources read) to stdout.
int PrintOnce(const NodeAgent::DiscoverFn& discover, const NodeAgent::DevicesFn& devices) {
  auto found = discover();
  if (!found) {
    std::cerr << "linkfit-agent: " << found.error().message << "\n";
    return 1;
  }
  std::cout << "# " << found->source << (found->driver_version.empty() ? "" : ", driver ")
            << found->driver_version << "\n";
  std::cout << topology::ToTopologyDocument(found->spec) << "\n";
  if (devices) {
    auto used = devices(found->spec);
    if (used) {
      std::cout << kube::EncodeDevicesInUse(*used) << "\n";
    } else {
      std::cerr << "linkfit-agent: " << used.error().message << "\n";
    }
  }
  return 0;
}

// With the NRI plugin, what it handed over is the truth to publish; the kubelet's view fills
// in pods it handed nothing.
NodeAgent::DevicesFn HandedFirst(NodeAgent::DevicesFn kubelet, HandedDevicesView& handed) {
  return [kubelet = std::move(kubelet),
          &handed](const topology::TopologySpec& spec) -> Result<kube::DevicesInUse> {
    kube::DevicesInUse from_kubelet;
    if (kubelet) {
      auto listed = kubelet(spec);
      if (!listed && !handed.known()) return tl::unexpected(listed.error());
      if (listed) from_kubelet = std::move(*listed);
    } else if (!handed.known()) {
      return MakeError("the NRI plugin has not synchronised with the runtime yet");
    }
    return MergeDeviceReports(handed.Report(spec), from_kubelet);
  };
}

// --once: one round, after waiting briefly for the pod list so that devices-in-use carries UIDs.
int RunOnce(NodeAgent& agent, kube::Reflector& pods) {
  for (int i = 0; i < 100 && !pods.synced(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto round = agent.RunRound(true);
  pods.Stop();
  if (!round) {
    std::cerr << "linkfit-agent: " << round.error().message << "\n";
    return 1;
  }
  std::cout << (*round ? "published" : "unchanged") << "\n";
  return 0;
}

// NVML's health events marking GPUs unhealthy until `stopping`; no thread where NVML has none.
std::thread StartHealthWatch(const NvmlOptions& nvml, NodeAgent& agent,
                             std::unique_ptr<HealthWatch>& health, std::atomic<bool>& stopping) {
  auto watch = WatchHealthWithNvml(nvml);
  if (!watch) {
    log::Warning("no NVML health events (" + watch.error().message +
                 "); health comes from re-discovery only");
    return {};
  }
  health = std::move(*watch);
  return std::thread([&agent, &stopping, watch_ptr = health.get()] {
    while (!stopping.load()) {
      for (const HealthWatch::Event& event : watch_ptr->Wait(1000)) {
        agent.MarkUnhealthy(event.gpu, event.problem);
      }
    }
  });
}

std::thread StartNri(const Flags& flags, NodeAgent& agent, HandedDevicesView& handed,
                     std::atomic<bool>& stopping) {
  handoff::NriPluginOptions nri;
  nri.node_name = flags.node_name;
  nri.cdi = flags.cdi;
  nri.exempt_namespaces.insert(flags.exempt_namespaces.begin(), flags.exempt_namespaces.end());
  nri.device_files = [cache = std::make_shared<DeviceFilesCache>(flags.host_proc, agent)] {
    return cache->Get();
  };
  nri.on_configured = [&agent](const std::string& mode, const std::string& runtime) {
    log::Info("NRI: configured by " + runtime);
    agent.SetHandoffMode(mode);
  };
  nri.nics = {flags.nic_env, flags.nic_cdi_kind};
  nri.nic_env_exempt_namespaces.insert(flags.nic_env_exempt_namespaces.begin(),
                                       flags.nic_env_exempt_namespaces.end());
  nri.nic_device_files = [cache = std::make_shared<NicDeviceFilesCache>(
                              flags.host_dev, flags.host_sys, agent)] { return cache->Get(); };
  nri.on_nic_configured = [&agent](const std::string& mode) { agent.SetNicHandoffMode(mode); };
  if (!flags.nic_cdi_kind.empty()) {
    nri.nic_cdi_declared =
        [cache = std::make_shared<NicCdiCache>(
             flags.nic_cdi_kind,
             flags.cdi_spec_dirs.empty() ? handoff::DefaultCdiSpecDirs() : flags.cdi_spec_dirs,
             agent)] { return cache->Get(); };
  }
  // `nri` by value: it leaves scope before the thread ends.
  return std::thread([&flags, nri, &agent, &handed, &stopping] {
    RunNriPlugin(flags.nri_socket, nri, agent, &handed, stopping);
  });
}

std::thread StartDevicePlugins(const Flags& flags, bool use_nri, NodeAgent& agent, NodePods& pods,
                               std::atomic<bool>& stopping) {
  DevicePluginLoopOptions plugin;
  plugin.plugin.directory = flags.device_plugin_dir;
  plugin.plugin.devices.share_resource = flags.share_resource;
  plugin.plugin.devices.nic_resource = flags.nic_resource;
  plugin.plugin.devices.nic_share_resource = flags.nic_share_resource;
  plugin.plugin.nic_env = flags.nic_env;
  std::error_code error;
  plugin.plugin.rdma_cm = std::filesystem::exists(flags.host_dev + "/infiniband/rdma_cm", error) ||
                          std::filesystem::exists(flags.host_sys + "/class/misc/rdma_cm", error);
  plugin.plugin.verify = !use_nri;
  plugin.plugin.exempt_namespaces.insert(flags.exempt_namespaces.begin(),
                                         flags.exempt_namespaces.end());
  plugin.node_name = flags.node_name;
  plugin.pod_resources_socket = flags.socket;
  return std::thread(
      [plugin, &agent, &pods, &stopping] { RunDevicePlugins(plugin, agent, pods, stopping); });
}

int Run(const Flags& flags) {
  NvmlOptions nvml;
  nvml.library = flags.nvml_library;
  nvml.sysfs_root = flags.host_sys;
  nvml.nic_rails = flags.nic_rails;
  auto gpu_models = LoadGpuModels(flags, nvml);
  if (!gpu_models) {
    std::cerr << "linkfit-agent: " << gpu_models.error().message << "\n";
    return 2;
  }
  AgentMetrics metrics;
  std::unique_ptr<MetricsEndpoint> metrics_endpoint;
  if (!flags.metrics_listen.empty() && !flags.print) {
    auto served = ServeMetrics(flags.metrics_listen, metrics);
    if (!served) {
      std::cerr << "linkfit-agent: " << served.error().message << "\n";
      return 2;
    }
    metrics_endpoint = std::move(*served);
  }
  const CommandRunner runner = SystemCommandRunner();
  const bool use_nri = UseNri(flags);
  // `gpu_models` is captured so that the table outlives every discovery.
  NodeAgent::DiscoverFn discover = [nvml, runner, models = *gpu_models] {
    return Discover(nvml, runner);
  };
  NodePods pods;
  NodeAgent::DevicesFn devices;
  if (!flags.socket.empty()) {
    const bool know_uids = !flags.print;
    std::set<std::string> nic_resources;
    for (const std::string& name : {flags.nic_resource, flags.nic_share_resource}) {
      if (!name.empty()) nic_resources.insert(name);
    }
    // Replicas of linkfit's GPU share resource are GPUs held too (verify mode reports them).
    std::set<std::string> gpu_resources;
    if (!flags.share_resource.empty()) gpu_resources.insert(flags.share_resource);
    devices = MakeDevicesFn(
        flags.socket,
        [&pods, know_uids](const std::string& key) {
          return know_uids ? pods.UidOf(key) : std::optional<std::string>(key);
        },
        std::move(nic_resources), std::move(gpu_resources));
  }
  if (flags.print) return PrintOnce(discover, devices);

  auto api = Connect(flags, pods);
  if (!api) {
    std::cerr << "linkfit-agent: " << api.error().message << "\n";
    return 1;
  }
  HandedDevicesView handed;
  if (use_nri) devices = HandedFirst(std::move(devices), handed);
  AgentOptions options;
  options.discover_interval = std::chrono::seconds(flags.discover_interval_s);
  options.devices_interval = std::chrono::seconds(flags.devices_interval_s);
  NodePublisher publisher(*api->client, flags.node_name);
  NodeAgent agent(options, discover, devices, publisher);
  agent.SetMetrics(&metrics);
  // Until the runtime configures the NRI plugin, another device plugin's choice stands.
  const char* without_nri = !use_nri && !flags.device_plugin_dir.empty() ? "verify" : "report";
  agent.SetHandoffMode(without_nri);
  agent.SetNicHandoffMode(without_nri);
  if (flags.once) return RunOnce(agent, *api->pods);

  StopOnSignals(agent);
  std::atomic<bool> stopping{false};
  std::unique_ptr<HealthWatch> health;
  std::thread health_thread = StartHealthWatch(nvml, agent, health, stopping);
  std::thread nri_thread;
  if (use_nri) nri_thread = StartNri(flags, agent, handed, stopping);
  std::thread plugin_thread;
  if (!flags.device_plugin_dir.empty()) {
    plugin_thread = StartDevicePlugins(flags, use_nri, agent, pods, stopping);
  }
  agent.Run();
  stopping.store(true);
  for (std::thread* thread : {&plugin_thread, &nri_thread, &health_thread}) {
    if (thread->joinable()) thread->join();
  }
  api->pods->Stop();
  api->client->Stop();
  return 0;
}

}  // namespace
}  // namespace linkfit::agent

int main(int argc, char** argv) {
  // Block the stop signals in every thread; StopOnSignals waits for them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      std::cout << linkfit::agent::kUsage;
      return 0;
    }
  }
  auto flags = linkfit::agent::ParseFlags(args);
  if (!flags) {
    std::cerr << "linkfit-agent: " << flags.error().message << "\n" << linkfit::agent::kUsage;
    return 2;
  }
  return linkfit::agent::Run(*flags);
}
