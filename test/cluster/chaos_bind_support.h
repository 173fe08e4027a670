#pragma once

// Pieces of chaos_bind_test.cc: its parameters from the environment, kube-scheduler's
// pending-pod queue with its backoff, and the checks of "exactly-once binding" against the API
// server's pods: the allocation records of the bound pods (no GPU held by two pods, no bound pod
// without a record) and a linkfit's /inspect against those records.
//
// Thread-safety: PodQueue may be used from any thread; a Sampler belongs to one thread (read its
// results once that thread has been joined); the functions are thread-safe.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/fake_api_server.h"

namespace linkfit::cluster::chaos {

using Clock = std::chrono::steady_clock;

double SecondsBetween(Clock::time_point from, Clock::time_point to);

// The environment variable `name` as a positive number, else `fallback`.
int EnvInt(const char* name, int fallback);

// LINKFIT_CHAOS_SEEDS: "7", "1-20" or "1,4,9" (default "1").
std::vector<uint32_t> SeedsFromEnv();

// linkfit's config for every process of a run. `exactly_once_keys`: Bindings with a 3 s deadline
// at the API server, settled 0.5 s after it, and a 6 s binder lease (README "Binding exactly
// once"); without them, the config a binary from before those keys accepts.
std::string LinkfitConfig(bool exactly_once_keys);

// kube-scheduler's active and backoff queues in one: a pod is handed out once its backoff is
// over; a failed attempt puts it back for 0.2 s, doubling up to 2 s (podInitialBackoff and
// podMaxBackoff, scaled down for a test).
class PodQueue {
 public:
  struct Entry {
    std::string name;
    std::chrono::milliseconds backoff{0};
    Clock::time_point ready_at{};
  };

  void Add(std::string name);
  // The oldest pod whose backoff is over, if any; it leaves the queue.
  std::optional<Entry> Take();
  void Backoff(Entry entry);

 private:
  std::mutex mutex_;
  std::deque<Entry> entries_;
};

// node -> pod UID -> the GPUs it holds (a mask).
using Holdings = std::map<std::string, std::map<std::string, uint32_t>>;

// A bound, non-terminal pod and the GPUs its linkfit.io/allocation record names.
struct BoundPod {
  std::string name;
  std::string uid;
  std::string node;
  std::vector<int> gpus;
};

// Returns the pod's record when it is bound (spec.nodeName) and neither Succeeded nor Failed.
// A bound pod that breaks the contract (no record, one that does not parse or names another
// node) gives nothing and says why in *problem.
std::optional<BoundPod> ReadBoundPod(const nlohmann::json& pod, std::string* problem);

// The records of the bound, non-terminal pods.
Holdings ApiHoldings(const std::vector<nlohmann::json>& pods);

// nodes[].gpus[].pods of GET /inspect on 127.0.0.1:port; nothing when it does not answer.
std::optional<Holdings> InspectHoldings(int port);

// The nodes where `cached` and `truth` differ, one "node: /inspect {uid: mask}, API records
// {uid: mask}; " each ("" when equal).
std::string Difference(const Holdings& cached, const Holdings& truth);

// Polls /inspect on `port` from now until it equals the API's records. Returns how long that
// took in seconds, or nothing after `limit` (the last difference goes to *difference).
std::optional<double> CacheEqualAfter(const linkfit::testing::FakeApiServer& fake, int port,
                                      std::chrono::milliseconds limit, std::string* difference);

// Samples the API's pods: no (node, GPU) held by two bound, non-terminal pods, every bound pod
// with its record. A violation is kept once per pair of pods and node, keyed "first|second|node"
// (pods by name), or once per pod without a good record, keyed "record NAME".
class Sampler {
 public:
  explicit Sampler(Clock::time_point start) : start_(start) {}

  void Sample(const std::vector<nlohmann::json>& pods);

  int samples() const { return samples_; }
  int violation_samples() const { return violation_samples_; }
  const std::map<std::string, std::string>& violations() const { return violations_; }
  // Pods ever seen bound (finished ones included).
  std::size_t pods_bound() const { return first_bound_s_.size(); }

 private:
  std::string Describe(const std::string& name) const;

  Clock::time_point start_;
  int samples_ = 0;
  int violation_samples_ = 0;
  std::map<std::string, std::string> violations_;
  std::map<std::string, double> first_bound_s_;  // pod -> when first seen bound
};

}  // namespace linkfit::cluster::chaos
