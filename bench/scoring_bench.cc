// Prioritize scoring microbenchmark: ScoreNodes (all four terms) for one request over N
// openb-like nodes (8x L40S PCIe, 96 cores, 384 GiB) in a seeded partly used state, with 40
// learnt shapes (whole GPUs and shares of 10 distinct sizes, CPU and memory), the shape count
// linkfit learns on the openb trace. CPU time per call and per node.
//
//   build/release/bench/linkfit_scoring_bench --benchmark_min_time=0.5

#include <fstream>
#include <random>
#include <sstream>

#include <benchmark/benchmark.h>

#include "linkfit/alloc/placement_table_cache.h"
#include "linkfit/extender/node_fit.h"
#include "linkfit/extender/scoring.h"

namespace {

using namespace linkfit;

constexpr std::int64_t kGiB = std::int64_t{1} << 30;

topology::TopologyPtr Load(const std::string& id) {
  std::ifstream in(std::string(LINKFIT_SOURCE_DIR) + "/config/topologies/" + id + ".json");
  std::stringstream text;
  text << in.rdbuf();
  auto spec = topology::ParseTopologyDocument(text.str());
  if (!spec) std::abort();
  auto topo = topology::BuildTopology(std::move(*spec));
  if (!topo) std::abort();
  return *topo;
}

std::vector<extender::Shape> Shapes() {
  std::vector<extender::Shape> shapes;
  const int sizes[] = {1000, 100, 200, 250, 300, 400, 500, 600, 750, 900};
  for (int i = 0; i < 40; ++i) {
    extender::Shape shape;
    shape.milli = sizes[i % 10];
    shape.gpus = shape.milli == 1000 ? 1 << (i / 10) : 1;
    shape.weight = 1.0 / 40;
    shape.cpu_milli = 4000 + 2000 * (i % 7);
    shape.memory_bytes = (8 + 8 * (i % 5)) * kGiB;
    shapes.push_back(shape);
  }
  return shapes;
}

void BM_ScoreNodes(benchmark::State& state) {
  static alloc::PlacementTableCache registry;
  auto info = std::make_shared<state::NodeInfo>();
  info->table = registry.Get(Load("pcie-8x-l40s-2socket"));
  info->cpu_milli = 96000;
  info->memory_bytes = 384 * kGiB;
  std::mt19937_64 rng(42);
  std::vector<state::NodeStatePtr> nodes;
  for (int n = 0; n < state.range(0); ++n) {
    auto node_info = std::make_shared<state::NodeInfo>(*info);
    node_info->name = "node-";  // appended, not concatenated: GCC 12's -Wrestrict misfires
    node_info->name += std::to_string(n);
    state::NodeStatePtr node = std::make_shared<state::NodeState>(node_info);
    // Up to 4 whole GPUs and one shared GPU in use, CPU and memory in proportion.
    state::Assignment whole;
    whole.pod_uid = "w" + std::to_string(n);
    whole.node = node_info->name;
    whole.gpus = static_cast<topology::GpuMask>(rng() % 16);
    whole.cpu_milli = 12000 * __builtin_popcount(whole.gpus);
    whole.memory_bytes = 40 * kGiB * __builtin_popcount(whole.gpus);
    if (auto applied = node->Apply(whole)) node = *applied;
    state::Assignment share;
    share.pod_uid = "s" + std::to_string(n);
    share.node = node_info->name;
    share.kind = state::Assignment::Kind::kShared;
    share.gpus = topology::GpuMask{1} << 7;
    share.shares = {{7, static_cast<int>(100 * (1 + rng() % 9))}};
    share.cpu_milli = 4000;
    if (auto applied = node->Apply(share)) node = *applied;
    nodes.push_back(node);
  }
  extender::GpuRequest request;
  request.kind = extender::GpuRequest::Kind::kWhole;
  request.count = 1;
  request.cpu_milli = 8000;
  request.memory_bytes = 32 * kGiB;
  std::vector<extender::NodeFit> fits;
  fits.reserve(nodes.size());  // the candidates point into it
  std::vector<extender::Candidate> candidates;
  for (const state::NodeStatePtr& node : nodes) {
    const extender::NodeFit& fit = fits.emplace_back(extender::FitOnNode(request, *node, {}));
    if (fit.fits) candidates.push_back({node.get(), &fit});
  }
  const std::vector<extender::Shape> shapes = Shapes();
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        extender::ScoreNodes(request, candidates, shapes, extender::ScoreWeights{}, 140));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(candidates.size()));
  state.SetLabel(std::to_string(candidates.size()) + " candidates");
}
BENCHMARK(BM_ScoreNodes)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
