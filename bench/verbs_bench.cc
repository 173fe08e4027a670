// The verbs without HTTP: what `linkfit serve`'s handler spends on one filter or prioritize body
// (decode, the verb, encode; wire::Handler, as the listener calls it) against the parse-only
// baseline's handler on the same body (bench/load/parse_only_handler.h). The same cluster and
// bodies as linkfit-load (bench/load/workload.h: 5,000 8-GPU nodes of seven topologies, 60 %
// partly used; the four pod shapes in rotation; names shuffled; a new pod UID per call), built
// in-process, so that a change to the verbs can be measured without the network's and the
// scheduler's noise (linkfit-load stays the end-to-end measure the targets are in).
//
//   build/dev/bench/linkfit_verbs_bench [--benchmark_filter=Filter] [--benchmark_repetitions=5]
//
// Each case reports CPU time per call; compare linkfit's row with parse-only's at the same size.
// `Lookups` times the name lookups alone (what linkfit's verbs do first, per name).
//
// LINKFIT_VERBS_BENCH_ITERATIONS=N runs each case exactly N calls (no warm-up calls, no timing
// loop): for counting instructions and cache misses per call under a simulator where the box's
// clock is too noisy to compare two builds (bench/RESULTS.md), e.g. with valgrind's callgrind,
// `--cache-sim=yes --toggle-collect='linkfit::extender::Extender::Filter*'`.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "app/service.h"
#include "common/extender_args.h"
#include "linkfit/app/config.h"
#include "linkfit/common/log.h"
#include "linkfit/common/malloc_settings.h"
#include "linkfit/state/name_index.h"
#include "linkfit/wire/codec.h"
#include "load/parse_only_handler.h"
#include "load/workload.h"

namespace linkfit {
namespace {

constexpr int kNodes = 5000;

// One linkfit service on a generated cluster, and the bodies at each size, built on first use.
struct Bench {
  std::unique_ptr<app::Service> service;
  load::ParseOnlyHandler parse_only;
  load::GeneratedCluster cluster;
  std::string work_dir;
  std::uint64_t serial = 0;

  Bench() {
    log::SetLevel(log::Level::kWarning);
    const std::string repo = LINKFIT_SOURCE_DIR;
    cluster = load::MakeCluster(repo + "/config/topologies", kNodes, 42);
    char dir[] = "/tmp/linkfit-verbs-bench-XXXXXX";
    if (::mkdtemp(dir) == nullptr) Fail("mkdtemp failed");
    work_dir = dir;
    const std::string cluster_path = work_dir + "/cluster.yaml";
    std::ofstream(cluster_path) << cluster.yaml;
    auto config = app::ParseConfig(
        "listen: \"127.0.0.1:0\"\nlog_level: warning\nmig_profiles_dir: " + repo +
        "/config/mig\ncluster_file: " + cluster_path + "\npolicy:\n  score_range: 140\n");
    if (!config) Fail(config.error().message);
    auto started = app::Service::Start(*config);
    if (!started) Fail(started.error().message);
    service = std::move(*started);
    UseServingMallocSettings();  // as `linkfit serve` does once it is ready
  }
  ~Bench() {
    service.reset();
    std::filesystem::remove_all(work_dir);
  }

  [[noreturn]] static void Fail(const std::string& message) {
    std::cerr << "linkfit_verbs_bench: " << message << "\n";
    std::exit(1);
  }

  // The four pod shapes' bodies naming the first `size` shuffled names; with `nics`, each pod
  // also asks one RDMA NIC per GPU.
  std::vector<std::string> Bodies(std::size_t size, bool nics = false) {
    std::vector<std::string> bodies;
    for (const load::PodShape& shape : load::PodShapes(nics)) {
      bodies.push_back(
          bench::CacheModeArgs(load::PodJson(shape, ++serial), cluster.shuffled_names, size));
    }
    return bodies;
  }
};

Bench& Shared() {
  static Bench bench;
  return bench;
}

enum class Verb { kFilter, kPrioritize };

// Between two requests a real server's core does other work: the kernel receives the next body
// and sends the last reply (150-230 KB each at 5,000 names), the scheduler's other calls come in.
// Run back to back, a verb finds every table it read in the last call still in cache, which
// flatters whatever keeps state across calls (linkfit) against what keeps none (the parse-only
// baseline). With `evict_kib` > 0, each call is preceded, outside the timed region, by writing that
// much scratch memory and then reading the body (as the kernel's copy into the server's buffer
// leaves it in cache).
void EvictBetweenCalls(std::size_t evict_kib, const std::string& body) {
  static std::vector<std::uint64_t> scratch;
  scratch.resize(evict_kib * 1024 / sizeof(std::uint64_t));
  for (std::size_t i = 0; i < scratch.size(); i += 8) scratch[i] += i;  // a store per line
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < body.size(); i += 64) sum += static_cast<unsigned char>(body[i]);
  benchmark::DoNotOptimize(sum);
  benchmark::ClobberMemory();
}

// Each case at 1,000 and 5,000 names, back to back (0) and with 16 MiB of other memory written
// between calls (EvictBetweenCalls; the second argument, in KiB): more than this box's last-level
// cache, so that what a call keeps across calls comes from memory, the worst case of a server
// whose core did other work between two requests (end to end, linkfit-load lies between the two).
void Sizes(benchmark::internal::Benchmark* b) {
  if (const char* fixed = std::getenv("LINKFIT_VERBS_BENCH_ITERATIONS")) {
    const long iterations = std::strtol(fixed, nullptr, 10);
    if (iterations > 0) b->Iterations(iterations);
  }
  b->ArgNames({"names", "evict_kib"});
  for (const int names : {1000, 5000}) {
    for (const int evict_kib : {0, 16384}) b->Args({names, evict_kib});
  }
}

// kFresh: every call a CPU request no earlier pod had (linkfit-load --fresh-requests), so no
// score can be kept: the cold path. kNics: the pods also ask one RDMA NIC per GPU (every node of
// the cluster has its machine's NICs, all free), the GPUs and NICs chosen together.
template <Verb kVerb, bool kLinkfit, bool kFresh = false, bool kNics = false>
void BM_Verb(benchmark::State& state) {
  Bench& bench = Shared();
  std::vector<std::string> bodies = bench.Bodies(static_cast<std::size_t>(state.range(0)), kNics);
  std::vector<std::size_t> uid_at;
  std::vector<std::size_t> cpu_at;
  for (std::string& body : bodies) {
    body.reserve(body.size() + server::kBodyPadding);  // as the server hands bodies over
    uid_at.push_back(load::UidOffset(body));
    cpu_at.push_back(load::CpuOffset(body));
  }
  server::ExtenderHandler& handler =
      kLinkfit ? static_cast<server::ExtenderHandler&>(bench.service->handler())
               : static_cast<server::ExtenderHandler&>(bench.parse_only);
  const auto evict_kib = static_cast<std::size_t>(state.range(1));
  std::size_t i = 0;
  std::size_t reply_bytes = 0;
  for (auto _ : state) {
    const std::size_t b = i++ % bodies.size();
    if (evict_kib > 0) {
      state.PauseTiming();
      EvictBetweenCalls(evict_kib, bodies[b]);
      state.ResumeTiming();
    }
    load::PatchUid(bodies[b], uid_at[b], ++bench.serial);  // a new pod each call
    if (kFresh) load::PatchCpu(bodies[b], cpu_at[b], bench.serial);
    const server::Body body(bodies[b], server::kBodyPadding);
    const server::HttpReply reply =
        kVerb == Verb::kFilter ? handler.Filter(body) : handler.Prioritize(body);
    if (reply.status != 200) {
      state.SkipWithError("the handler did not answer 200");
      break;
    }
    reply_bytes += reply.body.size();
    benchmark::DoNotOptimize(reply);
  }
  state.counters["reply_bytes"] =
      benchmark::Counter(static_cast<double>(reply_bytes), benchmark::Counter::kAvgIterations);
}

// The name lookups alone (state::NameIndex::FindAll, which both verbs start with): the request's
// names, as the decoder gives them (views into the body), against an index of the cluster's.
void BM_NameLookups(benchmark::State& state) {
  Bench& bench = Shared();
  const std::string body = bench.Bodies(static_cast<std::size_t>(state.range(0)))[0];
  const auto args = wire::DecodeExtenderArgs(body);
  if (!args) {
    state.SkipWithError("the body does not decode");
    return;
  }
  state::NameIndex index;
  for (std::size_t i = 0; i < bench.cluster.names.size(); ++i) {
    index.Insert(bench.cluster.names[i], i);
  }
  std::vector<state::NameIndex::Found> found(args->node_names.size());
  const auto evict_kib = static_cast<std::size_t>(state.range(1));
  for (auto _ : state) {
    if (evict_kib > 0) {
      state.PauseTiming();
      EvictBetweenCalls(evict_kib, body);
      state.ResumeTiming();
    }
    index.FindAll(args->node_names.data(), args->node_names.size(), found.data());
    benchmark::DoNotOptimize(found.data());
    benchmark::ClobberMemory();
  }
}

BENCHMARK(BM_NameLookups)->Name("Lookups")->Apply(Sizes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Verb<Verb::kFilter, true>)
    ->Name("Filter/linkfit")
    ->Apply(Sizes)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Verb<Verb::kFilter, true, false, true>)
    ->Name("Filter/linkfit-nics")
    ->Apply(Sizes)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Verb<Verb::kFilter, false>)
    ->Name("Filter/parse-only")
    ->Apply(Sizes)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Verb<Verb::kPrioritize, true>)
    ->Name("Prioritize/linkfit")
    ->Apply(Sizes)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Verb<Verb::kPrioritize, true, true>)
    ->Name("Prioritize/linkfit-fresh")
    ->Apply(Sizes)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Verb<Verb::kPrioritize, true, false, true>)
    ->Name("Prioritize/linkfit-nics")
    ->Apply(Sizes)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Verb<Verb::kPrioritize, true, true, true>)
    ->Name("Prioritize/linkfit-nics-fresh")
    ->Apply(Sizes)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Verb<Verb::kPrioritize, false>)
    ->Name("Prioritize/parse-only")
    ->Apply(Sizes)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace linkfit

BENCHMARK_MAIN();
