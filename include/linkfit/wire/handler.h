#pragma once

// Handler: the bridge between the HTTP server and the Extender. It decodes wire JSON with the codec
// (codec.h), calls the Extender in its own terms and encodes the exact replies of
// ../shared/spec/extender-protocol.md. Filter and prioritize take one snapshot and parse the pod
// once (verb_calls.h). Bodies that are not the verb's JSON get 400 with a JSON error; logical
// failures are 200 with the protocol's Error field.
//
// Thread-safety: as the Extender (every method may be called concurrently).

#include <atomic>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "linkfit/extender/extender.h"
#include "linkfit/server/handler.h"

namespace linkfit::wire {

class Handler final : public server::ExtenderHandler {
 public:
  // `memo` (standalone mode; null in cluster mode) learns each pod of a filter request before the
  // extender reads it, so that bind can resolve it and demand counts it (once per pod,
  // PodMemo::Seen: a retried request changes nothing). Prioritize changes nothing.
  explicit Handler(extender::Extender& extender, extender::PodMemo* memo = nullptr)
      : extender_(extender), memo_(memo) {}

  server::HttpReply Filter(server::Body body) override;
  server::HttpReply Prioritize(server::Body body) override;
  server::HttpReply Bind(std::string_view body) override;
  server::HttpReply Preempt(std::string_view body) override;
  server::HttpReply Inspect(std::string_view node) override;
  server::HttpReply Explain(std::string_view pod_json) override;
  server::HttpReply Release(std::string_view body) override;
  bool Ready() const override { return NotReadyReason().empty(); }

  // Standalone: ready once loaded.
  void SetReady(bool ready) { ready_.store(ready); }
  // Cluster mode: ready while `not_ready_reason` returns "" (the initial lists are applied).
  // Before that filter and bind answer with the reason as their Error, prioritize with zero
  // scores and preempt with no victims: never an empty filter list, which kube-scheduler would
  // read as "no node fits". REQUIRES: called before serving.
  void SetReadiness(std::function<std::string()> not_ready_reason) {
    not_ready_reason_ = std::move(not_ready_reason);
  }
  // Cluster mode: what GET /inspect shows under "binding" (the binder lease, binds in doubt,
  // allocation collisions). REQUIRES: called before serving.
  void SetBindingStatus(std::function<nlohmann::json()> binding_status) {
    binding_status_ = std::move(binding_status);
  }

 private:
  extender::Extender& extender_;
  std::string NotReadyReason() const;

  extender::PodMemo* memo_;
  std::atomic<bool> ready_{false};
  std::function<std::string()> not_ready_reason_;
  std::function<nlohmann::json()> binding_status_;
};

}  // namespace linkfit::wire
