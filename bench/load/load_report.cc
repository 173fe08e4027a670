// linkfit-load's Markdown report (load_figures.h).

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "linkfit/common/strings.h"
#include "load_figures.h"

namespace linkfit::load {

// The machine as the report names it.
std::string Machine() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::string model = "unknown CPU";
  while (std::getline(in, line)) {
    if (StartsWith(line, "model name")) {
      model = std::string(Trim(std::string_view(line).substr(line.find(':') + 1)));
      break;
    }
  }
  return model + ", " + std::to_string(::sysconf(_SC_NPROCESSORS_ONLN)) + " online CPUs";
}

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

double Samples::Percentile(double p) const {
  if (seconds.empty()) return 0;
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double Samples::Max() const {
  return seconds.empty() ? 0 : *std::max_element(seconds.begin(), seconds.end());
}

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

namespace {

// The machine, the cluster, the pods and how the client waited.
void ReportRun(const Options& o, const RunFigures& f, std::ostringstream& out) {
  out << "## linkfit-load\n\n";
  out << "- machine: " << f.machine << "; server pinned to CPU " << o.server_cpu
      << ", client to CPU " << o.client_cpu << " (-1 = unpinned)\n";
  out << "- load average before: " << f.load_before << "; after: " << f.load_after << "\n";
  out << "- cluster: " << o.nodes << " 8-GPU nodes (7 fixtures), " << f.allocations
      << " pre-existing allocations, seed " << o.seed << "; pods rotate over";
  for (const std::string& label : f.shape_labels) out << " [" << label << "]";
  out << ", a new UID per request"
      << (o.fresh_requests ? " and a CPU request no earlier pod had (--fresh-requests: cold)" : "")
      << "\n";
  out << "- names in each body: shuffled (seed " << o.seed
      << "); filter of the first pod shape "
         "passes";
  for (const auto& [size, counts] : f.passing) {
    out << " " << counts.first << " of " << size << " (parse-only " << counts.second << ")";
  }
  out << "\n";
  out << "- replies Content-Encoding: "
      << (f.reply_encoding.empty() ? "identity" : f.reply_encoding)
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
  out << "- whole run: " << Fixed(f.total_s, 1) << " s wall\n\n";
}

// Filter and prioritize latency: a table per way the client waits.
void ReportLatency(const Options& o, const RunFigures& f, std::ostringstream& out) {
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
    for (const CaseResult& c : f.cases) {
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
  if (!f.wake_costs.empty()) out << WakeReport(f.wake_costs, o.wake_samples);
}

// Bind and release (own work).
void ReportBinds(const Options& o, const RunFigures& f, std::ostringstream& out) {
  out << "\n### bind (own work; standalone, no state file), " << f.bind.seconds.size()
      << " binds on the " << o.nodes << "-node server (ms)\n\n";
  const auto row = [&](const char* what, const Samples& s) {
    if (s.seconds.empty()) return;  // --binds 0
    out << "| " << what << " | " << Ms(s.Percentile(0.5)) << " | " << Ms(s.Percentile(0.9)) << " | "
        << Ms(s.Percentile(0.99)) << " | " << Ms(s.Max()) << " | " << Fixed(s.PerSecond(), 0)
        << " |\n";
  };
  if (f.bind.seconds.empty()) {
    out << "Not measured (--binds 0).\n";
  } else {
    out << "| call | p50 | p90 | p99 | max | per s |\n|---|---:|---:|---:|---:|---:|\n";
  }
  row("linkfit bind", f.bind);
  row("parse-only bind", f.bind_parse_only);
  row("linkfit release (POST /standalone/release)", f.release);
}

// Filter in non-cache mode.
void ReportNonCache(const Options& o, const RunFigures& f, std::ostringstream& out) {
  if (o.non_cache_nodes > 0) {
    out << "\n### filter, non-cache mode: " << o.non_cache_nodes << " full Node objects ("
        << Fixed(static_cast<double>(f.non_cache_bytes) / 1e6, 1) << " MB body), "
        << f.non_cache_passing << " pass; reply checked byte for byte (ms)\n\n";
  }
  if (o.non_cache_nodes > 0 && o.non_cache_requests <= 0) {
    out << "Checked once and not timed (--non-cache-requests 0).\n";
  } else if (o.non_cache_nodes > 0) {
    out << "| server | p50 | max | n |\n|---|---:|---:|---:|\n";
    out << "| linkfit | " << Ms(f.non_cache.Percentile(0.5)) << " | " << Ms(f.non_cache.Max())
        << " | " << f.non_cache.seconds.size() << " |\n";
    out << "| parse-only | " << Ms(f.non_cache_parse_only.Percentile(0.5)) << " | "
        << Ms(f.non_cache_parse_only.Max()) << " | " << f.non_cache_parse_only.seconds.size()
        << " |\n";
    out << "\nratio linkfit / parse-only (p50): "
        << Fixed(f.non_cache.Percentile(0.5) / f.non_cache_parse_only.Percentile(0.5), 2) << "x\n";
  }
}

// Memory and start-up.
void ReportMemory(const Options& o, const RunFigures& f, std::ostringstream& out) {
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double per_node =
      static_cast<double>(f.ready_rss - f.small_rss) / static_cast<double>(o.nodes - 7);
  out << "\n### memory and start-up\n\n";
  out << "| figure | value |\n|---|---:|\n";
  out << "| RSS, linkfit ready with " << o.nodes << " nodes | "
      << Fixed(static_cast<double>(f.ready_rss) / 1048576.0, 1) << " MiB |\n";
  out << "| RSS, linkfit ready with 7 nodes | "
      << Fixed(static_cast<double>(f.small_rss) / 1048576.0, 1) << " MiB |\n";
  out << "| bytes per node ((RSS " << o.nodes << " - RSS 7) / " << o.nodes - 7 << ") | "
      << Fixed(per_node, 0) << " B |\n";
  if (f.after_non_cache_rss >= 0) {
    out << "| RSS, linkfit after the non-cache requests | "
        << Fixed(static_cast<double>(f.after_non_cache_rss) / 1048576.0, 1) << " MiB |\n";
  }
  out << "| RSS, linkfit after the run | " << Fixed(static_cast<double>(f.end_rss) / 1048576.0, 1)
      << " MiB |\n";
  out << "| RSS, parse-only ready / after the run | "
      << Fixed(static_cast<double>(f.parse_only_rss) / 1048576.0, 1) << " / "
      << Fixed(static_cast<double>(f.parse_only_end_rss) / 1048576.0, 1) << " MiB |\n";
  out << "| start-up CPU to ready, " << o.nodes
      << " nodes (median of 3; utime+stime, 10 ms ticks) | " << Fixed(median(f.startup_cpu), 2)
      << " s |\n";
  out << "| start-up wall to ready, " << o.nodes << " nodes (median of 3) | "
      << Fixed(median(f.startup_wall), 2) << " s |\n";
  out << "| start-up CPU to ready, 7 nodes | " << Fixed(f.small_cpu, 2) << " s |\n";
}

}  // namespace

std::string Report(const Options& o, const RunFigures& f) {
  std::ostringstream out;
  ReportRun(o, f, out);
  ReportLatency(o, f, out);
  ReportBinds(o, f, out);
  ReportNonCache(o, f, out);
  ReportMemory(o, f, out);
  return out.str();
}

}  // namespace linkfit::load
