#pragma once

// Service: the composition root of `linkfit serve`. It wires config -> MIG catalog -> model
// registry -> cluster cache (filled from the cluster file and the state file) -> binder ->
// extender -> wire handler -> HTTP server, and owns them in that order.
//
// Thread-safety: Start/Stop/Wait from one controlling thread; the server's threads call into the
// extender concurrently.

#include <memory>
#include <string>

#include "app/wire_handler.h"
#include "linkfit/alloc/mig.h"
#include "linkfit/alloc/model_registry.h"
#include "linkfit/app/config.h"
#include "linkfit/extender/extender.h"
#include "linkfit/server/prometheus_metrics.h"
#include "linkfit/server/server.h"
#include "linkfit/source/node_model.h"
#include "linkfit/standalone/standalone.h"
#include "linkfit/state/cluster_cache.h"

namespace linkfit::app {

class Service {
 public:
  // Loads everything and starts listening. Errors name the file and key at fault.
  static Result<std::unique_ptr<Service>> Start(const Config& config);

  ~Service();
  int port() const { return server_->port(); }
  const std::string& host() const { return config_.listen_host; }
  void Stop() { server_->Stop(); }
  void Wait() { server_->Wait(); }
  extender::Extender& extender() { return *extender_; }
  const standalone::ClusterLoadStats& load_stats() const { return stats_; }

 private:
  explicit Service(Config config) : config_(std::move(config)) {}

  Config config_;
  standalone::ClusterLoadStats stats_;
  server::PrometheusMetrics metrics_;
  alloc::MigCatalog catalog_;
  alloc::ModelRegistry registry_;
  std::unique_ptr<source::NodeModelFactory> factory_;
  std::unique_ptr<state::ClusterCache> cache_;
  std::unique_ptr<standalone::StateFileBinder> binder_;
  std::unique_ptr<extender::PodMemo> memo_;
  std::unique_ptr<extender::Extender> extender_;
  std::unique_ptr<WireHandler> handler_;
  server::ServerPtr server_;
};

// The bandwidth model with the config's overrides applied.
Result<topology::BandwidthModel> BandwidthModelFrom(const Config& config);

// Builds the extender's options from the config (closeness and policy names already validated by
// ParseConfig; errors here mean a programming mistake and are reported, not assumed away).
Result<extender::ExtenderOptions> ExtenderOptionsFrom(const Config& config);

}  // namespace linkfit::app
