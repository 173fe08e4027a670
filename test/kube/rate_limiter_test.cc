// The API client's token bucket on a fake clock: burst, refill, the cap, waits in order, and
// concurrent reservations.

#include "kube/rate_limiter.h"
#include "kube/fake_clock.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace linkfit::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

using linkfit::kube::testing::FakeClock;

TEST(RateLimiterTest, ABurstIsFreeThenTokensComeAtQps) {
  FakeClock clock;
  RateLimiter limiter(10, 3, clock);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limiter.Reserve(), nanoseconds(0)) << i;
  // Each further reservation waits for its own token: 100 ms apart at 10 QPS.
  EXPECT_EQ(limiter.Reserve(), milliseconds(100));
  EXPECT_EQ(limiter.Reserve(), milliseconds(200));
  // 50 ms later half a token came back: the next one is due 250 ms from now.
  clock.Advance(milliseconds(50));
  EXPECT_EQ(limiter.Reserve(), milliseconds(250));
}

TEST(RateLimiterTest, AnIdleBucketFillsUpToItsBurstOnly) {
  FakeClock clock;
  RateLimiter limiter(10, 3, clock);
  for (int i = 0; i < 5; ++i) limiter.Reserve();  // two tokens owed
  clock.Advance(std::chrono::hours(1));           // far more than the burst refills
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limiter.Reserve(), nanoseconds(0)) << i;
  EXPECT_EQ(limiter.Reserve(), milliseconds(100));
}

TEST(RateLimiterTest, WaitSleepsOnTheClockForItsReservation) {
  FakeClock clock;
  RateLimiter limiter(4, 1, clock);
  limiter.Wait();  // the burst token: no sleep
  EXPECT_TRUE(clock.sleeps().empty());
  limiter.Wait();  // the sleep advances the fake clock by exactly the wait
  limiter.Wait();
  EXPECT_EQ(clock.sleeps(), (std::vector<nanoseconds>{milliseconds(250), milliseconds(250)}));
}

TEST(RateLimiterTest, ZeroOrNegativeQpsIsUnlimitedAndABurstBelowOneCountsAsOne) {
  FakeClock clock;
  for (const double qps : {0.0, -1.0}) {
    RateLimiter unlimited(qps, 1, clock);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(unlimited.Reserve(), nanoseconds(0)) << qps;
  }
  RateLimiter no_burst(2, 0, clock);
  EXPECT_EQ(no_burst.Reserve(), nanoseconds(0));
  EXPECT_EQ(no_burst.Reserve(), milliseconds(500));
}

TEST(RateLimiterTest, ConcurrentReservationsEachGetTheirOwnSlot) {
  FakeClock clock;
  RateLimiter limiter(100, 1, clock);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 25;
  std::mutex mutex;
  std::vector<nanoseconds> waits;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        const nanoseconds wait = limiter.Reserve();
        std::lock_guard<std::mutex> lock(mutex);
        waits.push_back(wait);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  // Whatever the interleaving, the clock did not move: the waits are 0, 10 ms, ..., 990 ms.
  std::sort(waits.begin(), waits.end());
  ASSERT_EQ(waits.size(), static_cast<std::size_t>(kThreads * kPerThread));
  for (std::size_t i = 0; i < waits.size(); ++i) {
    EXPECT_EQ(waits[i], milliseconds(10) * static_cast<int>(i)) << i;
  }
}

}  // namespace
}  // namespace linkfit::kube
