#pragma once

// FakeKubelet: the kubelet's PodResources gRPC service (v1.PodResourcesLister/List) on a unix
// socket in a temporary directory, answering from a list of pods the test sets, with an
// injectable delay and failure status. The agent's real client talks to it.
//
// Thread-safety: every method may be called from any thread while it serves.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "linkfit/agent/pod_resources.h"
#include "linkfit/common/result.h"

namespace linkfit::testing {

class FakeKubelet {
 public:
  virtual ~FakeKubelet() = default;
  virtual const std::string& socket_path() const = 0;
  virtual void SetPods(std::vector<agent::PodDeviceUse> pods) = 0;
  virtual void SetDelay(std::chrono::milliseconds delay) = 0;
  // A non-zero gRPC status code answers every List with it (0 restores answers).
  virtual void SetFailure(int grpc_code, std::string message) = 0;
  virtual int lists() const = 0;
};

Result<std::unique_ptr<FakeKubelet>> StartFakeKubelet();

}  // namespace linkfit::testing
