#include "linkfit/alloc/nic_choice.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace linkfit::alloc
