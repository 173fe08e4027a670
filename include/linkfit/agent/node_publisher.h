#pragma once

// NodePublisher: keeps the node agent's annotations on its own Node (linkfit.io/topology,
// linkfit.io/devices-in-use) equal to what the agent found, with one JSON merge patch per change
// and never a periodic rewrite: every patch is a watch event for every kube-scheduler and
// linkfit replica, so an unchanged value costs nothing.
//
//   Publish(wanted)   compares `wanted` with the annotations the Node carried at the last read or
//                     patch; equal: no call. Different: PATCH /api/v1/nodes/NAME with
//                     {"metadata":{"annotations":{key: value | null}}} and remembers the Node the
//                     server returned. The first Publish reads the Node (GET) to learn them.
//   errors            a 4xx/5xx or transport error is returned (the caller backs off and calls
//                     again); a 409 or an unknown outcome makes the next Publish re-read the
//                     Node first. 429s are retried once after Retry-After by the ApiClient.
//
// Thread-safety: one thread calls Publish at a time (the agent loop); the ApiClient may be shared.

#include <map>
#include <optional>
#include <string>

#include "linkfit/common/result.h"
#include "linkfit/kube/api_client.h"

namespace linkfit::agent {

// Annotation key -> value; std::nullopt removes the annotation.
using WantedAnnotations = std::map<std::string, std::optional<std::string>>;

class NodePublisher {
 public:
  // `client` must outlive the publisher.
  NodePublisher(kube::ApiClient& client, std::string node_name);

  // Returns true when a patch was sent and applied, false when nothing had changed.
  Result<bool> Publish(const WantedAnnotations& wanted);

  // Makes the next Publish re-read the Node first (the agent does so every discovery period, so
  // that an annotation someone else changed or removed is put back; a GET is no watch event).
  void Invalidate() { known_ = false; }

  int patches() const { return patches_; }

 private:
  Result<void> Refresh();
  Result<void> Remember(const std::string& node_json);

  kube::ApiClient& client_;
  const std::string node_name_;
  const std::string path_;
  bool known_ = false;                              // annotations_ reflects the server
  std::map<std::string, std::string> annotations_;  // only the keys ever wanted
  int patches_ = 0;
};

// The merge patch that turns `current` into `wanted` for the keys of `wanted`; "" when they are
// equal. Exposed for tests.
std::string AnnotationPatch(const std::map<std::string, std::string>& current,
                            const WantedAnnotations& wanted);

}  // namespace linkfit::agent
