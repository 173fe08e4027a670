// Concurrency: many threads bind pods with random whole-GPU, share and MIG requests onto a few
// nodes (directly through ClusterCache::Assume with FitOnNode as the placer, and through
// Extender::Filter + Bind), forgetting and removing at random, while a reader checks every
// snapshot it sees. No GPU may ever be held by two pods, shares never exceed 1000, and per-GPU
// pod counts match the pod lists. Bounded iteration counts, no sleeps; run it under the tsan
// preset too.

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "linkfit/extender/extender.h"
#include "linkfit/extender/node_fit.h"
#include "linkfit/state/cluster_cache.h"
#include "linkfit/wire/verb_calls.h"
#include "testing/cluster.h"

namespace linkfit::state {
namespace {

using extender::GpuRequest;
using testing::Mask;

constexpr int kWriters = 8;
constexpr int kIterations = 250;
const std::vector<std::string> kNodes = {"a100-mig", "dgx1", "l40s"};

void AddNodes(ClusterCache& cache) {
  cache.UpsertNode(testing::MakeNodeInfo("a100-mig", "dgx-a100", Mask({0, 1, 2, 3})));
  cache.UpsertNode(testing::MakeNodeInfo("dgx1", "dgx1-v100"));
  cache.UpsertNode(testing::MakeNodeInfo("l40s", "pcie-8x-l40s-2socket"));
}

GpuRequest RandomRequest(std::mt19937& rng) {
  GpuRequest request;
  const auto pick = [&rng](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  switch (pick(3)) {
    case 0:
      request.kind = GpuRequest::Kind::kWhole;
      request.count = 1 + pick(4);
      request.closeness = pick(2) == 0 ? alloc::Closeness::kNvlink : alloc::Closeness::kNode;
      request.policy =
          pick(2) == 0 ? alloc::ClosenessPolicy::kRequired : alloc::ClosenessPolicy::kPreferred;
      break;
    case 1: {
      static const int kMilli[] = {100, 250, 500, 700, 1000};
      request.kind = GpuRequest::Kind::kShared;
      request.count = 1 + pick(2);
      request.share_milli = kMilli[pick(5)];
      break;
    }
    default: {
      static const char* kProfiles[] = {"1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"};
      request.kind = GpuRequest::Kind::kMig;
      request.count = 1 + pick(2);
      request.mig_profile = kProfiles[pick(4)];
      break;
    }
  }
  return request;
}

// Checks every node of a snapshot; returns the first violation, or "".
std::string CheckSnapshot(const Snapshot& snapshot) {
  for (std::size_t position = 0; position < snapshot.size(); ++position) {
    const NodeState& node = *snapshot.NodeAt(position);
    if (std::string problem = testing::CheckConsistent(node); !problem.empty()) {
      return node.name() + ": " + problem;
    }
    // What the verbs read by position instead of the node must be the node's.
    const std::uint32_t kind = snapshot.KindAt(position);
    if (kind >= snapshot.kinds().size() || !(snapshot.kinds()[kind] == node.machine_kind())) {
      return node.name() + ": machine kind by position differs";
    }
  }
  return "";
}

// Reads snapshots until `done` (at most `limit` times), checking each one.
struct SnapshotReader {
  const ClusterCache& cache;
  const std::atomic<bool>& done;
  std::string problem;
  int snapshots = 0;
  void Run(int limit) {
    std::uint64_t generation = 0;
    for (int i = 0; i < limit && !done.load(); ++i) {
      const SnapshotPtr snapshot = cache.Snapshot();
      if (snapshot->generation() < generation) {
        problem = "snapshot generation went back";
        return;
      }
      generation = snapshot->generation();
      problem = CheckSnapshot(*snapshot);
      if (!problem.empty()) return;
      ++snapshots;
    }
  }
};

TEST(ClusterCacheStressTest, ConcurrentAssumesNeverGiveADeviceTwice) {
  ClusterCache cache;
  AddNodes(cache);
  std::atomic<bool> done{false};
  SnapshotReader reader{cache, done, "", 0};
  std::thread reader_thread([&reader] { reader.Run(1000000); });

  std::vector<std::vector<std::string>> live(kWriters);
  std::vector<std::string> errors(kWriters);
  std::vector<std::thread> writers;
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(1234 + t));
      std::vector<std::string>& mine = live[static_cast<std::size_t>(t)];
      for (int i = 0; i < kIterations; ++i) {
        const GpuRequest request = RandomRequest(rng);
        const std::string uid = "t" + std::to_string(t) + "-" + std::to_string(i);
        const std::string& node = kNodes[rng() % kNodes.size()];
        auto assumed = cache.Assume(uid, node, [&](const NodeState& state) -> Result<Assignment> {
          extender::NodeFit fit = extender::FitOnNode(request, state, {});
          if (!fit.fits) return MakeError(fit.reason);
          return std::move(fit.assignment);
        });
        if (assumed) {
          if (assumed->already || assumed->assignment.node != node) {
            errors[static_cast<std::size_t>(t)] = uid + ": unexpected assume result";
            return;
          }
          switch (rng() % 5) {
            case 0:
              cache.Forget(uid);
              break;
            case 1: {
              // A repeated bind is the same allocation.
              auto again = cache.Assume(uid, node, [](const NodeState&) -> Result<Assignment> {
                return MakeError("placer must not run for a known pod");
              });
              if (!again || !again->already || !(again->assignment == assumed->assignment)) {
                errors[static_cast<std::size_t>(t)] = uid + ": repeated assume was not idempotent";
                return;
              }
              cache.Confirm(uid);
              mine.push_back(uid);
              break;
            }
            default:
              cache.Confirm(uid);
              mine.push_back(uid);
          }
        }
        if (!mine.empty() && rng() % 3 == 0) {
          const std::size_t victim = rng() % mine.size();
          if (!cache.Remove(mine[victim])) {
            errors[static_cast<std::size_t>(t)] = mine[victim] + ": Remove of a bound pod failed";
            return;
          }
          mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(victim));
        }
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  done.store(true);
  reader_thread.join();

  for (const std::string& error : errors) EXPECT_EQ(error, "");
  EXPECT_EQ(reader.problem, "");
  EXPECT_GT(reader.snapshots, 0);
  const SnapshotPtr final_snapshot = cache.Snapshot();
  EXPECT_EQ(CheckSnapshot(*final_snapshot), "");
  std::size_t total = 0;
  for (const auto& mine : live) {
    total += mine.size();
    for (const std::string& uid : mine) {
      EXPECT_EQ(cache.Phase(uid), PodPhase::kAdded) << uid;
      EXPECT_TRUE(cache.Find(uid).has_value()) << uid;
    }
  }
  std::size_t listed = 0;
  for (const NodeStatePtr& node : final_snapshot->nodes()) listed += node->pods().size();
  EXPECT_EQ(listed, total);
  EXPECT_EQ(cache.sizes().added, total);
  EXPECT_EQ(cache.sizes().assumed, 0u);
}

// A Binder that fails every `fail_every`-th call and counts what it recorded.
class CountingBinder final : public extender::Binder {
 public:
  explicit CountingBinder(int fail_every) : fail_every_(fail_every) {}
  extender::BindReply Bind(const extender::BindRequest& request) override {
    if (calls_.fetch_add(1) % fail_every_ == fail_every_ - 1) {
      return {state::BindEvent::kRefused, "injected failure for " + request.target.pod_uid};
    }
    return {};
  }
  void Released(const std::string&) override { released_.fetch_add(1); }
  int released() const { return released_.load(); }

 private:
  const int fail_every_;
  std::atomic<int> calls_{0};
  std::atomic<int> released_{0};
};

kube::PodView PodFor(const std::string& uid, const GpuRequest& request) {
  kube::PodView pod;
  pod.name = uid;
  pod.pod_namespace = "stress";
  pod.uid = uid;
  switch (request.kind) {
    case GpuRequest::Kind::kWhole:
      pod.requests["nvidia.com/gpu"] = request.count * 1000;
      if (request.closeness == alloc::Closeness::kNvlink) {
        pod.annotations["linkfit.io/closeness"] = "nvlink";
        pod.annotations["linkfit.io/closeness-policy"] =
            request.policy == alloc::ClosenessPolicy::kRequired ? "required" : "preferred";
      }
      break;
    case GpuRequest::Kind::kShared:
      // The share resource counts thousandths of all the pod's GPUs, as the kubelet does.
      pod.requests["linkfit.io/gpu-share"] = request.share_milli * request.count * 1000;
      pod.annotations["linkfit.io/gpus"] = std::to_string(request.count);
      break;
    case GpuRequest::Kind::kMig:
      pod.requests["nvidia.com/mig-" + request.mig_profile] = request.count * 1000;
      break;
    case GpuRequest::Kind::kNone:
      break;
  }
  return pod;
}

TEST(ClusterCacheStressTest, ConcurrentFilterAndBindThroughTheExtender) {
  ClusterCache cache;
  AddNodes(cache);
  CountingBinder binder(/*fail_every=*/7);
  NullMetrics metrics;
  extender::PodMemo memo({});
  extender::Extender ext(cache, {}, binder, memo, metrics);
  std::atomic<bool> done{false};
  SnapshotReader reader{cache, done, "", 0};
  std::thread reader_thread([&reader] { reader.Run(1000000); });

  std::vector<std::vector<std::string>> live(kWriters);
  std::vector<int> released(kWriters, 0);
  std::vector<std::string> errors(kWriters);
  std::vector<std::thread> writers;
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(99 + t));
      std::vector<std::string>& mine = live[static_cast<std::size_t>(t)];
      std::string& error = errors[static_cast<std::size_t>(t)];
      for (int i = 0; i < kIterations / 2; ++i) {
        const std::string uid = "e" + std::to_string(t) + "-" + std::to_string(i);
        wire::ExtenderArgs args;
        args.pod = PodFor(uid, RandomRequest(rng));
        args.node_names_given = true;
        for (const std::string& name : kNodes) args.node_names.push_back(name);
        memo.Seen(args.pod);
        const wire::FilterResult filtered = wire::RunFilter(ext, args);
        if (filtered.node_names.empty()) continue;
        // Bind to a passing node; other threads may have taken it since (then bind fails).
        const std::string node(filtered.node_names[rng() % filtered.node_names.size()]);
        const std::string bind_error = ext.Bind({uid, "stress", uid, node});
        const PodPhase phase = cache.Phase(uid);
        if (bind_error.empty() != (phase == PodPhase::kAdded)) {
          error = uid + ": bind said '" + bind_error + "' but the pod's phase disagrees";
          return;
        }
        if (bind_error.empty()) mine.push_back(uid);
        if (!mine.empty() && rng() % 3 == 0) {
          const std::size_t victim = rng() % mine.size();
          if (ext.Release(mine[victim]) != RemoveOutcome::kRemoved) {
            error = mine[victim] + ": release of a bound pod failed";
            return;
          }
          ++released[static_cast<std::size_t>(t)];
          mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(victim));
        }
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  done.store(true);
  reader_thread.join();

  for (const std::string& error : errors) EXPECT_EQ(error, "");
  EXPECT_EQ(reader.problem, "");
  EXPECT_EQ(CheckSnapshot(*cache.Snapshot()), "");
  std::size_t total = 0;
  int total_released = 0;
  for (std::size_t t = 0; t < live.size(); ++t) {
    total += live[t].size();
    total_released += released[t];
  }
  EXPECT_GT(total, 0u);
  EXPECT_EQ(cache.sizes().added, total);
  EXPECT_EQ(cache.sizes().assumed, 0u);
  EXPECT_EQ(binder.released(), total_released);
}

}  // namespace
}  // namespace linkfit::state
