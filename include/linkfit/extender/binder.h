#pragma once

// Binder: the one external write of a bind (DESIGN.md §8). In a cluster it POSTs the pod's
// binding subresource with the assigned devices as Binding annotations; in standalone mode it
// records the assignment in the state file. Called after the devices are assumed in the cache and
// outside every cache lock. What the extender does with the answer:
//
//   error      the write certainly did not happen: forget the assumption, answer the error
//   kRecorded  the write is final (standalone): confirm now
//   kAccepted  the API server accepted it (201, or 409 "already assigned" to this node): keep
//              it assumed, marked bound; the pod watch confirms it
//   kUnknown   no answer after the request was sent: keep the devices assumed (never forget on
//              an unknown outcome); the source settles it, and bind answers an error meanwhile
//   kSettled   the binder found the pod already bound by another write and applied the API's
//              record to the cache: leave the cache as it is; bind answers `detail` (empty:
//              bound where asked)
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

struct BindOutcome {
  enum class Kind { kRecorded, kAccepted, kUnknown, kSettled };
  Kind kind = Kind::kRecorded;
  std::string detail;  // kUnknown: what happened to the request; kSettled: the error, if any
};

class Binder {
 public:
  virtual ~Binder() = default;
  // `assignment` is empty (no GPUs) for pods that asked for none.
  virtual Result<BindOutcome> Bind(const BindTarget& target,
                                   const state::Assignment& assignment) = 0;
  // The pod's devices were released (standalone release, or a deleted pod seen by the watch).
  virtual void Released(const std::string& pod_uid) = 0;
};

}  // namespace linkfit::extender
