#pragma once

// FakeKubelet: the kubelet's PodResources API (v1.PodResourcesLister/List, gRPC) served on a unix
// socket in a fresh temporary directory, so that the node agent's real client is tested over the
// real transport and not a mock.
//
//   Answers  the pods last given to SetPods, in that order. Like the real kubelet it also sends
//            fields linkfit's proto subset leaves out (each container's cpu_ids, each device
//            list's NUMA topology); the client must skip them.
//   Faults   a delay before every answer (cut short when the server stops), and a failure status
//            (any gRPC code with a message) instead of an answer.
//   Records  how many List calls arrived.
//
// Thread-safety: every method may be called from any thread while it serves. The destructor
// stops the server (waking delayed calls, which then answer CANCELLED) and removes the socket
// and its directory.

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
  // The socket's file path (without "unix://").
  virtual const std::string& socket_path() const = 0;
  virtual void SetPods(std::vector<agent::PodDeviceUse> pods) = 0;
  // Every List waits this long before answering (zero: at once).
  virtual void SetDelay(std::chrono::milliseconds delay) = 0;
  // A non-zero gRPC status code (grpc::StatusCode's value) answers every List with it and
  // `message`; 0 restores answers.
  virtual void SetFailure(int grpc_code, std::string message) = 0;
  // List calls received so far.
  virtual int lists() const = 0;
};

// Creates the directory and starts serving; an error says what failed.
Result<std::unique_ptr<FakeKubelet>> StartFakeKubelet();

}  // namespace linkfit::testing
