#pragma once

// ExtenderHandler: what the HTTP server calls for each route. The server owns HTTP (routes,
// limits, TLS, keep-alive, status codes for transport problems); the handler owns the meaning of
// the bodies. Bodies in and out are exact wire JSON (../shared/spec/extender-protocol.md).
//
// Thread-safety: implementations must accept concurrent calls (kube-scheduler runs prioritize
// in parallel with binds of other pods).

#include <cstddef>
#include <string>
#include <string_view>

namespace linkfit::server {

struct HttpReply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

// How many readable bytes the server leaves after every filter and prioritize body it hands a
// handler (their values unspecified): enough for a JSON parser that reads ahead in 64-byte blocks
// (simdjson) to read the body where it lies instead of copying it.
inline constexpr std::size_t kBodyPadding = 64;

// A request body: its bytes, and how many bytes after them in the same buffer may be read
// (`readable_after`: kBodyPadding from the server; 0, the default, promises none). Made from any
// text, so that tests and tools pass a plain string.
struct Body {
  Body(std::string_view bytes, std::size_t readable_after_bytes = 0)  // NOLINT: implicit on purpose
      : text(bytes), readable_after(readable_after_bytes) {}
  Body(const std::string& bytes) : text(bytes) {}  // NOLINT: implicit on purpose
  Body(const char* bytes) : text(bytes) {}         // NOLINT: implicit on purpose

  std::string_view text;
  std::size_t readable_after = 0;
};

class ExtenderHandler {
 public:
  virtual ~ExtenderHandler() = default;

  // POST /scheduler/{filter,prioritize,bind,preempt}. Logical failures are 200 with the
  // protocol's Error field; 400 is for bodies that are not the verb's JSON at all.
  // The hot verbs take a Body, so that a body the server padded is parsed where it lies.
  virtual HttpReply Filter(Body body) = 0;
  virtual HttpReply Prioritize(Body body) = 0;
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
