// The `nic` experiment's parts on published machines: alignment by matching, the network rate
// model, the kubelet's NIC choice, the existence check, the numa-only and pcie-root baselines'
// rules, the 2025 trace's loader and reading NICs back from linkfit's allocation records.

#include <unistd.h>

#include <bit>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <random>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "harness/cluster.h"
#include "harness/cluster_file.h"
#include "harness/nic_placement.h"
#include "harness/nic_policies.h"
#include "harness/topology_catalog.h"
#include "harness/trace.h"
#include "linkfit/alloc/nic_choice.h"
#include "linkfit/topology/spec.h"
#include "testing/fixtures.h"

namespace linkfit::bench {
namespace {

const std::string kRoot = LINKFIT_SOURCE_DIR;

unsigned Mask(std::initializer_list<int> members) {
  unsigned mask = 0;
  for (int member : members) mask |= 1u << member;
  return mask;
}

// A cluster of one node of a fixture, every NIC tracked.
Cluster OneNode(const std::string& fixture) {
  auto topology = LoadNodeTopology(kRoot + "/config/topologies/" + fixture);
  EXPECT_TRUE(topology) << topology.error().message;
  SimNode node;
  node.name = "n0";
  node.gpu_model = "gpu";
  node.cpu_capacity = 256000;
  node.memory_capacity = 1 << 21;
  node.gpu_count = (*topology)->gpu_count();
  node.nic_count = (*topology)->model().nic_count();
  node.topology = *topology;
  Cluster cluster;
  cluster.AddNode(std::move(node));
  return cluster;
}

PodSpec NicPod(int gpus, int nic_milli) {
  PodSpec pod;
  pod.name = pod.uid = "p";
  pod.cpu_milli = 1000;
  pod.memory_mib = 1024;
  pod.demand = GpuDemand::kWhole;
  pod.gpu_count = gpus;
  pod.gpu_milli = kWholeGpuMilli;
  pod.nic_count = gpus;
  pod.nic_milli = nic_milli;
  return pod;
}

Placement Holding(unsigned gpus, unsigned nics, int nic_milli) {
  Placement placement;
  placement.node = 0;
  placement.gpus = static_cast<GpuMask>(gpus);
  placement.gpu_milli = kWholeGpuMilli;
  placement.nics = static_cast<SimNicMask>(nics);
  placement.nic_milli = nic_milli;
  return placement;
}

// DGX-1: mlx5_0 is PIX to GPUs 0 and 1, mlx5_1 to GPUs 2 and 3; both hang off root complex rc0
// (PHB to the other pair), mlx5_2 and mlx5_3 likewise on socket 1.
TEST(NicAlignment, EveryGpuNeedsItsOwnCloseNic) {
  const Cluster cluster = OneNode("dgx1-v100.json");
  const SimNode& node = cluster.node(0);
  EXPECT_TRUE(PlacementAligned(node, Holding(Mask({0}), Mask({0}), 250)));
  EXPECT_FALSE(PlacementAligned(node, Holding(Mask({2}), Mask({0}), 250)));
  // Both GPUs are close to mlx5_0 only; each needs a NIC of its own.
  EXPECT_FALSE(PlacementAligned(node, Holding(Mask({0, 1}), Mask({0, 1}), 1000)));
  // The matching pairs GPU 2 with mlx5_1 whatever the order.
  EXPECT_TRUE(PlacementAligned(node, Holding(Mask({0, 2}), Mask({0, 1}), 1000)));
}

TEST(NicAlignment, NetworkRateIsStagedOffPxbAndSplitByShare) {
  const Cluster cluster = OneNode("dgx1-v100.json");
  const SimNode& node = cluster.node(0);
  NetworkModel model;
  model.nic_gbps = 12.5;
  model.staged_gbps[3] = 6;  // the V100s are PCIe gen 3
  EXPECT_DOUBLE_EQ(PodNetworkGbps(node, Holding(Mask({0}), Mask({0}), 1000), model), 12.5);
  EXPECT_DOUBLE_EQ(PodNetworkGbps(node, Holding(Mask({2}), Mask({0}), 1000), model), 6);
  EXPECT_DOUBLE_EQ(PodNetworkGbps(node, Holding(Mask({2}), Mask({0}), 250), model), 3.125);
  // The best pairing: GPU 0 with mlx5_0 and GPU 2 with mlx5_1, both GPUDirect.
  EXPECT_DOUBLE_EQ(PodNetworkGbps(node, Holding(Mask({0, 2}), Mask({0, 1}), 1000), model), 12.5);
  EXPECT_DOUBLE_EQ(PodNetworkGbps(node, Holding(Mask({0, 1}), Mask({0, 1}), 1000), model), 6);
}

TEST(NicAlignment, KubeletTakesNicsOnTheGpusNumaNodeFirst) {
  Cluster cluster = OneNode("dgx1-v100.json");
  const PodSpec pod = NicPod(1, 250);
  EXPECT_EQ(KubeletNics(cluster.node(0), static_cast<GpuMask>(Mask({4})), pod), Mask({2}));
  cluster.nodes()[0].nic_free_milli[2] = 100;
  cluster.nodes()[0].nic_free_milli[3] = 0;
  EXPECT_EQ(KubeletNics(cluster.node(0), static_cast<GpuMask>(Mask({4})), pod), Mask({0}));
  cluster.nodes()[0].nic_free_milli[0] = cluster.nodes()[0].nic_free_milli[1] = 0;
  EXPECT_EQ(KubeletNics(cluster.node(0), static_cast<GpuMask>(Mask({4})), pod), 0u);
}

TEST(NicAlignment, AnAlignedChoiceExistsUntilTheCloseNicsAreGone) {
  Cluster cluster = OneNode("dgx1-v100.json");
  const PodSpec pod = NicPod(1, 500);
  EXPECT_TRUE(AlignedChoiceExists(cluster.node(0), pod));
  // GPUs 4-7 busy, mlx5_0 full: GPU 2 or 3 with mlx5_1 remains.
  cluster.Apply(NicPod(4, 1000), Holding(Mask({4, 5, 6, 7}), Mask({2, 3}), 1000));
  cluster.nodes()[0].nic_free_milli[0] = 0;
  EXPECT_TRUE(AlignedChoiceExists(cluster.node(0), pod));
  // mlx5_1 with too little left: GPUs 0-3 are free, but none has a close NIC that can take it.
  cluster.nodes()[0].nic_free_milli[1] = 400;
  EXPECT_FALSE(AlignedChoiceExists(cluster.node(0), pod));
  EXPECT_TRUE(AlignedChoiceExists(cluster.node(0), NicPod(1, 400)));
}

// The brute force the experiment uses agrees with linkfit's exact joint choice (nic-closeness
// pxb required) on random occupancies of every machine of the experiment.
TEST(NicAlignment, ExistenceAgreesWithLinkfitsJointChoice) {
  std::mt19937 rng(37);
  int exists = 0;
  int absent = 0;
  for (const char* fixture :
       {"dgx1-v100.json", "dgx-a100.json", "dgx-h100.json", "pcie-8x-l40s-2socket.json",
        "pcie-8x-cascaded-switch-2socket.json"}) {
    Cluster cluster = OneNode(fixture);
    SimNode& node = cluster.nodes()[0];
    for (int trial = 0; trial < 300; ++trial) {
      for (int g = 0; g < node.gpu_count; ++g) {
        node.gpu_free_milli[static_cast<std::size_t>(g)] = rng() % 2 ? kWholeGpuMilli : 0;
      }
      alloc::NicAvailability nics;
      for (int n = 0; n < node.nic_count; ++n) {
        const auto free = static_cast<std::int16_t>(250 * (rng() % 5));
        node.nic_free_milli[static_cast<std::size_t>(n)] = free;
        nics.free_milli.push_back(free);
      }
      PodSpec pod = NicPod(1 + static_cast<int>(rng() % 4), rng() % 2 ? 1000 : 250);
      pod.nic_count = std::max(1, pod.gpu_count + static_cast<int>(rng() % 3) - 1);
      const alloc::NicRequest request{.count = pod.nic_count,
                                      .milli = pod.nic_milli,
                                      .closeness = alloc::NicCloseness::kPxb,
                                      .policy = alloc::ClosenessPolicy::kRequired,
                                      .rails = {}};
      const bool joint = alloc::PlaceWholeGpusWithNics(node.topology->table(), node.IdleGpus(),
                                                       nics, {.gpus = pod.gpu_count}, request)
                             .fits();
      ASSERT_EQ(AlignedChoiceExists(node, pod), joint)
          << fixture << " trial " << trial << ": " << pod.gpu_count << " GPUs, " << pod.nic_count
          << " NICs of " << pod.nic_milli;
      (joint ? exists : absent) += 1;
    }
  }
  EXPECT_GT(exists, 100);
  EXPECT_GT(absent, 100);
}

TEST(NicBaselines, NumaOnlyTakesFirstFreeDevicesOfOneNumaNode) {
  auto numa_only = MakeNicBaseline("numa-only");
  ASSERT_TRUE(numa_only) << numa_only.error().message;
  Cluster dgx1 = OneNode("dgx1-v100.json");
  dgx1.nodes()[0].nic_free_milli[0] = 0;
  // NUMA node 0: GPU 0 and the first NIC that can take the share there, mlx5_1 (PHB): misaligned.
  NodeChoice choice = (*numa_only)->Evaluate(dgx1, 0, NicPod(1, 250));
  ASSERT_TRUE(choice.feasible);
  EXPECT_EQ(choice.placement.gpus, Mask({0}));
  EXPECT_EQ(choice.placement.nics, Mask({1}));
  EXPECT_FALSE(PlacementAligned(dgx1.node(0), choice.placement));
  // DGX A100: two GPUs per NUMA node, so a pod of 4 takes the fewest NUMA nodes that hold it.
  Cluster a100 = OneNode("dgx-a100.json");
  choice = (*numa_only)->Evaluate(a100, 0, NicPod(4, 1000));
  ASSERT_TRUE(choice.feasible);
  EXPECT_EQ(std::popcount(choice.placement.gpus), 4);
  std::set<int> numa;
  for (int g = 0; g < 8; ++g) {
    if ((choice.placement.gpus >> g) & 1) numa.insert(a100.node(0).topology->numa_node(g));
  }
  EXPECT_EQ(numa.size(), 2u);
  // A pod of 1 GPU goes on one NUMA node; with no NIC left there it goes to the next.
  choice = (*numa_only)->Evaluate(a100, 0, NicPod(1, 1000));
  ASSERT_TRUE(choice.feasible);
  EXPECT_TRUE(PlacementAligned(a100.node(0), choice.placement));
}

TEST(NicBaselines, PcieRootPairsUnderOneRootComplexAtPhbToo) {
  auto pcie_root = MakeNicBaseline("pcie-root");
  ASSERT_TRUE(pcie_root) << pcie_root.error().message;
  // Cascaded switches: the only NIC sits under socket 1's host bridge, PHB to GPUs 4-7.
  Cluster cascaded = OneNode("pcie-8x-cascaded-switch-2socket.json");
  NodeChoice choice = (*pcie_root)->Evaluate(cascaded, 0, NicPod(1, 250));
  ASSERT_TRUE(choice.feasible);
  EXPECT_EQ(choice.placement.gpus, Mask({4}));
  EXPECT_EQ(choice.placement.nics, Mask({0}));
  EXPECT_FALSE(PlacementAligned(cascaded.node(0), choice.placement));
  EXPECT_FALSE((*pcie_root)->Evaluate(cascaded, 0, NicPod(2, 1000)).feasible);
  // DGX-1 with mlx5_0 taken: GPU 0 pairs with mlx5_1 (same root, PHB) before GPU 2 does.
  Cluster dgx1 = OneNode("dgx1-v100.json");
  dgx1.nodes()[0].nic_free_milli[0] = 0;
  choice = (*pcie_root)->Evaluate(dgx1, 0, NicPod(1, 1000));
  ASSERT_TRUE(choice.feasible);
  EXPECT_EQ(choice.placement.gpus, Mask({0}));
  EXPECT_EQ(choice.placement.nics, Mask({1}));
  // Two pairs: root rc0 has one NIC left, so the second pair comes from socket 1.
  choice = (*pcie_root)->Evaluate(dgx1, 0, NicPod(2, 1000));
  ASSERT_TRUE(choice.feasible);
  EXPECT_EQ(choice.placement.gpus, Mask({0, 4}));
  EXPECT_EQ(choice.placement.nics, Mask({1, 2}));
  // Four pairs need four NICs; three are left.
  EXPECT_FALSE((*pcie_root)->Evaluate(dgx1, 0, NicPod(4, 1000)).feasible);
}

TEST(NicTrace, LoadsGpuInstancesWithNicShares) {
  const std::string header =
      "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,"
      "rdma_limit,memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,"
      "creation_time,scheduled_time,deletion_time\n";
  auto pods =
      ParseAlibaba2025GpuPods(header + "i0,HN,a,12,12,1,1,25,25,120.0,120.0,640.0,800.0,8,,,\n" +
                                  "i1,CN,a,8,8,0,0,1,1,16.0,16.0,1,1,-1,5.0,5.0,9.0\n" +
                                  "i2,HN,b,8,8,1,1,50,50,40.5,40.5,1,1,2,3973.5,3974,8000\n",
                              "t");
  ASSERT_TRUE(pods) << pods.error().message;
  ASSERT_EQ(pods->size(), 2u);
  EXPECT_EQ((*pods)[0].cpu_milli, 12000);
  EXPECT_EQ((*pods)[0].memory_mib, 120 * 1024);
  EXPECT_EQ((*pods)[0].rdma_percent, 25);
  EXPECT_EQ((*pods)[0].creation_s, -1);
  EXPECT_EQ((*pods)[1].deletion_s, 8000);
  EXPECT_DOUBLE_EQ((*pods)[1].creation_s, 3973.5);
  auto bad = ParseAlibaba2025GpuPods(header + "i0,HN,a,12,12,1,1,250,25,1,1,1,1,8,,,\n", "t");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("t:2: column 'rdma_request'"), std::string::npos)
      << bad.error().message;
}

TEST(NicRecords, NicsAreReadFromThePodsAllocationRecord) {
  const Cluster cluster = OneNode("dgx-a100.json");
  const std::string path = std::filesystem::temp_directory_path() /
                           ("linkfit-nic-state-" + std::to_string(getpid()) + ".json");
  auto write = [&](const std::string& text) { std::ofstream(path) << text; };
  const PodSpec pod = NicPod(2, 1000);
  write(R"({"allocations":[{"v":1,"pod":"bench/q","uid":"q","node":"n0","gpus":[0]},
    {"v":1,"pod":"bench/p","uid":"p","node":"n0","gpus":[2,3],
     "nics":[{"name":"mlx5_2","gpu":2},{"name":"mlx5_3","gpu":3}]}]})");
  auto nics = RecordedNics(path, pod, cluster.node(0));
  ASSERT_TRUE(nics) << nics.error().message;
  EXPECT_EQ(*nics, Mask({2, 3}));
  // A share the pod did not ask for, a NIC the node lacks, a pod without a record.
  write(R"({"allocations":[{"v":1,"pod":"bench/p","uid":"p","node":"n0","gpus":[2,3],
     "nics":[{"name":"mlx5_2","milli":250},{"name":"mlx5_3","milli":250}]}]})");
  auto share = RecordedNics(path, pod, cluster.node(0));
  ASSERT_FALSE(share);
  EXPECT_NE(share.error().message.find("250 thousandths of mlx5_2"), std::string::npos);
  write(R"({"allocations":[{"v":1,"pod":"bench/p","uid":"p","node":"n0","gpus":[2,3],
     "nics":[{"name":"mlx5_42"},{"name":"mlx5_3"}]}]})");
  auto unknown = RecordedNics(path, pod, cluster.node(0));
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("NIC mlx5_42"), std::string::npos);
  write(R"({"allocations":[]})");
  auto missing = RecordedNics(path, pod, cluster.node(0));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("no allocation record for pod p"), std::string::npos);
  std::filesystem::remove(path);
}

// linkfit serve is told each NIC's rate as a node agent would publish it: a node with a rate reads
// a copy of its fixture with that rate on every NIC (relations unchanged), one copy per fixture
// and rate; a node without one reads the fixture itself.
TEST(NicRecords, TheClusterFileCarriesTheNicsRate) {
  Cluster cluster;
  for (double rate : {400.0, 400.0, 0.0}) {
    SimNode node;
    node.name = "n" + std::to_string(cluster.nodes().size());
    node.gpu_model = "H100";
    node.gpu_count = 8;
    node.topology_file = kRoot + "/config/topologies/dgx-h100.json";
    node.nic_rate_gbps = rate;
    cluster.AddNode(std::move(node));
  }
  auto dir = MakeTempDir("linkfit-nic-rate-test-");
  ASSERT_TRUE(dir) << dir.error().message;
  auto file = WriteClusterFile(cluster, *dir);
  ASSERT_TRUE(file) << file.error().message;
  const std::string text = testing::ReadFileOrDie(*file);
  const std::string copy = *dir + "/nic-rate-0.json";
  EXPECT_NE(text.find(copy), std::string::npos) << text;
  EXPECT_FALSE(std::filesystem::exists(*dir + "/nic-rate-1.json"));
  EXPECT_NE(text.find("config/topologies/dgx-h100.json"), std::string::npos) << text;
  auto rated = topology::LoadTopologyFile(copy);
  auto fixture = topology::LoadTopologyFile(kRoot + "/config/topologies/dgx-h100.json");
  ASSERT_TRUE(rated && fixture);
  ASSERT_EQ(rated->nics.size(), fixture->nics.size());
  for (std::size_t n = 0; n < rated->nics.size(); ++n) {
    EXPECT_EQ(rated->nics[n].rate_gbps, 400.0) << n;
    EXPECT_EQ(rated->nics[n].gpu_relations, fixture->nics[n].gpu_relations) << n;
  }
  std::filesystem::remove_all(*dir);
}

}  // namespace
}  // namespace linkfit::bench
