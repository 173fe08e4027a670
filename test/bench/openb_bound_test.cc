// The harness's simplex (bench/harness/lp.h) on programs with known optima, and the openb upper
// bound (openb_bound.h) on clusters small enough to check by hand.

#include <gtest/gtest.h>

#include "harness/lp.h"
#include "harness/openb_bound.h"

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

}  // namespace
}  // namespace linkfit::bench
