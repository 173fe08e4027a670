#include "linkfit/common/check.h"

#include <gtest/gtest.h>

#include <string>

namespace linkfit {
namespace {

int EvaluationsOf(int& counter) { return ++counter; }

TEST(CheckTest, AHeldInvariantPassesAndEvaluatesItsConditionOnce) {
  int evaluations = 0;
  LINKFIT_CHECK(EvaluationsOf(evaluations) == 1, "evaluated once");
  EXPECT_EQ(evaluations, 1);
}

TEST(CheckDeathTest, ABrokenInvariantAbortsNamingTheConditionAndTheMessage) {
  const int held = 3;
  EXPECT_DEATH(LINKFIT_CHECK(held == 4, "shares of GPU " + std::to_string(held)),
               "CHECK failed at .*check_test.cc:[0-9]+: held == 4: shares of GPU 3");
}

#ifdef NDEBUG
TEST(CheckTest, ADebugCheckIsNotEvaluatedInReleaseBuilds) {
  int evaluations = 0;
  LINKFIT_DCHECK(EvaluationsOf(evaluations) == 5, "not evaluated");
  EXPECT_EQ(evaluations, 0);
}
#else
TEST(CheckDeathTest, ADebugCheckAbortsInDebugBuilds) {
  EXPECT_DEATH(LINKFIT_DCHECK(1 + 1 == 3, "arithmetic"), "1 \\+ 1 == 3: arithmetic");
}
#endif

}  // namespace
}  // namespace linkfit
