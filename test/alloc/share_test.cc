#include "linkfit/alloc/share.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace linkfit::alloc {
namespace {

SharedGpuView Fractional(int index, std::vector<int> shares = {}) {
  SharedGpuView view;
  view.index = index;
  view.eligible = true;
  for (int milli : shares) EXPECT_GE(view.state.Take(0, milli), 0);
  return view;
}

SharedGpuView TimeSliced(int index, int replicas, int pods = 0) {
  SharedGpuView view;
  view.index = index;
  view.eligible = true;
  view.replicas = replicas;
  for (int i = 0; i < pods; ++i) EXPECT_GE(view.state.Take(replicas, 0), 0);
  return view;
}

ShareRequest Fraction(int count, int milli) { return {ShareKind::kFraction, count, milli}; }

TEST(ShareTest, StateIsCompact) { EXPECT_LE(sizeof(SharedGpuState), 4U); }

TEST(ShareTest, TimeSliceSlotsFillTheGpuExactly) {
  for (int replicas : {1, 2, 3, 7, 10, 300, 999, 1000}) {
    SharedGpuState state;
    int total = 0;
    for (int k = 0; k < replicas; ++k) {
      const int slot = state.Take(replicas, 0);
      ASSERT_GE(slot, 1000 / replicas) << replicas;
      ASSERT_LE(slot, (1000 + replicas - 1) / replicas) << replicas;
      total += slot;
    }
    EXPECT_EQ(total, 1000) << replicas;
    EXPECT_EQ(state.used_milli(), 1000);
    EXPECT_EQ(state.Take(replicas, 0), -1) << "N slots, no more";
    for (int k = replicas; k > 0; --k) {
      ASSERT_TRUE(state.Release(replicas, 0));
      EXPECT_EQ(state.used_milli(), TimeSliceMilli(replicas, k - 1));
    }
    EXPECT_FALSE(state.Release(replicas, 0));
    EXPECT_EQ(state, SharedGpuState());
  }
  EXPECT_EQ(TimeSliceMilli(3, 1), 333);
  EXPECT_EQ(TimeSliceMilli(3, 2), 666);
  EXPECT_EQ(TimeSliceMilli(3, 3), 1000);
  EXPECT_EQ(TimeSliceMilli(0, 0), -1);
  EXPECT_EQ(TimeSliceMilli(3, 4), -1);
}

TEST(ShareTest, FractionalTakeAndRelease) {
  SharedGpuState state;
  EXPECT_EQ(state.Take(0, 600), 600);
  EXPECT_EQ(state.Take(0, 500), -1);
  EXPECT_EQ(state.Take(0, 400), 400);
  EXPECT_EQ(state.free_milli(), 0);
  EXPECT_EQ(state.Take(0, 0), -1);
  EXPECT_EQ(state.Take(0, 1001), -1);
  EXPECT_FALSE(state.Release(0, 2000));
  EXPECT_TRUE(state.Release(0, 600));
  EXPECT_FALSE(state.Release(0, 300));  // the last pod must release all that is used
  EXPECT_TRUE(state.Release(0, 400));
  EXPECT_EQ(state, SharedGpuState());
}

TEST(ShareTest, PackingKeepsWholeGpusFree) {
  const std::vector<SharedGpuView> gpus = {Fractional(0), Fractional(1, {500}),
                                           Fractional(2, {700}), Fractional(3)};
  auto decision = ChooseShares(gpus, Fraction(1, 300), SharePolicy::kPack);
  ASSERT_TRUE(decision.has_value()) << decision.error().message;
  ASSERT_TRUE(decision->fits);
  EXPECT_EQ(decision->gpus, (std::vector<int>{2}));  // 700 + 300 fills GPU 2 exactly
  EXPECT_EQ(decision->milli, (std::vector<int>{300}));

  decision = ChooseShares(gpus, Fraction(1, 400), SharePolicy::kPack);
  ASSERT_TRUE(decision.has_value());
  EXPECT_EQ(decision->gpus, (std::vector<int>{1}));  // GPU 2 has only 300 free

  decision = ChooseShares(gpus, Fraction(2, 250), SharePolicy::kPack);
  ASSERT_TRUE(decision.has_value());
  EXPECT_EQ(decision->gpus, (std::vector<int>{2, 1}));  // GPUs 0 and 3 stay whole
}

TEST(ShareTest, SharesGoToDistinctGpus) {
  // GPU 0 alone has room for 3 x 300 but a count-3 request needs 3 GPUs.
  const std::vector<SharedGpuView> gpus = {Fractional(0), Fractional(1, {800}),
                                           Fractional(2, {500})};
  auto decision = ChooseShares(gpus, Fraction(3, 300), SharePolicy::kPack);
  ASSERT_TRUE(decision.has_value());
  EXPECT_FALSE(decision->fits);
  EXPECT_EQ(decision->reason, "needs 3 GPUs with 300 free milli each; only GPUs 0 and 2 have");
  decision = ChooseShares(gpus, Fraction(2, 300), SharePolicy::kPack);
  ASSERT_TRUE(decision.has_value());
  ASSERT_TRUE(decision->fits);
  EXPECT_EQ(decision->gpus, (std::vector<int>{2, 0}));
}

TEST(ShareTest, SpreadPrefersTheMostFree) {
  const std::vector<SharedGpuView> gpus = {Fractional(0, {100}), Fractional(1, {500}),
                                           Fractional(2), Fractional(3)};
  auto decision = ChooseShares(gpus, Fraction(3, 200), SharePolicy::kSpread);
  ASSERT_TRUE(decision.has_value());
  ASSERT_TRUE(decision->fits);
  EXPECT_EQ(decision->gpus, (std::vector<int>{2, 3, 0}));  // ties by lowest index
}

TEST(ShareTest, IneligibleGpusAreSkipped) {
  SharedGpuView whole = Fractional(0);
  whole.eligible = false;  // held whole, or in MIG mode
  const std::vector<SharedGpuView> gpus = {whole, Fractional(1, {400}), TimeSliced(2, 4)};
  auto decision = ChooseShares(gpus, Fraction(2, 600), SharePolicy::kPack);
  ASSERT_TRUE(decision.has_value());
  EXPECT_FALSE(decision->fits);
  EXPECT_EQ(decision->reason, "needs 2 GPUs with 600 free milli each; only GPU 1 has");
  decision = ChooseShares(gpus, Fraction(1, 700), SharePolicy::kPack);
  ASSERT_TRUE(decision.has_value());
  EXPECT_FALSE(decision->fits);
  EXPECT_EQ(decision->reason, "needs 1 GPU with 700 free milli; none has");
}

TEST(ShareTest, TimeSlicedRequests) {
  const std::vector<SharedGpuView> gpus = {TimeSliced(0, 4, 1), TimeSliced(1, 4, 4),
                                           TimeSliced(2, 3, 0), Fractional(3)};
  const ShareRequest one_slot{ShareKind::kTimeSlice, 1, 0};
  auto decision = ChooseShares(gpus, one_slot, SharePolicy::kPack);
  ASSERT_TRUE(decision.has_value()) << decision.error().message;
  ASSERT_TRUE(decision->fits);
  EXPECT_EQ(decision->gpus, (std::vector<int>{0}));  // 500 free after vs 667
  EXPECT_EQ(decision->milli, (std::vector<int>{250}));

  const ShareRequest three_slots{ShareKind::kTimeSlice, 3, 0};
  decision = ChooseShares(gpus, three_slots, SharePolicy::kPack);
  ASSERT_TRUE(decision.has_value());
  EXPECT_FALSE(decision->fits);
  EXPECT_EQ(decision->reason,
            "needs 3 GPUs with a free time-slice slot each; only GPUs 0 and 2 have");

  const std::vector<SharedGpuView> fractional_only = {Fractional(0)};
  const ShareRequest slot{ShareKind::kTimeSlice, 1, 0};
  decision = ChooseShares(fractional_only, slot, SharePolicy::kPack);
  ASSERT_TRUE(decision.has_value());
  EXPECT_FALSE(decision->fits);
  EXPECT_NE(decision->reason.find("no eligible GPU is time-sliced"), std::string::npos);
}

TEST(ShareTest, BadInputsAreErrors) {
  const std::vector<SharedGpuView> gpus = {Fractional(0), Fractional(1)};
  EXPECT_FALSE(ChooseShares(gpus, Fraction(1, 0), SharePolicy::kPack).has_value());
  EXPECT_FALSE(ChooseShares(gpus, Fraction(1, 1001), SharePolicy::kPack).has_value());
  EXPECT_FALSE(ChooseShares(gpus, Fraction(1, -5), SharePolicy::kPack).has_value());
  EXPECT_FALSE(ChooseShares(gpus, Fraction(0, 100), SharePolicy::kPack).has_value());
  auto too_many = ChooseShares(gpus, Fraction(3, 100), SharePolicy::kPack);
  ASSERT_FALSE(too_many.has_value());
  EXPECT_NE(too_many.error().message.find("share count 3 is outside 1..2"), std::string::npos)
      << too_many.error().message;
  EXPECT_FALSE(ChooseShares({}, Fraction(1, 100), SharePolicy::kPack).has_value());

  std::vector<SharedGpuView> duplicate = {Fractional(0), Fractional(0)};
  EXPECT_FALSE(ChooseShares(duplicate, Fraction(1, 100), SharePolicy::kPack).has_value());
  std::vector<SharedGpuView> bad_replicas = {TimeSliced(0, 2)};
  bad_replicas[0].replicas = 1001;
  EXPECT_FALSE(ChooseShares(bad_replicas, Fraction(1, 100), SharePolicy::kPack).has_value());
  // A state that does not match the GPU's replicas is corruption, reported loudly.
  std::vector<SharedGpuView> mismatch = {Fractional(0, {300})};
  mismatch[0].replicas = 4;
  EXPECT_FALSE(ChooseShares(mismatch, Fraction(1, 100), SharePolicy::kPack).has_value());
  // A full request is still valid input.
  auto exact = ChooseShares(gpus, Fraction(2, 1000), SharePolicy::kSpread);
  ASSERT_TRUE(exact.has_value());
  EXPECT_TRUE(exact->fits);
}

}  // namespace
}  // namespace linkfit::alloc
