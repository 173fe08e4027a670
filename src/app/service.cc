#include "app/service.h"

#include "linkfit/common/log.h"

namespace linkfit::app {

Result<extender::ExtenderOptions> ExtenderOptionsFrom(const Config& config) {
  extender::ExtenderOptions options;
  options.defaults.shared_gpu_resource = config.shared_gpu_resource;
  LINKFIT_ASSIGN_OR_RETURN(options.defaults.closeness,
                           alloc::ParseCloseness(config.policy.default_closeness));
  LINKFIT_ASSIGN_OR_RETURN(options.defaults.policy,
                           alloc::ParseClosenessPolicy(config.policy.default_closeness_policy));
  options.fit.share_policy = config.policy.share_policy == "spread" ? alloc::SharePolicy::kSpread
                                                                    : alloc::SharePolicy::kPack;
  options.weights = {config.policy.weights.topology, config.policy.weights.packing,
                     config.policy.weights.fragmentation, config.policy.weights.balance};
  options.score_range = config.policy.score_range;
  return options;
}

Result<topology::BandwidthModel> BandwidthModelFrom(const Config& config) {
  topology::BandwidthModel bandwidth = topology::BandwidthModel::Defaults();
  for (const auto& [key, gbps] : config.bandwidth_overrides) {
    if (auto ok = bandwidth.Override(key, gbps); !ok) {
      return WithContext(ok.error(), "config bandwidth_overrides");
    }
  }
  return bandwidth;
}

Service::~Service() {
  if (server_) {
    server_->Stop();
    server_->Wait();
  }
}

Result<std::unique_ptr<Service>> Service::Start(const Config& config) {
  std::unique_ptr<Service> service(new Service(config));
  Service& s = *service;
  LINKFIT_ASSIGN_OR_RETURN(s.catalog_, alloc::MigCatalog::LoadDirectory(config.mig_profiles_dir));
  s.cache_ = std::make_unique<state::ClusterCache>(&s.metrics_);
  if (config.kubernetes.enabled) {
    return MakeError(
        "kubernetes.enabled: the API-server client is not implemented yet; run in standalone "
        "mode with cluster_file");
  }
  if (!config.cluster_file) {
    return MakeError("no nodes: set cluster_file in the config (or --cluster)");
  }
  topology::BandwidthModel bandwidth;
  LINKFIT_ASSIGN_OR_RETURN(bandwidth, BandwidthModelFrom(config));
  s.factory_ = std::make_unique<source::NodeModelFactory>(s.registry_, s.catalog_, bandwidth);
  LINKFIT_ASSIGN_OR_RETURN(s.stats_,
                           standalone::LoadClusterFile(*config.cluster_file, *s.factory_, *s.cache_));
  if (config.state_file) {
    // The state file replaces the cluster file's allocations (see standalone.h).
    if (auto restored = standalone::LoadStateFile(*config.state_file, *s.cache_); !restored) {
      return tl::unexpected(restored.error());
    }
    s.stats_.allocations = static_cast<int>(s.cache_->BoundAssignments().size());
  }
  s.binder_ = std::make_unique<standalone::StateFileBinder>(config.state_file.value_or(""), *s.cache_);
  extender::ExtenderOptions options;
  LINKFIT_ASSIGN_OR_RETURN(options, ExtenderOptionsFrom(config));
  s.memo_ = std::make_unique<extender::PodMemo>(options.defaults);
  s.extender_ = std::make_unique<extender::Extender>(*s.cache_, std::move(options), *s.binder_,
                                                     *s.memo_, s.metrics_);
  s.handler_ = std::make_unique<WireHandler>(*s.extender_, s.memo_.get());

  server::ServerOptions server_options;
  server_options.host = config.listen_host;
  server_options.port = config.listen_port;
  server_options.url_prefix = config.url_prefix;
  server_options.tls = {config.tls.cert_file, config.tls.key_file, config.tls.client_ca_file,
                        config.tls.require_client_cert};
  server_options.max_body_bytes = static_cast<std::size_t>(config.limits.max_body_bytes);
  server_options.read_timeout = std::chrono::milliseconds(config.limits.read_timeout_ms);
  server_options.write_timeout = std::chrono::milliseconds(config.limits.write_timeout_ms);
  server_options.threads = config.limits.threads;
  server_options.keep_alive_timeout = std::chrono::seconds(config.limits.keep_alive_timeout_s);
  LINKFIT_ASSIGN_OR_RETURN(s.server_, server::NewServer(server_options, *s.handler_, s.metrics_));
  if (auto started = s.server_->Start(); !started) return tl::unexpected(started.error());
  s.handler_->SetReady(true);
  log::Info("linkfit: " + std::to_string(s.stats_.nodes) + " nodes (" +
            std::to_string(s.stats_.topologies) + " topologies, " +
            std::to_string(s.registry_.size()) + " placement tables), " +
            std::to_string(s.stats_.allocations) + " allocations restored");
  return service;
}

}  // namespace linkfit::app
