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

#include "child_server.h"
#include "hostile.h"
#include "http_connection.h"
#include "linkfit/common/strings.h"
#include "wake_probe.h"
#include "workload.h"

namespace linkfit::load {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string linkfit = "build/release/src/app/linkfit";
  std::string parse_only = "build/release/bench/load/linkfit-parse-only";
  std::string repo = ".";
  int nodes = 5000;
  std::vector<std::size_t> sizes = {1000, 5000};
  int requests = 3000;  // measured requests per case at 1,000 names (fewer for larger sizes)
  int warmup = 300;
  int rounds = 3;
  int binds = 1000;
  int non_cache_nodes = 1000;
  int non_cache_requests = 8;
  int server_cpu = 0;
  int client_cpu = 1;
  int score_range = 140;  // written into the server's config; prioritize scores are checked in it
  std::uint64_t seed = 42;
  std::string write_only;  // --write-config DIR: write the cluster and config files there, exit
  int hostile = 0;         // --hostile N: only the hostile-clients measurement, with N of them
  int hostile_seconds = 10;
  bool fresh_requests = false;  // every pod a CPU request no earlier pod had: nothing is reused
  // How the scheduler's connection waits for a reply (HttpConnection::Wait): blocking by default,
  // as wrk and Go's netpoller do; spinning, no reply's latency includes the client's own wake-up
  // (in this project's VM ~60 µs, paid only by waits longer than the hypervisor polls for, ~145
  // µs: wake_probe.h, bench/RESULTS.md). With --client-wait both, each latency case is measured
  // both ways, alternately, and reported in a table each (block first): the same servers in the
  // same minutes, so that the step's share of a blocking ratio shows beside it.
  std::vector<HttpConnection::Wait> client_waits = {HttpConnection::Wait::kBlock};
  // Round trips per delay and wait mode of the client's wake-up probe (wake_probe.h), run just
  // before the latency rounds; 0 skips it.
  int wake_samples = 200;
};

const char* kUsage =
    "usage: linkfit-load [--linkfit PATH] [--parse-only PATH] [--repo DIR] [--nodes N]\n"
    "                    [--sizes 1000,5000] [--requests N] [--warmup N] [--rounds N]\n"
    "                    [--binds N] [--non-cache-nodes N] [--non-cache-requests N]\n"
    "                    [--server-cpu C] [--client-cpu C] (-1: no pinning) [--seed S]\n"
    "                    [--score-range N] (policy.score_range written to the config; 140)\n"
    "                    [--write-config DIR] (write the server's files there and exit)\n"
    "                    [--hostile N [--hostile-seconds S]] (only filter and /healthz latency\n"
    "                    without and with N idle and slowloris connections, S seconds each)\n"
    "                    [--fresh-requests] (every pod a CPU request no earlier pod had, so\n"
    "                    nothing linkfit keeps across calls applies: the cold path)\n"
    "                    [--client-wait block|spin|both] (how the client waits for each\n"
    "                    reply: in read(), the default, or polling its socket, or each case\n"
    "                    both ways, alternately; --hostile blocks)\n"
    "                    [--wake-samples N] (round trips per delay of the probe of the\n"
    "                    client's wake-up cost; 200, 0: no probe)\n";

std::optional<Options> ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--fresh-requests") {  // the one flag without a value
      o.fresh_requests = true;
      continue;
    }
    if (i + 1 >= argc) return std::nullopt;
    const std::string value = argv[++i];
    const auto number = ParseInt(value);
    const auto need_number = [&](int* out) {
      if (!number) return false;
      *out = static_cast<int>(*number);
      return true;
    };
    if (arg == "--linkfit") {
      o.linkfit = value;
    } else if (arg == "--parse-only") {
      o.parse_only = value;
    } else if (arg == "--write-config") {
      o.write_only = value;
    } else if (arg == "--repo") {
      o.repo = value;
    } else if (arg == "--client-wait") {
      if (value == "block") {
        o.client_waits = {HttpConnection::Wait::kBlock};
      } else if (value == "spin") {
        o.client_waits = {HttpConnection::Wait::kSpin};
      } else if (value == "both") {
        o.client_waits = {HttpConnection::Wait::kBlock, HttpConnection::Wait::kSpin};
      } else {
        return std::nullopt;
      }
    } else if (arg == "--sizes") {
      o.sizes.clear();
      for (std::string_view field : Split(value, ',')) {
        const auto size = ParseInt(field);
        if (!size || *size <= 0) return std::nullopt;
        o.sizes.push_back(static_cast<std::size_t>(*size));
      }
    } else if (arg == "--seed") {
      if (!number) return std::nullopt;
      o.seed = static_cast<std::uint64_t>(*number);
    } else if (!(arg == "--nodes" && need_number(&o.nodes)) &&
               !(arg == "--requests" && need_number(&o.requests)) &&
               !(arg == "--warmup" && need_number(&o.warmup)) &&
               !(arg == "--rounds" && need_number(&o.rounds)) &&
               !(arg == "--binds" && need_number(&o.binds)) &&
               !(arg == "--non-cache-nodes" && need_number(&o.non_cache_nodes)) &&
               !(arg == "--non-cache-requests" && need_number(&o.non_cache_requests)) &&
               !(arg == "--server-cpu" && need_number(&o.server_cpu)) &&
               !(arg == "--client-cpu" && need_number(&o.client_cpu)) &&
               !(arg == "--score-range" && need_number(&o.score_range)) &&
               !(arg == "--hostile" && need_number(&o.hostile)) &&
               !(arg == "--hostile-seconds" && need_number(&o.hostile_seconds)) &&
               !(arg == "--wake-samples" && need_number(&o.wake_samples))) {
      return std::nullopt;
    }
  }
  if (o.rounds < 1) o.rounds = 1;
  if (o.hostile < 0 || o.hostile_seconds < 1) return std::nullopt;
  return o;
}

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

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (StartsWith(line, "model name")) {
      const std::size_t colon = line.find(':');
      return std::string(Trim(std::string_view(line).substr(colon + 1)));
    }
  }
  return "unknown CPU";
}

// A count the server process keeps (context switches, page faults) over the measured loops;
// unknown once a reading failed or went backwards (a thread that exited took its count along).
struct ServerCount {
  long long total = 0;
  bool known = true;

  void Add(long long start, long long end) {
    if (start < 0 || end < start) {
      known = false;
    } else {
      total += end - start;
    }
  }
};

// Latency samples of one case, in seconds.
struct Samples {
  std::vector<double> seconds;
  double wall = 0;        // sum of the measured loops' wall time
  double server_cpu = 0;  // the server's utime + stime over the measured loops
  ServerCount switches;   // the server's context switches
  ServerCount faults;     // the server's minor page faults
  int errors = 0;

  double Percentile(double p) const {
    if (seconds.empty()) return 0;
    std::vector<double> sorted = seconds;
    std::sort(sorted.begin(), sorted.end());
    const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(sorted.size())));
    return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
  }
  double Max() const {
    return seconds.empty() ? 0 : *std::max_element(seconds.begin(), seconds.end());
  }
  double PerSecond() const { return wall > 0 ? static_cast<double>(seconds.size()) / wall : 0; }
};

std::string Ms(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", seconds * 1000);
  return text;
}

std::string Fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

// A server count per request, one decimal; "-" when unknown.
std::string PerRequest(const ServerCount& count, std::size_t requests) {
  if (!count.known) return "-";
  return Fixed(
      static_cast<double>(count.total) / static_cast<double>(std::max<std::size_t>(1, requests)),
      1);
}

// Errors end the run at once, children included (std::exit skips the destructors that would
// stop them, and a left-over server keeps its port and CPU).
[[noreturn]] void Die(const std::string& message) {
  std::cerr << "linkfit-load: " << message << "\n";
  ChildServer::KillAll();
  std::exit(1);
}

extern "C" void StopChildrenAndExit(int signal_number) {
  ChildServer::KillAll();
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
  Driver(std::string name, ChildServer server,
         HttpConnection::Wait wait = HttpConnection::Wait::kBlock)
      : name_(std::move(name)), server_(std::move(server)) {
    if (auto ok = connection_.Connect(server_.host(), server_.port()); !ok) Die(ok.error().message);
    connection_.set_wait(wait);
  }

  const std::string& name() const { return name_; }
  ChildServer& server() { return server_; }
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
  ChildServer server_;
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

int RunHostile(const Options& o, Driver& linkfit, std::vector<Body>& bodies, std::size_t size,
               std::uint64_t* serial, const std::string& load_before) {
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
  out << "- machine: " << CpuModel() << ", " << ::sysconf(_SC_NPROCESSORS_ONLN)
      << " online CPUs; server pinned to CPU " << o.server_cpu << ", client to CPU " << o.client_cpu
      << " (-1 = unpinned)\n";
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

struct CaseResult {
  std::string verb;
  std::size_t size = 0;
  HttpConnection::Wait wait = HttpConnection::Wait::kBlock;
  Samples linkfit;
  Samples parse_only;
};

int Run(const Options& o) {
  const std::string repo = Absolute(o.repo);
  const std::string linkfit_path = Absolute(o.linkfit);
  const std::string parse_only_path = Absolute(o.parse_only);
  if (o.client_cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(static_cast<std::size_t>(o.client_cpu), &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0)
      Die("cannot pin the client to CPU " + std::to_string(o.client_cpu));
  }
  char dir_template[] = "/tmp/linkfit-load-XXXXXX";
  if (o.write_only.empty() && ::mkdtemp(dir_template) == nullptr) Die("mkdtemp failed");
  const std::string work =
      o.write_only.empty() ? std::string(dir_template) : Absolute(o.write_only);
  const std::string load_before = ReadFirstLine("/proc/loadavg");
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
    auto child =
        ChildServer::Start({{linkfit_path, "serve", "--config", config_path}, o.server_cpu});
    if (!child) Die(child.error().message);
    return std::move(*child);
  };
  if (o.hostile > 0) {
    Driver linkfit("linkfit", start_linkfit(config));
    const std::size_t size = o.sizes.front();
    if (size > cluster.names.size()) Die("--sizes exceeds --nodes");
    std::uint64_t serial = 0;
    std::vector<Body> bodies;
    for (const PodShape& shape : PodShapes()) {
      Body body;
      body.text = CacheModeBody(PodJson(shape, ++serial), cluster.shuffled_names, size);
      body.uid_offset = UidOffset(body.text);
      bodies.push_back(std::move(body));
    }
    std::string encoding;
    CheckReplies(linkfit, bodies[0].text, bodies[0].text, size, o.score_range, &encoding);
    const int code = RunHostile(o, linkfit, bodies, size, &serial, load_before);
    std::filesystem::remove_all(work);
    return code;
  }
  long long small_rss = 0;
  double small_cpu = 0;
  {
    ChildServer baseline = start_linkfit(small_config);
    small_rss = baseline.RssBytes();
    small_cpu = baseline.startup_cpu_s();
  }
  // Start-up is measured three times; the last server is the one under load.
  std::vector<double> startup_cpu;
  std::vector<double> startup_wall;
  for (int i = 0; i < 2; ++i) {
    ChildServer trial = start_linkfit(config);
    startup_cpu.push_back(trial.startup_cpu_s());
    startup_wall.push_back(trial.startup_wall_s());
  }
  Driver linkfit("linkfit", start_linkfit(config), o.client_waits.front());
  startup_cpu.push_back(linkfit.server().startup_cpu_s());
  startup_wall.push_back(linkfit.server().startup_wall_s());
  const long long ready_rss = linkfit.server().RssBytes();
  auto parse_child = ChildServer::Start({{parse_only_path}, o.server_cpu});
  if (!parse_child) Die(parse_child.error().message);
  Driver parse_only("parse-only", std::move(*parse_child), o.client_waits.front());
  const long long parse_only_rss = parse_only.server().RssBytes();

  // Bodies: every pod shape at every size.
  std::uint64_t serial = 0;
  const std::vector<PodShape> shapes = PodShapes();
  std::map<std::size_t, std::vector<Body>> bodies;
  std::string reply_encoding;
  std::map<std::size_t, std::pair<std::size_t, std::size_t>> passing;  // linkfit, parse-only
  for (const std::size_t size : o.sizes) {
    if (size > cluster.names.size()) Die("--sizes exceeds --nodes");
    for (const PodShape& shape : shapes) {
      Body body;
      body.text = CacheModeBody(PodJson(shape, ++serial), cluster.shuffled_names, size);
      body.uid_offset = UidOffset(body.text);
      if (o.fresh_requests) body.cpu_offset = CpuOffset(body.text);
      bodies[size].push_back(std::move(body));
    }
    std::string ignored;
    passing[size] = {CheckReplies(linkfit, bodies[size][0].text, bodies[size][0].text, size,
                                  o.score_range, &reply_encoding),
                     CheckReplies(parse_only, bodies[size][0].text, bodies[size][0].text, size,
                                  o.score_range, &ignored)};
  }

  // What the client's own waiting costs on this machine, just before the latency rounds (the
  // servers idle meanwhile), so that the report can say which latencies straddle its step.
  std::vector<WakeCost> wake_costs;
  if (o.wake_samples > 0) {
    auto probed = ProbeWakeCost(o.server_cpu, o.client_cpu, o.wake_samples, DefaultWakeDelays());
    if (!probed) Die(probed.error().message);
    wake_costs = std::move(*probed);
  }

  // Latency: per round, every case on both servers; warm-up in the first round only.
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
        driver->Run(path, bodies[c.size], warmup, &serial, nullptr);
        driver->Run(path, bodies[c.size], measured, &serial, &samples);
      }
    }
  }
  for (Driver* driver : {&linkfit, &parse_only}) driver->set_wait(o.client_waits.front());

  // Bind: a small filter so that linkfit knows the pod, then the timed bind, then a release.
  Samples bind_samples;
  Samples bind_parse_only;
  Samples release_samples;
  {
    const PodShape one_gpu = shapes[1];
    HttpResponse response;
    for (int i = 0; i < o.binds; ++i) {
      const std::uint64_t pod_serial = ++serial;
      const std::string pod = PodJson(one_gpu, pod_serial);
      const std::string filter =
          CacheModeBody(pod, cluster.names, 16, static_cast<std::size_t>(i) * 16);
      if (linkfit.Send("/scheduler/filter", filter, &response) < 0)
        Die("filter before bind failed");
      const std::string node = FirstPassingName(Decoded(response));
      if (node.empty()) Die("no node passes the bind pod's filter");
      const std::string uid = PodUid(pod_serial);
      const std::string bind =
          BindBody("trainer-" + std::to_string(pod_serial), "ml-research", uid, node);
      const double seconds = linkfit.Send("/scheduler/bind", bind, &response);
      if (seconds < 0 || Decoded(response) != R"({"Error":""})") {
        Die("bind failed: " + Decoded(response));
      }
      bind_samples.seconds.push_back(seconds);
      bind_samples.wall += seconds;
      const double released =
          linkfit.Send("/standalone/release", R"({"PodUID":")" + uid + "\"}", &response);
      if (released < 0) Die("release failed: " + Decoded(response));
      release_samples.seconds.push_back(released);
      release_samples.wall += released;
      const double baseline = parse_only.Send("/scheduler/bind", bind, &response);
      if (baseline < 0) Die("parse-only bind failed");
      bind_parse_only.seconds.push_back(baseline);
      bind_parse_only.wall += baseline;
    }
  }

  // Non-cache mode: full Node objects; linkfit's reply must equal the cache-mode reply with the
  // passing Node objects echoed byte for byte.
  Samples non_cache;
  Samples non_cache_parse_only;
  long long after_non_cache_rss = -1;
  std::size_t non_cache_bytes = 0;
  std::size_t non_cache_passing = 0;
  if (o.non_cache_nodes > 0) {
    const auto count = std::min(static_cast<std::size_t>(o.non_cache_nodes), cluster.names.size());
    std::vector<std::string> objects;
    std::map<std::string, std::size_t> position;
    for (std::size_t i = 0; i < count; ++i) {
      objects.push_back(NodeObjectJson(cluster.names[i], cluster.products[i]));
      position[cluster.names[i]] = i;
    }
    const std::string pod = PodJson(shapes[0], ++serial);
    Body body;
    body.text = NonCacheModeBody(pod, objects);
    body.uid_offset = UidOffset(body.text);
    non_cache_bytes = body.text.size();
    HttpResponse response;
    if (linkfit.Send("/scheduler/filter", CacheModeBody(pod, cluster.names, count), &response) <
        0) {
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
      ++non_cache_passing;
    }
    expected += R"(]},"NodeNames":null)";
    expected += names_reply.substr(list_end + 1);
    if (linkfit.Send("/scheduler/filter", body.text, &response) < 0 ||
        Decoded(response) != expected) {
      Die("non-cache filter reply differs from the cache-mode reply");
    }
    std::vector<Body> one = {body};
    for (Driver* driver : {&linkfit, &parse_only}) {
      driver->Run("/scheduler/filter", one, 2, &serial, nullptr);
    }
    for (int i = 0; i < o.non_cache_requests; ++i) {  // alternate the servers
      linkfit.Run("/scheduler/filter", one, 1, &serial, &non_cache);
      parse_only.Run("/scheduler/filter", one, 1, &serial, &non_cache_parse_only);
    }
    after_non_cache_rss = linkfit.server().RssBytes();
    // Then cache-mode requests, as a scheduler's usual ones: a server thread that decoded a large
    // body gives its buffers back when it next decodes a small one (kube/json_reader.h).
    for (int i = 0; i < 8; ++i) {
      if (linkfit.Send("/scheduler/filter", CacheModeBody(pod, cluster.names, count), &response) <
          0) {
        Die("cache-mode filter after the non-cache ones failed");
      }
    }
  }

  const long long end_rss = linkfit.server().RssBytes();
  const long long parse_only_end_rss = parse_only.server().RssBytes();
  const double total_s = std::chrono::duration<double>(Clock::now() - run_start).count();
  const std::string load_after = ReadFirstLine("/proc/loadavg");

  // ---- Report (Markdown) ----
  std::ostringstream out;
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  out << "## linkfit-load\n\n";
  out << "- machine: " << CpuModel() << ", " << ::sysconf(_SC_NPROCESSORS_ONLN)
      << " online CPUs; server pinned to CPU " << o.server_cpu << ", client to CPU " << o.client_cpu
      << " (-1 = unpinned)\n";
  out << "- load average before: " << load_before << "; after: " << load_after << "\n";
  out << "- cluster: " << o.nodes << " 8-GPU nodes (7 fixtures), " << cluster.allocations
      << " pre-existing allocations, seed " << o.seed << "; pods rotate over";
  for (const PodShape& shape : shapes) out << " [" << shape.label << "]";
  out << ", a new UID per request"
      << (o.fresh_requests ? " and a CPU request no earlier pod had (--fresh-requests: cold)" : "")
      << "\n";
  out << "- names in each body: shuffled (seed " << o.seed
      << "); filter of the first pod shape "
         "passes";
  for (const auto& [size, counts] : passing) {
    out << " " << counts.first << " of " << size << " (parse-only " << counts.second << ")";
  }
  out << "\n";
  out << "- replies Content-Encoding: " << (reply_encoding.empty() ? "identity" : reply_encoding)
      << " (the client sends Accept-Encoding: gzip as Go does)\n";
  const auto waiting = [](HttpConnection::Wait wait) {
    return wait == HttpConnection::Wait::kSpin
               ? "by polling its socket (--client-wait spin: its CPU never idles, so no latency "
                 "includes its own wake-up)"
               : "in read() (--client-wait block: a reply slower than the hypervisor's halt "
                 "polling also pays the client CPU's wake-up)";
  };
  if (o.client_waits.size() == 1) {
    out << "- the client waits for each reply " << waiting(o.client_waits.front()) << "\n";
  } else {
    out << "- --client-wait both: each case measured twice per round, alternately: the client "
           "waiting for each reply "
        << waiting(HttpConnection::Wait::kBlock) << ", and " << waiting(HttpConnection::Wait::kSpin)
        << "; a table each\n";
  }
  out << "- whole run: " << Fixed(total_s, 1) << " s wall\n\n";
  for (const HttpConnection::Wait wait : o.client_waits) {
    if (wait != o.client_waits.front()) out << "\n";
    out << "### filter / prioritize, nodeCacheCapable, one request in flight (ms)"
        << (o.client_waits.size() == 1            ? ""
            : wait == HttpConnection::Wait::kSpin ? ", the client polling"
                                                  : ", the client waiting in read()")
        << "\n\n";
    if (wait != o.client_waits.front()) {
      out << "As above.\n\n";
    } else {
      out << "Latency is wall time at the client; server CPU/req is the server process's utime + "
             "stime over the measured requests divided by their number (robust against other work "
             "sharing the server's CPU); switches/req, the server's context switches (all its "
             "threads, voluntary or not) over the same requests: where a system call, a wake-up "
             "or a switch is dear (a virtual machine), runs whose servers switch more per request "
             "are slower for it; faults/req, its minor page faults (memory the allocator gave "
             "back to the kernel and takes again costs a fault a page).\n\n";
    }
    out << "| verb | names | server | p50 | p90 | p99 | max | req/s | n | p50 ratio "
           "| server CPU/req | CPU ratio | switches/req | faults/req |\n";
    out << "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const CaseResult& c : cases) {
      if (c.wait != wait) continue;
      for (const Samples* s : {&c.linkfit, &c.parse_only}) {
        const bool is_linkfit = s == &c.linkfit;
        out << "| " << c.verb << " | " << c.size << " | " << (is_linkfit ? "linkfit" : "parse-only")
            << " | " << Ms(s->Percentile(0.5)) << " | " << Ms(s->Percentile(0.9)) << " | "
            << Ms(s->Percentile(0.99)) << " | " << Ms(s->Max()) << " | " << Fixed(s->PerSecond(), 0)
            << " | " << s->seconds.size()
            << (s->errors ? " (" + std::to_string(s->errors) + " errors)" : "") << " | "
            << (is_linkfit
                    ? Fixed(c.linkfit.Percentile(0.5) / c.parse_only.Percentile(0.5), 2) + "x"
                    : "")
            << " | "
            << Ms(s->server_cpu / static_cast<double>(std::max<std::size_t>(1, s->seconds.size())))
            << " | "
            << (!is_linkfit ? ""
                // CPU time comes in 10 ms ticks: a short run may see none for a server.
                : c.parse_only.server_cpu > 0
                    ? Fixed(c.linkfit.server_cpu / c.parse_only.server_cpu, 2) + "x"
                    : "- (no tick)")
            << " | " << PerRequest(s->switches, s->seconds.size()) << " | "
            << PerRequest(s->faults, s->seconds.size()) << " |\n";
      }
    }
  }
  if (!wake_costs.empty()) out << WakeReport(wake_costs, o.wake_samples);
  out << "\n### bind (own work; standalone, no state file), " << bind_samples.seconds.size()
      << " binds on the " << o.nodes << "-node server (ms)\n\n";
  const auto row = [&](const char* what, const Samples& s) {
    if (s.seconds.empty()) return;  // --binds 0
    out << "| " << what << " | " << Ms(s.Percentile(0.5)) << " | " << Ms(s.Percentile(0.9)) << " | "
        << Ms(s.Percentile(0.99)) << " | " << Ms(s.Max()) << " | " << Fixed(s.PerSecond(), 0)
        << " |\n";
  };
  if (bind_samples.seconds.empty()) {
    out << "Not measured (--binds 0).\n";
  } else {
    out << "| call | p50 | p90 | p99 | max | per s |\n|---|---:|---:|---:|---:|---:|\n";
  }
  row("linkfit bind", bind_samples);
  row("parse-only bind", bind_parse_only);
  row("linkfit release (POST /standalone/release)", release_samples);
  if (o.non_cache_nodes > 0) {
    out << "\n### filter, non-cache mode: " << o.non_cache_nodes << " full Node objects ("
        << Fixed(static_cast<double>(non_cache_bytes) / 1e6, 1) << " MB body), "
        << non_cache_passing << " pass; reply checked byte for byte (ms)\n\n";
  }
  if (o.non_cache_nodes > 0 && o.non_cache_requests <= 0) {
    out << "Checked once and not timed (--non-cache-requests 0).\n";
  } else if (o.non_cache_nodes > 0) {
    out << "| server | p50 | max | n |\n|---|---:|---:|---:|\n";
    out << "| linkfit | " << Ms(non_cache.Percentile(0.5)) << " | " << Ms(non_cache.Max()) << " | "
        << non_cache.seconds.size() << " |\n";
    out << "| parse-only | " << Ms(non_cache_parse_only.Percentile(0.5)) << " | "
        << Ms(non_cache_parse_only.Max()) << " | " << non_cache_parse_only.seconds.size() << " |\n";
    out << "\nratio linkfit / parse-only (p50): "
        << Fixed(non_cache.Percentile(0.5) / non_cache_parse_only.Percentile(0.5), 2) << "x\n";
  }
  const double per_node =
      static_cast<double>(ready_rss - small_rss) / static_cast<double>(o.nodes - 7);
  out << "\n### memory and start-up\n\n";
  out << "| figure | value |\n|---|---:|\n";
  out << "| RSS, linkfit ready with " << o.nodes << " nodes | "
      << Fixed(static_cast<double>(ready_rss) / 1048576.0, 1) << " MiB |\n";
  out << "| RSS, linkfit ready with 7 nodes | "
      << Fixed(static_cast<double>(small_rss) / 1048576.0, 1) << " MiB |\n";
  out << "| bytes per node ((RSS " << o.nodes << " - RSS 7) / " << o.nodes - 7 << ") | "
      << Fixed(per_node, 0) << " B |\n";
  if (after_non_cache_rss >= 0) {
    out << "| RSS, linkfit after the non-cache requests | "
        << Fixed(static_cast<double>(after_non_cache_rss) / 1048576.0, 1) << " MiB |\n";
  }
  out << "| RSS, linkfit after the run | " << Fixed(static_cast<double>(end_rss) / 1048576.0, 1)
      << " MiB |\n";
  out << "| RSS, parse-only ready / after the run | "
      << Fixed(static_cast<double>(parse_only_rss) / 1048576.0, 1) << " / "
      << Fixed(static_cast<double>(parse_only_end_rss) / 1048576.0, 1) << " MiB |\n";
  out << "| start-up CPU to ready, " << o.nodes
      << " nodes (median of 3; utime+stime, 10 ms ticks) | " << Fixed(median(startup_cpu), 2)
      << " s |\n";
  out << "| start-up wall to ready, " << o.nodes << " nodes (median of 3) | "
      << Fixed(median(startup_wall), 2) << " s |\n";
  out << "| start-up CPU to ready, 7 nodes | " << Fixed(small_cpu, 2) << " s |\n";
  std::cout << out.str() << std::flush;
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
