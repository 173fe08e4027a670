// What the node agent reads from the machine about links: a GPU's PCIe link width and, where a
// machine's NVLinks differ in version, each pair's NVLink generation. Both round-trip through
// the compact document, change the pair bandwidths, and bad values are errors naming the field.

#include <gtest/gtest.h>

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
