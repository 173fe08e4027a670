#include "linkfit/alloc/nic_choice.h"

#include <gtest/gtest.h>

#include "testing/fixtures.h"

namespace linkfit::alloc {
namespace {

using topology::PcieRelation;

TEST(NicCloseness, ParsesEveryLevelAndNamesABadOne) {
  for (NicCloseness level :
       {NicCloseness::kPix, NicCloseness::kPxb, NicCloseness::kNuma, NicCloseness::kNode}) {
    auto parsed = ParseNicCloseness(ToString(level));
    ASSERT_TRUE(parsed) << ToString(level);
    EXPECT_EQ(*parsed, level);
  }
  auto bad = ParseNicCloseness("PXB");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("\"PXB\""), std::string::npos) << bad.error().message;
  EXPECT_FALSE(ParseNicCloseness(""));
}

TEST(NicCloseness, LevelsFollowNcclsGdrLevels) {
  EXPECT_TRUE(Within(PcieRelation::kPix, NicCloseness::kPix));
  EXPECT_FALSE(Within(PcieRelation::kPxb, NicCloseness::kPix));
  EXPECT_TRUE(Within(PcieRelation::kPxb, NicCloseness::kPxb));
  EXPECT_FALSE(Within(PcieRelation::kPhb, NicCloseness::kPxb));
  EXPECT_TRUE(Within(PcieRelation::kPhb, NicCloseness::kNuma));
  EXPECT_TRUE(Within(PcieRelation::kNode, NicCloseness::kNuma));
  EXPECT_FALSE(Within(PcieRelation::kSys, NicCloseness::kNuma));
  EXPECT_TRUE(Within(PcieRelation::kSys, NicCloseness::kNode));
}

TEST(NicRequest, CountsOnePerGpuAndDescribesItself) {
  NicRequest request;
  EXPECT_FALSE(request.wanted());
  request.count = NicRequest::kPerGpu;
  EXPECT_TRUE(request.wanted());
  EXPECT_EQ(request.CountFor(4), 4);
  EXPECT_EQ(request.CountFor(0), 1);
  EXPECT_EQ(request.Describe(), "1 NIC per GPU at pxb");
  request.count = 2;
  request.milli = 250;
  request.closeness = NicCloseness::kNuma;
  request.policy = ClosenessPolicy::kRequired;
  EXPECT_EQ(request.CountFor(8), 2);
  EXPECT_EQ(request.Describe(), "2 NICs x 250/1000 at numa, required");
}

// The cascaded PCIe gen 3 machine: one NIC on the host bridge of GPUs 4-7 (PHB to them), SYS to
// GPUs 0-3; never at PXB. Its NIC at `rate_gbps` (0: unknown).
topology::TopologyPtr CascadedWithNicRate(double rate_gbps) {
  return testing::LoadFixtureWithNicRate("pcie-8x-cascaded-switch-2socket", rate_gbps);
}

NicChoice ChooseForGpu(const topology::Topology& topo, int gpu, int milli,
                       ClosenessPolicy policy = ClosenessPolicy::kPreferred) {
  NicRequest request;
  request.count = NicRequest::kPerGpu;
  request.milli = milli;
  request.policy = policy;
  NicAvailability nics;
  nics.free_milli.assign(static_cast<std::size_t>(topo.nic_count()), NicRequest::kWhole);
  const auto gpus = static_cast<topology::GpuMask>(1u << gpu);
  return ChooseNics(topo, gpus, static_cast<topology::GpuMask>(topo.all_gpus() & ~gpus), nics,
                    request);
}

TEST(NicChoice, StagedAtRateWhenTheHostPathCarriesTheShare) {
  const topology::TopologyPtr topo = CascadedWithNicRate(100);
  // link-bandwidth.json: SYS at gen 3 = 6 GB/s through host memory; 100 Gb/s = 12.5 GB/s.
  EXPECT_EQ(topo->staged_mbps(4), 6000u);
  EXPECT_EQ(topo->nic_mbps(0), 12500u);
  const NicChoice quarter = ChooseForGpu(*topo, 4, 250);  // 3.1 GB/s: carried
  ASSERT_TRUE(quarter.fits);
  EXPECT_FALSE(quarter.aligned);
  EXPECT_TRUE(quarter.staged_at_rate);
  const NicChoice far_quarter = ChooseForGpu(*topo, 0, 250);  // SYS: the same host path
  EXPECT_TRUE(far_quarter.staged_at_rate);
  EXPECT_TRUE(ChooseForGpu(*topo, 4, 480).staged_at_rate);   // 6.0 GB/s: just carried
  EXPECT_FALSE(ChooseForGpu(*topo, 4, 500).staged_at_rate);  // 6.25 GB/s: not
  EXPECT_FALSE(ChooseForGpu(*topo, 4, NicRequest::kWhole).staged_at_rate);
  // A required closeness never fits there, staged or not.
  EXPECT_FALSE(ChooseForGpu(*topo, 4, 250, ClosenessPolicy::kRequired).fits);
}

TEST(NicChoice, AnUnknownNicRateIsNeverTakenAsCarried) {
  const topology::TopologyPtr topo = CascadedWithNicRate(0);
  EXPECT_EQ(topo->nic_mbps(0), 0u);
  const NicChoice choice = ChooseForGpu(*topo, 4, 250);
  ASSERT_TRUE(choice.fits);
  EXPECT_FALSE(choice.aligned);
  EXPECT_FALSE(choice.staged_at_rate);
}

TEST(NicChoice, AnAlignedChoiceIsNotCalledStaged) {
  const topology::TopologyPtr topo = testing::LoadFixtureWithNicRate("dgx-h100", 400);
  ASSERT_TRUE(topo);
  const NicChoice choice = ChooseForGpu(*topo, 3, 250);
  EXPECT_TRUE(choice.aligned);
  EXPECT_FALSE(choice.staged_at_rate);
}

TEST(Topology, StagedRateFollowsTheGpusPcieGenerationAndLanes) {
  topology::TopologySpec spec = testing::LoadFixture("dgx-h100")->spec();
  spec.gpus[1].pcie_gen = 4;
  spec.gpus[2].pcie_gen = 5;
  spec.gpus[2].pcie_width = 8;
  spec.gpus[3].pcie_gen = 0;  // unknown: gen 4
  auto topo = topology::BuildTopology(std::move(spec));
  ASSERT_TRUE(topo) << topo.error().message;
  EXPECT_EQ((*topo)->staged_mbps(1), 12000u);
  EXPECT_EQ((*topo)->staged_mbps(2), 10000u);  // 20 GB/s at x16, half the lanes
  EXPECT_EQ((*topo)->staged_mbps(3), 12000u);
  topology::TopologySpec bare = testing::LoadFixture("pcie-8x-rtx4090-all-sys")->spec();
  auto without_nics = topology::BuildTopology(std::move(bare));
  ASSERT_TRUE(without_nics);
  EXPECT_EQ((*without_nics)->staged_mbps(0), 0u);  // nothing derived for a node without NICs
}

// A DGX-1 has four NICs, each at PIX to one GPU pair: at most four GPUs get a NIC of their own,
// one of each pair, and none of a pair whose NIC is taken.
TEST(GpusWithOwnCloseNic, MatchesGpusToNicsOfTheirOwn) {
  const topology::TopologyPtr topo = testing::LoadFixture("dgx1-v100");
  ASSERT_EQ(topo->nic_count(), 4);
  NicMask all;
  for (int n = 0; n < topo->nic_count(); ++n) all.set(static_cast<std::size_t>(n));
  EXPECT_EQ(GpusWithOwnCloseNic(*topo, topo->all_gpus(), all, NicCloseness::kPxb), 4);
  EXPECT_EQ(GpusWithOwnCloseNic(*topo, topo->all_gpus(), all, NicCloseness::kNode),
            4);  // four NICs
  // Every NIC serves a pair: taking the NIC of GPUs 0 and 1 leaves three GPUs a NIC each.
  int nic_of_gpu0 = -1;
  for (int n = 0; n < topo->nic_count(); ++n) {
    if (Within(topo->nic_relation(n, 0), NicCloseness::kPix)) nic_of_gpu0 = n;
  }
  ASSERT_GE(nic_of_gpu0, 0);
  NicMask without = all;
  without.reset(static_cast<std::size_t>(nic_of_gpu0));
  EXPECT_EQ(GpusWithOwnCloseNic(*topo, topo->all_gpus(), without, NicCloseness::kPxb), 3);
  EXPECT_EQ(GpusWithOwnCloseNic(*topo, 0b11, without, NicCloseness::kPxb), 0);
  EXPECT_EQ(GpusWithOwnCloseNic(*topo, 0b11, all, NicCloseness::kPxb), 1);
  EXPECT_EQ(GpusWithOwnCloseNic(*topo, topo->all_gpus(), NicMask{}, NicCloseness::kNode), 0);
}

}  // namespace
}  // namespace linkfit::alloc
