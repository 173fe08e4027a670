#pragma once

// Helpers for the Extender tests: a fake Binder that records calls and can be told to fail, pod
// views with GPU requests, and cache-mode / non-cache-mode ExtenderArgs.

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "linkfit/extender/extender.h"
#include "linkfit/wire/bind_preempt.h"
#include "linkfit/wire/verb_calls.h"
#include "testing/cluster.h"

namespace linkfit::extender::testing {

class FakeBinder final : public Binder {
 public:
  BindReply Bind(const BindRequest& request) override {
    std::lock_guard<std::mutex> lock(mutex_);
    binds_.push_back({request.target, request.assignment});
    if (!fail_with_.empty()) return {state::BindEvent::kRefused, fail_with_};
    return {};
  }
  void Released(const std::string& pod_uid) override {
    std::lock_guard<std::mutex> lock(mutex_);
    released_.push_back(pod_uid);
  }
  void FailWith(std::string message) {
    std::lock_guard<std::mutex> lock(mutex_);
    fail_with_ = std::move(message);
  }
  std::size_t bind_calls() {
    std::lock_guard<std::mutex> lock(mutex_);
    return binds_.size();
  }
  std::pair<BindTarget, state::Assignment> last_bind() {
    std::lock_guard<std::mutex> lock(mutex_);
    return binds_.back();
  }
  std::vector<std::string> released() {
    std::lock_guard<std::mutex> lock(mutex_);
    return released_;
  }

 private:
  std::mutex mutex_;
  std::string fail_with_;
  std::vector<std::pair<BindTarget, state::Assignment>> binds_;
  std::vector<std::string> released_;
};

// A pod asking for `gpus` whole GPUs through nvidia.com/gpu, with extra annotations.
inline kube::PodView GpuPod(const std::string& uid, int gpus, kube::StringMap annotations = {}) {
  kube::PodView pod;
  pod.name = "pod-" + uid;
  pod.pod_namespace = "ml";
  pod.uid = uid;
  if (gpus > 0) pod.requests["nvidia.com/gpu"] = std::int64_t{gpus} * 1000;
  pod.requests["cpu"] = 500;
  pod.annotations = std::move(annotations);
  return pod;
}

inline kube::StringMap NvlinkRequired() {
  return {{"linkfit.io/closeness", "nvlink"}, {"linkfit.io/closeness-policy", "required"}};
}

// Cache-mode args (NodeNames). `names` must outlive the args.
inline wire::ExtenderArgs NamesArgs(const kube::PodView& pod,
                                    const std::vector<std::string>& names) {
  wire::ExtenderArgs args;
  args.pod = pod;
  args.node_names_given = true;
  for (const std::string& name : names) args.node_names.push_back(name);
  return args;
}

// Non-cache-mode args (Nodes): `raw` holds each node's JSON and must outlive the args.
inline wire::ExtenderArgs NodesArgs(const kube::PodView& pod, const std::vector<std::string>& names,
                                    const std::vector<std::string>& raw) {
  wire::ExtenderArgs args;
  args.pod = pod;
  args.nodes_given = true;
  for (std::size_t i = 0; i < names.size(); ++i) {
    args.node_names.push_back(names[i]);
    wire::NodeItem item;
    item.raw_json = raw[i];
    item.view.name = names[i];
    args.nodes.push_back(std::move(item));
  }
  return args;
}

inline BindTarget BindArgs(const kube::PodView& pod, const std::string& node) {
  return BindTarget{pod.name, pod.pod_namespace, pod.uid, node};
}

// Returns the reason for `node` in a failure list, or "" if it is not there.
inline std::string ReasonFor(const std::vector<wire::NodeFailure>& failures,
                             std::string_view node) {
  for (const wire::NodeFailure& failure : failures) {
    if (failure.node == node) {
      return failure.reason.empty() ? "(empty reason)" : std::string(failure.reason);
    }
  }
  return "";
}

// The extender as standalone mode serves it: every filter and prioritize request first passes
// through the PodMemo (as wire::Handler does), so that bind can resolve the pod.
class MemoExtender {
 public:
  MemoExtender(state::ClusterCache& cache, const ExtenderOptions& options, Binder& binder,
               MetricsSink& metrics)
      : memo_(options.defaults), extender_(cache, options, binder, memo_, metrics) {}
  wire::FilterResult Filter(const wire::ExtenderArgs& args) {
    memo_.Seen(args.pod);
    return wire::RunFilter(extender_, args);
  }
  std::vector<wire::HostPriority> Prioritize(const wire::ExtenderArgs& args) {
    return wire::Priorities(extender_, args);  // as wire::Handler: prioritize learns nothing
  }
  std::string Bind(const BindTarget& target) { return extender_.Bind(target); }
  std::vector<wire::NodeVictims> Preempt(const wire::PreemptionArgs& args) const {
    return wire::KeptVictims(extender_, args);
  }
  state::RemoveOutcome Release(const std::string& uid) { return extender_.Release(uid); }
  std::vector<std::string> Explain(const kube::PodView& pod) const {
    return extender_.Explain(pod);
  }
  Extender& extender() { return extender_; }

 private:
  PodMemo memo_;
  Extender extender_;
};

// A cache, binder and extender over a few fixture nodes.
class ExtenderFixture : public ::testing::Test {
 protected:
  explicit ExtenderFixture(ExtenderOptions options = {})
      : extender_(cache_, options, binder_, metrics_) {}

  void AddNode(const std::string& name, const std::string& fixture, topology::GpuMask mig = 0) {
    cache_.UpsertNode(linkfit::testing::MakeNodeInfo(name, fixture, mig));
  }
  // Records a bound pod holding `gpus` whole.
  void Hold(const std::string& uid, const std::string& node, topology::GpuMask gpus) {
    state::Assignment a;
    a.pod_uid = uid;
    a.pod_namespace = "ml";
    a.pod_name = "pod-" + uid;
    a.node = node;
    a.gpus = gpus;
    auto added = cache_.AddBound(a);
    ASSERT_TRUE(added.has_value()) << added.error().message;
  }
  // The node's whole GPUs in use (all bits set if the node is unknown, which fails the test).
  topology::GpuMask WholeUsed(const std::string& node) const {
    const state::SnapshotPtr snapshot = cache_.Snapshot();
    const state::NodeState* found = snapshot->Find(node);
    if (found == nullptr) {
      ADD_FAILURE() << "unknown node " << node;
      return static_cast<topology::GpuMask>(~0u);
    }
    return found->whole_used();
  }

  state::ClusterCache cache_;
  FakeBinder binder_;
  NullMetrics metrics_;
  MemoExtender extender_;
};

}  // namespace linkfit::extender::testing
