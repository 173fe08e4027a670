// The cluster-file writer against its reader: what EncodeClusterFile writes, LoadClusterFile reads
// back as the same nodes, labels, topologies, MIG modes, allocatable and allocations.

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "linkfit/standalone/cluster_file.h"
#include "linkfit/standalone/standalone.h"
#include "linkfit/topology/spec.h"
#include "testing/cluster.h"

namespace linkfit::standalone {
namespace {

std::string Topology(const std::string& id) {
  return testing::SourcePath("config/topologies/" + id + ".json");
}

ClusterFile SampleFile() {
  ClusterFile file;
  file.comment = "a sample\nof two lines";
  ClusterFileNode a100;
  a100.name = "a100-0";
  a100.topology = Topology("dgx-a100");
  a100.labels = {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB"}, {"note", "a \"quoted\" \\"}};
  a100.mig_gpus = {0, 3};
  a100.cpu = "255";
  a100.memory = "1000Gi";
  ClusterFileNode h100;
  h100.name_prefix = "h100-";
  h100.count = 3;
  h100.topology = Topology("dgx-h100");
  h100.mig_all = true;
  h100.cpu = "223500m";
  ClusterFileNode pcie;
  pcie.name = "l40s-0";
  pcie.topology = Topology("pcie-8x-l40s-2socket");
  file.nodes = {a100, h100, pcie};

  ClusterFileAllocation whole;
  whole.pod = "ml/trainer-0";
  whole.uid = "u1";
  whole.node = "l40s-0";
  whole.gpus = {1, 4};
  whole.cpu = "8";
  whole.memory = "64Gi";
  ClusterFileAllocation mig;
  mig.pod = "ml/infer-0";
  mig.uid = "u2";
  mig.node = "a100-0";
  mig.mig = {{3, "3g.20gb", 4}};
  ClusterFileAllocation share;
  share.pod = "ml/nb-0";
  share.uid = "u3";
  share.node = "l40s-0";
  share.shares = {{2, 300}, {5, 250}};
  ClusterFileAllocation cpu_only;
  cpu_only.pod = "ml/etl-0";
  cpu_only.uid = "u4";
  cpu_only.node = "h100-2";
  cpu_only.cpu = "16";
  cpu_only.memory = "500Mi";
  file.allocations = {whole, mig, share, cpu_only};
  return file;
}

const state::Assignment* Find(const state::NodeState& node, const std::string& uid) {
  for (const auto& [pod_uid, assignment] : node.pods()) {
    if (pod_uid == uid) return &assignment;
  }
  return nullptr;
}

TEST(ClusterFileWriter, WhatItWritesReadsBackAsTheSameCluster) {
  const ClusterFile file = SampleFile();
  const std::string path = ::testing::TempDir() + "/cluster_file_writer_test.yaml";
  ASSERT_TRUE(WriteClusterFile(path, file));

  model::NodeModelFactory factory(testing::Registry(), testing::Catalog(),
                                  topology::BandwidthModel::Defaults());
  state::ClusterCache cache;
  auto stats = LoadClusterFile(path, factory, cache);
  ASSERT_TRUE(stats) << stats.error().message << "\n" << EncodeClusterFile(file);
  EXPECT_EQ(stats->nodes, 5);
  EXPECT_EQ(stats->topologies, 3);
  EXPECT_EQ(stats->allocations, 4);
  const state::SnapshotPtr snapshot = cache.Snapshot();

  struct Expected {
    std::string name;
    const ClusterFileNode* entry;
    topology::GpuMask mig;
    std::int64_t cpu_milli;
    std::int64_t memory_bytes;
  };
  const std::vector<Expected> expected = {
      {"a100-0", &file.nodes[0], 0b1001, 255000, 1000LL << 30},
      {"h100-0", &file.nodes[1], 0xff, 223500, 0},
      {"h100-1", &file.nodes[1], 0xff, 223500, 0},
      {"h100-2", &file.nodes[1], 0xff, 223500, 0},
      {"l40s-0", &file.nodes[2], 0, 0, 0},
  };
  for (const Expected& e : expected) {
    SCOPED_TRACE(e.name);
    const state::NodeState* node = snapshot->Find(e.name);
    ASSERT_NE(node, nullptr);
    EXPECT_EQ(node->info().labels, e.entry->labels);
    auto spec = topology::LoadTopologyFile(e.entry->topology);
    ASSERT_TRUE(spec);
    EXPECT_EQ(node->info().topology().spec().id, spec->id);
    EXPECT_EQ(node->info().mig_enabled, e.mig);
    EXPECT_EQ(node->info().cpu_milli, e.cpu_milli);
    EXPECT_EQ(node->info().memory_bytes, e.memory_bytes);
  }

  const state::Assignment* whole = Find(*snapshot->Find("l40s-0"), "u1");
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(whole->pod_namespace + "/" + whole->pod_name, "ml/trainer-0");
  EXPECT_EQ(whole->kind, state::Assignment::Kind::kWhole);
  EXPECT_EQ(whole->gpus, 0b10010);
  EXPECT_EQ(whole->cpu_milli, 8000);
  EXPECT_EQ(whole->memory_bytes, 64LL << 30);

  const state::NodeState& a100 = *snapshot->Find("a100-0");
  const state::Assignment* mig = Find(a100, "u2");
  ASSERT_NE(mig, nullptr);
  ASSERT_EQ(mig->kind, state::Assignment::Kind::kMig);
  ASSERT_EQ(mig->mig.size(), 1u);
  EXPECT_EQ(mig->mig[0].gpu, 3);
  EXPECT_EQ(mig->mig[0].instance.start, 4);
  const alloc::MigPlanner* planner = a100.info().MigPlannerOf(3);
  ASSERT_NE(planner, nullptr);
  EXPECT_EQ(planner->set().profiles[static_cast<std::size_t>(mig->mig[0].instance.profile)].name,
            "3g.20gb");

  const state::Assignment* share = Find(*snapshot->Find("l40s-0"), "u3");
  ASSERT_NE(share, nullptr);
  ASSERT_EQ(share->kind, state::Assignment::Kind::kShared);
  const std::vector<state::Assignment::ShareSlot> shares = {{2, 300}, {5, 250}};
  EXPECT_EQ(share->shares, shares);

  const state::Assignment* cpu_only = Find(*snapshot->Find("h100-2"), "u4");
  ASSERT_NE(cpu_only, nullptr);
  EXPECT_EQ(cpu_only->gpus, 0);
  EXPECT_EQ(cpu_only->cpu_milli, 16000);
  EXPECT_EQ(cpu_only->memory_bytes, 500LL << 20);
  ::unlink(path.c_str());
}

TEST(ClusterFileWriter, WritesTheDocumentedShape) {
  ClusterFile file;
  ClusterFileNode node;
  node.name = "n";
  node.topology = "t.json";
  file.nodes = {node};
  EXPECT_EQ(EncodeClusterFile(file),
            "nodes:\n  - name: \"n\"\n    topology: \"t.json\"\nallocations: []\n");
}

}  // namespace
}  // namespace linkfit::standalone
