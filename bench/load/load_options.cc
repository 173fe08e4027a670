// linkfit-load's command line (load_figures.h).

#include <cstdio>

#include "common/flags.h"
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
  const auto client_wait = [&o](const std::string& value) {
    if (value == "block") {
      o.client_waits = {HttpConnection::Wait::kBlock};
    } else if (value == "spin") {
      o.client_waits = {HttpConnection::Wait::kSpin};
    } else if (value == "both") {
      o.client_waits = {HttpConnection::Wait::kBlock, HttpConnection::Wait::kSpin};
    } else {
      return false;
    }
    return true;
  };
  const auto sizes = [&o](const std::string& value) {
    o.sizes.clear();
    for (std::string_view field : Split(value, ',')) {
      const auto size = ParseInt(field);
      if (!size || *size <= 0) return false;
      o.sizes.push_back(static_cast<std::size_t>(*size));
    }
    return true;
  };
  const auto seed = [&o](const std::string& value) {
    const auto number = ParseInt(value);
    if (number) o.seed = static_cast<std::uint64_t>(*number);
    return number.has_value();
  };
  bench::Flags flags;
  flags.Switch("--fresh-requests", &o.fresh_requests)
      .String("--linkfit", &o.linkfit)
      .String("--parse-only", &o.parse_only)
      .String("--write-config", &o.write_only)
      .String("--repo", &o.repo)
      .Value("--client-wait", client_wait)
      .Value("--sizes", sizes)
      .Value("--seed", seed)
      .Int("--nodes", &o.nodes)
      .Int("--requests", &o.requests)
      .Int("--warmup", &o.warmup)
      .Int("--rounds", &o.rounds)
      .Int("--binds", &o.binds)
      .Int("--non-cache-nodes", &o.non_cache_nodes)
      .Int("--non-cache-requests", &o.non_cache_requests)
      .Int("--server-cpu", &o.server_cpu)
      .Int("--client-cpu", &o.client_cpu)
      .Int("--score-range", &o.score_range)
      .Int("--hostile", &o.hostile)
      .Int("--hostile-seconds", &o.hostile_seconds)
      .Int("--wake-samples", &o.wake_samples);
  if (auto parsed = flags.Parse(argc, argv); !parsed) {
    std::fprintf(stderr, "linkfit-load: %s\n", parsed.error().message.c_str());
    return std::nullopt;
  }
  if (o.rounds < 1) o.rounds = 1;
  if (o.hostile < 0 || o.hostile_seconds < 1) return std::nullopt;
  return o;
}

}  // namespace linkfit::load
