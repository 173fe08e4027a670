#pragma once

// Binder: the one external write of a bind (DESIGN.md §8). In a cluster it POSTs the pod's
// binding subresource with the assigned devices as Binding annotations; in standalone mode it
// records the assignment in the state file. Called after the devices are assumed in the cache
// (bind stage kWriting, state/bind_lifecycle.h) and outside every cache lock.
//
// A Binder only writes: it gets everything the write needs (the assignment, the node model it was
// placed on, the pod's containers), and answers with the BindEvent its write led to. What
// follows from the event (the devices kept, forgotten, confirmed) is the lifecycle's, carried out
// by ClusterCache::Advance; a Binder that settles an unknown outcome later advances the pod the
// same way.
//
// Thread-safety: implementations must accept concurrent calls.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "linkfit/kube/types.h"
#include "linkfit/state/bind_lifecycle.h"
#include "linkfit/state/node_state.h"

namespace linkfit::extender {

struct BindTarget {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;
  std::string node;
};

struct BindRequest {
  BindTarget target;
  // Empty (no pod UID) for a pod without GPUs on a node linkfit does not model.
  state::Assignment assignment;
  // The node model `assignment` was placed on; null when `assignment` is empty.
  state::NodeInfoPtr node;
  // The pod's containers when the source keeps them (cluster mode: the per-container plan); null
  // otherwise.
  std::shared_ptr<const std::vector<kube::ContainerView>> containers;
};

struct BindReply {
  BindReply() = default;
  BindReply(state::BindEvent e, std::string what = "", std::string node = "")
      : event(e), detail(std::move(what)), bound_node(std::move(node)) {}

  // One of the events the lifecycle allows from kWriting: kRecorded, kCreated,
  // kConflictSameRecord, kConflictOtherRecord, kLeaseRefused, kRecordTookDevices, kRefused,
  // kNoAnswer.
  state::BindEvent event = state::BindEvent::kRecorded;
  // What happened, for the bind's answer and the log: the refusal, the unknown outcome, or where
  // and how the API has the pod bound (kConflictOtherRecord). Empty for a plain success.
  std::string detail;
  // kConflictOtherRecord: the node the API has the pod on.
  std::string bound_node;
};

class Binder {
 public:
  virtual ~Binder() = default;
  virtual BindReply Bind(const BindRequest& request) = 0;
  // The pod's devices were released (standalone release, or a deleted pod seen by the watch).
  virtual void Released(const std::string& pod_uid) = 0;
};

}  // namespace linkfit::extender
