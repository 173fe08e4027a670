// The harness's simplex (bench/harness/lp.h) on programs with known optima, and the openb upper
// bound (openb_bound.h) on clusters small enough to check by hand.

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "harness/lp.h"
#include "harness/openb_bound.h"
#include "harness/openb_forced_bound.h"

namespace linkfit::bench {
namespace {

TEST(Simplex, KnownOptima) {
  // max 3x + 5y, x <= 4, 2y <= 12, 3x + 2y <= 18: optimum 36 at (2, 6).
  LinearProgram program;
  program.columns = 2;
  program.objective = {3, 5};
  program.rows = {{1, 0}, {0, 2}, {3, 2}};
  program.bounds = {4, 12, 18};
  auto solved = Maximise(program);
  ASSERT_TRUE(solved) << solved.error().message;
  EXPECT_NEAR(solved->value, 36, 1e-9);
  EXPECT_NEAR(solved->x[0], 2, 1e-9);
  EXPECT_NEAR(solved->x[1], 6, 1e-9);
  // A degenerate program (a zero bound) still ends: max x + y, x - y <= 0, x <= 0, y <= 3.
  program.objective = {1, 1};
  program.rows = {{1, -1}, {1, 0}, {0, 1}};
  program.bounds = {0, 0, 3};
  solved = Maximise(program);
  ASSERT_TRUE(solved);
  EXPECT_NEAR(solved->value, 3, 1e-9);
}

TEST(Simplex, RejectsUnboundedAndMalformedPrograms) {
  LinearProgram program;
  program.columns = 2;
  program.objective = {1, 0};
  program.rows = {{0, 1}};
  program.bounds = {1};
  EXPECT_FALSE(Maximise(program));  // x is unbounded
  program.objective = {1, 1};
  program.bounds = {-1};
  EXPECT_FALSE(Maximise(program));
  program.bounds = {1, 2};
  EXPECT_FALSE(Maximise(program));
}

SimNode Node(int gpus, std::int64_t cpu_milli) {
  SimNode node;
  node.name = "n" + std::to_string(gpus) + "-" + std::to_string(cpu_milli);
  node.gpu_model = "G";
  node.gpu_count = gpus;
  node.cpu_capacity = cpu_milli;
  node.memory_capacity = 1 << 20;
  return node;
}

PodSpec Pod(int gpus, int milli, std::int64_t cpu_milli) {
  PodSpec pod;
  pod.demand = milli < kWholeGpuMilli ? GpuDemand::kShare : GpuDemand::kWhole;
  pod.gpu_count = gpus;
  pod.gpu_milli = milli;
  pod.cpu_milli = cpu_milli;
  pod.memory_mib = 1;
  return pod;
}

TEST(OpenbBound, CpuBindsAndPodsTooBigForEveryNodeCountNothing) {
  Cluster cluster;
  cluster.AddNode(Node(8, 32000));
  cluster.AddNode(Node(8, 32000));
  // 1-GPU pods of 8 cores: CPU allows 8 of them (64 cores) for 16 GPUs; 16-GPU pods fit nowhere;
  // half-GPU pods of no CPU fill the rest: 16 GPUs in all.
  std::vector<PodSpec> arrivals(20, Pod(1, 1000, 8000));
  arrivals.push_back(Pod(16, 1000, 0));
  auto bound = OpenbGpuBound(cluster, arrivals);
  ASSERT_TRUE(bound) << bound.error().message;
  EXPECT_NEAR(bound->allocated_gpu_milli, 8000, 1e-6);
  for (int i = 0; i < 40; ++i) arrivals.push_back(Pod(1, 500, 0));
  bound = OpenbGpuBound(cluster, arrivals);
  ASSERT_TRUE(bound);
  EXPECT_NEAR(bound->allocated_gpu_milli, 16000, 1e-6);
  EXPECT_NEAR(bound->ratio, 1.0, 1e-9);
  EXPECT_EQ(bound->kinds, 1);
  EXPECT_EQ(bound->shapes, 3);
}

// The forced-share bound (openb_forced_bound.h) on arrivals whose every work-conserving replay
// is known by hand. Nodes have 1 << 20 MiB; pods ask 1 MiB.
Cluster OneGpuNodes(int nodes, std::int64_t cpu_milli) {
  Cluster cluster;
  for (int i = 0; i < nodes; ++i) {
    SimNode node = Node(1, cpu_milli);
    node.name += "-" + std::to_string(i);
    cluster.AddNode(std::move(node));
  }
  return cluster;
}

double ForcedBound(const Cluster& cluster, const std::vector<PodSpec>& arrivals, int* forced) {
  auto bound = OpenbForcedShareBound(cluster, arrivals);
  EXPECT_TRUE(bound) << bound.error().message;
  if (!bound) return -1;
  *forced = 0;
  for (const ForcedShape& shape : bound->forced) *forced += shape.forced;
  return bound->allocated_gpu_milli;
}

TEST(OpenbForcedBound, BigSharesThatArriveFirstKeepTheirGpus) {
  // Two 1-GPU nodes; two 0.81 shares, then four halves. Each 0.81 finds an empty GPU and must be
  // placed; the halves then fit nowhere: 1,620 milli, whatever the policy. The LP of
  // openb_bound.h takes the four halves instead: 2,000.
  const Cluster cluster = OneGpuNodes(2, 64000);
  std::vector<PodSpec> arrivals(2, Pod(1, 810, 1000));
  for (int i = 0; i < 4; ++i) arrivals.push_back(Pod(1, 500, 1000));
  int forced = -1;
  EXPECT_NEAR(ForcedBound(cluster, arrivals, &forced), 1620, 1e-6);
  EXPECT_EQ(forced, 2);
  auto lp = OpenbGpuBound(cluster, arrivals);
  ASSERT_TRUE(lp);
  EXPECT_NEAR(lp->allocated_gpu_milli, 2000, 1e-6);
}

TEST(OpenbForcedBound, SharesThatArriveFirstCanCloseTheGpus) {
  // The same pods with the halves first: they fill both GPUs, the 0.81 shares fit nowhere: 2,000
  // is reached, so a bound below it would be wrong.
  const Cluster cluster = OneGpuNodes(2, 64000);
  std::vector<PodSpec> arrivals(4, Pod(1, 500, 1000));
  arrivals.push_back(Pod(1, 810, 1000));
  arrivals.push_back(Pod(1, 810, 1000));
  int forced = -1;
  EXPECT_NEAR(ForcedBound(cluster, arrivals, &forced), 2000, 1e-6);
  EXPECT_EQ(forced, 0);
}

TEST(OpenbForcedBound, AWholeGpuPodAndOneForcedShareOnATwoGpuNode) {
  // One 2-GPU node: a whole GPU, then two 0.81 shares and two halves. The whole pod takes one GPU,
  // the first 0.81 must take the other; nothing else fits: 1,810. The second 0.81 may fail.
  Cluster cluster;
  cluster.AddNode(Node(2, 64000));
  std::vector<PodSpec> arrivals{Pod(1, 1000, 1000), Pod(1, 810, 1000), Pod(1, 810, 1000),
                                Pod(1, 500, 1000), Pod(1, 500, 1000)};
  int forced = -1;
  EXPECT_NEAR(ForcedBound(cluster, arrivals, &forced), 1810, 1e-6);
  EXPECT_EQ(forced, 1);
}

TEST(OpenbForcedBound, CpuThatArrivesFirstCanCloseANode) {
  // One 1-GPU node of 10 cores; a CPU-only pod, a 0.81 share of 4 cores, two halves of 1 core.
  // With 7 cores taken first the share never fits (3 left) and the halves fill the GPU: 1,000.
  // With 6 taken it fits and must be placed; the halves then do not: 810.
  const Cluster cluster = OneGpuNodes(1, 10000);
  for (const auto& [cpu_only, expected, expected_forced] :
       std::vector<std::tuple<std::int64_t, double, int>>{{7000, 1000, 0}, {6000, 810, 1}}) {
    std::vector<PodSpec> arrivals{Pod(0, 0, cpu_only), Pod(1, 810, 4000), Pod(1, 500, 1000),
                                  Pod(1, 500, 1000)};
    arrivals[0].demand = GpuDemand::kNone;
    int forced = -1;
    EXPECT_NEAR(ForcedBound(cluster, arrivals, &forced), expected, 1e-6) << cpu_only;
    EXPECT_EQ(forced, expected_forced) << cpu_only;
  }
}

}  // namespace
}  // namespace linkfit::bench
