// linkfit-load: end-to-end latency of the extender verbs as kube-scheduler drives them
// (DESIGN.md §11, issue 3 §5). It generates a standalone cluster of 8-GPU nodes, starts
// `linkfit serve` and the parse-only baseline (bench/load/parse_only_main.cc) as child processes
// pinned to one CPU, pins itself to another, and sends requests in the exact wire format over
// one keep-alive connection with one request in flight (kube-scheduler's loop is serial):
//
//   - filter and prioritize, nodeCacheCapable (full Pod, "Nodes":null, "NodeNames":[...]) at
//     each --sizes, against both servers, interleaved in --rounds so that noise hits both;
//   - bind (own work: standalone mode without a state file makes no API call), each pod first
//     seen by a small filter call, then released through POST /standalone/release;
//   - filter in non-cache mode with full ~20 KB Node objects, checked byte for byte against the
//     cache-mode answer;
//   - server memory (VmRSS) and start-up CPU (utime + stime when "listening" is printed);
//   - per request, each server's CPU (utime + stime) and context switches (all its threads, from
//     /proc/PID/task/*/status) over the measured requests.
//
// The client waits for each reply in read() (--client-wait block, as wrk and Go's netpoller do),
// or polls its socket (--client-wait spin) so that no latency includes its own CPU's wake-up. In
// a virtual machine that wake-up is a step (~60 µs here, for waits over ~0.14 ms), which a
// blocking ratio of a slower server to a quicker one counts against the slower one when only its
// replies are past the step. Just before the latency rounds a probe (wake_probe.h) measures the
// step on the machine at hand, and the report shows it beside the ratios (bench/RESULTS.md,
// 27 Nov 2026). --client-wait both measures every case both ways, alternately, in one run.
//
// With --hostile N it measures only the hostile-clients figure instead (DESIGN.md §11): filter
// at the first --sizes on the scheduler's keep-alive connection, and /healthz on a new
// connection every 100 ms (as a kubelet probes), for --hostile-seconds without and then with N
// hostile connections open against the same listener (bench/load/hostile.h: half idle, half
// slowloris trickling a header byte a second, reopened whenever the server closes them).
//
//   linkfit-load --linkfit build/release/src/app/linkfit
//                --parse-only build/release/bench/load/linkfit-parse-only --repo .
//
// scripts/load.sh BUILD_DIR runs it with the defaults. Results go to stdout as Markdown.

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/child_process.h"
#include "common/extender_args.h"
#include "hostile.h"
#include "http_connection.h"
#include "linkfit/common/strings.h"
#include "load_figures.h"
#include "wake_probe.h"
#include "workload.h"

namespace linkfit::load {
namespace {

using Clock = std::chrono::steady_clock;

std::string Absolute(const std::string& path) {
  char* resolved = ::realpath(path.c_str(), nullptr);
  if (resolved == nullptr) return path;
  std::string out = resolved;
  std::free(resolved);
  return out;
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  return out.good();
}

// Errors end the run at once, children included (std::exit skips the destructors that would
// stop them, and a left-over server keeps its port and CPU).
[[noreturn]] void Die(const std::string& message) {
  std::cerr << "linkfit-load: " << message << "\n";
  bench::ChildProcess::KillAll();
  std::exit(1);
}

// Starts a server as a child pinned to `cpu` (-1: unpinned), which dies with this process.
bench::ChildProcess StartServer(std::vector<std::string> argv, int cpu) {
  bench::ChildProcessOptions options;
  options.argv = std::move(argv);
  options.cpu = cpu;
  options.die_with_parent = true;
  auto child = bench::ChildProcess::Start(options);
  if (!child) Die(child.error().message);
  return std::move(*child);
}

extern "C" void StopChildrenAndExit(int signal_number) {
  bench::ChildProcess::KillAll();
  ::_exit(128 + signal_number);
}

// A request body whose pod UID is rewritten before each send, so every request is a new pod.
struct Body {
  std::string text;
  std::size_t uid_offset = 0;
  std::size_t cpu_offset = std::string::npos;  // --fresh-requests: rewritten too
};

class Driver {
 public:
  Driver(std::string name, bench::ChildProcess server,
         HttpConnection::Wait wait = HttpConnection::Wait::kBlock)
      : name_(std::move(name)), server_(std::move(server)) {
    if (auto ok = connection_.Connect(server_.host(), server_.port()); !ok) Die(ok.error().message);
    connection_.set_wait(wait);
  }

  const std::string& name() const { return name_; }
  bench::ChildProcess& server() { return server_; }
  void set_wait(HttpConnection::Wait wait) { connection_.set_wait(wait); }

  // Sends one request; returns its latency in seconds, or a negative value on failure.
  double Send(std::string_view path, std::string_view body, HttpResponse* response) {
    const auto start = Clock::now();
    auto ok = connection_.Post(path, body, response);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (!ok) Die(name_ + ": " + ok.error().message);
    return response->status == 200 ? seconds : -1;
  }

  // Runs `count` requests over `bodies` in rotation, recording latencies when `samples` is set.
  void Run(std::string_view path, std::vector<Body>& bodies, int count, std::uint64_t* serial,
           Samples* samples) {
    HttpResponse response;
    const auto start = Clock::now();
    const double cpu_start = samples != nullptr ? server_.CpuSeconds() : 0;
    const long long switches_start = samples != nullptr ? server_.ContextSwitches() : 0;
    const long long faults_start = samples != nullptr ? server_.MinorFaults() : 0;
    for (int i = 0; i < count; ++i) {
      Body& body = bodies[static_cast<std::size_t>(i) % bodies.size()];
      PatchUid(body.text, body.uid_offset, ++*serial);
      if (body.cpu_offset != std::string::npos) PatchCpu(body.text, body.cpu_offset, *serial);
      const double seconds = Send(path, body.text, &response);
      if (samples == nullptr) continue;
      if (seconds < 0) {
        ++samples->errors;
      } else {
        samples->seconds.push_back(seconds);
      }
    }
    if (samples != nullptr) {
      samples->wall += std::chrono::duration<double>(Clock::now() - start).count();
      samples->server_cpu += server_.CpuSeconds() - cpu_start;
      samples->switches.Add(switches_start, server_.ContextSwitches());
      samples->faults.Add(faults_start, server_.MinorFaults());
    }
  }

 private:
  std::string name_;
  bench::ChildProcess server_;
  HttpConnection connection_;
};

std::string Decoded(const HttpResponse& response) {
  if (response.content_encoding.empty()) return response.body;
  if (response.content_encoding != "gzip")
    Die("unexpected Content-Encoding " + response.content_encoding);
  auto plain = Gunzip(response.body);
  if (!plain) Die(plain.error().message);
  return *plain;
}

// Checks one filter and one prioritize answer of a server for `size` names: every name is
// accounted for exactly once, scores are integers in 0..score_range (the configured range).
// Returns how many names the filter passed.
std::size_t CheckReplies(Driver& linkfit, const std::string& filter_body,
                         const std::string& prioritize_body, std::size_t size, int score_range,
                         std::string* encoding) {
  HttpResponse response;
  if (linkfit.Send("/scheduler/filter", filter_body, &response) < 0) {
    Die("filter answered HTTP " + std::to_string(response.status) + ": " + Decoded(response));
  }
  *encoding = response.content_encoding;
  const auto filter = nlohmann::json::parse(Decoded(response));
  const std::size_t passed = filter["NodeNames"].is_array() ? filter["NodeNames"].size() : 0;
  const std::size_t accounted =
      passed + filter["FailedNodes"].size() + filter["FailedAndUnresolvableNodes"].size();
  if (accounted != size || !filter["Error"].get<std::string>().empty()) {
    Die("filter reply accounts for " + std::to_string(accounted) + " of " + std::to_string(size) +
        " nodes");
  }
  if (linkfit.Send("/scheduler/prioritize", prioritize_body, &response) < 0) {
    Die("prioritize answered HTTP " + std::to_string(response.status));
  }
  const auto scores = nlohmann::json::parse(Decoded(response));
  if (!scores.is_array() || scores.size() != size) Die("prioritize reply has the wrong length");
  for (const auto& entry : scores) {
    const auto score = entry["Score"].get<std::int64_t>();
    if (score < 0 || score > score_range) {
      Die("prioritize score " + std::to_string(score) + " is outside 0.." +
          std::to_string(score_range) + " (policy.score_range)");
    }
  }
  return passed;
}

// The first name of a filter reply's NodeNames, or "".
std::string FirstPassingName(const std::string& reply) {
  const std::string marker = "\"NodeNames\":[\"";
  const std::size_t at = reply.find(marker);
  if (at == std::string::npos) return "";
  const std::size_t start = at + marker.size();
  return reply.substr(start, reply.find('"', start) - start);
}

// One phase of the hostile-clients measurement.
struct HostilePhase {
  Samples filter;
  Samples healthz;         // successful probes
  int healthz_failed = 0;  // probes with no answer within the probe timeout
  int closed_by_server = 0;
};

constexpr std::chrono::milliseconds kProbeTimeout{2000};
constexpr std::chrono::milliseconds kProbeInterval{100};

// Filter requests back to back on the scheduler's connection for `seconds`, while another
// thread probes /healthz on a fresh connection every kProbeInterval (a stalled probe does not
// hold up the filter requests, nor the other way round).
HostilePhase MeasureHostilePhase(Driver& linkfit, std::vector<Body>& bodies, int seconds,
                                 std::uint64_t* serial) {
  HostilePhase phase;
  const auto end = Clock::now() + std::chrono::seconds(seconds);
  std::thread prober([&phase, &linkfit, end] {
    // A probe that times out takes longer than the interval; the next one starts at once.
    for (auto next = Clock::now(); next < end;
         next = std::max(next + kProbeInterval, Clock::now())) {
      std::this_thread::sleep_until(next);
      HttpConnection probe;
      HttpResponse response;
      const auto start = Clock::now();
      auto ok = probe.Connect(linkfit.server().host(), linkfit.server().port(), kProbeTimeout);
      if (ok) ok = probe.Get("/healthz", &response);
      if (ok && response.status == 200) {
        phase.healthz.seconds.push_back(
            std::chrono::duration<double>(Clock::now() - start).count());
      } else {
        ++phase.healthz_failed;
      }
    }
  });
  while (Clock::now() < end) linkfit.Run("/scheduler/filter", bodies, 1, serial, &phase.filter);
  prober.join();
  return phase;
}

// The hostile-clients mode (--hostile): filter with every pod shape at the first --sizes.
int RunHostile(const Options& o, Driver& linkfit, const GeneratedCluster& cluster,
               const std::string& load_before) {
  const std::size_t size = o.sizes.front();
  if (size > cluster.names.size()) Die("--sizes exceeds --nodes");
  std::uint64_t serial_number = 0;
  std::uint64_t* serial = &serial_number;
  std::vector<Body> bodies;
  for (const PodShape& shape : PodShapes()) {
    Body body;
    body.text = bench::CacheModeArgs(PodJson(shape, ++*serial), cluster.shuffled_names, size);
    body.uid_offset = UidOffset(body.text);
    bodies.push_back(std::move(body));
  }
  std::string encoding;
  CheckReplies(linkfit, bodies[0].text, bodies[0].text, size, o.score_range, &encoding);
  if (RaiseOpenFileLimit() < o.hostile + 100) Die("the open-file limit is below --hostile + 100");
  linkfit.Run("/scheduler/filter", bodies, o.warmup + 10, serial, nullptr);
  const HostilePhase quiet = MeasureHostilePhase(linkfit, bodies, o.hostile_seconds, serial);
  HostileClients hostile(linkfit.server().host(), linkfit.server().port(), o.hostile);
  if (auto ok = hostile.Start(); !ok) Die(ok.error().message);
  std::this_thread::sleep_for(std::chrono::seconds(1));  // every slow client has begun
  const int closed_before = hostile.reopened();
  HostilePhase attacked = MeasureHostilePhase(linkfit, bodies, o.hostile_seconds, serial);
  attacked.closed_by_server = hostile.reopened() - closed_before;
  hostile.Stop();
  const std::string load_after = ReadFirstLine("/proc/loadavg");

  std::ostringstream out;
  out << "## linkfit-load --hostile " << o.hostile << "\n\n";
  out << "- machine: " << Machine() << "; server pinned to CPU " << o.server_cpu
      << ", client to CPU " << o.client_cpu << " (-1 = unpinned)\n";
  out << "- load average before: " << load_before << "; after: " << load_after << "\n";
  out << "- cluster: " << o.nodes << " nodes; filter with " << size
      << " names on one keep-alive connection, one request in flight; /healthz on a new "
         "connection every "
      << kProbeInterval.count() << " ms, " << kProbeTimeout.count() << " ms timeout; "
      << o.hostile_seconds << " s per phase\n";
  out << "- hostile: " << o.hostile << " connections (" << o.hostile / 2
      << " slowloris at one header byte a second, the rest idle: half silent, half kept alive "
         "after one GET); the server closed "
      << attacked.closed_by_server << " of them during the phase (each reopened at once)\n\n";
  out << "| phase | filter p50 | filter p99 | filter max | filter n | /healthz p50 | /healthz p99 "
         "| /healthz max | /healthz answered | /healthz timed out |\n";
  out << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const HostilePhase* phase : {&quiet, static_cast<const HostilePhase*>(&attacked)}) {
    out << "| " << (phase == &quiet ? "no hostile clients" : std::to_string(o.hostile) + " hostile")
        << " | " << Ms(phase->filter.Percentile(0.5)) << " | " << Ms(phase->filter.Percentile(0.99))
        << " | " << Ms(phase->filter.Max()) << " | " << phase->filter.seconds.size()
        << (phase->filter.errors ? " (" + std::to_string(phase->filter.errors) + " errors)" : "")
        << " | " << Ms(phase->healthz.Percentile(0.5)) << " | "
        << Ms(phase->healthz.Percentile(0.99)) << " | " << Ms(phase->healthz.Max()) << " | "
        << phase->healthz.seconds.size() << " | " << phase->healthz_failed << " |\n";
  }
  out << "\nfilter p99 with / without: "
      << Fixed(attacked.filter.Percentile(0.99) / std::max(1e-9, quiet.filter.Percentile(0.99)), 2)
      << "x (target <= 2x); /healthz max with hostile clients: " << Ms(attacked.healthz.Max())
      << " ms, " << attacked.healthz_failed << " probes unanswered (target < 100 ms, none)\n";
  std::cout << out.str() << std::flush;
  return 0;
}

// Latency: per round, every case on both servers; warm-up in the first round only.
std::vector<CaseResult> MeasureLatency(const Options& o, Driver& linkfit, Driver& parse_only,
                                       std::map<std::size_t, std::vector<Body>>& bodies,
                                       std::uint64_t* serial) {
  std::vector<CaseResult> cases;
  for (const std::size_t size : o.sizes) {
    for (const char* verb : {"filter", "prioritize"}) {
      for (const HttpConnection::Wait wait : o.client_waits) {
        cases.push_back({verb, size, wait, {}, {}});
      }
    }
  }
  for (int round = 0; round < o.rounds; ++round) {
    for (CaseResult& c : cases) {
      const std::string path = "/scheduler/" + c.verb;
      const double scale = std::min(1.0, 1000.0 / static_cast<double>(c.size));
      const int measured =
          std::max(100, static_cast<int>(o.requests * std::max(scale, 0.34))) / o.rounds;
      const int warmup = round == 0 ? static_cast<int>(o.warmup * scale) + 10 : 10;
      for (Driver* driver : {&linkfit, &parse_only}) {
        Samples& samples = driver == &linkfit ? c.linkfit : c.parse_only;
        driver->set_wait(c.wait);
        driver->Run(path, bodies[c.size], warmup, serial, nullptr);
        driver->Run(path, bodies[c.size], measured, serial, &samples);
      }
    }
  }
  for (Driver* driver : {&linkfit, &parse_only}) driver->set_wait(o.client_waits.front());
  return cases;
}

// Bind: a small filter so that linkfit knows the pod, then the timed bind, then a release.
void MeasureBinds(const Options& o, Driver& linkfit, Driver& parse_only,
                  const GeneratedCluster& cluster, const PodShape& shape, std::uint64_t* serial,
                  RunFigures& f) {
  HttpResponse response;
  for (int i = 0; i < o.binds; ++i) {
    const std::uint64_t pod_serial = ++*serial;
    const std::string pod = PodJson(shape, pod_serial);
    const std::string filter =
        bench::CacheModeArgs(pod, cluster.names, 16, static_cast<std::size_t>(i) * 16);
    if (linkfit.Send("/scheduler/filter", filter, &response) < 0) Die("filter before bind failed");
    const std::string node = FirstPassingName(Decoded(response));
    if (node.empty()) Die("no node passes the bind pod's filter");
    const std::string uid = PodUid(pod_serial);
    const std::string bind =
        bench::BindingArgs("trainer-" + std::to_string(pod_serial), "ml-research", uid, node);
    const double seconds = linkfit.Send("/scheduler/bind", bind, &response);
    if (seconds < 0 || Decoded(response) != R"({"Error":""})") {
      Die("bind failed: " + Decoded(response));
    }
    f.bind.seconds.push_back(seconds);
    f.bind.wall += seconds;
    const double released =
        linkfit.Send("/standalone/release", R"({"PodUID":")" + uid + "\"}", &response);
    if (released < 0) Die("release failed: " + Decoded(response));
    f.release.seconds.push_back(released);
    f.release.wall += released;
    const double baseline = parse_only.Send("/scheduler/bind", bind, &response);
    if (baseline < 0) Die("parse-only bind failed");
    f.bind_parse_only.seconds.push_back(baseline);
    f.bind_parse_only.wall += baseline;
  }
}

// Non-cache mode: full Node objects; linkfit's reply must equal the cache-mode reply with the
// passing Node objects echoed byte for byte.
void MeasureNonCache(const Options& o, Driver& linkfit, Driver& parse_only,
                     const GeneratedCluster& cluster, const PodShape& shape, std::uint64_t* serial,
                     RunFigures& f) {
  const auto count = std::min(static_cast<std::size_t>(o.non_cache_nodes), cluster.names.size());
  std::vector<std::string> objects;
  std::map<std::string, std::size_t> position;
  for (std::size_t i = 0; i < count; ++i) {
    objects.push_back(NodeObjectJson(cluster.names[i], cluster.products[i]));
    position[cluster.names[i]] = i;
  }
  const std::string pod = PodJson(shape, ++*serial);
  Body body;
  body.text = bench::NonCacheModeArgs(pod, objects);
  body.uid_offset = UidOffset(body.text);
  f.non_cache_bytes = body.text.size();
  HttpResponse response;
  if (linkfit.Send("/scheduler/filter", bench::CacheModeArgs(pod, cluster.names, count),
                   &response) < 0) {
    Die("cache-mode filter failed");
  }
  const std::string names_reply = Decoded(response);
  const std::size_t list_start = names_reply.find("\"NodeNames\":[") + 13;
  const std::size_t list_end = names_reply.find(']', list_start);
  std::string expected = R"({"Nodes":{"metadata":{},"items":[)";
  bool first = true;
  for (std::string_view quoted :
       Split(std::string_view(names_reply).substr(list_start, list_end - list_start), ',')) {
    if (quoted.size() < 2) continue;
    const std::string name(quoted.substr(1, quoted.size() - 2));
    if (!first) expected += ',';
    first = false;
    expected += objects[position.at(name)];
    ++f.non_cache_passing;
  }
  expected += R"(]},"NodeNames":null)";
  expected += names_reply.substr(list_end + 1);
  if (linkfit.Send("/scheduler/filter", body.text, &response) < 0 ||
      Decoded(response) != expected) {
    Die("non-cache filter reply differs from the cache-mode reply");
  }
  std::vector<Body> one = {body};
  for (Driver* driver : {&linkfit, &parse_only}) {
    driver->Run("/scheduler/filter", one, 2, serial, nullptr);
  }
  for (int i = 0; i < o.non_cache_requests; ++i) {  // alternate the servers
    linkfit.Run("/scheduler/filter", one, 1, serial, &f.non_cache);
    parse_only.Run("/scheduler/filter", one, 1, serial, &f.non_cache_parse_only);
  }
  f.after_non_cache_rss = linkfit.server().RssBytes();
  // Then cache-mode requests, as a scheduler's usual ones: a server thread that decoded a large
  // body gives its buffers back when it next decodes a small one (common/json_reader.h).
  for (int i = 0; i < 8; ++i) {
    if (linkfit.Send("/scheduler/filter", bench::CacheModeArgs(pod, cluster.names, count),
                     &response) < 0) {
      Die("cache-mode filter after the non-cache ones failed");
    }
  }
}

// Every pod shape at every size, each size's first body checked on both servers.
std::map<std::size_t, std::vector<Body>> MakeBodies(const Options& o,
                                                    const GeneratedCluster& cluster,
                                                    const std::vector<PodShape>& shapes,
                                                    Driver& linkfit, Driver& parse_only,
                                                    std::uint64_t* serial, RunFigures& f) {
  std::map<std::size_t, std::vector<Body>> bodies;
  for (const std::size_t size : o.sizes) {
    if (size > cluster.names.size()) Die("--sizes exceeds --nodes");
    for (const PodShape& shape : shapes) {
      Body body;
      body.text = bench::CacheModeArgs(PodJson(shape, ++*serial), cluster.shuffled_names, size);
      body.uid_offset = UidOffset(body.text);
      if (o.fresh_requests) body.cpu_offset = CpuOffset(body.text);
      bodies[size].push_back(std::move(body));
    }
    std::string ignored;
    f.passing[size] = {CheckReplies(linkfit, bodies[size][0].text, bodies[size][0].text, size,
                                    o.score_range, &f.reply_encoding),
                       CheckReplies(parse_only, bodies[size][0].text, bodies[size][0].text, size,
                                    o.score_range, &ignored)};
  }
  return bodies;
}

void PinClient(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<std::size_t>(cpu), &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    Die("cannot pin the client to CPU " + std::to_string(cpu));
  }
}

int Run(const Options& o) {
  const std::string repo = Absolute(o.repo);
  const std::string linkfit_path = Absolute(o.linkfit);
  const std::string parse_only_path = Absolute(o.parse_only);
  if (o.client_cpu >= 0) PinClient(o.client_cpu);
  char dir_template[] = "/tmp/linkfit-load-XXXXXX";
  if (o.write_only.empty() && ::mkdtemp(dir_template) == nullptr) Die("mkdtemp failed");
  const std::string work =
      o.write_only.empty() ? std::string(dir_template) : Absolute(o.write_only);
  RunFigures f;
  f.machine = Machine();
  f.load_before = ReadFirstLine("/proc/loadavg");
  const auto run_start = Clock::now();

  // Cluster files: the measured one, and a one-node-per-topology one for the memory baseline.
  const GeneratedCluster cluster = MakeCluster(repo + "/config/topologies", o.nodes, o.seed);
  const GeneratedCluster small = MakeCluster(repo + "/config/topologies", 7, o.seed);
  const auto write_config = [&](const std::string& name, const GeneratedCluster& c) {
    const std::string cluster_path = work + "/" + name + "-cluster.yaml";
    const std::string config_path = work + "/" + name + "-config.yaml";
    if (!WriteFile(cluster_path, c.yaml) ||
        !WriteFile(config_path,
                   "listen: \"127.0.0.1:0\"\nlog_level: warning\nmig_profiles_dir: " + repo +
                       "/config/mig\ncluster_file: " + cluster_path +
                       "\npolicy:\n  score_range: " + std::to_string(o.score_range) + "\n")) {
      Die("cannot write to " + work);
    }
    return config_path;
  };
  const std::string config = write_config("load", cluster);
  const std::string small_config = write_config("small", small);
  if (!o.write_only.empty()) {
    std::cout << "linkfit serve --config " << config << "\n";
    return 0;
  }

  const auto start_linkfit = [&](const std::string& config_path) {
    return StartServer({linkfit_path, "serve", "--config", config_path}, o.server_cpu);
  };
  if (o.hostile > 0) {
    Driver linkfit("linkfit", start_linkfit(config));
    const int code = RunHostile(o, linkfit, cluster, f.load_before);
    std::filesystem::remove_all(work);
    return code;
  }
  {
    bench::ChildProcess baseline = start_linkfit(small_config);
    f.small_rss = baseline.RssBytes();
    f.small_cpu = baseline.startup_cpu_s();
  }
  // Start-up is measured three times; the last server is the one under load.
  for (int i = 0; i < 2; ++i) {
    bench::ChildProcess trial = start_linkfit(config);
    f.startup_cpu.push_back(trial.startup_cpu_s());
    f.startup_wall.push_back(trial.startup_wall_s());
  }
  Driver linkfit("linkfit", start_linkfit(config), o.client_waits.front());
  f.startup_cpu.push_back(linkfit.server().startup_cpu_s());
  f.startup_wall.push_back(linkfit.server().startup_wall_s());
  f.ready_rss = linkfit.server().RssBytes();
  Driver parse_only("parse-only", StartServer({parse_only_path}, o.server_cpu),
                    o.client_waits.front());
  f.parse_only_rss = parse_only.server().RssBytes();

  std::uint64_t serial = 0;
  const std::vector<PodShape> shapes = PodShapes();
  for (const PodShape& shape : shapes) f.shape_labels.push_back(shape.label);
  f.allocations = cluster.allocations;
  std::map<std::size_t, std::vector<Body>> bodies =
      MakeBodies(o, cluster, shapes, linkfit, parse_only, &serial, f);

  // What the client's own waiting costs on this machine, just before the latency rounds (the
  // servers idle meanwhile), so that the report can say which latencies straddle its step.
  if (o.wake_samples > 0) {
    auto probed = ProbeWakeCost(o.server_cpu, o.client_cpu, o.wake_samples, DefaultWakeDelays());
    if (!probed) Die(probed.error().message);
    f.wake_costs = std::move(*probed);
  }

  f.cases = MeasureLatency(o, linkfit, parse_only, bodies, &serial);
  MeasureBinds(o, linkfit, parse_only, cluster, shapes[1], &serial, f);
  if (o.non_cache_nodes > 0)
    MeasureNonCache(o, linkfit, parse_only, cluster, shapes[0], &serial, f);
  f.end_rss = linkfit.server().RssBytes();
  f.parse_only_end_rss = parse_only.server().RssBytes();
  f.total_s = std::chrono::duration<double>(Clock::now() - run_start).count();
  f.load_after = ReadFirstLine("/proc/loadavg");

  std::cout << Report(o, f) << std::flush;
  std::filesystem::remove_all(work);
  return 0;
}

}  // namespace
}  // namespace linkfit::load

int main(int argc, char** argv) {
  std::signal(SIGINT, linkfit::load::StopChildrenAndExit);
  std::signal(SIGTERM, linkfit::load::StopChildrenAndExit);
  const auto options = linkfit::load::ParseOptions(argc, argv);
  if (!options) {
    std::cerr << linkfit::load::kUsage;
    return 2;
  }
  return linkfit::load::Run(*options);
}
