#pragma once

// ClusterSource: cluster mode's composition. It keeps the ClusterCache in step with the API
// server and binds through it:
//
//   nodes reflector --> NodeStore --+--> ClusterCache <-- Extender (filter/prioritize/bind)
//   pods reflector  --> PodStore  --+        ^                 |
//                          ^ PodSource       |  assume/confirm |
//                          +----- ApiBinder -+<----------------+ POST pods/binding
//
// Start-up: the nodes are listed first, then the pods (so that every bound pod finds its node),
// and only then is the source Ready(): until then filter and prioritize answer with an error,
// never with an empty list, which kube-scheduler would read as "no node fits". After that the
// reflectors keep watching (a cut watch resumes, a 410 relists); no API call is made on the
// filter/prioritize path. Each reflector and the binder have a connection of their own.
//
// Thread-safety: Start/Stop from one controlling thread; everything else is safe from any
// thread.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "linkfit/cluster/api_binder.h"
#include "linkfit/cluster/event_recorder.h"
#include "linkfit/cluster/node_store.h"
#include "linkfit/cluster/pod_store.h"
#include "linkfit/common/metrics.h"
#include "linkfit/kube/api_client.h"
#include "linkfit/kube/reflector.h"
#include "linkfit/model/node_model.h"
#include "linkfit/state/cluster_cache.h"

namespace linkfit::cluster {

struct ClusterOptions {
  kube::ClientConfig client;
  extender::RequestDefaults defaults;
  extender::FitOptions fit;
  int page_size = 500;
  int watch_timeout_seconds = 300;
  std::chrono::milliseconds watch_idle_timeout{std::chrono::seconds(150)};
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{std::chrono::seconds(30)};
  SettleOptions settle;
  BinderLeaseOptions lease;
  // Called once on the source's own thread when the initial lists are applied, just before
  // Ready() turns true (`linkfit serve` releases the lists' freed memory there).
  std::function<void()> on_ready;
};

class ClusterSource {
 public:
  // Creates the API clients (errors: a bad server URL or certificate). Nothing is contacted
  // before Start. Every reference must outlive the source.
  static Result<std::unique_ptr<ClusterSource>> Create(const ClusterOptions& options,
                                                       state::ClusterCache& cache,
                                                       model::NodeModelFactory& factory,
                                                       MetricsSink& metrics);
  ~ClusterSource();
  ClusterSource(const ClusterSource&) = delete;
  ClusterSource& operator=(const ClusterSource&) = delete;

  // Starts listing and watching. REQUIRES: called at most once.
  void Start();
  // Stops the reflectors and the binder's settler, and releases the binder lease once every
  // Binding sent can no longer land (waiting up to one Binding's horizon); in-flight
  // assumptions stay as they are.
  void Stop();

  // The initial node and pod lists have been applied.
  bool Ready() const { return ready_.load(); }
  // Waits up to `timeout` for Ready().
  bool WaitReady(std::chrono::milliseconds timeout) const;
  // Why the source is not ready yet ("listing nodes", "listing pods").
  std::string NotReadyReason() const;

  PodStore& pods() { return *pods_; }
  NodeStore& nodes() { return *nodes_; }
  ApiBinder& binder() { return *binder_; }
  const BinderLease& lease() const { return *lease_; }

 private:
  class Observer;
  ClusterSource(state::ClusterCache& cache, MetricsSink& metrics);
  void StartPodsWhenNodesSynced();

  state::ClusterCache& cache_;
  MetricsSink& metrics_;
  ClusterOptions options_;
  std::unique_ptr<Observer> observer_;
  kube::ApiClientPtr node_client_;
  kube::ApiClientPtr pod_client_;
  kube::ApiClientPtr bind_client_;
  kube::ApiClientPtr event_client_;
  std::unique_ptr<EventRecorder> events_;
  std::unique_ptr<PodStore> pods_;
  std::unique_ptr<NodeStore> nodes_;
  std::unique_ptr<BinderLease> lease_;
  std::unique_ptr<ApiBinder> binder_;
  std::unique_ptr<kube::Reflector> node_reflector_;
  std::unique_ptr<kube::Reflector> pod_reflector_;
  std::thread starter_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> ready_{false};
  std::atomic<int> stage_{0};  // 0 not started, 1 listing nodes, 2 listing pods, 3 ready
};

}  // namespace linkfit::cluster
