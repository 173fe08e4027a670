// CPU and memory in linkfit's model: a node's allocatable, the requests of bound pods (pods
// without GPUs included), and the fragmentation that counts GPUs stranded by exhausted CPU.

#include <gtest/gtest.h>
#include <algorithm>
#include <deque>
#include <memory>
#include <random>
#include <set>
#include <tuple>

#include "extender/balance.h"
#include "extender_testing.h"
#include "linkfit/extender/scoring.h"

namespace linkfit::extender {
namespace {

using linkfit::testing::MakeNodeInfo;
using linkfit::testing::Mask;
using testing::BindArgs;
using testing::ExtenderFixture;
using testing::GpuPod;
using testing::NamesArgs;

constexpr std::int64_t kGiB = std::int64_t{1} << 30;

state::NodeInfoPtr NodeWith(const std::string& name, std::int64_t cpu_milli,
                            std::int64_t memory_bytes) {
  auto info = std::make_shared<state::NodeInfo>(*MakeNodeInfo(name, "dgx1-v100"));
  info->cpu_milli = cpu_milli;
  info->memory_bytes = memory_bytes;
  return info;
}

state::Assignment GpuLess(const std::string& uid, const std::string& node, std::int64_t cpu,
                          std::int64_t memory) {
  state::Assignment a;
  a.pod_uid = uid;
  a.pod_namespace = "ml";
  a.pod_name = "pod-" + uid;
  a.node = node;
  a.cpu_milli = cpu;
  a.memory_bytes = memory;
  return a;
}

TEST(NodeResourcesTest, GpuLessAssignmentCountsCpuAndMemoryOnly) {
  const state::NodeState empty(NodeWith("n", 64000, 256 * kGiB));
  EXPECT_EQ(empty.cpu_free_milli(), 64000);
  auto held = empty.Apply(GpuLess("u1", "n", 48000, 200 * kGiB));
  ASSERT_TRUE(held.has_value()) << held.error().message;
  EXPECT_EQ((*held)->cpu_used_milli(), 48000);
  EXPECT_EQ((*held)->cpu_free_milli(), 16000);
  EXPECT_EQ((*held)->memory_free_bytes(), 56 * kGiB);
  EXPECT_EQ((*held)->whole_free(), empty.whole_free());  // no GPU taken
  EXPECT_EQ((*held)->UsedGpuEquivalents(), 0.0);
  EXPECT_EQ(linkfit::testing::CheckConsistent(**held), "");
  // Requests beyond allocatable are recorded (linkfit does not filter on CPU); free stays >= 0.
  auto over = (*held)->Apply(GpuLess("u2", "n", 32000, 0));
  ASSERT_TRUE(over.has_value());
  EXPECT_EQ((*over)->cpu_free_milli(), 0);
  const state::NodeStatePtr removed = (*over)->Remove("u1");
  EXPECT_EQ(removed->cpu_used_milli(), 32000);
  EXPECT_EQ(removed->memory_used_bytes(), 0);
}

TEST(NodeResourcesTest, UntrackedNodeHasUnlimitedCpu) {
  const state::NodeState node(MakeNodeInfo("n", "dgx1-v100"));
  EXPECT_EQ(node.cpu_free_milli(), state::NodeState::kUntracked);
  EXPECT_EQ(node.memory_free_bytes(), state::NodeState::kUntracked);
}

TEST(NodeResourcesTest, GpuLessAssignmentMustNotNameSlots) {
  const state::NodeState node(NodeWith("n", 64000, 0));
  state::Assignment shares = GpuLess("u1", "n", 1000, 0);
  shares.kind = state::Assignment::Kind::kShared;
  EXPECT_FALSE(node.Apply(shares).has_value());
  state::Assignment negative = GpuLess("u2", "n", -1, 0);
  EXPECT_FALSE(node.Apply(negative).has_value());
}

TEST(FragmentationTest, FreeGpusOnANodeWithoutCpuAreAllFragment) {
  Shape one_gpu;
  one_gpu.gpus = 1;
  one_gpu.milli = 1000;
  one_gpu.weight = 1.0;
  one_gpu.cpu_milli = 8000;
  const std::vector<Shape> shapes{one_gpu};
  const state::NodeState fresh(NodeWith("n", 64000, 0));
  EXPECT_EQ(Fragmentation(fresh, shapes), 0.0);
  // 60 of 64 cores taken by a pod without GPUs: 8 idle GPUs, none usable by the shape.
  auto starved = fresh.Apply(GpuLess("cpu-hog", "n", 60000, 0));
  ASSERT_TRUE(starved.has_value());
  EXPECT_EQ(Fragmentation(**starved, shapes), 8000.0);
  // Unknown allocatable: CPU is not tracked, the GPUs are not fragment.
  const state::NodeState untracked(MakeNodeInfo("u", "dgx1-v100"));
  auto held = untracked.Apply(GpuLess("cpu-hog", "u", 60000, 0));
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(Fragmentation(**held, shapes), 0.0);
}

TEST(FragmentationTest, ShapeWithoutGpusCountsEveryFreeGpu) {
  Shape cpu_only;
  cpu_only.gpus = 0;
  cpu_only.milli = 0;
  cpu_only.weight = 1.0;
  const state::NodeState node(NodeWith("n", 64000, 0));
  EXPECT_EQ(Fragmentation(node, {cpu_only}), 8000.0);
}

// Candidates with the fits they point to.
struct Candidates {
  std::deque<NodeFit> fits;
  std::vector<Candidate> list;
};

std::unique_ptr<Candidates> CandidatesFor(const GpuRequest& request,
                                          const std::vector<const state::NodeState*>& nodes) {
  auto candidates = std::make_unique<Candidates>();
  for (const state::NodeState* node : nodes) {
    NodeFit& fit = candidates->fits.emplace_back(FitOnNode(request, *node, {}));
    EXPECT_TRUE(fit.fits) << fit.reason;
    candidates->list.push_back({node, &fit});
  }
  return candidates;
}

// Scores of `request` on each node with only the balance term weighted.
std::vector<std::int64_t> BalanceScores(const GpuRequest& request,
                                        const std::vector<const state::NodeState*>& nodes,
                                        const std::vector<Shape>& shapes = {}) {
  ScoreWeights balance_only{0, 0, 0, 1};
  balance_only.whole_machines = WholeMachinePolicy::kOff;  // the term alone
  return ScoreNodes(request, CandidatesFor(request, nodes)->list, shapes, balance_only, 1000);
}

Shape OneGpuShape(std::int64_t cpu_milli) {
  Shape shape;
  shape.gpus = 1;
  shape.milli = 1000;
  shape.weight = 1.0;
  shape.cpu_milli = cpu_milli;
  return shape;
}

GpuRequest WholeGpus(int count, std::int64_t cpu_milli) {
  GpuRequest request;
  request.kind = GpuRequest::Kind::kWhole;
  request.count = count;
  request.cpu_milli = cpu_milli;
  return request;
}

TEST(BalanceTest, GpuPodAvoidsTheNodeWhoseCpuRunsAheadOfItsGpus) {
  // Pods bring 8 cores per GPU, as much as the nodes have (64 cores, 8 GPUs): rho = 1, the level
  // counts. a: 48 of 64 cores taken by a pod without GPUs; b: idle. One GPU and 8 cores leave a
  // at 1/8 of its GPUs and 7/8 of its CPU (B = 0.25), b at 1/8 and 1/8 (B = 1).
  const state::NodeState idle(NodeWith("b", 64000, 0));
  auto busy = state::NodeState(NodeWith("a", 64000, 0)).Apply(GpuLess("h", "a", 48000, 0));
  ASSERT_TRUE(busy.has_value());
  const auto scores = BalanceScores(WholeGpus(1, 8000), {busy->get(), &idle}, {OneGpuShape(8000)});
  EXPECT_EQ(scores[0], 250);
  EXPECT_EQ(scores[1], 1000);
}

TEST(BalanceTest, PodWithoutGpusGoesWhereGpusAreAlreadyBusy) {
  // No GPU shapes learnt yet: rho = 0, only the change counts. c: 4 of 8 GPUs, 8 of 64 cores
  // and 128 of 256 GiB in use; d: idle. 16 cores and 64 GiB close c's CPU gap from 0.375 to
  // 0.125 (0.625) and open a memory gap of 0.25 (0.375): 0.5. On d both gaps open by 0.25:
  // 0.375.
  const state::NodeState d(NodeWith("d", 64000, 256 * kGiB));
  state::Assignment held = GpuLess("g", "c", 8000, 128 * kGiB);
  held.kind = state::Assignment::Kind::kWhole;
  held.gpus = Mask({0, 1, 2, 3});
  auto c = state::NodeState(NodeWith("c", 64000, 256 * kGiB)).Apply(held);
  ASSERT_TRUE(c.has_value()) << c.error().message;
  GpuRequest request;
  request.cpu_milli = 16000;
  request.memory_bytes = 64 * kGiB;
  const auto scores = BalanceScores(request, {c->get(), &d});
  EXPECT_EQ(scores[0], 500);
  EXPECT_EQ(scores[1], 375);
}

TEST(BalanceTest, CpuLightPodsStillPackWhenGpusAreTheScarceResource) {
  // Pods bring 4 cores per GPU, the nodes have 16 (rho = 1/16): B barely differs between a
  // half-used node and an idle one, and with the default weights packing keeps the idle node
  // whole for multi-GPU pods (the level alone spread 1-GPU pods over idle nodes).
  const state::NodeState idle(NodeWith("idle", 128000, 0));
  state::Assignment held = GpuLess("g", "half", 16000, 0);
  held.kind = state::Assignment::Kind::kWhole;
  held.gpus = Mask({0, 1, 2, 3});
  auto half = state::NodeState(NodeWith("half", 128000, 0)).Apply(held);
  ASSERT_TRUE(half.has_value()) << half.error().message;
  const GpuRequest request = WholeGpus(1, 4000);
  const std::vector<Shape> shapes{OneGpuShape(4000)};
  const auto balance = BalanceScores(request, {half->get(), &idle}, shapes);
  EXPECT_LE(std::abs(balance[0] - balance[1]), 30) << balance[0] << " vs " << balance[1];
  const auto scores =
      ScoreNodes(request, CandidatesFor(request, {half->get(), &idle})->list, shapes, {}, 140);
  EXPECT_GT(scores[0], scores[1]);
}

TEST(BalanceTest, NodesWithoutKnownCpuOrGpusAreNeutral) {
  const state::NodeState untracked(MakeNodeInfo("u", "dgx1-v100"));
  EXPECT_EQ(BalanceScores(WholeGpus(2, 8000), {&untracked}, {OneGpuShape(8000)}),
            std::vector<std::int64_t>{1000});
}

// ScarcityOf's median, counted by distinct value, must be the value nth_element picks, for few
// and for many distinct values (past the bound it keeps every value), at every size.
TEST(BalanceTest, MedianOfFewIsTheElementNthElementPicks) {
  std::mt19937 rng(11);
  for (int round = 0; round < 400; ++round) {
    const std::size_t distinct = 1 + rng() % (round % 2 == 0 ? 6 : 40);
    std::vector<double> pool;
    for (std::size_t d = 0; d < distinct; ++d)
      pool.push_back(static_cast<double>(rng() % 4000) / 7.0);
    const std::size_t size = 1 + rng() % 300;
    std::vector<double> values;
    MedianOfFew median;
    for (std::size_t i = 0; i < size; ++i) {
      values.push_back(pool[rng() % pool.size()]);
      median.Add(values.back());
    }
    const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
    std::nth_element(values.begin(), middle, values.end());
    ASSERT_FALSE(median.empty());
    EXPECT_EQ(median.Median(), *middle) << "round " << round << ", " << size << " values";
  }
  EXPECT_TRUE(MedianOfFew().empty());
  // Exactly at the bound and one past it.
  for (std::size_t distinct : {MedianOfFew::kMaxDistinct, MedianOfFew::kMaxDistinct + 1}) {
    MedianOfFew median;
    for (std::size_t d = distinct; d > 0; --d) median.Add(static_cast<double>(d));
    EXPECT_EQ(median.Median(), static_cast<double>(distinct / 2 + 1)) << distinct;
  }
}

// ScarcityOf over what CandidateSupply gathered (counted by kind, folded into medians at the
// end, every value kept past kMaxKinds) must equal the definition computed over every
// candidate's values, whatever the order, the number of kinds, and candidates without GPUs, CPU
// or memory figures.
TEST(BalanceTest, GatheredSupplyGivesTheScarcityOfEveryCandidatesValues) {
  // Placement tables of 8, 16 and 4 GPUs.
  const std::vector<std::string> topologies = {"dgx1-v100", "dgx2-v100",
                                               "ws-4x-rtxa6000-nvlink-pairs"};
  std::vector<std::shared_ptr<state::NodeState>> keep;
  std::vector<const alloc::PlacementTable*> tables;
  for (const std::string& topology : topologies) {
    keep.push_back(std::make_shared<state::NodeState>(MakeNodeInfo("n-" + topology, topology)));
    tables.push_back(&keep.back()->table());
  }
  const std::vector<Shape> shapes = {OneGpuShape(6000), [] {
                                       Shape shape = OneGpuShape(2000);
                                       shape.gpus = 4;
                                       shape.weight = 0.5;
                                       shape.memory_bytes = 64 * kGiB;
                                       return shape;
                                     }()};
  std::mt19937 rng(5);
  for (int round = 0; round < 300; ++round) {
    const std::size_t kinds = 1 + rng() % (round % 3 == 0 ? 80 : 12);
    std::vector<state::MachineKind> pool;
    for (std::size_t k = 0; k < kinds; ++k) {
      state::MachineKind hot;
      hot.table = tables[rng() % tables.size()];
      hot.cpu_allocatable_milli =
          rng() % 7 == 0 ? 0 : 1000 * static_cast<std::int64_t>(rng() % 256);
      hot.memory_allocatable_bytes =
          rng() % 9 == 0 ? 0 : kGiB * static_cast<std::int64_t>(rng() % 2048);
      pool.push_back(hot);
    }
    CandidateSupply supply;
    std::vector<double> cpu_values, memory_values;
    std::set<const alloc::PlacementTable*> added_tables;
    const std::size_t size = 1 + rng() % 400;
    for (std::size_t i = 0; i < size; ++i) {
      const state::MachineKind& hot = pool[rng() % pool.size()];
      const std::size_t times = 1 + rng() % 3;  // as the verbs add kinds counted by number
      supply.Add(hot, times);
      added_tables.insert(hot.table);
      const double gpus = hot.table->gpu_count();
      for (std::size_t t = 0; t < times; ++t) {
        if (hot.cpu_allocatable_milli > 0) {
          cpu_values.push_back(static_cast<double>(hot.cpu_allocatable_milli) / gpus);
        }
        if (hot.memory_allocatable_bytes > 0) {
          memory_values.push_back(static_cast<double>(hot.memory_allocatable_bytes) / gpus);
        }
      }
    }
    // Every candidate's table is known for the idle look-ahead, spilled or not.
    std::set<const alloc::PlacementTable*> seen_tables;
    supply.ForEachTable([&](const alloc::PlacementTable* table) { seen_tables.insert(table); });
    EXPECT_EQ(seen_tables, added_tables) << "round " << round;
    // The definition (balance.h): rho = clamp(demand / median supply, 0, 1)^2.
    double gpu_weight = 0, cpu_weight = 0, memory_weight = 0;
    for (const Shape& shape : shapes) {
      gpu_weight += shape.weight * shape.gpus * shape.milli / 1000.0;
      cpu_weight += shape.weight * static_cast<double>(shape.cpu_milli);
      memory_weight += shape.weight * static_cast<double>(shape.memory_bytes);
    }
    const auto rho = [](double demand, std::vector<double>& values) {
      if (values.empty()) return 0.0;
      const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
      std::nth_element(values.begin(), middle, values.end());
      const double ratio = std::clamp(demand / *middle, 0.0, 1.0);
      return ratio * ratio;
    };
    const Scarcity got = ScarcityOf(shapes, supply);
    EXPECT_EQ(got.cpu, rho(cpu_weight / gpu_weight, cpu_values)) << "round " << round;
    EXPECT_EQ(got.memory, rho(memory_weight / gpu_weight, memory_values)) << "round " << round;
  }
}

// The kind that overflows the counted kinds is the first one kept by value: its table must still
// be known (it was dropped when no later candidate shared it).
TEST(BalanceTest, TheKindThatSpillsKeepsItsTable) {
  const state::NodeState one(MakeNodeInfo("n-1", "dgx1-v100"));
  const state::NodeState other(MakeNodeInfo("n-2", "dgx2-v100"));
  CandidateSupply supply;
  for (std::size_t k = 0; k < CandidateSupply::kMaxKinds; ++k) {
    supply.Add(state::MachineKind{&one.table(), 1000 * static_cast<std::int64_t>(k + 1), kGiB});
  }
  supply.Add(state::MachineKind{&other.table(), 4000, kGiB});
  std::set<const alloc::PlacementTable*> seen;
  supply.ForEachTable([&](const alloc::PlacementTable* table) { seen.insert(table); });
  EXPECT_EQ(seen, (std::set<const alloc::PlacementTable*>{&one.table(), &other.table()}));
}

TEST(ShapeStatsTest, LearnsCpuAndMemoryOfShapes) {
  ShapeStats stats;
  GpuRequest request;
  request.kind = GpuRequest::Kind::kWhole;
  request.count = 1;
  request.cpu_milli = 11300;
  request.memory_bytes = 16 * kGiB;
  stats.Record(request);
  request.cpu_milli = 11900;  // same CPU bucket (12 cores)
  stats.Record(request);
  const ShapeList typical = stats.Typical();
  ASSERT_EQ(typical->size(), 1u);
  EXPECT_EQ((*typical)[0].gpus, 1);
  EXPECT_EQ((*typical)[0].cpu_milli, 11600);  // the bucket's mean
  EXPECT_EQ((*typical)[0].memory_bytes, 16 * kGiB);
  EXPECT_DOUBLE_EQ((*typical)[0].weight, 1.0);
}

TEST(ShapeStatsTest, LearnsTheNicsOfShapes) {
  ShapeStats stats;
  GpuRequest request;
  request.kind = GpuRequest::Kind::kWhole;
  request.count = 2;
  request.nics.count = alloc::NicRequest::kPerGpu;
  stats.Record(request);  // 2 GPUs, a whole NIC each
  GpuRequest share = request;
  share.count = 1;
  share.nics.milli = 240;  // bucketed to 250
  stats.Record(share);
  GpuRequest plain = request;
  plain.nics = {};
  stats.Record(plain);
  const ShapeList typical = stats.Typical();
  ASSERT_EQ(typical->size(), 3u);
  std::set<std::tuple<int, int, int>> seen;
  for (const Shape& shape : *typical) seen.emplace(shape.gpus, shape.nics, shape.nic_milli);
  EXPECT_EQ(seen, (std::set<std::tuple<int, int, int>>{{2, 2, 1000}, {1, 1, 250}, {2, 0, 0}}));
}

class CpuMemoryExtenderTest : public ExtenderFixture {
 protected:
  void SetUp() override {
    cache_.UpsertNode(NodeWith("a", 64000, 256 * kGiB));
    cache_.UpsertNode(NodeWith("b", 64000, 256 * kGiB));
  }
  kube::PodView CpuPod(const std::string& uid, std::int64_t cpu_milli) {
    kube::PodView pod = GpuPod(uid, 0);
    pod.requests["cpu"] = cpu_milli;
    pod.requests["memory"] = 8 * kGiB * 1000;  // thousandths of a byte
    return pod;
  }
  const state::NodeState& Node(const std::string& name) {
    snapshot_ = cache_.Snapshot();
    return *snapshot_->Find(name);
  }
  state::SnapshotPtr snapshot_;
};

TEST_F(CpuMemoryExtenderTest, PodWithoutGpusIsCountedAtBindAndFreedAtRelease) {
  const std::vector<std::string> names{"a", "b"};
  const kube::PodView pod = CpuPod("c1", 40000);
  extender_.Filter(NamesArgs(pod, names));
  EXPECT_EQ(extender_.Bind(BindArgs(pod, "a")), "");
  EXPECT_EQ(Node("a").cpu_used_milli(), 40000);
  EXPECT_EQ(Node("a").memory_used_bytes(), 8 * kGiB);
  EXPECT_EQ(Node("a").whole_free(), Mask({0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(cache_.Phase("c1"), state::PodPhase::kAdded);
  ASSERT_EQ(binder_.bind_calls(), 1u);
  EXPECT_EQ(binder_.last_bind().second.cpu_milli, 40000);
  // A repeated bind is a success and counts nothing twice.
  EXPECT_EQ(extender_.Bind(BindArgs(pod, "a")), "");
  EXPECT_EQ(Node("a").cpu_used_milli(), 40000);
  EXPECT_EQ(extender_.Release("c1"), state::RemoveOutcome::kRemoved);
  EXPECT_EQ(Node("a").cpu_used_milli(), 0);
}

TEST_F(CpuMemoryExtenderTest, GpuPodRecordsItsCpu) {
  const std::vector<std::string> names{"a", "b"};
  kube::PodView pod = GpuPod("g1", 2);
  pod.requests["cpu"] = 12000;
  extender_.Filter(NamesArgs(pod, names));
  EXPECT_EQ(extender_.Bind(BindArgs(pod, "b")), "");
  EXPECT_EQ(Node("b").cpu_used_milli(), 12000);
  EXPECT_EQ(__builtin_popcount(Node("b").whole_used()), 2);
}

TEST_F(CpuMemoryExtenderTest, PodWithoutGpusOnAnUnknownNodeStillBinds) {
  const std::vector<std::string> names{"cpu-node"};
  const kube::PodView pod = CpuPod("c2", 1000);
  extender_.Filter(NamesArgs(pod, names));
  EXPECT_EQ(extender_.Bind(BindArgs(pod, "cpu-node")), "");
  EXPECT_EQ(cache_.Phase("c2"), state::PodPhase::kInitial);
}

TEST_F(CpuMemoryExtenderTest, PrioritizeAvoidsStrandingGpusByCpu) {
  const std::vector<std::string> names{"a", "b"};
  // Teach the shape distribution: 1-GPU pods with 8 cores.
  for (int i = 0; i < 20; ++i) {
    kube::PodView gpu_pod = GpuPod("shape-" + std::to_string(i), 1);
    gpu_pod.requests["cpu"] = 8000;
    extender_.Filter(NamesArgs(gpu_pod, names));
  }
  // Node a has only 10 cores left and 8 idle GPUs; node b has all its CPU. A pod without GPUs
  // asking for 6 cores would strand a's GPUs (4 cores left < 8), not b's.
  const kube::PodView hog = CpuPod("hog", 54000);
  extender_.Filter(NamesArgs(hog, names));
  ASSERT_EQ(extender_.Bind(BindArgs(hog, "a")), "");
  const kube::PodView small = CpuPod("small", 6000);
  extender_.Filter(NamesArgs(small, names));
  const std::vector<wire::HostPriority> scores = extender_.Prioritize(NamesArgs(small, names));
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_LT(scores[0].score, scores[1].score)
      << "a " << scores[0].score << ", b " << scores[1].score;
}

TEST_F(CpuMemoryExtenderTest, GpuPodAvoidsTheNodeWhoseCpuItWouldExhaust) {
  const std::vector<std::string> names{"a", "b"};
  for (int i = 0; i < 20; ++i) {
    kube::PodView gpu_pod = GpuPod("shape-" + std::to_string(i), 1);
    gpu_pod.requests["cpu"] = 8000;
    extender_.Filter(NamesArgs(gpu_pod, names));
  }
  // Both nodes have 8 idle GPUs; a has 12 cores left, b 40. A 1-GPU pod with 8 cores leaves a
  // with 4 cores: its 7 remaining GPUs could serve no 8-core shape.
  const kube::PodView hog_a = CpuPod("hog-a", 52000);
  const kube::PodView hog_b = CpuPod("hog-b", 24000);
  extender_.Filter(NamesArgs(hog_a, names));
  extender_.Filter(NamesArgs(hog_b, names));
  ASSERT_EQ(extender_.Bind(BindArgs(hog_a, "a")), "");
  ASSERT_EQ(extender_.Bind(BindArgs(hog_b, "b")), "");
  kube::PodView pod = GpuPod("g", 1);
  pod.requests["cpu"] = 8000;
  extender_.Filter(NamesArgs(pod, names));
  const std::vector<wire::HostPriority> scores = extender_.Prioritize(NamesArgs(pod, names));
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_LT(scores[0].score, scores[1].score)
      << "a " << scores[0].score << ", b " << scores[1].score;
}

// The scoring's fragmentation (shared per-request tables, binary-searched CPU and memory steps,
// memoised by node state in prioritize) equals FGD's formula evaluated shape by shape, to the
// bit, over random nodes and random shapes (RDMA NIC shares among them).
double ReferenceFragmentation(const state::NodeState& node, const std::vector<Shape>& shapes) {
  std::vector<int> free;
  double total_free = 0;
  for (int g = 0; g < node.info().gpu_count(); ++g) {
    const int milli = ((node.share_eligible() >> g) & 1) ? 1000 - node.shared_milli(g) : 0;
    free.push_back(milli);
    total_free += milli;
  }
  double fragmentation = 0;
  for (const Shape& shape : shapes) {
    int hosts = 0;
    double too_small = 0;
    for (int milli : free) {
      hosts += milli >= shape.milli ? 1 : 0;
      if (milli > 0 && milli < shape.milli) too_small += milli;
    }
    int nics_with_room = 0;
    for (int n = 0; n < node.nic_count(); ++n) {
      const bool usable = node.nic_usable().test(static_cast<std::size_t>(n));
      nics_with_room += usable && 1000 - node.nic_used_milli(n) >= shape.nic_milli ? 1 : 0;
    }
    const bool fits = shape.gpus > 0 && node.cpu_free_milli() >= shape.cpu_milli &&
                      node.memory_free_bytes() >= shape.memory_bytes && hosts >= shape.gpus &&
                      nics_with_room >= shape.nics;
    fragmentation += shape.weight * (fits ? too_small : total_free);
  }
  return fragmentation;
}

TEST(FragmentationTest, EqualsFgdShapeByShapeToTheBit) {
  std::mt19937 random(7);
  for (int round = 0; round < 300; ++round) {
    std::vector<Shape> shapes(1 + random() % 40);
    for (Shape& shape : shapes) {
      shape.gpus = static_cast<int>(random() % 5);  // 0: a shape without GPUs
      shape.milli = shape.gpus > 1 ? 1000 : static_cast<int>(50 * (1 + random() % 20));
      shape.weight = 1.0 / static_cast<double>(1 + random() % 7);
      shape.cpu_milli = static_cast<std::int64_t>(random() % 5) * 16000;
      shape.memory_bytes = static_cast<std::int64_t>(random() % 5) * 64 * kGiB;
      shape.nics = static_cast<int>(random() % 4);  // 0: none
      shape.nic_milli = shape.nics > 0 ? static_cast<int>(50 * (1 + random() % 20)) : 0;
    }
    state::NodeStatePtr node = std::make_shared<state::NodeState>(NodeWith("n", 64000, 256 * kGiB));
    state::Assignment whole = GpuLess("w", "n", static_cast<std::int64_t>(random() % 64000),
                                      static_cast<std::int64_t>(random() % 256) * kGiB);
    whole.kind = state::Assignment::Kind::kWhole;
    whole.gpus = static_cast<topology::GpuMask>(random() % 16);
    if (auto applied = node->Apply(whole)) node = *applied;
    state::Assignment share = GpuLess("s", "n", 0, 0);
    share.kind = state::Assignment::Kind::kShared;
    share.gpus = topology::GpuMask{1} << 6;
    share.shares = {{6, static_cast<int>(50 * (1 + random() % 19))}};
    if (auto applied = node->Apply(share)) node = *applied;
    state::Assignment nic_holder = GpuLess("r", "n", 0, 0);
    for (int n = 0; n < node->nic_count(); ++n) {
      if (random() % 2 == 0)
        nic_holder.nics.push_back({n, static_cast<int>(50 * (1 + random() % 20)), -1});
    }
    if (auto applied = node->Apply(nic_holder)) node = *applied;
    const double expected = ReferenceFragmentation(*node, shapes);
    EXPECT_EQ(Fragmentation(*node, shapes), expected) << "round " << round;
    ASSERT_GT(node->nic_count(), 0) << "the node has NICs, so the NIC shapes are tested";
  }
}

}  // namespace
}  // namespace linkfit::extender
