#pragma once

// The parse-only baseline's handler (linkfit-parse-only, and the in-process verbs benchmark):
// decodes each request with linkfit's codec and answers a minimal valid reply. Filter passes
// every other name and fails the rest with one reason (as the hot-path issue's do-nothing server
// does: half the names pass; the Node objects echoed in non-cache mode), prioritize scores every
// node 0, bind succeeds. linkfit's cost over this one is what its own decisions cost.
//
// Thread-safety: stateless; any number of threads may call it.

#include <string_view>

#include "linkfit/server/handler.h"

namespace linkfit::load {

class ParseOnlyHandler final : public server::ExtenderHandler {
 public:
  server::HttpReply Filter(server::Body body) override;
  server::HttpReply Prioritize(server::Body body) override;
  server::HttpReply Bind(std::string_view body) override;
  server::HttpReply Preempt(std::string_view body) override;
  server::HttpReply Inspect(std::string_view node) override;
  server::HttpReply Explain(std::string_view pod) override;
  bool Ready() const override { return true; }
};

}  // namespace linkfit::load
