#pragma once

// Runs a program (no shell) and returns its standard output: the nvidia-smi fallback's only
// contact with the system.
//
// Thread-safety: safe to call concurrently (each call has its own child and pipes).

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "linkfit/common/result.h"

namespace linkfit::agent {

struct RunLimits {
  std::chrono::milliseconds timeout{30000};  // then the child is killed (SIGKILL)
  std::size_t max_output = 16u << 20;        // bytes of stdout; beyond it, an error
};

// argv[0] is looked up on PATH. An error names the command and says what happened: not found,
// killed after the timeout, output too large, or a non-zero exit status with the first line of
// its standard error.
Result<std::string> RunCommand(const std::vector<std::string>& argv, const RunLimits& limits);

}  // namespace linkfit::agent
