#include "linkfit/cluster/cluster_source.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "linkfit/common/log.h"

namespace linkfit::cluster {

// Forwards the client's and the reflectors' counts to the metrics sink.
class ClusterSource::Observer final : public kube::ApiCallObserver, public kube::ReflectorObserver {
 public:
  explicit Observer(MetricsSink& metrics) : metrics_(metrics) {}
  void ApiCall(std::string_view verb, int code) override { metrics_.CountApiCall(verb, code); }
  void WatchEvent(std::string_view kind, std::string_view type) override {
    metrics_.CountWatchEvent(kind, type);
  }
  void Relist(std::string_view kind, std::string_view reason) override {
    metrics_.CountRelist(kind, reason);
  }
  // The reflector has logged the error; count it only.
  void ReflectorError(std::string_view kind, std::string_view message) override {
    (void)message;
    metrics_.CountReflectorError(kind);
  }

 private:
  MetricsSink& metrics_;
};

namespace {

// Events name the linkfit replica that saw something: its pod name, else the host name.
std::string ReportingInstance() {
  if (const char* pod = std::getenv("POD_NAME"); pod != nullptr && *pod != '\0') return pod;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0') return host;
  return "linkfit";
}

}  // namespace

ClusterSource::ClusterSource(state::ClusterCache& cache, MetricsSink& metrics)
    : cache_(cache), metrics_(metrics), observer_(std::make_unique<Observer>(metrics)) {}

Result<std::unique_ptr<ClusterSource>> ClusterSource::Create(const ClusterOptions& options,
                                                             state::ClusterCache& cache,
                                                             model::NodeModelFactory& factory,
                                                             MetricsSink& metrics) {
  std::unique_ptr<ClusterSource> source(new ClusterSource(cache, metrics));
  source->options_ = options;
  LINKFIT_ASSIGN_OR_RETURN(source->node_client_,
                           kube::NewApiClient(options.client, source->observer_.get()));
  LINKFIT_ASSIGN_OR_RETURN(source->pod_client_,
                           kube::NewApiClient(options.client, source->observer_.get()));
  // The binder's client waits for a Binding's answer until its deadline at the API server has
  // passed (the server answers 504 then).
  kube::ClientConfig bind_config = options.client;
  bind_config.timeout = std::max(bind_config.timeout, options.settle.horizon());
  LINKFIT_ASSIGN_OR_RETURN(source->bind_client_,
                           kube::NewApiClient(bind_config, source->observer_.get()));
  LINKFIT_ASSIGN_OR_RETURN(source->event_client_,
                           kube::NewApiClient(options.client, source->observer_.get()));
  source->events_ = std::make_unique<EventRecorder>(*source->event_client_, ReportingInstance());
  source->pods_ = std::make_unique<PodStore>(cache, options.defaults, options.fit, metrics);
  source->pods_->SetEventRecorder(source->events_.get());
  source->nodes_ = std::make_unique<NodeStore>(cache, factory, *source->pods_, metrics);
  // Bind may be asked about a pod linkfit's watch has not delivered yet: read it (the bind path
  // may call the API server; filter and prioritize never do).
  kube::ApiClient* bind_client = source->bind_client_.get();
  source->pods_->SetFetcher(
      [bind_client](const std::string& ns, const std::string& name) -> std::optional<std::string> {
        auto reply = bind_client->Get("/api/v1/namespaces/" + ns + "/pods/" + name, "get");
        if (!reply || reply->status != 200) return std::nullopt;
        return std::move(reply->body);
      });
  source->lease_ = std::make_unique<BinderLease>(*source->bind_client_, options.lease, metrics);
  model::NicResources nic_resources;  // the NIC resources of the pod API, to plan containers
  nic_resources.whole = {options.defaults.nic_resource};
  nic_resources.whole.insert(nic_resources.whole.end(), options.defaults.nic_resources.begin(),
                             options.defaults.nic_resources.end());
  nic_resources.share = options.defaults.nic_share_resource;
  source->binder_ = std::make_unique<ApiBinder>(
      *source->bind_client_, cache, *source->pods_, *source->lease_,
      options.defaults.shared_gpu_resource, metrics, options.settle, std::move(nic_resources));
  const auto reflector_options = [&](const char* kind, const char* path) {
    kube::ReflectorOptions r;
    r.kind = kind;
    r.path = path;
    r.page_size = options.page_size;
    r.watch_timeout_seconds = options.watch_timeout_seconds;
    r.watch_idle_timeout = options.watch_idle_timeout;
    r.initial_backoff = options.initial_backoff;
    r.max_backoff = options.max_backoff;
    return r;
  };
  source->node_reflector_ = std::make_unique<kube::Reflector>(
      *source->node_client_, *source->nodes_, reflector_options("nodes", "/api/v1/nodes"),
      source->observer_.get());
  source->pod_reflector_ = std::make_unique<kube::Reflector>(
      *source->pod_client_, *source->pods_, reflector_options("pods", "/api/v1/pods"),
      source->observer_.get());
  return source;
}

ClusterSource::~ClusterSource() { Stop(); }

void ClusterSource::Start() {
  stage_ = 1;
  log::Info("cluster mode: listing nodes and pods from " + options_.client.server + " (" +
            options_.client.source + ")");
  events_->Start();
  // Read the binder lease first: a predecessor's Bindings are waited for from now on.
  lease_->Start();
  node_reflector_->Start();
  starter_ = std::thread([this] { StartPodsWhenNodesSynced(); });
}

void ClusterSource::StartPodsWhenNodesSynced() {
  const auto started = std::chrono::steady_clock::now();
  const auto poll = std::chrono::milliseconds(2);
  while (!stopping_ && !node_reflector_->synced()) std::this_thread::sleep_for(poll);
  if (stopping_) return;
  stage_ = 2;
  pod_reflector_->Start();
  while (!stopping_ && !pod_reflector_->synced()) std::this_thread::sleep_for(poll);
  if (stopping_) return;
  if (options_.on_ready) options_.on_ready();
  stage_ = 3;
  ready_ = true;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  metrics_.SetTimeToReady(seconds);
  const state::ClusterCache::Sizes sizes = cache_.sizes();
  log::Info("cluster mode: ready after " + std::to_string(seconds) + " s: " +
            std::to_string(nodes_->known()) + " nodes (" + std::to_string(nodes_->modelled()) +
            " with a GPU topology), " + std::to_string(pods_->size()) + " pods (" +
            std::to_string(sizes.added) + " counted on GPU nodes, " +
            std::to_string(pods_->estimated_pods()) + " with estimated devices)");
}

bool ClusterSource::WaitReady(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!ready_) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

std::string ClusterSource::NotReadyReason() const {
  switch (stage_.load()) {
    case 0:
      return "linkfit has not started watching the API server";
    case 1:
      return "linkfit is still listing nodes from the API server";
    case 2:
      return "linkfit is still listing pods from the API server";
    default:
      return "";
  }
}

void ClusterSource::Stop() {
  stopping_ = true;
  if (starter_.joinable()) starter_.join();
  if (pod_reflector_) pod_reflector_->Stop();
  if (node_reflector_) node_reflector_->Stop();
  if (binder_) binder_->Stop();
  if (lease_) lease_->Stop(options_.settle.horizon());
  if (events_) events_->Stop();
}

}  // namespace linkfit::cluster
