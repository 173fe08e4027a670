// Cluster mode over real HTTPS: start-up from the API server's lists, and binds per second.
// The fake API server (test/kube/fake_api_server.h) runs in a child process, so that the CPU
// this process uses is linkfit's alone (the reflectors' HTTP, parsing and state, the binds).
//
//   linkfit_cluster_api_bench [--nodes 5000] [--pods 50000] [--binds 2000] [--bind-threads 8]
//                             [--api-latency-ms 1]
//
// 1. Start-up: ClusterSource::Start until Ready (nodes listed, then pods, 500 a page): wall and
//    CPU seconds of this process, heap growth per pod, and the growth of the resident size per
//    node and per pod, with malloc set up as `linkfit serve` sets it (malloc_settings.h).
// 2. Binds: `binds` pending 1-GPU pods bound through Extender::Bind by `bind-threads` threads
//    while every API request takes `api-latency-ms`: binds per second and the latency of a bind.
//    `--binds 0` stops after start-up.

#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "common/flags.h"
#include "common/process_stats.h"
#include "kube/fake_api_server.h"
#include "linkfit/cluster/cluster_source.h"
#include "linkfit/common/files.h"
#include "linkfit/common/malloc_settings.h"
#include "linkfit/extender/extender.h"
#include "linkfit/kube/annotations.h"
#include "linkfit/topology/spec.h"

namespace {

using namespace linkfit;
using nlohmann::json;

// The resident size of this process, in bytes (/proc/self/statm).
double ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0;
  long resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

// HeapInUse (bench/common/process_stats.h): with `linkfit serve`'s fixed 128 KiB mmap threshold at
// start-up, the large tables and buffers are the mmapped blocks.
using linkfit::bench::CpuSeconds;
using linkfit::bench::HeapInUse;

std::string Compact(const std::string& id) {
  const auto text =
      linkfit::ReadFile(std::string(LINKFIT_SOURCE_DIR) + "/config/topologies/" + id + ".json");
  if (!text) std::abort();
  auto spec = topology::ParseTopologyDocument(*text);
  if (!spec) std::abort();
  return topology::ToTopologyDocument(*spec);
}

// The child: a fake API server with the cluster, until its stdin closes. Writes the kubeconfig
// path and a newline to `out`.
[[noreturn]] void RunApiServer(int out, int nodes, int pods, int binds, int latency_ms) {
  linkfit::testing::FakeApiServerOptions options;
  options.history_limit = 1000;
  options.bookmark_interval = std::chrono::milliseconds(5000);
  auto fake = linkfit::testing::StartFakeApiServer(options);
  if (!fake) _exit(3);
  const std::vector<std::string> machines = {Compact("dgx-a100"), Compact("dgx-h100"),
                                             Compact("dgx1-v100"), Compact("pcie-8x-l40s-2socket")};
  for (int n = 0; n < nodes; ++n) {
    json node = linkfit::testing::MakeFakeNode("gpu-" + std::to_string(n));
    node["metadata"]["annotations"][kube::kAnnotationTopology] =
        machines[static_cast<std::size_t>(n) % machines.size()];
    node["metadata"]["labels"]["kubernetes.io/hostname"] = "gpu-" + std::to_string(n);
    node["status"]["allocatable"] = {{"cpu", "224"}, {"memory", "2Ti"}, {"pods", "110"}};
    if (!(*fake)->AddNode(node)) _exit(4);
  }
  std::vector<int> used(static_cast<std::size_t>(nodes), 0);
  std::mt19937 rng(7);
  for (int i = 0; i < pods; ++i) {
    const int n = static_cast<int>(rng() % static_cast<unsigned>(nodes));
    const std::string node = "gpu-" + std::to_string(n);
    json pod = linkfit::testing::MakeFakePod("team-" + std::to_string(i % 40),
                                             "job-" + std::to_string(i), node);
    json limits = {{"cpu", "4"}, {"memory", "32Gi"}};
    int& gpus = used[static_cast<std::size_t>(n)];
    if (i % 2 == 0 && gpus < 6) {  // half GPU pods, with the record linkfit would have written
      limits["nvidia.com/gpu"] = "1";
      pod["metadata"]["uid"] = "uid-" + std::to_string(i);
      kube::AllocationRecord record;
      record.pod = pod["metadata"]["namespace"].get<std::string>() + "/job-" + std::to_string(i);
      record.uid = "uid-" + std::to_string(i);
      record.node = node;
      record.devices.gpus = {gpus++};
      pod["metadata"]["annotations"][kube::kAnnotationAllocation] =
          kube::EncodeAllocationRecord(record);
    }
    pod["spec"]["containers"] = {{{"name", "main"}, {"resources", {{"limits", limits}}}}};
    pod["status"]["phase"] = "Running";
    if (!(*fake)->AddPod(pod)) _exit(5);
  }
  for (int i = 0; i < binds; ++i) {
    json pod = linkfit::testing::MakeFakePod("bench", "pending-" + std::to_string(i));
    pod["spec"]["containers"] = {
        {{"name", "main"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}};
    if (!(*fake)->AddPod(pod)) _exit(6);
  }
  if (latency_ms > 0) (*fake)->SetLatency(std::chrono::milliseconds(latency_ms));
  auto kubeconfig = (*fake)->WriteKubeconfig();
  if (!kubeconfig) _exit(7);
  const std::string line = *kubeconfig + "\n";
  if (write(out, line.data(), line.size()) < 0) _exit(8);
  close(out);
  char byte = 0;
  while (read(STDIN_FILENO, &byte, 1) > 0) {
  }
  _exit(0);
}

// Times the Binding write itself, so that bind's own work (re-check, assume, the record, marking
// bound) is a figure of its own.
struct TimedBinder final : extender::Binder {
  explicit TimedBinder(extender::Binder& binder) : inner(binder) {}
  extender::BindReply Bind(const extender::BindRequest& request) override {
    const auto start = std::chrono::steady_clock::now();
    extender::BindReply outcome = inner.Bind(request);
    write_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return outcome;
  }
  void Released(const std::string& pod_uid) override { inner.Released(pod_uid); }
  extender::Binder& inner;
  static inline thread_local double write_seconds = 0;  // the calling thread's last write
};

// The fake API server, in a child process: it prints its kubeconfig's path on `kubeconfig`'s
// pipe and runs until its stdin (`to_child`) closes.
struct FakeApiServer {
  pid_t pid = -1;
  int to_child = -1;
  std::string kubeconfig;  // empty: it did not start
};

FakeApiServer StartFakeApiServer(int nodes, int pods, int binds, int latency_ms) {
  FakeApiServer server;
  int to_parent[2];
  int to_child[2];
  if (pipe(to_parent) != 0 || pipe(to_child) != 0) return server;
  server.pid = fork();
  if (server.pid == 0) {
    close(to_parent[0]);
    close(to_child[1]);
    dup2(to_child[0], STDIN_FILENO);
    RunApiServer(to_parent[1], nodes, pods, binds, latency_ms);
  }
  close(to_parent[1]);
  close(to_child[0]);
  server.to_child = to_child[1];
  char c = 0;
  while (read(to_parent[0], &c, 1) == 1 && c != '\n') server.kubeconfig.push_back(c);
  return server;
}

// 2. `binds` binds of the pending pods from `threads` threads, with the Binding write timed apart;
// returns how many bound.
int MeasureBinds(cluster::ClusterSource& source, state::ClusterCache& cache, NullMetrics& metrics,
                 int nodes, int binds, int threads, int latency_ms) {
  TimedBinder timed(source.binder());
  extender::ExtenderOptions extender_options;
  extender::Extender ext(cache, extender_options, timed, source.pods(), metrics);
  // The UIDs kube-scheduler's bind would carry.
  const std::unordered_map<std::string, std::string> uids = source.pods().UidsByName();
  std::atomic<int> next{0};
  std::atomic<int> ok{0};
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(threads));
  std::vector<std::vector<double>> own_work(static_cast<std::size_t>(threads));
  const auto binds_start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = next++; i < binds; i = next++) {
        const std::string name = "pending-" + std::to_string(i);
        const auto uid = uids.find("bench/" + name);
        extender::BindTarget args{name, "bench", uid == uids.end() ? "" : uid->second,
                                  "gpu-" + std::to_string(i % nodes)};
        const auto start = std::chrono::steady_clock::now();
        TimedBinder::write_seconds = 0;
        const std::string error = ext.Bind(args);
        const double total =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        latencies[static_cast<std::size_t>(t)].push_back(total);
        own_work[static_cast<std::size_t>(t)].push_back(total - TimedBinder::write_seconds);
        if (error.empty()) ++ok;
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  const double binds_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - binds_start).count();
  const auto sorted = [](const std::vector<std::vector<double>>& lists) {
    std::vector<double> all;
    for (const auto& list : lists) all.insert(all.end(), list.begin(), list.end());
    std::sort(all.begin(), all.end());
    return all;
  };
  const auto quantile = [](const std::vector<double>& all, double q) {
    return all.empty()
               ? 0.0
               : all[std::min(all.size() - 1,
                              static_cast<std::size_t>(q * static_cast<double>(all.size())))];
  };
  const std::vector<double> all = sorted(latencies);
  const std::vector<double> own = sorted(own_work);
  std::printf(
      "binds: %d of %d bound in %.2f s = %.0f binds/s with %d threads, API latency %d ms; "
      "bind p50 %.2f ms p99 %.2f ms (API call included); own work (the Binding write "
      "excluded) p50 %.3f ms p99 %.3f ms\n",
      ok.load(), binds, binds_seconds, ok.load() / binds_seconds, threads, latency_ms,
      quantile(all, 0.5) * 1e3, quantile(all, 0.99) * 1e3, quantile(own, 0.5) * 1e3,
      quantile(own, 0.99) * 1e3);
  return ok.load();
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::printf(
          "usage: linkfit_cluster_api_bench [--nodes 5000] [--pods 50000] [--binds 2000]\n"
          "                                 [--bind-threads 8] [--api-latency-ms 1]\n"
          "Start-up (time, CPU, heap and resident growth at ready per node and per pod), then\n"
          "binds; --binds 0 stops after start-up.\n");
      return 0;
    }
  }
  int nodes = 5000;
  int pods = 50000;
  int binds = 2000;
  int threads = 8;
  int latency_ms = 1;
  linkfit::bench::Flags flags;
  flags.Int("--nodes", &nodes)
      .Int("--pods", &pods)
      .Int("--binds", &binds)
      .Int("--bind-threads", &threads)
      .Int("--api-latency-ms", &latency_ms);
  if (auto parsed = flags.Parse(argc, argv); !parsed) {
    std::fprintf(stderr, "linkfit_cluster_api_bench: %s (--help for usage)\n",
                 parsed.error().message.c_str());
    return 2;
  }
  setenv("LINKFIT_LOG_LEVEL", "warning", 0);

  const FakeApiServer server = StartFakeApiServer(nodes, pods, binds, latency_ms);
  if (server.kubeconfig.empty()) {
    std::fprintf(stderr, "the fake API server did not start\n");
    return 1;
  }
  UseStartUpMallocSettings();  // as `linkfit serve` does (cmd_serve.cc)
  auto catalog = alloc::MigCatalog::LoadDirectory(std::string(LINKFIT_SOURCE_DIR) + "/config/mig");
  auto client = kube::LoadKubeconfig(server.kubeconfig);
  if (!catalog || !client) return 1;
  NullMetrics metrics;
  state::ClusterCache cache;
  alloc::PlacementTableCache registry;
  model::NodeModelFactory factory(registry, *catalog, topology::BandwidthModel::Defaults());
  cluster::ClusterOptions options;
  options.client = *client;
  options.client.qps = 0;  // the start-up figure is linkfit's, not the rate limit's
  options.on_ready = [] { UseServingMallocSettings(); };  // as `linkfit serve` does
  malloc_trim(0);
  const HeapInUse heap_before = HeapInUse::Now();
  const double resident_before = ResidentBytes();
  auto source = cluster::ClusterSource::Create(options, cache, factory, metrics);
  if (!source) {
    std::fprintf(stderr, "%s\n", source.error().message.c_str());
    return 1;
  }
  const double cpu_start = CpuSeconds();
  const auto wall_start = std::chrono::steady_clock::now();
  (*source)->Start();
  if (!(*source)->WaitReady(std::chrono::minutes(5))) return 1;
  const double cpu = CpuSeconds() - cpu_start;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  const HeapInUse heap_now = HeapInUse::Now();
  const double heap = heap_now.arenas - heap_before.arenas;
  const double mmapped = heap_now.mmapped - heap_before.mmapped;
  const double resident = ResidentBytes() - resident_before;
  std::printf(
      "start-up over HTTPS: %d nodes, %d pods (+%d pending) to ready in %.2f s wall, "
      "%.2f s CPU; heap %.1f MB in arenas (%.0f B per pod, nodes included) and %.1f MB in "
      "mmapped blocks\n",
      nodes, pods, binds, wall, cpu, heap / 1e6, heap / std::max(1, pods + binds), mmapped / 1e6);
  // The resident growth counts what malloc keeps but does not use (freed list pages, arenas).
  std::printf("resident at ready: +%.1f MB = %.0f B per node", resident / 1e6,
              resident / std::max(1, nodes));
  if (pods + binds > 0) std::printf(", %.0f B per pod (nodes included)", resident / (pods + binds));
  std::printf("\n");
  if (binds == 0) {
    (*source)->Stop();
    close(server.to_child);
    int status = 0;
    waitpid(server.pid, &status, 0);
    return 0;
  }

  const int bound = MeasureBinds(**source, cache, metrics, nodes, binds, threads, latency_ms);
  (*source)->Stop();
  close(server.to_child);
  int status = 0;
  waitpid(server.pid, &status, 0);
  return bound > 0 ? 0 : 1;
}
