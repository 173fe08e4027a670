#include "linkfit/server/prometheus_metrics.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "linkfit/common/mutex.h"

namespace linkfit::server {
namespace {

constexpr std::array<Verb, 4> kVerbs = {Verb::kFilter, Verb::kPrioritize, Verb::kBind,
                                        Verb::kPreempt};

std::size_t VerbIndex(Verb verb) { return static_cast<std::size_t>(verb); }

// 10 us .. 1 s: the DESIGN §11 targets sit between 0.15 ms and 2 ms, binds with their API call
// reach tens of milliseconds, and the scheduler gives up at 5 s anyway.
prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
          0.005,   0.01,     0.025,   0.05,   0.1,     0.25,   0.5,   1.0};
}

// linkfit_gpus is not a prometheus-cpp family: its series are synthesized at Render() from one
// compact record per node (see Impl::node_gpus).
constexpr std::string_view kGpusName = "linkfit_gpus";
constexpr std::string_view kGpusHelp =
    "Whole-GPU equivalents per node and GPU model, used or free.";
// The registered family that follows linkfit_gpus in the exposition (the place prometheus-cpp
// gave linkfit_gpus when it was registered between the cache and fragmentation gauges).
constexpr std::string_view kAfterGpusName = "linkfit_fragmentation_ratio";
// Nodes serialized per MetricFamily at Render(): bounds the temporary ClientMetrics (about
// 330 B per series with its labels) to a few hundred kilobytes however many nodes there are.
constexpr std::size_t kGpusNodesPerChunk = 256;

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view text) const {
    return std::hash<std::string_view>{}(text);
  }
};

// One node's linkfit_gpus figures, as Render() copies them out of the lock.
struct GpusRow {
  std::string node;
  std::uint32_t model = 0;
  double used = 0;
  double free = 0;
};

prometheus::ClientMetric GpusSeries(const std::string& node, const std::string& model,
                                    const char* state, double value) {
  prometheus::ClientMetric metric;
  // In the order prometheus-cpp's Labels (a std::map) gave them: model, node, state.
  metric.label = {{"model", model}, {"node", node}, {"state", state}};
  metric.gauge.value = value;
  return metric;
}

prometheus::MetricFamily GpusFamily() {
  prometheus::MetricFamily family;
  family.name = std::string(kGpusName);
  family.help = std::string(kGpusHelp);
  family.type = prometheus::MetricType::Gauge;
  return family;
}

// Appends the linkfit_gpus family (two series per row, `rows` sorted by node) to `out`, one chunk
// of rows at a time; the chunks after the first are written without the family's header.
void AppendGpusFamily(const std::vector<GpusRow>& rows, const std::vector<std::string>& models,
                      const prometheus::TextSerializer& serializer, std::string& out) {
  if (rows.empty()) return;  // as prometheus-cpp, which leaves out a family without series
  std::ostringstream text;
  serializer.Serialize(text, {GpusFamily()});
  const std::string header = text.str();
  for (std::size_t begin = 0; begin < rows.size(); begin += kGpusNodesPerChunk) {
    const std::size_t end = std::min(rows.size(), begin + kGpusNodesPerChunk);
    std::vector<prometheus::MetricFamily> chunk(1, GpusFamily());
    chunk[0].metric.reserve(2 * (end - begin));
    for (std::size_t i = begin; i < end; ++i) {
      const GpusRow& row = rows[i];
      chunk[0].metric.push_back(GpusSeries(row.node, models[row.model], "free", row.free));
      chunk[0].metric.push_back(GpusSeries(row.node, models[row.model], "used", row.used));
    }
    text.str("");
    serializer.Serialize(text, chunk);
    const std::string serialized = text.str();
    const bool repeated_header = begin > 0 && serialized.compare(0, header.size(), header) == 0;
    out.append(serialized, repeated_header ? header.size() : 0);
  }
}

}  // namespace

std::string_view VerbName(Verb verb) {
  switch (verb) {
    case Verb::kFilter:
      return "filter";
    case Verb::kPrioritize:
      return "prioritize";
    case Verb::kBind:
      return "bind";
    case Verb::kPreempt:
      return "preempt";
  }
  return "unknown";
}

struct PrometheusMetrics::Impl {
  // One node's linkfit_gpus series: its GPU model (an index into `models`) and the two values.
  // About 140 B per node with the map's node, its bucket and the name's heap block, where two
  // prometheus-cpp gauges (each with its own label map and hash-map entries) took about 1.25 KB
  // (mallinfo2 over 5,000 nodes with 25-character names).
  struct NodeGpus {
    double used = 0;
    double free = 0;
    std::uint32_t model = 0;
  };

  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();

  prometheus::Family<prometheus::Histogram>& duration =
      prometheus::BuildHistogram()
          .Name("linkfit_request_duration_seconds")
          .Help("Time spent in linkfit's handler per extender verb, in seconds.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& requests =
      prometheus::BuildCounter()
          .Name("linkfit_requests_total")
          .Help(
              "Extender requests by verb and outcome (ok, bad_request, error, exception, "
              "too_large, empty_body).")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& filter_nodes =
      prometheus::BuildCounter()
          .Name("linkfit_filter_nodes_total")
          .Help("Nodes judged by filter: passed, failed (resolvable) or unresolvable.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& cache_nodes = prometheus::BuildGauge()
                                                           .Name("linkfit_cache_nodes")
                                                           .Help("GPU nodes in linkfit's cache.")
                                                           .Register(*registry);
  prometheus::Family<prometheus::Gauge>& cache_pods =
      prometheus::BuildGauge()
          .Name("linkfit_cache_pods")
          .Help("Pods in linkfit's cache: assumed (bind sent, not yet seen bound) or bound.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& fragmentation =
      prometheus::BuildGauge()
          .Name("linkfit_fragmentation_ratio")
          .Help(
              "Share (0..1) of free whole GPUs that cannot serve their node's largest "
              "well-connected request any more.")
          .Register(*registry);

  // Cluster mode.
  prometheus::Family<prometheus::Counter>& watch_events =
      prometheus::BuildCounter()
          .Name("linkfit_watch_events_total")
          .Help("Watch events received from the API server by kind (pods, nodes) and type.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& relists =
      prometheus::BuildCounter()
          .Name("linkfit_relists_total")
          .Help("Lists of a kind from the API server by reason (initial, gone, error).")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& api_calls =
      prometheus::BuildCounter()
          .Name("linkfit_api_calls_total")
          .Help("API-server calls by verb and HTTP code (0: no reply).")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& bind_outcomes =
      prometheus::BuildCounter()
          .Name("linkfit_bind_outcomes_total")
          .Help(
              "Binding writes by outcome: bound, rejected, unknown (no answer, devices kept), "
              "settled (an unknown outcome resolved), replaced (the API's record of the pod names "
              "other devices), displaced (a committed record took the devices first).")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& binds_held_family =
      prometheus::BuildCounter()
          .Name("linkfit_binds_held_total")
          .Help(
              "Binds refused because another linkfit holds the binder lease, or this one could "
              "not take it yet (kube-scheduler retries them).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& lease_held_family =
      prometheus::BuildGauge()
          .Name("linkfit_binder_lease_held")
          .Help("1 while this linkfit holds the binder lease and may send Bindings.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& lease_transitions =
      prometheus::BuildCounter()
          .Name("linkfit_binder_lease_transitions_total")
          .Help("Binder lease transitions: acquired, taken_over, released, lost.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& in_doubt_family =
      prometheus::BuildGauge()
          .Name("linkfit_binds_in_doubt")
          .Help("Bindings sent whose outcome is not known yet (devices kept until settled).")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& collisions_family =
      prometheus::BuildCounter()
          .Name("linkfit_allocation_collisions_total")
          .Help(
              "Pods whose committed linkfit.io/allocation names a device another pod's record "
              "holds (a GPU given twice; must stay 0).")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& reflector_errors =
      prometheus::BuildCounter()
          .Name("linkfit_reflector_errors_total")
          .Help("List and watch errors of the API reflectors, by kind.")
          .Register(*registry);
  prometheus::Counter& binds_held = binds_held_family.Add({});
  prometheus::Gauge& lease_held = lease_held_family.Add({});
  prometheus::Gauge& binds_in_doubt = in_doubt_family.Add({});
  prometheus::Counter& allocation_collisions = collisions_family.Add({});
  prometheus::Family<prometheus::Counter>& bad_objects =
      prometheus::BuildCounter()
          .Name("linkfit_bad_objects_total")
          .Help(
              "Objects linkfit could not use, by kind and what was wrong (topology, mig-mode, "
              "allocation, allocation-collision, overcommitted, json, uid, pods-dropped).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& estimated =
      prometheus::BuildGauge()
          .Name("linkfit_estimated_pods")
          .Help(
              "GPU pods placed by another scheduler whose devices linkfit estimated (no "
              "linkfit.io/allocation record).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& reported =
      prometheus::BuildGauge()
          .Name("linkfit_reported_pods")
          .Help(
              "GPU pods counted on the devices their node's agent reports them holding "
              "(linkfit.io/devices-in-use).")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& mismatches =
      prometheus::BuildCounter()
          .Name("linkfit_handoff_mismatch_total")
          .Help(
              "Pods linkfit placed whose node reports other devices than their "
              "linkfit.io/allocation (the node ignored linkfit's choice).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& handoff_modes =
      prometheus::BuildGauge()
          .Name("linkfit_nodes_by_handoff_mode")
          .Help(
              "Nodes linkfit models, by how their agent hands devices to containers: nri-cdi, "
              "nri-env, verify, report, or unreported (/inspect shows each node's).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& pod_store =
      prometheus::BuildGauge()
          .Name("linkfit_pod_store_pods")
          .Help("Pods known from the API server's watch.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& time_to_ready =
      prometheus::BuildGauge()
          .Name("linkfit_time_to_ready_seconds")
          .Help("Seconds from start-up until the initial node and pod lists were applied.")
          .Register(*registry);
  prometheus::Gauge& estimated_pods = estimated.Add({});
  prometheus::Gauge& pod_store_pods = pod_store.Add({});
  prometheus::Gauge& reported_pods = reported.Add({});
  prometheus::Counter& handoff_mismatches = mismatches.Add({});
  prometheus::Gauge& ready_seconds = time_to_ready.Add({});

  std::array<prometheus::Histogram*, 4> duration_by_verb{};
  std::array<prometheus::Counter*, 4> ok_by_verb{};
  prometheus::Counter& passed = filter_nodes.Add({{"result", "passed"}});
  prometheus::Counter& failed = filter_nodes.Add({{"result", "failed"}});
  prometheus::Counter& unresolvable = filter_nodes.Add({{"result", "unresolvable"}});
  prometheus::Gauge& nodes = cache_nodes.Add({});
  prometheus::Gauge& assumed_pods = cache_pods.Add({{"state", "assumed"}});
  prometheus::Gauge& bound_pods = cache_pods.Add({{"state", "bound"}});
  prometheus::Gauge& fragmentation_ratio = fragmentation.Add({});

  Mutex nodes_mutex;
  // GPU models seen, interned: a handful per cluster, kept for the process's life.
  std::vector<std::string> models LINKFIT_GUARDED_BY(nodes_mutex);
  std::unordered_map<std::string, NodeGpus, StringHash, std::equal_to<>> node_gpus
      LINKFIT_GUARDED_BY(nodes_mutex);

  Impl() {
    for (const Verb verb : kVerbs) {
      const std::string name(VerbName(verb));
      duration_by_verb[VerbIndex(verb)] = &duration.Add({{"verb", name}}, LatencyBuckets());
      ok_by_verb[VerbIndex(verb)] = &requests.Add({{"verb", name}, {"outcome", "ok"}});
    }
  }

  prometheus::Counter& RequestCounter(Verb verb, std::string_view outcome) {
    if (outcome == "ok") return *ok_by_verb[VerbIndex(verb)];
    // Family::Add returns the existing series for known labels (it takes the family's lock).
    return requests.Add({{"verb", std::string(VerbName(verb))}, {"outcome", std::string(outcome)}});
  }

  // Returns the index of `model` in `models`, adding it if it is new.
  std::uint32_t InternModelLocked(std::string_view model) LINKFIT_REQUIRES(nodes_mutex) {
    const auto it = std::find(models.begin(), models.end(), model);
    if (it != models.end()) return static_cast<std::uint32_t>(it - models.begin());
    models.emplace_back(model);
    return static_cast<std::uint32_t>(models.size() - 1);
  }
};

PrometheusMetrics::PrometheusMetrics() : impl_(std::make_unique<Impl>()) {}

PrometheusMetrics::~PrometheusMetrics() = default;

void PrometheusMetrics::ObserveRequest(Verb verb, std::string_view outcome, double seconds) {
  impl_->duration_by_verb[VerbIndex(verb)]->Observe(seconds);
  impl_->RequestCounter(verb, outcome).Increment();
}

void PrometheusMetrics::CountRequest(Verb verb, std::string_view outcome) {
  impl_->RequestCounter(verb, outcome).Increment();
}

void PrometheusMetrics::CountFilterNodes(std::uint64_t passed, std::uint64_t failed,
                                         std::uint64_t unresolvable) {
  impl_->passed.Increment(static_cast<double>(passed));
  impl_->failed.Increment(static_cast<double>(failed));
  impl_->unresolvable.Increment(static_cast<double>(unresolvable));
}

void PrometheusMetrics::SetCacheSizes(std::uint64_t nodes, std::uint64_t assumed_pods,
                                      std::uint64_t bound_pods) {
  impl_->nodes.Set(static_cast<double>(nodes));
  impl_->assumed_pods.Set(static_cast<double>(assumed_pods));
  impl_->bound_pods.Set(static_cast<double>(bound_pods));
}

void PrometheusMetrics::SetNodeDevices(std::string_view node, std::string_view gpu_model,
                                       double used, double free) {
  MutexLock lock(impl_->nodes_mutex);
  auto it = impl_->node_gpus.find(node);
  if (it == impl_->node_gpus.end()) it = impl_->node_gpus.emplace(node, Impl::NodeGpus{}).first;
  // A changed model replaces the node's series: the next Render() shows only the new labels.
  it->second = {used, free, impl_->InternModelLocked(gpu_model)};
}

void PrometheusMetrics::RemoveNode(std::string_view node) {
  MutexLock lock(impl_->nodes_mutex);
  const auto it = impl_->node_gpus.find(node);
  if (it != impl_->node_gpus.end()) impl_->node_gpus.erase(it);
}

void PrometheusMetrics::SetFragmentation(double ratio) { impl_->fragmentation_ratio.Set(ratio); }

std::string PrometheusMetrics::Render() const {
  std::vector<prometheus::MetricFamily> first = impl_->registry->Collect();
  // The copy keeps the lock short: SetNodeDevices is called under the cluster cache's lock.
  std::vector<GpusRow> rows;
  std::vector<std::string> models;
  {
    MutexLock lock(impl_->nodes_mutex);
    models = impl_->models;
    rows.reserve(impl_->node_gpus.size());
    for (const auto& entry : impl_->node_gpus) {
      rows.push_back({entry.first, entry.second.model, entry.second.used, entry.second.free});
    }
  }
  std::sort(rows.begin(), rows.end(),
            [](const GpusRow& a, const GpusRow& b) { return a.node < b.node; });

  const auto after_gpus = std::find_if(
      first.begin(), first.end(),
      [](const prometheus::MetricFamily& family) { return family.name == kAfterGpusName; });
  std::vector<prometheus::MetricFamily> rest(std::make_move_iterator(after_gpus),
                                             std::make_move_iterator(first.end()));
  first.erase(after_gpus, first.end());

  const prometheus::TextSerializer serializer;
  std::string out = serializer.Serialize(first);
  AppendGpusFamily(rows, models, serializer, out);
  out += serializer.Serialize(rest);
  return out;
}

void PrometheusMetrics::CountApiCall(std::string_view verb, int code) {
  impl_->api_calls.Add({{"verb", std::string(verb)}, {"code", std::to_string(code)}}).Increment();
}

void PrometheusMetrics::CountWatchEvent(std::string_view kind, std::string_view type) {
  impl_->watch_events.Add({{"kind", std::string(kind)}, {"type", std::string(type)}}).Increment();
}

void PrometheusMetrics::CountRelist(std::string_view kind, std::string_view reason) {
  impl_->relists.Add({{"kind", std::string(kind)}, {"reason", std::string(reason)}}).Increment();
}

void PrometheusMetrics::CountBindOutcome(std::string_view outcome) {
  impl_->bind_outcomes.Add({{"outcome", std::string(outcome)}}).Increment();
}

void PrometheusMetrics::CountBindHeld() { impl_->binds_held.Increment(); }

void PrometheusMetrics::SetBinderLeaseHeld(bool held) { impl_->lease_held.Set(held ? 1 : 0); }

void PrometheusMetrics::CountBinderLease(std::string_view transition) {
  impl_->lease_transitions.Add({{"transition", std::string(transition)}}).Increment();
}

void PrometheusMetrics::SetBindsInDoubt(std::uint64_t binds) {
  impl_->binds_in_doubt.Set(static_cast<double>(binds));
}

void PrometheusMetrics::CountAllocationCollision() { impl_->allocation_collisions.Increment(); }

void PrometheusMetrics::CountReflectorError(std::string_view kind) {
  impl_->reflector_errors.Add({{"kind", std::string(kind)}}).Increment();
}

void PrometheusMetrics::CountBadObject(std::string_view kind, std::string_view what) {
  impl_->bad_objects.Add({{"kind", std::string(kind)}, {"what", std::string(what)}}).Increment();
}

void PrometheusMetrics::SetEstimatedPods(std::uint64_t pods) {
  impl_->estimated_pods.Set(static_cast<double>(pods));
}

void PrometheusMetrics::SetReportedPods(std::uint64_t pods) {
  impl_->reported_pods.Set(static_cast<double>(pods));
}

void PrometheusMetrics::CountHandoffMismatch() { impl_->handoff_mismatches.Increment(); }

void PrometheusMetrics::SetNodesByHandoffMode(std::string_view mode, std::uint64_t nodes) {
  impl_->handoff_modes.Add({{"mode", std::string(mode)}}).Set(static_cast<double>(nodes));
}

void PrometheusMetrics::SetPodStoreSize(std::uint64_t pods) {
  impl_->pod_store_pods.Set(static_cast<double>(pods));
}

void PrometheusMetrics::SetTimeToReady(double seconds) { impl_->ready_seconds.Set(seconds); }

}  // namespace linkfit::server
