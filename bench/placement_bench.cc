// Placement microbenchmarks (issue 2): table build time per topology, the cost of one placement
// lookup per node, and a brute-force search over every k-subset for comparison.
//
//   build/release/bench/linkfit_placement_bench --benchmark_min_time=0.2

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>

#include <benchmark/benchmark.h>

#include "linkfit/alloc/nic_choice.h"
#include "linkfit/alloc/placement_table.h"

namespace {

using linkfit::alloc::GpuMask;
using linkfit::alloc::PlacementTable;
using linkfit::alloc::PlacementTablePtr;

linkfit::topology::TopologyPtr Load(const std::string& id) {
  std::ifstream in(std::string(LINKFIT_SOURCE_DIR) + "/config/topologies/" + id + ".json");
  std::stringstream text;
  text << in.rdbuf();
  auto spec = linkfit::topology::ParseTopologyDocument(text.str());
  if (!spec) std::abort();
  auto topo = linkfit::topology::BuildTopology(std::move(*spec));
  if (!topo) std::abort();
  return *topo;
}

void BM_TableBuild(benchmark::State& state, const std::string& id) {
  const auto topo = Load(id);
  for (auto _ : state) benchmark::DoNotOptimize(PlacementTable::Build(topo));
  state.SetLabel(std::to_string(topo->gpu_count()) + " GPUs");
}
BENCHMARK_CAPTURE(BM_TableBuild, dgx1_v100, std::string("dgx1-v100"))
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_TableBuild, dgx_h100, std::string("dgx-h100"))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_TableBuild, l40s, std::string("pcie-8x-l40s-2socket"))
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_TableBuild, dgx2_v100_16gpu, std::string("dgx2-v100"))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// One placement decision as filter makes it per node: PlaceWholeGpus over a random free mask.
void BM_Lookup(benchmark::State& state, const std::string& id, linkfit::alloc::Closeness level) {
  const PlacementTablePtr table = PlacementTable::Build(Load(id));
  std::mt19937 rng(1);
  std::vector<GpuMask> masks(4096);
  for (GpuMask& m : masks) m = static_cast<GpuMask>(rng() & table->topology().all_gpus());
  const int k = static_cast<int>(state.range(0));
  std::size_t i = 0;
  for (auto _ : state) {
    const auto placement = linkfit::alloc::PlaceWholeGpus(
        *table, masks[i++ & 4095], {k, level, linkfit::alloc::ClosenessPolicy::kPreferred});
    benchmark::DoNotOptimize(placement.gpus);
  }
}
BENCHMARK_CAPTURE(BM_Lookup, dgx1_node, std::string("dgx1-v100"), linkfit::alloc::Closeness::kNode)
    ->Arg(1)
    ->Arg(2)
    ->Arg(4);
BENCHMARK_CAPTURE(BM_Lookup, dgx_a100_numa, std::string("dgx-a100"),
                  linkfit::alloc::Closeness::kNuma)
    ->Arg(2)
    ->Arg(4);
BENCHMARK_CAPTURE(BM_Lookup, dgx2_node, std::string("dgx2-v100"), linkfit::alloc::Closeness::kNode)
    ->Arg(4)
    ->Arg(8);

// GPUs and NICs chosen together (issue 37): the published HGX H100 with 8 GPUs and 9 NICs
// (test/data/nvidia-smi/nics), one NIC per GPU at PXB, over random free GPU masks with random NICs
// in use. This is what a memo miss of filter costs on a NIC node (nodes in one state share it).
void BM_JointGpuNic(benchmark::State& state) {
  std::ifstream in(std::string(LINKFIT_SOURCE_DIR) +
                   "/test/data/nvidia-smi/nics/hgx-h100-9nic-nccl1453.topo.txt");
  std::stringstream text;
  text << in.rdbuf();
  auto spec = linkfit::topology::ParseNvidiaSmi(text.str(), "");
  if (!spec) std::abort();
  auto topo = linkfit::topology::BuildTopology(std::move(*spec));
  if (!topo) std::abort();
  const PlacementTablePtr table = PlacementTable::Build(*topo);
  std::mt19937 rng(1);
  struct Case {
    GpuMask free;
    linkfit::alloc::NicAvailability nics;
  };
  std::vector<Case> cases(1024);
  for (Case& c : cases) {
    c.free = static_cast<GpuMask>((rng() | rng()) & table->topology().all_gpus());
    for (int n = 0; n < (*topo)->nic_count(); ++n)
      c.nics.free_milli.push_back(rng() % 4 ? 1000 : 0);
  }
  const int k = static_cast<int>(state.range(0));
  linkfit::alloc::NicRequest nic;
  nic.count = linkfit::alloc::NicRequest::kPerGpu;
  std::size_t i = 0;
  for (auto _ : state) {
    const Case& c = cases[i++ & 1023];
    const auto placement = linkfit::alloc::PlaceWholeGpusWithNics(
        *table, c.free, c.nics,
        {k, linkfit::alloc::Closeness::kNode, linkfit::alloc::ClosenessPolicy::kPreferred}, nic);
    benchmark::DoNotOptimize(placement.gpus.gpus);
  }
}
BENCHMARK(BM_JointGpuNic)->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Unit(benchmark::kMicrosecond);

// The raw table read (no request handling): BestOnNode + Quality.
void BM_TableRead(benchmark::State& state) {
  const PlacementTablePtr table = PlacementTable::Build(Load("dgx1-v100"));
  std::size_t i = 0;
  for (auto _ : state) {
    const GpuMask best = table->BestOnNode(static_cast<GpuMask>((i++ * 37) & 0xFF), 2);
    benchmark::DoNotOptimize(table->Quality(best));
  }
}
BENCHMARK(BM_TableRead);

// Brute force for comparison: every k-subset of the free set, ring by trying cyclic orders.
std::uint32_t Ring(const linkfit::topology::Topology& topo, std::vector<int> gpus) {
  if (gpus.size() == 2) return topo.bandwidth_mbps(gpus[0], gpus[1]);
  std::uint32_t best = 0;
  std::sort(gpus.begin() + 1, gpus.end());
  do {
    std::uint32_t bottleneck = UINT32_MAX;
    for (std::size_t j = 0; j < gpus.size(); ++j) {
      bottleneck = std::min(bottleneck, topo.bandwidth_mbps(gpus[j], gpus[(j + 1) % gpus.size()]));
    }
    best = std::max(best, bottleneck);
  } while (std::next_permutation(gpus.begin() + 1, gpus.end()));
  return best;
}

void BM_BruteForce(benchmark::State& state) {
  const auto topo = Load("dgx1-v100");
  const int k = static_cast<int>(state.range(0));
  for (auto _ : state) {
    std::uint32_t best = 0;
    for (unsigned s = 0; s < 256; ++s) {
      if (__builtin_popcount(s) != k) continue;
      best = std::max(best, Ring(*topo, linkfit::alloc::MaskToIndexes(static_cast<GpuMask>(s))));
    }
    benchmark::DoNotOptimize(best);
  }
}
BENCHMARK(BM_BruteForce)->Arg(2)->Arg(4)->Arg(6)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
