#include "linkfit/topology/topology.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "testing/fixtures.h"

namespace linkfit::topology {
namespace {

using linkfit::testing::FixtureIds;
using linkfit::testing::LoadFixture;
using linkfit::testing::ReadFileOrDie;

class EveryFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryFixture, MatrixIsSymmetricPositiveAndOrdered) {
  const TopologyPtr topo = LoadFixture(GetParam());
  ASSERT_NE(topo, nullptr);
  const int n = topo->gpu_count();
  std::uint32_t min_nvlink = UINT32_MAX;
  std::uint32_t max_pcie = 0;
  for (int a = 0; a < n; ++a) {
    EXPECT_EQ(topo->bandwidth_mbps(a, a), 0u);
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      EXPECT_EQ(topo->bandwidth_mbps(a, b), topo->bandwidth_mbps(b, a));
      EXPECT_GT(topo->bandwidth_mbps(a, b), 0u);
      if (topo->has_nvlink(a, b)) {
        min_nvlink = std::min(min_nvlink, topo->bandwidth_mbps(a, b));
      } else {
        max_pcie = std::max(max_pcie, topo->bandwidth_mbps(a, b));
      }
    }
  }
  if (min_nvlink != UINT32_MAX) {
    EXPECT_GT(min_nvlink, max_pcie);
  }
  // PCIe-only pairs of one generation order SYS <= NODE <= PHB <= PXB <= PIX.
  for (const LinkSpec& x : topo->spec().links) {
    for (const LinkSpec& y : topo->spec().links) {
      if (x.nvlink_count > 0 || y.nvlink_count > 0 || x.pcie >= y.pcie) continue;
      EXPECT_LE(topo->bandwidth_mbps(x.a, x.b), topo->bandwidth_mbps(y.a, y.b))
          << ToString(x.pcie) << " pair " << x.a << "-" << x.b << " vs " << ToString(y.pcie);
    }
  }
}

TEST_P(EveryFixture, IslandsPartitionTheGpus) {
  const TopologyPtr topo = LoadFixture(GetParam());
  ASSERT_NE(topo, nullptr);
  unsigned seen = 0;
  for (GpuMask island : topo->nvlink_islands()) {
    EXPECT_EQ(seen & island, 0u);
    seen |= island;
    // Every GPU of an island with 2+ GPUs has an NVLink neighbour inside it.
    if (__builtin_popcount(island) > 1) {
      for (int g = 0; g < topo->gpu_count(); ++g) {
        if ((island >> g) & 1) {
          EXPECT_NE(topo->nvlink_neighbors(g) & island, 0);
        }
      }
    }
  }
  EXPECT_EQ(seen, topo->all_gpus());
}

TEST_P(EveryFixture, CompactDocumentRoundTripKeepsTheFingerprint) {
  const TopologyPtr topo = LoadFixture(GetParam());
  ASSERT_NE(topo, nullptr);
  auto reparsed = ParseTopologyDocument(ToTopologyDocument(topo->spec()));
  ASSERT_TRUE(reparsed) << reparsed.error().message;
  auto rebuilt = BuildTopology(std::move(*reparsed));
  ASSERT_TRUE(rebuilt) << rebuilt.error().message;
  EXPECT_EQ((*rebuilt)->fingerprint(), topo->fingerprint());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EveryFixture, ::testing::ValuesIn(FixtureIds()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string name = param_info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(Topology, Dgx1BandwidthFollowsNvlinkCounts) {
  const TopologyPtr topo = LoadFixture("dgx1-v100");
  ASSERT_NE(topo, nullptr);
  EXPECT_EQ(topo->bandwidth_mbps(0, 3), 40000u);  // NV2, 20 GB/s per gen2 link
  EXPECT_EQ(topo->bandwidth_mbps(0, 1), 20000u);  // NV1
  EXPECT_EQ(topo->bandwidth_mbps(0, 5), 6000u);   // SYS, PCIe gen3
  EXPECT_EQ(topo->nvlink_islands().size(), 1u);
  EXPECT_EQ(topo->numa_groups().size(), 2u);
  EXPECT_EQ(topo->NumaSpan(0x0F), 1);
  EXPECT_EQ(topo->NumaSpan(0x11), 2);
}

TEST(Topology, NvswitchPairsGetTheSwitchRate) {
  EXPECT_EQ(LoadFixture("dgx-h100")->bandwidth_mbps(2, 7), 370000u);
  EXPECT_EQ(LoadFixture("dgx-a100")->bandwidth_mbps(0, 5), 230000u);
  EXPECT_EQ(LoadFixture("dgx2-v100")->bandwidth_mbps(0, 15), 120000u);
}

TEST(Topology, GroupsFollowTheHardware) {
  const TopologyPtr l40s = LoadFixture("pcie-8x-l40s-2socket");
  EXPECT_EQ(l40s->pcie_switch_groups(), (std::vector<GpuMask>{0x03, 0x0C, 0x30, 0xC0}));
  EXPECT_EQ(l40s->socket_groups(), (std::vector<GpuMask>{0x0F, 0xF0}));
  EXPECT_EQ(l40s->nvlink_islands().size(), 8u);
  const TopologyPtr bridges = LoadFixture("pcie-8x-a100-nvlink-bridge-pairs");
  EXPECT_EQ(bridges->nvlink_islands(), (std::vector<GpuMask>{0x05, 0x0A, 0x30, 0xC0}));
  const TopologyPtr a100 = LoadFixture("dgx-a100");
  EXPECT_EQ(a100->numa_groups().size(), 4u);
}

TEST(Topology, GeForceWithoutP2pGetsTheSysRate) {
  const TopologyPtr topo = LoadFixture("pcie-8x-rtx4090-all-sys");
  EXPECT_EQ(topo->bandwidth_mbps(0, 1), 12000u);
}

TEST(Topology, IdenticalDocumentsShareAFingerprintDifferentOnesDoNot) {
  EXPECT_EQ(LoadFixture("dgx-h100")->fingerprint(), LoadFixture("dgx-h100")->fingerprint());
  EXPECT_NE(LoadFixture("dgx-h100")->fingerprint(), LoadFixture("dgx-a100")->fingerprint());
}

TEST(Topology, BandwidthOverridesApplyAndKeepPcieOrder) {
  auto spec =
      ParseTopologyDocument(ReadFileOrDie(linkfit::testing::FixturePath("pcie-8x-l40s-2socket")));
  ASSERT_TRUE(spec);
  BandwidthModel model = BandwidthModel::Defaults();
  ASSERT_TRUE(model.Override("PIX_gen4", 30));
  ASSERT_TRUE(model.Override("NODE_gen4", 50));  // above PIX: PIX is lifted to keep the order
  auto topo = BuildTopology(*spec, model);
  ASSERT_TRUE(topo);
  EXPECT_EQ((*topo)->bandwidth_mbps(0, 2), 50000u);
  EXPECT_EQ((*topo)->bandwidth_mbps(0, 1), 50000u);
  EXPECT_FALSE(model.Override("PIX_gen9", 30));
  EXPECT_FALSE(model.Override("PIX_gen4", -1));
}

TEST(Topology, BandwidthDocumentMatchesTheBuiltInDefaults) {
  auto model = BandwidthModel::FromDocument(
      ReadFileOrDie(linkfit::testing::SourcePath("config/link-bandwidth.json")));
  ASSERT_TRUE(model) << model.error().message;
  EXPECT_EQ(model->values(), BandwidthModel::Defaults().values());
}

// A minimal valid document with `n` GPUs and PHB between all pairs, for mutation tests.
std::string SmallDocument(int n) {
  std::string doc = R"({"gpus":[)";
  for (int i = 0; i < n; ++i) {
    doc += (i ? "," : "") + std::string(R"({"index":)") + std::to_string(i) + "}";
  }
  doc += R"(],"links":[)";
  bool first = true;
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      doc += (first ? "" : ",") + std::string(R"({"a":)") + std::to_string(a) + R"(,"b":)" +
             std::to_string(b) + R"(,"pcie_relation":"PHB"})";
      first = false;
    }
  }
  return doc + "]}";
}

TEST(TopologyDocument, BadInputsGiveErrorsThatNameTheProblem) {
  struct Case {
    std::string text;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"", "not valid JSON"},
      {"[1,2]", "expected a JSON object"},
      {R"({"gpus":[]})", "at least one GPU"},
      {R"({"links":[]})", "$.gpus: missing"},
      {R"({"gpus":[{"index":0},{"index":0}],"links":[]})", "duplicate GPU index 0"},
      {R"({"gpus":[{"index":0},{"index":2}],"links":[{"a":0,"b":2}]})", "GPU 1 is missing"},
      {R"({"gpus":[{"index":"zero"}]})", "$.gpus[0].index: expected an integer"},
      {R"({"gpus":[{"index":5.888e67}]})", "$.gpus[0].index: expected an integer"},
      {R"({"gpus":[{"index":-1e300}]})", "$.gpus[0].index: expected an integer"},
      {R"({"gpus":[{"index":0.5}]})", "$.gpus[0].index: expected an integer"},
      {R"({"gpus":[{"index":0},{"index":1}],"links":[]})", "no entry for GPU pair 0-1"},
      {R"({"gpus":[{"index":0},{"index":1}],"links":[{"a":0,"b":5}]})", "not in gpus[]"},
      {R"({"schema":"other/v9","gpus":[{"index":0}]})", "unsupported"},
      {R"({"gpus":[{"index":0,"pcie_path":["nowhere"]}],"pcie_tree":[{"id":"hb","kind":"host_bridge"}]})",
       "unknown PCIe node"},
      {R"({"gpus":[{"index":0}],"pcie_tree":[{"id":"x","kind":"router"}]})",
       "host_bridge or switch"},
      {R"({"gpus":[{"index":0}],"nvlink_fabric":{"kind":"mesh"}})", "unknown NVLink fabric kind"},
  };
  for (const Case& c : cases) {
    auto spec = ParseTopologyDocument(c.text);
    ASSERT_FALSE(spec) << c.text;
    EXPECT_NE(spec.error().message.find(c.expected), std::string::npos)
        << "input: " << c.text << "\nerror: " << spec.error().message;
  }
}

TEST(TopologyDocument, SeventeenGpusAreRejected) {
  auto spec = ParseTopologyDocument(SmallDocument(17));
  ASSERT_FALSE(spec);
  EXPECT_NE(spec.error().message.find("at most 16"), std::string::npos);
  EXPECT_TRUE(ParseTopologyDocument(SmallDocument(16)));
}

TEST(TopologyDocument, UnknownRelationAndAsymmetricLinksFallBackToSysWithWarnings) {
  const std::string doc = R"({"gpus":[{"index":0},{"index":1},{"index":2}],"links":[
      {"a":0,"b":1,"nvlink_count":2,"pcie_relation":"PIX"},
      {"a":1,"b":0,"nvlink_count":0,"pcie_relation":"PIX"},
      {"a":0,"b":2,"pcie_relation":"WARP"},
      {"a":1,"b":2,"pcie_relation":"PIX"}]})";
  auto spec = ParseTopologyDocument(doc);
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->warnings.size(), 2u);
  auto topo = BuildTopology(*spec);
  ASSERT_TRUE(topo);
  EXPECT_FALSE((*topo)->has_nvlink(0, 1));
  EXPECT_EQ((*topo)->bandwidth_mbps(0, 1), 12000u);  // SYS gen4
  EXPECT_EQ((*topo)->bandwidth_mbps(0, 2), 12000u);
  EXPECT_EQ((*topo)->bandwidth_mbps(1, 2), 24000u);  // PIX gen4
}

TEST(BuildTopology, RejectsSpecsThatAreNotANode) {
  TopologySpec empty;
  EXPECT_FALSE(BuildTopology(empty));
  TopologySpec missing_pair;
  missing_pair.gpus.resize(2);
  missing_pair.gpus[0].index = 0;
  missing_pair.gpus[1].index = 1;
  auto built = BuildTopology(missing_pair);
  ASSERT_FALSE(built);
  EXPECT_NE(built.error().message.find("pair 0-1"), std::string::npos);
}

}  // namespace
}  // namespace linkfit::topology
