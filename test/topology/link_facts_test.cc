// What the node agent reads from the machine about links: a GPU's PCIe link width, each PCIe
// switch's uplink generation and width, and, where a machine's NVLinks differ in version, each
// pair's NVLink generation. They round-trip through the compact document, change the pair
// bandwidths, and bad values are errors naming the field. What a document does not state of a
// GPU's NVLinks comes from the GPU model table (config/gpus.json), the agent's own.

#include <gtest/gtest.h>

#include "linkfit/topology/gpu_models.h"
#include "linkfit/topology/spec.h"
#include "linkfit/topology/topology.h"
#include "testing/fixtures.h"

namespace linkfit::topology {
namespace {

TEST(LinkFacts, PcieWidthAndPairGenerationRoundTrip) {
  TopologySpec spec = linkfit::testing::LoadFixture("dgx1-v100")->spec();
  spec.gpus[3].pcie_width = 8;
  spec.links[0].nvlink_generation = 3;
  auto parsed = ParseTopologyDocument(ToTopologyDocument(spec));
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->gpus[3].pcie_width, 8);
  EXPECT_EQ(parsed->gpus[2].pcie_width, 0);
  EXPECT_EQ(parsed->links[0].nvlink_generation, 3);
  EXPECT_EQ(parsed->links[1].nvlink_generation, 0);
  EXPECT_EQ(ToTopologyDocument(*parsed), ToTopologyDocument(spec));
}

// A x8 link carries half of a x16 one: every PCIe-only pair of that GPU halves.
TEST(LinkFacts, ANarrowPcieLinkHalvesItsPairs) {
  const TopologyPtr plain = linkfit::testing::LoadFixture("pcie-8x-l40s-2socket");
  TopologySpec spec = plain->spec();
  spec.gpus[5].pcie_width = 8;
  auto built = BuildTopology(spec);
  ASSERT_TRUE(built) << built.error().message;
  for (int b = 0; b < 8; ++b) {
    if (b == 5) continue;
    EXPECT_EQ((*built)->bandwidth_mbps(5, b), plain->bandwidth_mbps(5, b) / 2) << b;
  }
  EXPECT_EQ((*built)->bandwidth_mbps(0, 1), plain->bandwidth_mbps(0, 1));
  EXPECT_NE((*built)->fingerprint(), plain->fingerprint());
}

// DGX-2's NVSwitch pairs are NVSwitch gen 1 (120 GB/s); a pair whose links say NVLink 3 is rated
// as NVSwitch gen 2 (230 GB/s), the other pairs keep the fabric's figure.
TEST(LinkFacts, APairGenerationOverridesTheFabricsForThatPair) {
  const TopologyPtr plain = linkfit::testing::LoadFixture("dgx2-v100");
  TopologySpec spec = plain->spec();
  ASSERT_TRUE(spec.links[0].via_nvswitch);
  spec.links[0].nvlink_generation = 3;
  auto built = BuildTopology(spec);
  ASSERT_TRUE(built) << built.error().message;
  EXPECT_EQ(plain->bandwidth_mbps(0, 1), 120000u);
  EXPECT_EQ((*built)->bandwidth_mbps(spec.links[0].a, spec.links[0].b), 230000u);
  EXPECT_EQ((*built)->bandwidth_mbps(2, 3), 120000u);
}

// The L40S server's switch psw0a (GPUs 0, 1) runs its uplink at gen 3: pairs leaving it through
// that link drop to gen 3, the pair under it (0-1) and every other pair keep gen 4; a x8 uplink
// on psw1b (GPUs 6, 7) halves what crosses it too.
TEST(LinkFacts, TheSlowestLinkOnAPairsPathLimitsIt) {
  const TopologyPtr plain = linkfit::testing::LoadFixture("pcie-8x-l40s-2socket");
  TopologySpec spec = plain->spec();
  ASSERT_EQ(spec.pcie_tree[1].id, "psw0a");
  ASSERT_EQ(spec.pcie_tree[7].id, "psw1b");
  spec.pcie_tree[1].gen = 3;
  spec.pcie_tree[1].source = FigureSource::kSysfs;
  spec.pcie_tree[7].width = 8;
  auto built = BuildTopology(spec);
  ASSERT_TRUE(built) << built.error().message;
  EXPECT_EQ(plain->bandwidth_mbps(0, 1), 24000u);
  EXPECT_EQ((*built)->bandwidth_mbps(0, 1), 24000u);  // PIX: turns at psw0a
  EXPECT_EQ(plain->bandwidth_mbps(0, 2), 20000u);
  EXPECT_EQ((*built)->bandwidth_mbps(0, 2), 10000u);  // NODE gen 3
  EXPECT_EQ((*built)->bandwidth_mbps(1, 4), 6000u);   // SYS gen 3
  EXPECT_EQ((*built)->bandwidth_mbps(0, 6), 3000u);   // SYS gen 3, x8
  EXPECT_EQ((*built)->bandwidth_mbps(2, 4), plain->bandwidth_mbps(2, 4));
  EXPECT_EQ((*built)->bandwidth_mbps(6, 7), plain->bandwidth_mbps(6, 7));
  EXPECT_EQ((*built)->bandwidth_mbps(2, 6), plain->bandwidth_mbps(2, 6) / 2);
  // The switch figures and their source round-trip.
  auto parsed = ParseTopologyDocument(ToTopologyDocument(spec));
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->pcie_tree[1].gen, 3);
  EXPECT_EQ(parsed->pcie_tree[1].source, FigureSource::kSysfs);
  EXPECT_EQ(parsed->pcie_tree[7].width, 8);
  EXPECT_EQ(parsed->pcie_tree[0].source, FigureSource::kUnstated);
  EXPECT_EQ(ToTopologyDocument(*parsed), ToTopologyDocument(spec));
}

// Fixtures' switches are never slower than their GPUs: the tree changes no fixture's figures.
TEST(LinkFacts, FixtureSwitchesChangeNoFigure) {
  for (const char* id :
       {"dgx-a100", "dgx-h100", "dgx1-v100", "dgx2-v100", "pcie-8x-a100-nvlink-bridge-pairs",
        "pcie-8x-cascaded-switch-2socket", "pcie-8x-l40s-2socket", "pcie-8x-rtx4090-all-sys",
        "ws-4x-rtxa6000-nvlink-pairs"}) {
    const TopologyPtr fixture = linkfit::testing::LoadFixture(id);
    TopologySpec without = fixture->spec();
    without.pcie_tree.clear();
    for (GpuSpec& gpu : without.gpus) gpu.pcie_path.clear();
    auto built = BuildTopology(without);
    ASSERT_TRUE(built) << built.error().message;
    for (int a = 0; a < fixture->gpu_count(); ++a) {
      for (int b = 0; b < fixture->gpu_count(); ++b) {
        EXPECT_EQ(fixture->bandwidth_mbps(a, b), (*built)->bandwidth_mbps(a, b)) << id;
      }
    }
  }
}

// What the document does not say of NVLinks comes from the GPU model table, not from substrings
// of the model name; what it says comes first.
TEST(LinkFacts, UnstatedNvlinkFactsComeFromTheModelTable) {
  // The workstation's RTX A6000 bridges, with neither generation nor per-link rate stated: the
  // table's narrow GA102 links (11 GB/s effective per link, 4 links).
  TopologySpec a6000 = linkfit::testing::LoadFixture("ws-4x-rtxa6000-nvlink-pairs")->spec();
  a6000.fabric.nvlink_generation = 0;
  a6000.fabric.per_link_gbps = 0;
  auto built = BuildTopology(a6000);
  ASSERT_TRUE(built) << built.error().message;
  EXPECT_EQ((*built)->bandwidth_mbps(0, 1), 44000u);
  // A document that states a full-width per-link rate is believed.
  a6000.fabric.per_link_gbps = 25;
  built = BuildTopology(a6000);
  ASSERT_TRUE(built) << built.error().message;
  EXPECT_EQ((*built)->bandwidth_mbps(0, 1), 80000u);
  // The same bridges on A100 80GB PCIe boards: full-width NVLink 3.
  a6000.fabric.per_link_gbps = 0;
  for (GpuSpec& gpu : a6000.gpus) gpu.model = "NVIDIA A100 80GB PCIe";
  built = BuildTopology(a6000);
  ASSERT_TRUE(built) << built.error().message;
  EXPECT_EQ((*built)->bandwidth_mbps(0, 1), 80000u);

  // DGX-1's direct NVLinks without a stated generation: V100 is NVLink 2 by the table, a model
  // an operator's table calls NVLink 4 is rated as NVLink 4.
  BandwidthModel rates = BandwidthModel::Defaults();
  ASSERT_TRUE(rates.Override("NVLINK_DIRECT_per_link_gen2", 21));
  ASSERT_TRUE(rates.Override("NVLINK_DIRECT_per_link_gen4", 24));
  TopologySpec dgx1 = linkfit::testing::LoadFixture("dgx1-v100")->spec();
  dgx1.fabric.nvlink_generation = 0;
  ASSERT_EQ(dgx1.links[0].nvlink_count, 1);  // 0-1: NV1
  built = BuildTopology(dgx1, rates);
  ASSERT_TRUE(built) << built.error().message;
  EXPECT_EQ((*built)->bandwidth_mbps(0, 1), 21000u);
  auto table = GpuModelTable::Parse(R"({"schema": "linkfit-gpu-models/v1", "models": [
      {"name": "V", "match": ["V100"], "nvlink_generation": 4, "source": "s"}]})",
                                    "mine.json");
  ASSERT_TRUE(table) << table.error().message;
  built = BuildTopology(dgx1, rates, *table);
  ASSERT_TRUE(built) << built.error().message;
  EXPECT_EQ((*built)->bandwidth_mbps(0, 1), 24000u);
}

TEST(LinkFacts, ImplausibleValuesAreErrorsNamingTheField) {
  TopologySpec spec = linkfit::testing::LoadFixture("dgx1-v100")->spec();
  spec.gpus[1].pcie_width = 64;
  auto parsed = ParseTopologyDocument(ToTopologyDocument(spec));
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().message.find("pcie_width: out of range (0..32 lanes)"),
            std::string::npos)
      << parsed.error().message;
  spec.gpus[1].pcie_width = 16;
  spec.links[2].nvlink_generation = 11;
  parsed = ParseTopologyDocument(ToTopologyDocument(spec));
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().message.find("$.links[2].nvlink_generation: out of range (0..10)"),
            std::string::npos)
      << parsed.error().message;
}

}  // namespace
}  // namespace linkfit::topology
