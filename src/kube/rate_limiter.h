#pragma once

// RateLimiter: the API client's token bucket (client-go's flowcontrol.NewTokenBucketRateLimiter):
// `burst` tokens at most, refilled at `qps` per second; Wait() takes one, sleeping on the Clock
// until it is there. qps <= 0 means unlimited.
//
// Thread-safety: Wait() may be called concurrently; waiters are served in arrival order of their
// reservations (each reserves its slot under the lock, then sleeps outside it).

#include <chrono>

#include "linkfit/common/mutex.h"
#include "linkfit/kube/api_client.h"

namespace linkfit::kube {

class RateLimiter {
 public:
  RateLimiter(double qps, int burst, Clock& clock);
  void Wait();
  // Reserves a token and returns how long the caller must wait for it (0 when one is there).
  std::chrono::nanoseconds Reserve();

 private:
  const double qps_;
  const double burst_;
  Clock& clock_;
  Mutex mutex_;
  double tokens_ LINKFIT_GUARDED_BY(mutex_);  // may go negative
  std::chrono::steady_clock::time_point updated_ LINKFIT_GUARDED_BY(mutex_);
};

}  // namespace linkfit::kube
