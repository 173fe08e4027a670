#include "app/service.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "linkfit/common/log.h"

namespace linkfit::app {

Result<extender::ExtenderOptions> ExtenderOptionsFrom(const Config& config) {
  extender::ExtenderOptions options;
  options.defaults.shared_gpu_resource = config.shared_gpu_resource;
  options.defaults.nic_resource = config.nic_resource;
  options.defaults.nic_resources = config.nic_resources;
  options.defaults.nic_share_resource = config.nic_share_resource;
  LINKFIT_ASSIGN_OR_RETURN(options.defaults.nic_closeness,
                           alloc::ParseNicCloseness(config.nic_closeness));
  LINKFIT_ASSIGN_OR_RETURN(options.defaults.closeness,
                           alloc::ParseCloseness(config.policy.default_closeness));
  LINKFIT_ASSIGN_OR_RETURN(options.defaults.policy,
                           alloc::ParseClosenessPolicy(config.policy.default_closeness_policy));
  options.fit.share_policy = config.policy.share_policy == "spread" ? alloc::SharePolicy::kSpread
                                                                    : alloc::SharePolicy::kPack;
  options.weights.topology = config.policy.weights.topology;
  options.weights.packing = config.policy.weights.packing;
  options.weights.fragmentation = config.policy.weights.fragmentation;
  options.weights.balance = config.policy.weights.balance;
  LINKFIT_ASSIGN_OR_RETURN(options.weights.whole_machines,
                           extender::ParseWholeMachinePolicy(config.policy.whole_machines));
  options.weights.whole_machine_penalty = config.policy.whole_machine_penalty;
  LINKFIT_ASSIGN_OR_RETURN(options.fit.nic_alignment,
                           extender::ParseNicAlignment(config.policy.nic_alignment));
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

Result<kube::ClientConfig> ClientConfigFrom(const Config& config) {
  const KubernetesConfig& k = config.kubernetes;
  kube::ClientConfig client;
  if (k.kubeconfig) {
    LINKFIT_ASSIGN_OR_RETURN(client, kube::LoadKubeconfig(*k.kubeconfig, k.context));
  } else if (!k.api_server.empty()) {
    client.server = k.api_server;
    client.token_file = k.token_file;
    std::ifstream ca(k.ca_file);
    if (!ca) return MakeError("kubernetes.ca_file " + k.ca_file + ": cannot read the file");
    std::ostringstream pem;
    pem << ca.rdbuf();
    client.ca_pem = pem.str();
    client.source = "kubernetes.api_server " + k.api_server;
  } else {
    kube::InClusterPaths paths;
    paths.token_file = k.token_file;
    paths.ca_file = k.ca_file;
    LINKFIT_ASSIGN_OR_RETURN(client, kube::InClusterConfig(paths));
  }
  client.qps = k.qps;
  client.burst = k.burst;
  client.timeout = std::chrono::milliseconds(k.request_timeout_ms);
  return client;
}

Service::~Service() {
  Stop();
  Wait();
  if (cluster_) cluster_->Stop();
}

void Service::Stop() {
  if (server_) server_->Stop();
  if (ops_server_) ops_server_->Stop();
}

void Service::Wait() {
  if (server_) server_->Wait();
  if (ops_server_) ops_server_->Wait();
}

Result<void> Service::LoadStandalone() {
  if (!config_.cluster_file) {
    return MakeError(
        "no nodes: set cluster_file in the config (or --cluster), or run in "
        "cluster mode (kubernetes.enabled, or --kubeconfig)");
  }
  LINKFIT_ASSIGN_OR_RETURN(stats_,
                           standalone::LoadClusterFile(*config_.cluster_file, *factory_, *cache_));
  if (config_.state_file) {
    // The state file replaces the cluster file's allocations (see standalone.h).
    if (auto restored = standalone::LoadStateFile(*config_.state_file, *cache_); !restored) {
      return tl::unexpected(restored.error());
    }
    stats_.allocations = static_cast<int>(cache_->BoundAssignments().size());
  }
  binder_ = std::make_unique<standalone::StateFileBinder>(config_.state_file.value_or(""), *cache_);
  extender::ExtenderOptions options;
  LINKFIT_ASSIGN_OR_RETURN(options, ExtenderOptionsFrom(config_));
  memo_ = std::make_unique<extender::PodMemo>(options.defaults);
  // The allocations already held are pods linkfit knows: they count in demand from the start,
  // as running pods do in cluster mode.
  memo_->LearnHeld(*cache_);
  extender_ =
      std::make_unique<extender::Extender>(*cache_, std::move(options), *binder_, *memo_, metrics_);
  handler_ = std::make_unique<wire::Handler>(*extender_, memo_.get());
  return {};
}

namespace {

// GET /inspect's "binding" section in cluster mode.
nlohmann::json BindingStatusJson(cluster::ClusterSource& source) {
  const cluster::BinderLease::Status lease = source.lease().status();
  nlohmann::json collisions = nlohmann::json::array();
  for (const cluster::PodStore::Collision& c : source.pods().collisions()) {
    collisions.push_back({{"node", c.node},
                          {"pod", c.pod},
                          {"uid", c.uid},
                          {"holders", c.holders},
                          {"devices", c.devices}});
  }
  return {{"lease",
           {{"enabled", lease.enabled},
            {"holding", lease.holding},
            {"identity", lease.identity},
            {"holder", lease.holder},
            {"expires_in_seconds", lease.expires_in_seconds},
            {"held_until_seconds", lease.held_until_seconds},
            {"binds_held", lease.binds_held},
            {"acquisitions", lease.acquisitions},
            {"takeovers", lease.takeovers},
            {"first_bind_after_start_seconds", lease.first_grant_after_start_seconds}}},
          {"binds_in_doubt", source.binder().unsettled()},
          {"collisions", collisions}};
}

}  // namespace

Result<void> Service::StartCluster(std::function<void()> on_ready) {
  if (config_.cluster_file || config_.state_file) {
    log::Info(
        "cluster mode: cluster_file and state_file are standalone mode's and are not used; "
        "nodes and allocations come from the API server");
  }
  cluster::ClusterOptions options;
  LINKFIT_ASSIGN_OR_RETURN(options.client, ClientConfigFrom(config_));
  options.page_size = config_.kubernetes.list_page_size;
  options.settle.require_nri_plugin = config_.kubernetes.require_nri_plugin;
  options.settle.bind_timeout = std::chrono::milliseconds(config_.kubernetes.bind_timeout_ms);
  options.settle.margin = std::chrono::milliseconds(config_.kubernetes.bind_settle_margin_ms);
  const KubernetesConfig::BinderLease& lease = config_.kubernetes.binder_lease;
  options.lease.enabled = lease.enabled;
  options.lease.lease_namespace = lease.lease_namespace;
  options.lease.name = lease.name;
  options.lease.duration = std::chrono::milliseconds(lease.duration_ms);
  options.on_ready = std::move(on_ready);
  extender::ExtenderOptions extender_options;
  LINKFIT_ASSIGN_OR_RETURN(extender_options, ExtenderOptionsFrom(config_));
  options.defaults = extender_options.defaults;
  options.fit = extender_options.fit;
  LINKFIT_ASSIGN_OR_RETURN(cluster_,
                           cluster::ClusterSource::Create(options, *cache_, *factory_, metrics_));
  extender_ = std::make_unique<extender::Extender>(*cache_, std::move(extender_options),
                                                   cluster_->binder(), cluster_->pods(), metrics_);
  handler_ = std::make_unique<wire::Handler>(*extender_);
  cluster::ClusterSource* source = cluster_.get();
  handler_->SetReadiness([source] { return source->NotReadyReason(); });
  handler_->SetBindingStatus([source] { return BindingStatusJson(*source); });
  return {};
}

Result<void> Service::Listen() {
  server::ServerOptions options;
  options.routes = config_.ops_listen ? server::RouteSet::kExtender : server::RouteSet::kAll;
  options.host = config_.listen_host;
  options.port = config_.listen_port;
  options.url_prefix = config_.url_prefix;
  options.tls = {config_.tls.cert_file, config_.tls.key_file, config_.tls.client_ca_file,
                 config_.tls.require_client_cert};
  options.max_body_bytes = static_cast<std::size_t>(config_.limits.max_body_bytes);
  options.read_timeout = std::chrono::milliseconds(config_.limits.read_timeout_ms);
  options.write_timeout = std::chrono::milliseconds(config_.limits.write_timeout_ms);
  options.threads = config_.limits.threads;
  options.keep_alive_timeout = std::chrono::seconds(config_.limits.keep_alive_timeout_s);
  LINKFIT_ASSIGN_OR_RETURN(server_, server::NewServer(options, *handler_, metrics_));
  if (auto started = server_->Start(); !started) return started;
  if (config_.ops_listen) {
    // Plain HTTP for probes and Prometheus (the NetworkPolicy limits who reaches it); its own
    // few threads.
    server::ServerOptions ops = options;
    ops.routes = server::RouteSet::kOperations;
    ops.host = config_.ops_listen_host;
    ops.port = config_.ops_listen_port;
    ops.tls = {};
    ops.threads = 4;
    LINKFIT_ASSIGN_OR_RETURN(ops_server_, server::NewServer(ops, *handler_, metrics_));
    if (auto started = ops_server_->Start(); !started) return started;
  }
  return {};
}

Result<std::unique_ptr<Service>> Service::Start(const Config& config,
                                                std::function<void()> on_ready) {
  std::unique_ptr<Service> service(new Service(config));
  Service& s = *service;
  LINKFIT_ASSIGN_OR_RETURN(s.catalog_, alloc::MigCatalog::LoadDirectory(config.mig_profiles_dir));
  topology::BandwidthModel bandwidth;
  LINKFIT_ASSIGN_OR_RETURN(bandwidth, BandwidthModelFrom(config));
  s.factory_ = std::make_unique<model::NodeModelFactory>(s.tables_, s.catalog_, bandwidth);
  s.cache_ = std::make_unique<state::ClusterCache>(&s.metrics_);
  const bool cluster_mode = config.kubernetes.enabled || config.kubernetes.kubeconfig.has_value();
  if (cluster_mode) {
    if (auto ok = s.StartCluster(std::move(on_ready)); !ok) return tl::unexpected(ok.error());
  } else {
    if (auto ok = s.LoadStandalone(); !ok) return tl::unexpected(ok.error());
  }
  if (auto ok = s.Listen(); !ok) return tl::unexpected(ok.error());
  if (cluster_mode) {
    s.cluster_->Start();
    return service;
  }
  if (on_ready) on_ready();
  s.handler_->SetReady(true);
  log::Info("linkfit: " + std::to_string(s.stats_.nodes) + " nodes (" +
            std::to_string(s.stats_.topologies) + " topologies, " +
            std::to_string(s.tables_.size()) + " placement tables), " +
            std::to_string(s.stats_.allocations) + " allocations restored");
  return service;
}

}  // namespace linkfit::app
