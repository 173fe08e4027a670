#include "kube/rate_limiter.h"

#include <algorithm>
#include <cmath>

#include "linkfit/common/mutex.h"

namespace linkfit::kube {

RateLimiter::RateLimiter(double qps, int burst, Clock& clock)
    : qps_(qps),
      burst_(static_cast<double>(std::max(burst, 1))),
      clock_(clock),
      tokens_(burst_),
      updated_(clock.Now()) {}

std::chrono::nanoseconds RateLimiter::Reserve() {
  if (qps_ <= 0) return std::chrono::nanoseconds(0);
  MutexLock lock(mutex_);
  const auto now = clock_.Now();
  const double elapsed = std::chrono::duration<double>(now - updated_).count();
  tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
  updated_ = now;
  tokens_ -= 1;
  if (tokens_ >= 0) return std::chrono::nanoseconds(0);
  // Rounded to the nearest nanosecond: truncating would turn 0.07 s into 69,999,999 ns.
  return std::chrono::nanoseconds(std::llround(-tokens_ / qps_ * 1e9));
}

void RateLimiter::Wait() {
  const std::chrono::nanoseconds wait = Reserve();
  if (wait.count() > 0) clock_.SleepFor(wait);
}

}  // namespace linkfit::kube
