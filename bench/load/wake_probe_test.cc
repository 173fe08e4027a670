// The wake-up probe: where its step is found (and where a rise is not one), a real probe over
// loopback, and the report's words.

#include "wake_probe.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace linkfit::load {
namespace {

// The figures of this project's VM on 27 Nov 2026 (a 4-byte round trip less its delay, µs).
std::vector<WakeCost> MeasuredOnTheVm() {
  return {{0, 27.2, 18.5},   {100, 27.7, 19.0}, {130, 27.8, 18.9}, {140, 27.6, 19.1},
          {150, 88.7, 19.0}, {160, 89.3, 19.0}, {200, 89.1, 19.2}, {400, 92.3, 19.5}};
}

TEST(FindWakeStep, FindsTheFirstDelayThatWaitingInReadPaysForAndHowMuch) {
  const auto step = FindWakeStep(MeasuredOnTheVm());
  ASSERT_TRUE(step.has_value());
  EXPECT_EQ(step->from_delay_us, 150);
  // The median rise over 150, 160, 200 and 400 µs: (61.5, 62.1, 61.9, 65.1) -> 62.1 (upper).
  EXPECT_NEAR(step->extra_us, 62.1, 1e-9);
}

TEST(FindWakeStep, NoStepWhereBlockingCostsTheSameAtEveryDelay) {
  EXPECT_FALSE(FindWakeStep({{0, 9.0, 8.0}, {150, 9.5, 8.1}, {400, 12.0, 8.3}}).has_value());
}

TEST(FindWakeStep, ARiseThatPollingPaysTooIsTheLoopbacksNotTheWakeUps) {
  // Both modes 40 µs dearer from 200 µs on (e.g. another process took the CPU): not a step of
  // the client's waiting.
  EXPECT_FALSE(FindWakeStep({{0, 27.0, 19.0}, {200, 67.0, 59.0}, {400, 68.0, 60.0}}).has_value());
}

TEST(FindWakeStep, NeedsTwoDelaysToCompare) {
  EXPECT_FALSE(FindWakeStep({}).has_value());
  EXPECT_FALSE(FindWakeStep({{0, 27.0, 19.0}}).has_value());
}

TEST(ProbeWakeCost, MeasuresEveryDelayOverLoopbackInBothModes) {
  const std::vector<int> delays = {0, 50, 300};
  const auto costs = ProbeWakeCost(-1, -1, 5, delays);
  ASSERT_TRUE(costs.has_value()) << costs.error().message;
  ASSERT_EQ(costs->size(), delays.size());
  for (std::size_t i = 0; i < delays.size(); ++i) {
    EXPECT_EQ((*costs)[i].delay_us, delays[i]);
    // A reply never comes before its delay has passed.
    EXPECT_GE((*costs)[i].block_extra_us, 0.0);
    EXPECT_GE((*costs)[i].spin_extra_us, 0.0);
  }
}

TEST(ProbeWakeCost, RefusesToMeasureWithoutSamples) {
  const auto costs = ProbeWakeCost(-1, -1, 0, {0, 100});
  ASSERT_FALSE(costs.has_value());
  EXPECT_NE(costs.error().message.find("at least one sample"), std::string::npos);
}

TEST(WakeReport, SaysWhereTheStepIsAndListsEveryDelay) {
  const std::string report = WakeReport(MeasuredOnTheVm(), 200);
  EXPECT_NE(report.find("costs 62.1 µs more once the reply is 150 µs or more away"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("median of 200"), std::string::npos);
  EXPECT_NE(report.find("| 400 | 92.3 | 19.5 |"), std::string::npos);
  const std::string flat = WakeReport({{0, 9.0, 8.0}, {400, 9.5, 8.1}}, 10);
  EXPECT_NE(flat.find("No step"), std::string::npos) << flat;
}

}  // namespace
}  // namespace linkfit::load
