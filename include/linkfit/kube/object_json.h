#pragma once

// The Kubernetes objects linkfit reads, decoded from JSON: a Pod's identity, containers,
// resource requests (as Kubernetes adds them up: types.h) and scheduling fields, and a Node's
// identity, labels, annotations, schedulability and allocatable resources. The API client
// decodes list items and watch events with DecodePod/DecodeNode; the extender protocol (wire/)
// reads the Pod and Nodes inside its requests with ReadPod/ReadNode on the same reader.
//
// Embedded objects are camelCase and matched case-sensitively; unknown fields are validated and
// ignored. Malformed resource quantities become the object's `problems` (the object still
// decodes); JSON that is not such an object is an error naming the place.
//
// Thread-safety: all functions are safe to call concurrently (each thread keeps its own parser).

#include <string>
#include <string_view>

#include "linkfit/common/json_reader.h"
#include "linkfit/common/result.h"
#include "linkfit/kube/types.h"

namespace linkfit::kube {

// Decodes one Pod object.
Result<PodView> DecodePod(std::string_view json);
// Decodes one Node object (NodeView::name from metadata.name, which is required).
Result<NodeView> DecodeNode(std::string_view json);

// Reads the Pod object at `v` into *pod (which the caller has reset); `where` names it in
// messages ("Pod"). Returns false after recording the first error in `c`.
bool ReadPod(json::Ctx& c, json::od::value& v, const std::string& where, PodView* pod);
// Reads the Node object at `v` into *node, except its name: *name is metadata.name as read (a
// view into the body, or into c.owned when it held escapes; empty when absent or null).
bool ReadNode(json::Ctx& c, json::od::value& v, const std::string& where, NodeView* node,
              std::string_view* name);

}  // namespace linkfit::kube
