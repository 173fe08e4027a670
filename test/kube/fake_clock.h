#pragma once

// FakeClock: the kube module's Clock for tests. It moves only when told to (Advance) or slept on
// (SleepFor, recorded), and a hook may run on Now() to act at a precise point inside a call.
//
// Thread-safety: every method may be called from any thread.

#include <chrono>
#include <functional>
#include <mutex>
#include <vector>

#include "linkfit/kube/api_client.h"

namespace linkfit::kube::testing {

class FakeClock final : public Clock {
 public:
  std::chrono::steady_clock::time_point Now() const override {
    std::function<void()> hook;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      hook = on_now_;
    }
    if (hook) hook();
    std::lock_guard<std::mutex> lock(mutex_);
    return now_;
  }
  void SleepFor(std::chrono::nanoseconds duration) override {
    std::lock_guard<std::mutex> lock(mutex_);
    now_ += duration;
    sleeps_.push_back(duration);
  }
  void Advance(std::chrono::nanoseconds duration) {
    std::lock_guard<std::mutex> lock(mutex_);
    now_ += duration;
  }
  void OnNow(std::function<void()> hook) {
    std::lock_guard<std::mutex> lock(mutex_);
    on_now_ = std::move(hook);
  }
  std::vector<std::chrono::nanoseconds> sleeps() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return sleeps_;
  }

 private:
  mutable std::mutex mutex_;
  std::chrono::steady_clock::time_point now_{};
  std::vector<std::chrono::nanoseconds> sleeps_;
  std::function<void()> on_now_;
};

}  // namespace linkfit::kube::testing
