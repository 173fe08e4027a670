#pragma once

// WaitFor: polls `condition` every 5 ms until it holds (true) or `timeout` passes (false), for
// tests that watch another thread or process reach a state.

#include <chrono>
#include <functional>
#include <thread>

namespace linkfit::testing {

inline bool WaitFor(const std::function<bool()>& condition,
                    std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace linkfit::testing
