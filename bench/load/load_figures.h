#pragma once

// linkfit-load's options, what one run measures, and the Markdown report written from it
// (load_main.cc drives the servers; load_options.cc parses the command line; load_report.cc
// writes the report).
//
// Thread-safety: plain values and pure functions.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "http_connection.h"
#include "wake_probe.h"

namespace linkfit::load {

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

extern const char* const kUsage;
// The options of argv, or nullopt (having said why on stderr) when one is unknown, given twice,
// lacks its value or has a bad one.
std::optional<Options> ParseOptions(int argc, char** argv);

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

  double Percentile(double p) const;
  double Max() const;
  double PerSecond() const { return wall > 0 ? static_cast<double>(seconds.size()) / wall : 0; }
};

// One latency case: a verb at one size, the client waiting one way, on both servers.
struct CaseResult {
  std::string verb;
  std::size_t size = 0;
  HttpConnection::Wait wait = HttpConnection::Wait::kBlock;
  Samples linkfit;
  Samples parse_only;
};

// Everything one run measured, in the order the report shows it.
struct RunFigures {
  std::string machine;  // CPU model and online CPUs
  std::string load_before;
  std::string load_after;
  double total_s = 0;
  int allocations = 0;  // pre-existing allocations in the generated cluster
  std::vector<std::string> shape_labels;
  // Per size: the first pod shape's passing names at linkfit and at the parse-only server.
  std::map<std::size_t, std::pair<std::size_t, std::size_t>> passing;
  std::string reply_encoding;  // linkfit's Content-Encoding ("" = identity)
  std::vector<CaseResult> cases;
  std::vector<WakeCost> wake_costs;
  Samples bind;
  Samples bind_parse_only;
  Samples release;
  Samples non_cache;
  Samples non_cache_parse_only;
  long long after_non_cache_rss = -1;
  std::size_t non_cache_bytes = 0;
  std::size_t non_cache_passing = 0;
  long long small_rss = 0;  // linkfit ready with one node per topology (7)
  double small_cpu = 0;
  long long ready_rss = 0;
  long long end_rss = 0;
  long long parse_only_rss = 0;
  long long parse_only_end_rss = 0;
  std::vector<double> startup_cpu;  // three start-ups to ready, --nodes nodes
  std::vector<double> startup_wall;
};

// The machine as the report names it (CPU model, online CPUs), and the first line of a file
// (/proc/loadavg before and after).
std::string Machine();
std::string ReadFirstLine(const std::string& path);

// The run's Markdown report.
std::string Report(const Options& o, const RunFigures& figures);

// Formatting shared with the hostile-clients report: milliseconds with three decimals, a fixed
// number of decimals, a server count per request ("-" when unknown).
std::string Ms(double seconds);
std::string Fixed(double value, int digits);
std::string PerRequest(const ServerCount& count, std::size_t requests);

}  // namespace linkfit::load
