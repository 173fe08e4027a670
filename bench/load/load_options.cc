// linkfit-load's command line (load_figures.h).

#include "linkfit/common/strings.h"
#include "load_figures.h"

namespace linkfit::load {

const char* const kUsage =
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

}  // namespace linkfit::load
