#pragma once

// The small, read-only views of Kubernetes objects that linkfit works with: a PodView and a
// NodeView hold only the fields the extender reads (identity, labels, annotations, resource
// amounts), already converted to plain C++ values. They are produced by kube's object readers
// (object_json.h) from the Pod and Node JSON kube-scheduler sends (inside the extender requests
// wire/ decodes) and the API server lists and watches.
//
// Resource amounts are int64 thousandths ("milli", see quantity.h): 2 GPUs are 2000, 500m CPU is
// 500, 1Gi memory is 1073741824000.
//
// A malformed field inside an object (a quantity that does not parse, a priority that is not an
// integer) does not fail decoding: it is described in `problems`, and the field is treated as
// absent, so that the extender can answer with a reason that names it.
//
// Thread-safety: plain values; safe to share between threads once built.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace linkfit::kube {

// Ordered by key bytes (as Go sorts map keys); `std::less<>` allows lookups by string_view.
using StringMap = std::map<std::string, std::string, std::less<>>;
// Resource name -> amount in thousandths.
using ResourceMap = std::map<std::string, std::int64_t, std::less<>>;

// One container of a pod, as far as device planning needs it.
struct ContainerView {
  std::string name;
  bool init = false;         // from spec.initContainers
  bool restartable = false;  // an init container with restartPolicy Always (a sidecar)
  // Its extended-resource requests (names with a '/', e.g. nvidia.com/gpu), completed from
  // limits like `requests` below; CPU and memory are left out.
  ResourceMap extended;
};

struct PodView {
  std::string name;                 // metadata.name
  std::string pod_namespace;        // metadata.namespace
  std::string uid;                  // metadata.uid
  std::string node_name;            // spec.nodeName ("" while unscheduled)
  std::string nominated_node_name;  // status.nominatedNodeName
  std::string scheduler_name;       // spec.schedulerName
  std::int32_t priority = 0;        // spec.priority (0 when absent, as kube-scheduler reads it)
  std::string phase;                // status.phase
  StringMap labels;                 // metadata.labels
  StringMap annotations;            // metadata.annotations
  // The pod's effective request, computed as Kubernetes does (resource helpers' PodRequests):
  // per resource, max(sum over containers, max over init containers) plus spec.overhead, where a
  // container asks for requests[r] if present and otherwise limits[r] (the API server defaults
  // requests from limits; extended resources such as nvidia.com/gpu often appear only in limits).
  // Restartable init containers (sidecars, restartPolicy: Always) count like regular containers
  // and also for the init containers that follow them, as in Kubernetes 1.28+.
  // Every resource named in any container's requests or limits has a key here (possibly 0), so
  // the keys also answer kube-scheduler's IsInterested question.
  ResourceMap requests;
  // Init containers first (in spec order), then app containers.
  std::vector<ContainerView> containers;
  bool terminating = false;           // metadata.deletionTimestamp is set
  std::vector<std::string> problems;  // malformed fields, e.g. a quantity that does not parse
};

struct NodeView {
  std::string name;                   // metadata.name
  StringMap labels;                   // metadata.labels
  StringMap annotations;              // metadata.annotations
  ResourceMap allocatable;            // status.allocatable, in thousandths
  bool unschedulable = false;         // spec.unschedulable
  std::vector<std::string> problems;  // malformed fields, e.g. a quantity that does not parse
};

}  // namespace linkfit::kube
