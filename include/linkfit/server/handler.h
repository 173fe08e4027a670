#pragma once

// ExtenderHandler: what the HTTP server calls for each route. The server owns HTTP (routes,
// limits, TLS, keep-alive, status codes for transport problems); the handler owns the meaning of
// the bodies. Bodies in and out are exact wire JSON (../shared/spec/extender-protocol.md).
//
// Thread-safety: implementations must accept concurrent calls (kube-scheduler runs prioritize
// in parallel with binds of other pods).

#include <string>
#include <string_view>

namespace linkfit::server {

struct HttpReply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

class ExtenderHandler {
 public:
  virtual ~ExtenderHandler() = default;

  // POST /scheduler/{filter,prioritize,bind,preempt}. Logical failures are 200 with the
  // protocol's Error field; 400 is for bodies that are not the verb's JSON at all.
  virtual HttpReply Filter(std::string_view body) = 0;
  virtual HttpReply Prioritize(std::string_view body) = 0;
  virtual HttpReply Bind(std::string_view body) = 0;
  virtual HttpReply Preempt(std::string_view body) = 0;

  // GET /inspect (node empty) and /inspect/{node}; 404 for an unknown node.
  virtual HttpReply Inspect(std::string_view node) = 0;

  // POST /explain with a Pod JSON body: one line per node saying why the pod does or does not fit.
  virtual HttpReply Explain(std::string_view pod_json) = 0;

  // POST /standalone/release with {"PodUID":"..."}: frees a pod's devices in standalone mode
  // (departures in the benchmark harness; a cluster learns them from its pod watch). 404 when
  // the handler does not support it.
  virtual HttpReply Release(std::string_view body) {
    (void)body;
    return HttpReply{404, R"({"Error":"release is only available in standalone mode"})"};
  }

  // /readyz: true once the initial node and pod state is loaded.
  virtual bool Ready() const = 0;
};

}  // namespace linkfit::server
