// Cluster mode's state path, in process: how fast the node and pod stores absorb the API
// server's objects (the decode + apply work a reflector hands them), and what filter costs while
// they do. The HTTP transport is measured separately (bench/cluster/cluster_api_bench.cc).
//
//   linkfit_cluster_state_bench [--nodes 5000] [--pods 50000] [--events 200000] [--names 1000]
//                               [--event-rate 0 (as fast as possible) | events per second]
//                               [--without-nics (the machines' RDMA NICs left out)]
//
// 1. Initial list: every node (a compact topology document in linkfit.io/topology, one of four
//    machine types, allocatable CPU/memory, ordinary labels) and every pod (realistic objects of
//    about 2 KB: labels, annotations, managedFields, two containers, status conditions; half GPU
//    pods bound with an allocation record, a tenth GPU pods without one (estimated), the rest
//    CPU-only, a few pending) through NodeStore::ListItem and PodStore::ListItem: CPU seconds,
//    heap bytes per pod (mallinfo2 before and after, the JSON text freed).
// 2. Watch absorption: one thread applies pod events (status MODIFIED, and pods deleted and
//    re-added) as fast as it can while another runs filter with `names` node names; events per
//    second, and filter p50/p99 with and without the event stream.

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/flags.h"
#include "common/process_stats.h"
#include "linkfit/cluster/node_store.h"
#include "linkfit/cluster/pod_store.h"
#include "linkfit/common/files.h"
#include "linkfit/extender/extender.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/topology/spec.h"
#include "linkfit/wire/verb_calls.h"

namespace {

using namespace linkfit;

using linkfit::bench::CpuSeconds;

std::size_t HeapBytes() {
  return static_cast<std::size_t>(linkfit::bench::HeapInUse::Now().arenas);
}

std::string ReadFile(const std::string& path) {
  auto text = linkfit::ReadFile(path);
  if (!text) std::abort();  // the repository's own fixtures
  return *text;
}

struct Machine {
  std::string id;
  std::string document;  // compact annotation form
  int gpus = 8;
};

// The fixtures' machines; `without_nics`: their RDMA NICs left out (a cluster without NICs).
std::vector<Machine> Machines(bool without_nics) {
  std::vector<Machine> machines;
  for (const char* id : {"dgx-a100", "dgx-h100", "dgx1-v100", "pcie-8x-l40s-2socket"}) {
    auto spec = topology::ParseTopologyDocument(
        ReadFile(std::string(LINKFIT_SOURCE_DIR) + "/config/topologies/" + id + ".json"));
    if (!spec) std::abort();
    if (without_nics) spec->nics.clear();
    machines.push_back({id, topology::ToTopologyDocument(*spec), 8});
  }
  return machines;
}

std::string NodeJson(const std::string& name, const Machine& machine) {
  nlohmann::json node = {
      {"metadata",
       {{"name", name},
        {"uid", "node-uid-" + name},
        {"resourceVersion", "100"},
        {"labels",
         {{"kubernetes.io/hostname", name},
          {"kubernetes.io/os", "linux"},
          {"node.kubernetes.io/instance-type", machine.id},
          {"nvidia.com/gpu.present", "true"},
          {"nvidia.com/gpu.product", machine.id},
          {"topology.kubernetes.io/zone", "zone-a"}}},
        {"annotations",
         {{"linkfit.io/topology", machine.document},
          {"node.alpha.kubernetes.io/ttl", "0"},
          {"volumes.kubernetes.io/controller-managed-attach-detach", "true"}}}}},
      {"spec", {{"podCIDR", "10.0.0.0/24"}}},
      {"status",
       {{"allocatable",
         {{"cpu", "224"}, {"memory", "2Ti"}, {"nvidia.com/gpu", "8"}, {"pods", "110"}}},
        {"capacity", {{"cpu", "224"}, {"memory", "2Ti"}, {"nvidia.com/gpu", "8"}}},
        {"conditions",
         {{{"type", "Ready"},
           {"status", "True"},
           {"lastHeartbeatTime", "2026-11-24T00:00:00Z"},
           {"reason", "KubeletReady"}}}}}}};
  return node.dump();
}

std::string PodJson(int i, const std::string& node, int gpus, const std::string& allocation,
                    const std::string& phase) {
  const std::string name = "job-" + std::to_string(i);
  nlohmann::json annotations = {{"kubectl.kubernetes.io/restartedAt", "2026-11-20T10:00:00Z"},
                                {"prometheus.io/scrape", "true"}};
  if (!allocation.empty()) annotations["linkfit.io/allocation"] = allocation;
  nlohmann::json limits = {{"cpu", "8"}, {"memory", "64Gi"}};
  if (gpus > 0) limits["nvidia.com/gpu"] = std::to_string(gpus);
  nlohmann::json pod = {
      {"metadata",
       {{"name", name},
        {"namespace", "team-" + std::to_string(i % 40)},
        {"uid", "00000000-0000-4000-8000-" + std::to_string(100000000000 + i)},
        {"resourceVersion", std::to_string(1000 + i)},
        {"creationTimestamp", "2026-11-20T10:00:00Z"},
        {"labels", {{"app", "trainer"}, {"job", name}, {"pod-template-hash", "7d9f8c6b5"}}},
        {"annotations", annotations},
        {"ownerReferences",
         {{{"apiVersion", "batch/v1"}, {"kind", "Job"}, {"name", name}, {"uid", "o-" + name}}}},
        {"managedFields",
         {{{"manager", "kube-controller-manager"},
           {"operation", "Update"},
           {"apiVersion", "v1"},
           {"fieldsType", "FieldsV1"},
           {"fieldsV1",
            {{"f:metadata", {{"f:labels", {{".", nlohmann::json::object()}}}}},
             {"f:spec", {{"f:containers", nlohmann::json::object()}}}}}}}}}},
      {"spec",
       {{"schedulerName", "linkfit-scheduler"},
        {"containers",
         {{{"name", "main"},
           {"image", "registry.example/trainer:v1"},
           {"command", {"python", "train.py", "--epochs", "100"}},
           {"env", {{{"name", "NCCL_DEBUG"}, {"value", "INFO"}}}},
           {"resources", {{"limits", limits}, {"requests", limits}}}},
          {{"name", "sidecar"},
           {"image", "registry.example/log:v1"},
           {"resources", {{"requests", {{"cpu", "100m"}, {"memory", "64Mi"}}}}}}}},
        {"restartPolicy", "Never"},
        {"tolerations", {{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}}}}}},
      {"status",
       {{"phase", phase},
        {"qosClass", "Burstable"},
        {"conditions",
         {{{"type", "Ready"}, {"status", "True"}}, {{"type", "PodScheduled"}, {"status", "True"}}}},
        {"podIP", "10.1.2.3"}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod.dump();
}

struct NoBinder final : extender::Binder {
  extender::BindReply Bind(const extender::BindRequest&) override {
    return {state::BindEvent::kRefused, "no binds in this benchmark"};
  }
  void Released(const std::string&) override {}
};

// Filter latencies (seconds) of `count` calls with `names`, sorted.
std::vector<double> FilterLatencies(const extender::Extender& ext, const wire::ExtenderArgs& args,
                                    int count) {
  std::vector<double> seconds;
  seconds.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const wire::FilterResult result = wire::RunFilter(ext, args);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (result.node_names.size() > args.node_names.size()) std::abort();
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds;
}

double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto index = static_cast<std::size_t>(q * static_cast<double>(sorted.size()));
  return sorted[std::min(sorted.size() - 1, index)];
}

// Pods as the API server would list them, spread at random over `node_count` nodes: GPU pods
// with allocation records (counted in `gpu_pods`), GPU pods another scheduler placed (no record:
// `estimated`), pending GPU pods, and CPU pods.
std::vector<std::string> GeneratePods(int node_count, int pod_count, int& gpu_pods,
                                      int& estimated) {
  std::vector<std::string> pod_json;
  std::vector<int> next_gpu(static_cast<std::size_t>(node_count), 0);
  std::mt19937 rng(42);
  for (int i = 0; i < pod_count; ++i) {
    const int n = static_cast<int>(rng() % static_cast<unsigned>(node_count));
    const std::string node = "gpu-" + std::to_string(n);
    const int kind = static_cast<int>(rng() % 20);
    int& used = next_gpu[static_cast<std::size_t>(n)];
    if (kind < 10 && used + 2 <= 8) {  // GPU pod with a record
      kube::AllocationRecord record;
      record.pod = "team-" + std::to_string(i % 40) + "/job-" + std::to_string(i);
      record.uid = "00000000-0000-4000-8000-" + std::to_string(100000000000 + i);
      record.node = node;
      record.devices.gpus = {used, used + 1};
      record.containers = {{"main", false, record.devices}};
      used += 2;
      pod_json.push_back(PodJson(i, node, 2, kube::EncodeAllocationRecord(record), "Running"));
      ++gpu_pods;
    } else if (kind < 12 && used + 1 <= 8) {  // placed by another scheduler, no record
      used += 1;
      pod_json.push_back(PodJson(i, node, 1, "", "Running"));
      ++estimated;
    } else if (kind < 13) {  // pending GPU pod
      pod_json.push_back(PodJson(i, "", 4, "", "Pending"));
    } else {
      pod_json.push_back(PodJson(i, node, 0, "", "Running"));
    }
  }
  return pod_json;
}

// 1. The initial list: CPU time and heap to take in every node and pod.
void MeasureInitialList(cluster::NodeStore& nodes, cluster::PodStore& pods,
                        const state::ClusterCache& cache, const std::vector<std::string>& node_json,
                        const std::vector<std::string>& pod_json, int gpu_pods, int estimated) {
  const int node_count = static_cast<int>(node_json.size());
  const int pod_count = static_cast<int>(pod_json.size());
  std::size_t pod_bytes = 0;
  for (const std::string& json : pod_json) pod_bytes += json.size();
  malloc_trim(0);

  const std::size_t heap_before_nodes = HeapBytes();
  const double cpu_start = CpuSeconds();
  const auto wall_start = std::chrono::steady_clock::now();
  nodes.BeginList();
  for (const std::string& json : node_json) nodes.ListItem(json);
  nodes.EndList("1000");
  const double cpu_nodes = CpuSeconds() - cpu_start;
  const std::size_t heap_after_nodes = HeapBytes();
  pods.BeginList();
  for (const std::string& json : pod_json) pods.ListItem(json);
  pods.EndList("2000");
  const double cpu_total = CpuSeconds() - cpu_start;
  const double wall_total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  const std::size_t heap_after_pods = HeapBytes();
  const double bytes_per_pod =
      (static_cast<double>(heap_after_pods) - static_cast<double>(heap_after_nodes)) / pod_count;
  const state::ClusterCache::Sizes sizes = cache.sizes();
  std::printf(
      "initial list: %d nodes (%zu modelled), %d pods (%d with records, %d estimated, "
      "%zu in the cache), %.1f MB of pod JSON\n",
      node_count, nodes.modelled(), pod_count, gpu_pods, estimated, sizes.added,
      static_cast<double>(pod_bytes) / 1e6);
  std::printf("  CPU to ready: %.3f s (nodes %.3f s, pods %.3f s; %.1f us per pod), wall %.3f s\n",
              cpu_total, cpu_nodes, cpu_total - cpu_nodes,
              (cpu_total - cpu_nodes) * 1e6 / pod_count, wall_total);
  std::printf(
      "  heap: nodes %.0f B per node, pods %.0f B per pod\n",
      (static_cast<double>(heap_after_nodes) - static_cast<double>(heap_before_nodes)) / node_count,
      bytes_per_pod);
}

// 2. Watch absorption: pod events applied by one thread while this one calls filter; filter's
// latency then against `quiet` (measured without events).
void MeasureWatchUnderFilter(cluster::PodStore& pods, const extender::Extender& ext,
                             const wire::ExtenderArgs& args,
                             const std::vector<std::string>& pod_json, std::int64_t event_count,
                             std::int64_t event_rate, int names, const std::vector<double>& quiet) {
  // Events: MODIFIED status updates of running pods (the bulk of a real pod watch), and every
  // tenth event a delete + re-add of a CPU pod.
  std::vector<std::string> events;
  for (long e = 0; e < std::min<long>(event_count, 20000); ++e) {
    events.push_back(pod_json[static_cast<std::size_t>(e) % pod_json.size()]);
  }
  std::atomic<bool> done{false};
  std::atomic<long> applied{0};
  double events_seconds = 0;
  std::thread watcher([&] {
    const auto start = std::chrono::steady_clock::now();
    for (long e = 0; e < event_count; ++e) {
      if (event_rate > 0 && e % 100 == 0) {
        std::this_thread::sleep_until(start + std::chrono::microseconds(e * 1000000 / event_rate));
      }
      const std::string& json = events[static_cast<std::size_t>(e) % events.size()];
      if (e % 10 == 9) {
        pods.Event(kube::WatchEventType::kDeleted, json);
        pods.Event(kube::WatchEventType::kAdded, json);
        applied += 2;
      } else {
        pods.Event(kube::WatchEventType::kModified, json);
        ++applied;
      }
    }
    events_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    done = true;
  });
  std::vector<double> busy;
  while (!done) {
    const std::vector<double> batch = FilterLatencies(ext, args, 50);
    busy.insert(busy.end(), batch.begin(), batch.end());
  }
  watcher.join();
  std::sort(busy.begin(), busy.end());
  std::printf("watch absorption: %ld pod events in %.3f s = %.0f events/s while filter ran\n",
              applied.load(), events_seconds, static_cast<double>(applied.load()) / events_seconds);
  std::printf(
      "  filter @ %d names: quiet p50 %.3f ms p99 %.3f ms; during events p50 %.3f ms "
      "p99 %.3f ms (%zu calls)\n",
      names, Quantile(quiet, 0.5) * 1e3, Quantile(quiet, 0.99) * 1e3, Quantile(busy, 0.5) * 1e3,
      Quantile(busy, 0.99) * 1e3, busy.size());
}

}  // namespace

int main(int argc, char** argv) {
  int node_count = 5000;
  int pod_count = 50000;
  std::int64_t event_count = 200000;
  // 0: as fast as one thread applies them; else paced to this many events per second (the
  // target rate, to see filter latency at that load rather than at saturation).
  std::int64_t event_rate = 0;
  int names_asked = 1000;
  bool without_nics = false;
  linkfit::bench::Flags flags;
  flags.Int("--nodes", &node_count)
      .Int("--pods", &pod_count)
      .Int64("--events", &event_count)
      .Int64("--event-rate", &event_rate)
      .Int("--names", &names_asked)
      .Switch("--without-nics", &without_nics);
  if (auto parsed = flags.Parse(argc, argv); !parsed) {
    std::fprintf(stderr,
                 "linkfit_cluster_state_bench: %s\nusage: linkfit_cluster_state_bench [--nodes N] "
                 "[--pods N] [--events N] [--event-rate N] [--names N] [--without-nics]\n",
                 parsed.error().message.c_str());
    return 2;
  }
  const int names = std::min(node_count, names_asked);
  setenv("LINKFIT_LOG_LEVEL", "error", 0);

  const std::vector<Machine> machines = Machines(without_nics);
  auto catalog = alloc::MigCatalog::LoadDirectory(std::string(LINKFIT_SOURCE_DIR) + "/config/mig");
  if (!catalog) return 1;
  NullMetrics metrics;
  state::ClusterCache cache;
  alloc::PlacementTableCache registry;
  model::NodeModelFactory factory(registry, *catalog, topology::BandwidthModel::Defaults());
  cluster::PodStore pods(cache, {}, {}, metrics);
  cluster::NodeStore nodes(cache, factory, pods, metrics);

  // Objects as the API server would list them (generated first: their text is not linkfit's
  // memory; it is freed before measuring).
  std::vector<std::string> node_json;
  for (int n = 0; n < node_count; ++n) {
    node_json.push_back(NodeJson("gpu-" + std::to_string(n),
                                 machines[static_cast<std::size_t>(n) % machines.size()]));
  }
  int gpu_pods = 0;
  int estimated = 0;
  const std::vector<std::string> pod_json =
      GeneratePods(node_count, pod_count, gpu_pods, estimated);
  MeasureInitialList(nodes, pods, cache, node_json, pod_json, gpu_pods, estimated);
  // 2. Watch absorption under filter load.
  extender::ExtenderOptions options;
  NoBinder binder;
  extender::Extender ext(cache, options, binder, pods, metrics);
  wire::ExtenderArgs args;
  args.pod.name = "probe";
  args.pod.uid = "probe";
  args.pod.requests["nvidia.com/gpu"] = 2000;
  args.node_names_given = true;
  std::vector<std::string> name_storage;
  for (int n = 0; n < names; ++n) name_storage.push_back("gpu-" + std::to_string(n));
  for (const std::string& name : name_storage) args.node_names.push_back(name);
  (void)FilterLatencies(ext, args, 200);  // warm-up
  const std::vector<double> quiet = FilterLatencies(ext, args, 2000);

  MeasureWatchUnderFilter(pods, ext, args, pod_json, event_count, event_rate, names, quiet);
  return 0;
}
