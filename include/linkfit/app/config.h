#pragma once

// Config: linkfit's start-up configuration, read from a YAML file (config/linkfit.yaml documents
// every key with its default). Loading is strict, like kube-scheduler's own config codec: an
// unknown or misspelt key anywhere is an error that names its YAML path and the known keys
// ("policy.weigths: unknown key; known keys: weights, default_closeness, ..."), and a value of
// the wrong type or out of range names the key, the value and its line. A bad config stops
// start-up; nothing is silently ignored or defaulted over.
//
// Relative paths in the file (TLS files, mig_profiles_dir, cluster_file, state_file, the
// Kubernetes token and CA files) are resolved against the directory of the config file, so a
// config works wherever the process is started from.
//
// Thread-safety: plain values and pure functions.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/result.h"

namespace linkfit::app {

struct TlsConfig {
  std::string cert_file;             // PEM chain; TLS is on when cert_file and key_file are set
  std::string key_file;              // PEM private key
  std::string client_ca_file;        // verify client certificates against this CA bundle
  bool require_client_cert = false;  // mTLS: refuse clients without a valid certificate
};

struct LimitsConfig {
  std::uint64_t max_body_bytes = std::uint64_t{64} << 20;  // "64Mi"
  std::int64_t read_timeout_ms = 10000;
  std::int64_t write_timeout_ms = 10000;
  int threads = 16;
  std::int64_t keep_alive_timeout_s = 90;
};

struct PolicyWeights {
  // The setting measured in bench/RESULTS.md (with score_range 140 and extender weight 1): the
  // same as extender::ScoreWeights' (a test holds them equal; this module stays free of the
  // extender).
  double topology = 3.0;       // ring/sum bandwidth of the chosen set
  double packing = 1.0;        // prefer nodes that are already partly used
  double fragmentation = 3.0;  // penalise placements that break up good free sets
  double balance = 3.0;        // keep CPU and memory use in step with GPU use on each node
};

struct PolicyConfig {
  PolicyWeights weights;
  std::string default_closeness = "node";              // nvlink|pcie-switch|numa|socket|node
  std::string default_closeness_policy = "preferred";  // required|preferred
  std::string share_policy = "pack";                   // pack|spread
  // Whole machines (extender/whole_machines.h): keep|ring|off.
  std::string whole_machines = "ring";
  // The share of score_range a node loses for breaking a whole machine (whole_machines.h).
  double whole_machine_penalty = 0.5;
  // What prioritize counts as NICs serving a pod well (extender/node_fit.h NicAlignment):
  // aligned|rate.
  std::string nic_alignment = "aligned";
  int score_range = 140;  // highest prioritize score
};

struct KubernetesConfig {
  bool enabled = false;
  // A kubeconfig file (with `context`, or its current-context); unset: api_server, or in-cluster.
  std::optional<std::string> kubeconfig;
  std::string context;
  std::string api_server;  // empty: in-cluster (KUBERNETES_SERVICE_HOST/PORT)
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  double qps = 50;  // kube-scheduler's own defaults, not client-go's 5/10
  int burst = 100;
  int request_timeout_ms = 10000;  // one API request (not watches)
  int list_page_size = 500;
  // The Binding also sets NRI's required-plugins.noderesource.dev/container.<name> for every
  // container linkfit plans, so that where the runtime's default validator runs, a container
  // cannot start unless linkfit's NRI plugin handed it its devices. Off by default: turn it on
  // only where every GPU node runs linkfit-agent with --nri-socket.
  bool require_nri_plugin = false;
  // Exactly-once binding (README "Binding exactly once"): every Binding carries this deadline
  // for the API server (its `timeout` parameter), after which it can no longer land; plus a
  // margin for a write already handed to etcd. Only the holder of the binder lease sends
  // Bindings, and only while the lease outlasts the Binding's deadline and margin.
  int bind_timeout_ms = 5000;
  int bind_settle_margin_ms = 2000;
  struct BinderLease {
    bool enabled = true;
    std::string lease_namespace = "linkfit-system";
    std::string name = "linkfit-binder";
    int duration_ms = 15000;
  } binder_lease;
};

struct Config {
  std::string listen = "0.0.0.0:8888";
  std::string listen_host = "0.0.0.0";  // from `listen`; IPv6 without brackets
  int listen_port = 8888;
  // The operations listener (/healthz, /readyz, /metrics, /inspect, /explain) on its own threads;
  // unset: one listener serves everything.
  std::optional<std::string> ops_listen;
  std::string ops_listen_host;
  int ops_listen_port = 0;
  std::string url_prefix = "/scheduler";  // no trailing '/'; "" serves verbs at the root
  TlsConfig tls;
  LimitsConfig limits;
  PolicyConfig policy;
  std::map<std::string, double> bandwidth_overrides;  // key -> GB/s, keys checked by topology
  std::string mig_profiles_dir;                       // see ParseConfig for the default
  std::optional<std::string> cluster_file;            // standalone mode's nodes and allocations
  std::optional<std::string> state_file;
  std::string shared_gpu_resource = "linkfit.io/gpu-share";
  // RDMA NICs (README "Pod API"): the resource of whole NICs, other resources counted like it
  // (a cluster's RDMA device plugins, e.g. rdma/hca), the resource of NIC shares, and the NIC
  // closeness of a pod that names none (pix|pxb|numa|node). Resource names are distinct.
  std::string nic_resource = "linkfit.io/rdma";
  std::vector<std::string> nic_resources;
  std::string nic_share_resource = "linkfit.io/rdma-share";
  std::string nic_closeness = "pxb";
  KubernetesConfig kubernetes;
  std::string log_level = "info";  // debug|info|warning|error|off
  std::string base_dir;            // directory relative paths were resolved against
};

// Parses a config document. Relative paths are resolved against `base_dir` (left relative when
// it is empty). mig_profiles_dir defaults to "<base_dir>/mig", or "config/mig" when base_dir is
// empty (the repository layout, run from the repository root). An empty document gives the
// defaults. Errors read "<source>:<line>:<column>: <key path>: <problem>".
Result<Config> ParseConfig(std::string_view yaml, const std::string& base_dir = "",
                           const std::string& source = "config");

// Reads and parses the file at `path`, resolving relative paths against its directory (so the
// repository's config/linkfit.yaml finds config/mig).
Result<Config> LoadConfig(const std::string& path);

// Parses a byte size: a plain integer or one with a Kubernetes quantity suffix (Ki, Mi, Gi, Ti
// binary; k, M, G, T decimal), e.g. "64Mi", "1048576", "1G". Errors name the text.
Result<std::uint64_t> ParseByteSize(std::string_view text);

}  // namespace linkfit::app
