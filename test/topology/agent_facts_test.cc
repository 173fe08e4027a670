// The node agent's per-GPU facts in the compact topology document: health, MIG mode (current and
// pending) and the MIG instances that exist. They round-trip, stay out of the fingerprint (a sick
// GPU does not split the placement table), and bad values are errors naming the field.

#include <gtest/gtest.h>

#include "linkfit/topology/spec.h"
#include "linkfit/topology/topology.h"
#include "testing/fixtures.h"

namespace linkfit::topology {
namespace {

TopologySpec A100WithAgentFacts() {
  const TopologyPtr topo = linkfit::testing::LoadFixture("dgx-a100");
  EXPECT_NE(topo, nullptr);
  TopologySpec spec = topo->spec();
  for (GpuSpec& gpu : spec.gpus) gpu.mig_mode = MigMode::kDisabled;
  spec.gpus[2].healthy = false;
  spec.gpus[2].health_problem = "Xid 79: GPU has fallen off the bus";
  spec.gpus[4].mig_mode = MigMode::kEnabled;
  spec.gpus[4].mig_instances = {{"3g.20gb", 0, 4, "MIG-4a", 1}, {"1g.5gb", 6, 1, "", -1}};
  spec.gpus[5].mig_mode_pending = MigMode::kEnabled;
  spec.gpus[0].sources = {FigureSource::kNvml, FigureSource::kTable, FigureSource::kAssumed};
  spec.gpus[1].sources.pcie = FigureSource::kNvidiaSmi;
  spec.handoff_mode = "nri-cdi";
  return spec;
}

TEST(AgentFacts, RoundTripThroughTheCompactDocument) {
  const TopologySpec spec = A100WithAgentFacts();
  const std::string text = ToTopologyDocument(spec);
  auto parsed = ParseTopologyDocument(text);
  ASSERT_TRUE(parsed) << parsed.error().message;
  ASSERT_EQ(parsed->gpus.size(), spec.gpus.size());
  for (std::size_t i = 0; i < spec.gpus.size(); ++i) {
    EXPECT_EQ(parsed->gpus[i].healthy, spec.gpus[i].healthy) << i;
    EXPECT_EQ(parsed->gpus[i].health_problem, spec.gpus[i].health_problem) << i;
    EXPECT_EQ(parsed->gpus[i].mig_mode, spec.gpus[i].mig_mode) << i;
    EXPECT_EQ(parsed->gpus[i].mig_mode_pending, spec.gpus[i].mig_mode_pending) << i;
    EXPECT_EQ(parsed->gpus[i].mig_instances, spec.gpus[i].mig_instances) << i;
    EXPECT_EQ(parsed->gpus[i].sources, spec.gpus[i].sources) << i;
  }
  EXPECT_NE(text.find(R"("sources":{"mig":"assumed","nvlink":"nvml","pcie":"table"})"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"("sources":{"pcie":"nvidia-smi"})"), std::string::npos) << text;
  EXPECT_EQ(parsed->handoff_mode, "nri-cdi");
  // Canonical: serialising the parsed document gives the same text (the agent patches only
  // when this text changes).
  EXPECT_EQ(ToTopologyDocument(*parsed), text);
}

TEST(AgentFacts, HealthAndMigStayOutOfTheFingerprint) {
  const TopologyPtr plain = linkfit::testing::LoadFixture("dgx-a100");
  auto built = BuildTopology(A100WithAgentFacts());
  ASSERT_TRUE(built) << built.error().message;
  EXPECT_EQ((*built)->fingerprint(), plain->fingerprint());
}

TEST(AgentFacts, AnUnknownHandoffModeIsAnError) {
  TopologySpec spec = A100WithAgentFacts();
  spec.handoff_mode = "magic";
  auto parsed = ParseTopologyDocument(ToTopologyDocument(spec));
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().message.find("$.handoff_mode: unsupported \"magic\""), std::string::npos)
      << parsed.error().message;
}

TEST(AgentFacts, TheNicHandoffModeRoundTripsAndAnUnknownOneIsAnError) {
  TopologySpec spec = A100WithAgentFacts();
  spec.nic_handoff_mode = "nri-env";
  auto parsed = ParseTopologyDocument(ToTopologyDocument(spec));
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->nic_handoff_mode, "nri-env");
  spec.nic_handoff_mode = "rdma-magic";
  parsed = ParseTopologyDocument(ToTopologyDocument(spec));
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().message.find("$.nic_handoff_mode: unsupported \"rdma-magic\""),
            std::string::npos)
      << parsed.error().message;
}

TEST(AgentFacts, FixturesWithoutThemMeanHealthyAndModeUnknown) {
  const TopologyPtr plain = linkfit::testing::LoadFixture("dgx-h100");
  for (const GpuSpec& gpu : plain->spec().gpus) {
    EXPECT_TRUE(gpu.healthy);
    EXPECT_EQ(gpu.mig_mode, MigMode::kUnknown);
    EXPECT_TRUE(gpu.mig_instances.empty());
  }
  EXPECT_EQ(ToTopologyDocument(plain->spec()).find("healthy"), std::string::npos);
  EXPECT_EQ(ToTopologyDocument(plain->spec()).find("sources"), std::string::npos);
}

struct BadFact {
  const char* json;  // replaces GPU 0's agent facts
  const char* message;
};

class BadAgentFacts : public ::testing::TestWithParam<BadFact> {};

TEST_P(BadAgentFacts, AreErrorsNamingTheField) {
  std::string text = ToTopologyDocument(linkfit::testing::LoadFixture("dgx-a100")->spec());
  const std::string anchor = "{\"index\":0,";
  const std::size_t at = text.find(anchor);
  ASSERT_NE(at, std::string::npos);
  text.insert(at + anchor.size(), std::string(GetParam().json) + ",");
  auto parsed = ParseTopologyDocument(text);
  ASSERT_FALSE(parsed) << GetParam().json;
  EXPECT_NE(parsed.error().message.find(GetParam().message), std::string::npos)
      << parsed.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadAgentFacts,
    ::testing::Values(
        BadFact{R"("healthy":"no")", "gpus[0].healthy"},
        BadFact{R"("mig_mode":"sometimes")", "gpus[0].mig_mode"},
        BadFact{R"("mig_mode_pending":3)", "gpus[0].mig_mode_pending"},
        BadFact{R"("mig_mode":"enabled","mig_instances":{})", "mig_instances: expected an array"},
        BadFact{R"("mig_mode":"enabled","mig_instances":[{"start":0,"size":4}])",
                "mig_instances[0].profile: missing"},
        BadFact{
            R"("mig_mode":"enabled","mig_instances":[{"profile":"3g.20gb","start":6,"size":4}])",
            "do not fit"},
        BadFact{R"("mig_mode":"enabled","mig_instances":[{"profile":"3g.20gb","start":0,"size":4},)"
                R"({"profile":"2g.10gb","start":2,"size":2}])",
                "mig_instances[1]: overlaps"},
        BadFact{
            R"("mig_mode":"disabled","mig_instances":[{"profile":"1g.5gb","start":0,"size":1}])",
            "not \"enabled\""},
        BadFact{R"("sources":"nvml")", "gpus[0].sources: expected an object"},
        BadFact{R"("sources":{"memory":"nvml"})",
                "gpus[0].sources.memory: unknown figure (nvlink, pcie, mig)"},
        BadFact{R"("sources":{"pcie":4})", "gpus[0].sources.pcie: expected a string"},
        BadFact{R"("sources":{"mig":"guess"})",
                "gpus[0].sources.mig: \"guess\" is not a figure source (nvml, nvidia-smi, sysfs, "
                "table, assumed)"},
        BadFact{R"("sources":{"mig":"unstated"})", "gpus[0].sources.mig: \"unstated\" is not"}));

}  // namespace
}  // namespace linkfit::topology
