#pragma once

// The request bodies kube-scheduler sends an extender, byte for byte as its Go encoder writes
// them (../shared/spec/extender-protocol.md): ExtenderArgs for filter and prioritize in both
// nodeCacheCapable modes, and ExtenderBindingArgs for bind. The pod and node objects inside are
// the caller's (each tool has its own: linkfit-load's realistic pods whose UID it rewrites in
// place, wire_codec_bench's fixed corpus, the harness's pods from its trace). Names and UIDs are
// JSON-escaped as Go escapes them (the callers' never need it).
//
// The harness and `linkfit demo` drive linkfit through one kube-scheduler cycle in src/
// (wire::SchedulingCycle over wire::ExtenderClient, which writes the same bodies); these builders
// serve the tools that drive it otherwise: linkfit-load times raw round trips on one keep-alive
// connection with bodies of any size and rotation, linkfit_verbs_bench calls the handler in
// process, and the codec bench decodes a fixed corpus.
//
// Thread-safety: pure functions.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace linkfit::bench {

// {"Pod":<pod>,"Nodes":null,"NodeNames":[count names from names[first], wrapping around]}:
// wire::CacheModeBody, the body kube-scheduler's cycle in src/ sends.
std::string CacheModeArgs(std::string_view pod, const std::vector<std::string>& names,
                          std::size_t count, std::size_t first = 0);
// Every name of `names`, in order.
inline std::string CacheModeArgs(std::string_view pod, const std::vector<std::string>& names) {
  return CacheModeArgs(pod, names, names.size());
}

// {"Pod":<pod>,"Nodes":{"metadata":{},"items":[<node objects>]},"NodeNames":null}.
std::string NonCacheModeArgs(std::string_view pod, const std::vector<std::string>& node_objects);

// {"PodName":...,"PodNamespace":...,"PodUID":...,"Node":...} (Go's field order):
// wire::BindingBody, the body kube-scheduler's cycle in src/ sends.
std::string BindingArgs(std::string_view pod_name, std::string_view pod_namespace,
                        std::string_view uid, std::string_view node);

}  // namespace linkfit::bench
