#pragma once

// Binder: the one external write of a bind (DESIGN.md §8). In a cluster it POSTs the pod's
// binding subresource with the assigned devices as Binding annotations; in standalone mode it
// records the assignment in the state file. Called after the devices are assumed in the cache and
// outside every cache lock; an error makes the extender forget the assumption.
//
// Thread-safety: implementations must accept concurrent calls.

#include <string>

#include "linkfit/common/result.h"
#include "linkfit/state/node_state.h"

namespace linkfit::extender {

struct BindTarget {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;
  std::string node;
};

class Binder {
 public:
  virtual ~Binder() = default;
  // `assignment` is empty (no GPUs) for pods that asked for none.
  virtual Result<void> Bind(const BindTarget& target, const state::Assignment& assignment) = 0;
  // The pod's devices were released (standalone release, or a deleted pod seen by the watch).
  virtual void Released(const std::string& pod_uid) = 0;
};

}  // namespace linkfit::extender
