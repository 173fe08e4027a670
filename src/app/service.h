#pragma once

// Service: the composition root of `linkfit serve`. It wires config -> MIG catalog -> model
// placement tables -> node model factory -> cluster cache -> source of state -> extender -> wire
// handler
// -> HTTP server(s), and owns them in that order. The source of state is
//
//   standalone  the cluster file and the state file (StateFileBinder, PodMemo), ready at once;
//   cluster     the API server (ClusterSource: reflectors, PodStore, ApiBinder), ready once the
//               initial node and pod lists are applied.
//
// With an operations address, a second listener with its own threads serves /healthz, /readyz,
// /metrics, /inspect and /explain, and the first only the extender verbs.
//
// Thread-safety: Start/Stop/Wait from one controlling thread; the server's threads call into the
// extender concurrently.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "linkfit/alloc/mig.h"
#include "linkfit/alloc/placement_table_cache.h"
#include "linkfit/app/config.h"
#include "linkfit/cluster/cluster_source.h"
#include "linkfit/extender/extender.h"
#include "linkfit/model/node_model.h"
#include "linkfit/server/prometheus_metrics.h"
#include "linkfit/server/server.h"
#include "linkfit/standalone/standalone.h"
#include "linkfit/state/cluster_cache.h"
#include "linkfit/wire/handler.h"

namespace linkfit::app {

class Service {
 public:
  // Loads everything and starts listening. Errors name the file and key at fault. In cluster
  // mode the API server is contacted in the background: Start returns while /readyz is false.
  // `on_ready` is called once when the state is loaded: in standalone mode before Start returns,
  // in cluster mode on the cluster source's thread once the initial lists are applied.
  static Result<std::unique_ptr<Service>> Start(const Config& config,
                                                std::function<void()> on_ready = {});

  ~Service();
  int port() const { return server_->port(); }
  // The operations listener's port; 0 without one.
  int ops_port() const { return ops_server_ ? ops_server_->port() : 0; }
  const std::string& host() const { return config_.listen_host; }
  bool cluster_mode() const { return cluster_ != nullptr; }
  void Stop();
  void Wait();
  extender::Extender& extender() { return *extender_; }
  // What the listeners call for each request (decode, verb, encode): for measuring the verbs
  // without HTTP (bench/verbs_bench.cc).
  wire::Handler& handler() { return *handler_; }
  const standalone::ClusterLoadStats& load_stats() const { return stats_; }
  // Cluster mode only (nullptr otherwise).
  cluster::ClusterSource* cluster() { return cluster_.get(); }

 private:
  explicit Service(Config config) : config_(std::move(config)) {}
  Result<void> LoadStandalone();
  Result<void> StartCluster(std::function<void()> on_ready);
  Result<void> Listen();

  Config config_;
  standalone::ClusterLoadStats stats_;
  server::PrometheusMetrics metrics_;
  alloc::MigCatalog catalog_;
  alloc::PlacementTableCache tables_;
  std::unique_ptr<model::NodeModelFactory> factory_;
  std::unique_ptr<state::ClusterCache> cache_;
  std::unique_ptr<standalone::StateFileBinder> binder_;  // standalone
  std::unique_ptr<extender::PodMemo> memo_;              // standalone
  std::unique_ptr<cluster::ClusterSource> cluster_;      // cluster mode
  std::unique_ptr<extender::Extender> extender_;
  std::unique_ptr<wire::Handler> handler_;
  server::ServerPtr server_;
  server::ServerPtr ops_server_;
};

// The bandwidth model with the config's overrides applied.
Result<topology::BandwidthModel> BandwidthModelFrom(const Config& config);

// Builds the extender's options from the config (closeness and policy names already validated by
// ParseConfig; errors here mean a programming mistake and are reported, not assumed away).
Result<extender::ExtenderOptions> ExtenderOptionsFrom(const Config& config);

// The API client configuration of cluster mode: kubernetes.kubeconfig (and context), else
// kubernetes.api_server with token_file and ca_file, else in-cluster; qps, burst and the request
// timeout from the config.
Result<kube::ClientConfig> ClientConfigFrom(const Config& config);

}  // namespace linkfit::app
