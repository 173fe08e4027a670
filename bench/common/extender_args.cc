#include "common/extender_args.h"

#include "linkfit/wire/scheduling_cycle.h"

namespace linkfit::bench {

std::string CacheModeArgs(std::string_view pod, const std::vector<std::string>& names,
                          std::size_t count, std::size_t first) {
  return wire::CacheModeBody(pod, names, count, first);
}

std::string NonCacheModeArgs(std::string_view pod, const std::vector<std::string>& node_objects) {
  std::size_t size = pod.size() + 64;
  for (const std::string& node : node_objects) size += node.size() + 1;
  std::string body;
  body.reserve(size);
  body += R"({"Pod":)";
  body.append(pod);
  body += R"(,"Nodes":{"metadata":{},"items":[)";
  for (std::size_t i = 0; i < node_objects.size(); ++i) {
    if (i > 0) body += ',';
    body += node_objects[i];
  }
  body += R"(]},"NodeNames":null})";
  return body;
}

std::string BindingArgs(std::string_view pod_name, std::string_view pod_namespace,
                        std::string_view uid, std::string_view node) {
  return wire::BindingBody(pod_name, pod_namespace, uid, node);
}

}  // namespace linkfit::bench
