#pragma once

// NodePods: the pods bound to the agent's node (a reflector with fieldSelector
// spec.nodeName=NODE feeds it), so that the kubelet's PodResources answers, which name pods by
// namespace and name only, can be published keyed by pod UID. A name reused by a new pod (a
// StatefulSet's replacement) maps to the UID of the pod the API server shows now. Each pod's
// linkfit.io/allocation is kept too, for the device plugin's steering (steering.h).
//
// Thread-safety: every method may be called concurrently (the reflector thread writes, the agent
// loop reads).

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "linkfit/agent/steering.h"
#include "linkfit/common/mutex.h"
#include "linkfit/kube/reflector.h"

namespace linkfit::agent {

class NodePods : public kube::ReflectorSink {
 public:
  // The UID of the pod "namespace/name" on this node, if the API server shows one.
  std::optional<std::string> UidOf(const std::string& pod_key) const;
  std::size_t size() const;
  // Every pod that carries a linkfit.io/allocation annotation, with its UID.
  std::vector<PodPlanText> Plans() const;

  void BeginList() override;
  void ListItem(std::string_view object_json) override;
  void EndList(std::string_view resource_version) override;
  void Event(kube::WatchEventType type, std::string_view object_json) override;

 private:
  mutable Mutex mutex_;
  struct Entry {
    std::string uid;
    std::string plan;  // linkfit.io/allocation, "" when absent
    std::map<std::string, std::set<std::string>> requested;  // container -> extended resources
  };
  static std::optional<std::pair<std::string, Entry>> Read(std::string_view object_json,
                                                           const char* what);
  std::unordered_map<std::string, Entry> pods_ LINKFIT_GUARDED_BY(mutex_);
  std::unordered_map<std::string, Entry> listing_ LINKFIT_GUARDED_BY(mutex_);  // during a list
};

}  // namespace linkfit::agent
