// The whole-machines experiment's oracle (bench/harness/whole_machines_oracle.h): cases it must
// call placeable, cases it must call impossible, and the derived linkfit config.

#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "harness/experiment.h"
#include "harness/whole_machines_cases.h"
#include "harness/whole_machines_oracle.h"

namespace linkfit::bench {
namespace {

const std::string kRoot = LINKFIT_SOURCE_DIR;

class OracleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = LoadMachineCatalog(kRoot);
    ASSERT_TRUE(catalog) << catalog.error().message;
    catalog_ = std::move(*catalog);
    cluster_.AddMigProfiles("a100-40gb", catalog_.a100_profiles);
  }

  int Add(const std::string& kind, GpuMask mig = 0) {
    const MachineCatalog::Kind& k = catalog_.kinds.at(kind);
    SimNode node;
    node.name = kind + "-" + std::to_string(cluster_.nodes().size());
    node.gpu_model = k.model;
    node.cpu_capacity = 128000;
    node.memory_capacity = 1024 * 1024;
    node.gpu_count = k.topology->gpu_count();
    node.topology = k.topology;
    node.mig_gpus = mig;
    cluster_.AddNode(std::move(node));
    return static_cast<int>(cluster_.nodes().size()) - 1;
  }

  void Hold(int node, GpuMask gpus) {
    PodSpec pod = Whole(std::popcount(static_cast<unsigned>(gpus)));
    Placement at;
    at.node = node;
    at.gpus = gpus;
    at.gpu_milli = kWholeGpuMilli;
    cluster_.Preload(pod, at);
  }

  static PodSpec Whole(int gpus, bool nvlink_required = false) {
    PodSpec pod;
    pod.name = "p" + std::to_string(serial_++);
    pod.demand = GpuDemand::kWhole;
    pod.gpu_count = gpus;
    pod.gpu_milli = kWholeGpuMilli;
    pod.cpu_milli = 4000LL * gpus;
    pod.memory_mib = 32768LL * gpus;
    if (nvlink_required) {
      pod.closeness = "nvlink";
      pod.closeness_required = true;
    }
    return pod;
  }

  static PodSpec Mig(const std::string& profile) {
    PodSpec pod;
    pod.name = "m" + std::to_string(serial_++);
    pod.demand = GpuDemand::kMig;
    pod.gpu_count = 1;
    pod.mig_profile = profile;
    pod.cpu_milli = 2000;
    pod.memory_mib = 16384;
    return pod;
  }

  bool Placeable(const std::vector<PodSpec>& pods) {
    auto answer = CanPlaceAll(cluster_, pods);
    EXPECT_TRUE(answer) << answer.error().message;
    return answer && *answer;
  }

  static inline int serial_ = 0;
  MachineCatalog catalog_;
  Cluster cluster_;
};

TEST_F(OracleTest, SmallPodsOnThePartlyUsedMachineLeaveTheIdleOneWhole) {
  // The demo's story: a DGX A100 with GPUs 0-3 in MIG mode and an idle DGX A100; four 1-GPU
  // pods fit GPUs 4-7 of the first, so the 8-GPU NVLink pod keeps the second.
  Add("a100", 0x0f);
  Add("a100");
  EXPECT_TRUE(Placeable({Whole(8, true), Whole(2), Whole(1), Whole(1)}));
  // With a 7g on a free MIG GPU and smaller instances on the others.
  EXPECT_TRUE(Placeable({Whole(8, true), Whole(2), Mig("7g.40gb"), Mig("3g.20gb"), Mig("3g.20gb"),
                         Mig("2g.10gb"), Mig("1g.5gb")}));
}

TEST_F(OracleTest, ImpossibleWhenOnlyBreakingTheIdleMachineServesASmallPod) {
  Add("a100", 0x0f);
  Add("a100");
  // Five GPUs of small pods: one must go to the idle machine, which the 8-GPU pod needs.
  EXPECT_FALSE(Placeable({Whole(8, true), Whole(2), Whole(2), Whole(1)}));
  // Two 2-GPU pods need two pairs: three free GPUs on one machine hold one pair.
  Hold(0, 0x10);
  EXPECT_FALSE(Placeable({Whole(8, true), Whole(2), Whole(2)}));
  EXPECT_TRUE(Placeable({Whole(8, true), Whole(2), Whole(1)}));
}

TEST_F(OracleTest, NvlinkRequiredSetsFollowTheTopology) {
  // A 4-GPU workstation has NVLink pairs only: no 4-GPU all-NVLink ring; a DGX-1 V100 has one.
  Add("ws");
  EXPECT_FALSE(Placeable({Whole(4, true)}));
  EXPECT_TRUE(Placeable({Whole(4)}));
  EXPECT_TRUE(Placeable({Whole(2, true), Whole(2, true)}));
  const int v100 = Add("v100");
  EXPECT_TRUE(Placeable({Whole(8, true)}));
  Hold(v100, 0x01);
  EXPECT_TRUE(Placeable({Whole(4, true), Whole(2, true), Whole(1)}));
  EXPECT_FALSE(Placeable({Whole(8, true)}));
}

TEST_F(OracleTest, MigInstancesNeedLegalStartsAndComputeSlices) {
  Add("a100", 0x01);                                                         // one MIG GPU
  EXPECT_TRUE(Placeable({Mig("3g.20gb"), Mig("3g.20gb")}));                  // starts 0 and 4
  EXPECT_FALSE(Placeable({Mig("4g.20gb"), Mig("4g.20gb")}));                 // 4g starts at 0 only
  EXPECT_FALSE(Placeable({Mig("3g.20gb"), Mig("3g.20gb"), Mig("1g.5gb")}));  // 8 slices used
  EXPECT_FALSE(Placeable({Mig("7g.40gb"), Mig("1g.5gb")}));
  EXPECT_FALSE(Placeable({Mig("1g.5gb"), Mig("1g.5gb"), Mig("1g.5gb"), Mig("1g.5gb"), Mig("1g.5gb"),
                          Mig("1g.5gb"), Mig("1g.5gb"), Mig("1g.5gb")}));  // 7 SMs
}

TEST_F(OracleTest, MostBigPodsCountsTheLargestSetBesideTheSmallOnes) {
  Add("h100");
  Hold(0, 0x01);
  Add("h100");
  auto most =
      MostBigPodsPlaceable(cluster_, {Whole(2), Whole(2)}, {Whole(8, true), Whole(4, true)});
  ASSERT_TRUE(most) << most.error().message;
  EXPECT_EQ(*most, 1);  // 7 - 4 = 3 GPUs left on the used one: the 4 and the 8 both need the idle
  auto small_only =
      MostBigPodsPlaceable(cluster_, {Whole(2), Whole(2), Whole(1)}, {Whole(8, true)});
  ASSERT_TRUE(small_only);
  EXPECT_EQ(*small_only, 1);
  auto none = MostBigPodsPlaceable(cluster_, std::vector<PodSpec>(9, Whole(2)), {});
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, -1);  // 18 GPUs of small pods on 15 free
}

TEST_F(OracleTest, RefusesPodsOutsideItsScope) {
  Add("a100");
  PodSpec share = Whole(1);
  share.demand = GpuDemand::kShare;
  share.gpu_milli = 500;
  EXPECT_FALSE(CanPlaceAll(cluster_, {share}));
  PodSpec cpu_heavy = Whole(1);
  cpu_heavy.cpu_milli = 64000;  // 8 of them would need 512 cores
  EXPECT_FALSE(CanPlaceAll(cluster_, {cpu_heavy}));
}

TEST_F(OracleTest, EveryDrawnCaseIsWithinScopeAndMostArePlaceable) {
  for (const WholeMachinesFamily family : kWholeMachinesFamilies) {
    std::mt19937_64 rng(7);
    int placeable = 0;
    for (int c = 0; c < 20; ++c) {
      auto drawn = DrawCase(family, catalog_, rng);
      ASSERT_TRUE(drawn) << FamilyName(family) << ": " << drawn.error().message;
      EXPECT_GE(drawn->oracle_big, 0) << FamilyName(family);
      if (drawn->oracle_big == static_cast<int>(drawn->big.size())) ++placeable;
    }
    EXPECT_GE(placeable, 10) << FamilyName(family);
  }
}

TEST(DeriveLinkfitConfig, SetsWholeMachinesAndResolvesTheMigFolder) {
  auto derived = DeriveLinkfitConfig(
      "listen: \"127.0.0.1:0\"\nmig_profiles_dir: ../../config/mig\npolicy:\n  score_range: "
      "140\n  whole_machines: keep\n",
      "/repo/bench/config", {{"whole_machines", "off"}, {"nic_alignment", "rate"}}, "/default/mig");
  ASSERT_TRUE(derived) << derived.error().message;
  EXPECT_NE(derived->find("mig_profiles_dir: \"/repo/config/mig\""), std::string::npos) << *derived;
  EXPECT_NE(derived->find("policy:\n  whole_machines: off\n  nic_alignment: rate\n  score_range: "
                          "140\n"),
            std::string::npos)
      << *derived;
  EXPECT_EQ(derived->find("keep"), std::string::npos) << *derived;
  auto bare = DeriveLinkfitConfig("listen: \"127.0.0.1:0\"\n", ".", {{"whole_machines", "ring"}},
                                  "/default/mig");
  ASSERT_TRUE(bare);
  EXPECT_NE(bare->find("mig_profiles_dir: \"/default/mig\""), std::string::npos);
  EXPECT_NE(bare->find("policy:\n  whole_machines: ring\n"), std::string::npos);
  EXPECT_FALSE(
      DeriveLinkfitConfig("policy: {score_range: 140}\n", ".", {{"whole_machines", "ring"}}, "/m"));
}

}  // namespace
}  // namespace linkfit::bench
