#include "linkfit/app/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace linkfit::app {
namespace {

TEST(ConfigTest, EmptyDocumentGivesDefaults) {
  for (const std::string yaml : {"", "# only a comment\n", "---\n"}) {
    auto config = ParseConfig(yaml);
    ASSERT_TRUE(config.has_value()) << config.error().message;
    EXPECT_EQ(config->listen_host, "0.0.0.0");
    EXPECT_EQ(config->listen_port, 8888);
    EXPECT_EQ(config->url_prefix, "/scheduler");
    EXPECT_EQ(config->limits.max_body_bytes, 64u << 20);
    EXPECT_EQ(config->limits.keep_alive_timeout_s, 90);
    EXPECT_EQ(config->policy.score_range, 140);
    EXPECT_EQ(config->policy.weights.topology, 3.0);
    EXPECT_EQ(config->policy.weights.packing, 1.0);
    EXPECT_EQ(config->policy.weights.fragmentation, 3.0);
    EXPECT_EQ(config->policy.weights.balance, 3.0);
    EXPECT_EQ(config->policy.default_closeness, "node");
    EXPECT_EQ(config->mig_profiles_dir, "config/mig");
    EXPECT_FALSE(config->cluster_file.has_value());
    EXPECT_EQ(config->shared_gpu_resource, "linkfit.io/gpu-share");
    EXPECT_EQ(config->nic_resource, "linkfit.io/rdma");
    EXPECT_TRUE(config->nic_resources.empty());
    EXPECT_EQ(config->nic_share_resource, "linkfit.io/rdma-share");
    EXPECT_EQ(config->nic_closeness, "pxb");
    EXPECT_FALSE(config->kubernetes.enabled);
    EXPECT_EQ(config->kubernetes.qps, 50);
    EXPECT_EQ(config->kubernetes.burst, 100);
    EXPECT_FALSE(config->kubernetes.require_nri_plugin);
    EXPECT_EQ(config->log_level, "info");
  }
}

TEST(ConfigTest, FullDocument) {
  const std::string yaml = R"(
listen: "[::]:9443"
url_prefix: /ext/
tls:
  cert_file: tls/server.crt
  key_file: /abs/server.key
  client_ca_file: tls/ca.crt
  require_client_cert: true
limits:
  max_body_bytes: 128Mi
  read_timeout_ms: 5000
  write_timeout_ms: 6000
  threads: 8
  keep_alive_timeout_s: 120
policy:
  weights: {topology: 2, packing: 0.5, fragmentation: 0, balance: 1.5}
  default_closeness: nvlink
  default_closeness_policy: required
  share_policy: spread
  whole_machines: ring
  nic_alignment: rate
  score_range: 100
bandwidth_overrides:
  PIX_gen4: 26
  NVSWITCH_H100: 450.5
mig_profiles_dir: profiles
cluster_file: clusters/demo.yaml
state_file: ~
shared_gpu_resource: example.com/gpu-share
nic_resource: example.com/ib
nic_resources: [rdma/hca, rdma/rdma_shared_device_a]
nic_share_resource: example.com/ib-milli
nic_closeness: numa
kubernetes:
  enabled: true
  api_server: https://10.0.0.1:6443
  qps: 20.5
  burst: 40
  require_nri_plugin: true
log_level: debug
)";
  auto config = ParseConfig(yaml, "/etc/linkfit");
  ASSERT_TRUE(config.has_value()) << config.error().message;
  EXPECT_EQ(config->listen_host, "::");
  EXPECT_EQ(config->listen_port, 9443);
  EXPECT_EQ(config->url_prefix, "/ext");
  EXPECT_EQ(config->tls.cert_file, "/etc/linkfit/tls/server.crt");
  EXPECT_EQ(config->tls.key_file, "/abs/server.key");
  EXPECT_EQ(config->tls.client_ca_file, "/etc/linkfit/tls/ca.crt");
  EXPECT_TRUE(config->tls.require_client_cert);
  EXPECT_EQ(config->limits.max_body_bytes, 128u << 20);
  EXPECT_EQ(config->limits.read_timeout_ms, 5000);
  EXPECT_EQ(config->limits.write_timeout_ms, 6000);
  EXPECT_EQ(config->limits.threads, 8);
  EXPECT_EQ(config->limits.keep_alive_timeout_s, 120);
  EXPECT_EQ(config->policy.weights.topology, 2);
  EXPECT_EQ(config->policy.weights.packing, 0.5);
  EXPECT_EQ(config->policy.weights.fragmentation, 0);
  EXPECT_EQ(config->policy.weights.balance, 1.5);
  EXPECT_EQ(config->policy.default_closeness, "nvlink");
  EXPECT_EQ(config->policy.default_closeness_policy, "required");
  EXPECT_EQ(config->policy.share_policy, "spread");
  EXPECT_EQ(config->policy.whole_machines, "ring");
  EXPECT_EQ(config->policy.nic_alignment, "rate");
  EXPECT_EQ(config->policy.score_range, 100);
  EXPECT_EQ(config->bandwidth_overrides.at("PIX_gen4"), 26);
  EXPECT_EQ(config->bandwidth_overrides.at("NVSWITCH_H100"), 450.5);
  EXPECT_EQ(config->mig_profiles_dir, "/etc/linkfit/profiles");
  EXPECT_EQ(config->cluster_file, "/etc/linkfit/clusters/demo.yaml");
  EXPECT_FALSE(config->state_file.has_value());
  EXPECT_EQ(config->shared_gpu_resource, "example.com/gpu-share");
  EXPECT_EQ(config->nic_resource, "example.com/ib");
  EXPECT_EQ(config->nic_resources,
            (std::vector<std::string>{"rdma/hca", "rdma/rdma_shared_device_a"}));
  EXPECT_EQ(config->nic_share_resource, "example.com/ib-milli");
  EXPECT_EQ(config->nic_closeness, "numa");
  EXPECT_TRUE(config->kubernetes.enabled);
  EXPECT_EQ(config->kubernetes.api_server, "https://10.0.0.1:6443");
  EXPECT_EQ(config->kubernetes.token_file, "/var/run/secrets/kubernetes.io/serviceaccount/token");
  EXPECT_EQ(config->kubernetes.qps, 20.5);
  EXPECT_EQ(config->kubernetes.burst, 40);
  EXPECT_TRUE(config->kubernetes.require_nri_plugin);
  EXPECT_EQ(config->log_level, "debug");
}

TEST(ConfigTest, ValidValues) {
  struct Case {
    std::string yaml;
    std::function<bool(const Config&)> check;
  };
  const std::vector<Case> cases = {
      {"listen: 127.0.0.1:0", [](const Config& c) { return c.listen_port == 0; }},
      {"listen: :8080",
       [](const Config& c) { return c.listen_host == "0.0.0.0" && c.listen_port == 8080; }},
      {"listen: linkfit.kube-system.svc:8888",
       [](const Config& c) { return c.listen_host == "linkfit.kube-system.svc"; }},
      {"url_prefix: /", [](const Config& c) { return c.url_prefix.empty(); }},
      {"limits: {max_body_bytes: 1048576}",
       [](const Config& c) { return c.limits.max_body_bytes == 1048576; }},
      {"limits: {max_body_bytes: 1G}",
       [](const Config& c) { return c.limits.max_body_bytes == 1000000000; }},
      {"limits: {max_body_bytes: \"2Gi\"}",
       [](const Config& c) { return c.limits.max_body_bytes == (2ull << 30); }},
      {"limits:", [](const Config& c) { return c.limits.threads == 16; }},
      {"tls: {cert_file: a.crt, key_file: a.key, client_ca_file: ca.crt}",
       [](const Config& c) { return c.tls.cert_file == "a.crt" && !c.tls.require_client_cert; }},
      {"cluster_file: \"\"", [](const Config& c) { return !c.cluster_file.has_value(); }},
      {"kubernetes: {enabled: True}", [](const Config& c) { return c.kubernetes.enabled; }},
      {"kubernetes: {bind_timeout_ms: 1000, bind_settle_margin_ms: 200, binder_lease: "
       "{namespace: ops, name: b, duration_ms: 3000}}",
       [](const Config& c) {
         const auto& k = c.kubernetes;
         return k.bind_timeout_ms == 1000 && k.bind_settle_margin_ms == 200 &&
                k.binder_lease.enabled && k.binder_lease.lease_namespace == "ops" &&
                k.binder_lease.name == "b" && k.binder_lease.duration_ms == 3000;
       }},
      {"kubernetes: {binder_lease: {enabled: false, duration_ms: 1000}}",
       [](const Config& c) { return !c.kubernetes.binder_lease.enabled; }},
      {"nic_resources: ~", [](const Config& c) { return c.nic_resources.empty(); }},
      {"nic_resources:\n  - rdma/hca\n",
       [](const Config& c) { return c.nic_resources == std::vector<std::string>{"rdma/hca"}; }},
      {"nic_closeness: node", [](const Config& c) { return c.nic_closeness == "node"; }},
      {"nic_closeness: pix", [](const Config& c) { return c.nic_closeness == "pix"; }},
      {"kubernetes:",
       [](const Config& c) {
         return c.kubernetes.bind_timeout_ms == 5000 &&
                c.kubernetes.binder_lease.duration_ms == 15000 &&
                c.kubernetes.binder_lease.name == "linkfit-binder";
       }},
  };
  for (const Case& c : cases) {
    auto config = ParseConfig(c.yaml);
    ASSERT_TRUE(config.has_value()) << c.yaml << ": " << config.error().message;
    EXPECT_TRUE(c.check(*config)) << c.yaml;
  }
}

TEST(ConfigTest, InvalidConfigsNameTheKeyValueAndLine) {
  struct Case {
    std::string yaml;
    std::vector<std::string> expected;  // substrings of the error
  };
  const std::vector<Case> cases = {
      {"policy:\n  weigths: {topology: 1}\n",
       {"config:2:3: policy.weigths: unknown key; known keys: weights, default_closeness"}},
      {"lisen: 0.0.0.0:1\n",
       {"config:1:1: lisen: unknown key; known keys: listen, ops_listen, url_prefix"}},
      {"tls:\n  cert: x\n", {"tls.cert: unknown key"}},
      {"listen: 0.0.0.0\n", {"listen: expected host:port", "\"0.0.0.0\""}},
      {"listen: 0.0.0.0:70000\n", {"listen:", "0..65535"}},
      {"listen: ::1:80\n", {"need [brackets]"}},
      {"listen: [1, 2]\n", {"listen: expected a string, got a list"}},
      {"url_prefix: scheduler\n", {"url_prefix: must start with '/'"}},
      {"url_prefix: /a b\n", {"url_prefix: must be a plain URL path"}},
      {"limits:\n  threads: eight\n",
       {"config:2:12: limits.threads: expected an integer", "\"eight\""}},
      {"limits:\n  threads: \"8\"\n", {"limits.threads: expected an integer", "string \"8\""}},
      {"limits:\n  threads: 0\n", {"limits.threads: 0 is out of range 1..1024"}},
      {"limits:\n  threads: 2.5\n", {"limits.threads: expected an integer"}},
      {"limits:\n  max_body_bytes: 64MB\n", {"limits.max_body_bytes: expected a size", "64MB"}},
      {"limits:\n  max_body_bytes: 10\n", {"limits.max_body_bytes: 10 bytes is out of range"}},
      {"limits:\n  max_body_bytes: -5\n", {"limits.max_body_bytes: expected a size"}},
      {"limits:\n  read_timeout_ms: 0\n", {"limits.read_timeout_ms: 0 is out of range"}},
      {"limits: 5\n", {"limits: expected a mapping, got \"5\""}},
      {"policy:\n  weights:\n    packing: -1\n",
       {"config:3:14: policy.weights.packing: expected a non-negative number, got \"-1\""}},
      {"policy:\n  weights:\n    topology: .nan\n", {"policy.weights.topology"}},
      {"policy:\n  weights:\n    topology: lots\n", {"policy.weights.topology", "\"lots\""}},
      {"policy:\n  default_closeness: nvswitch\n",
       {"policy.default_closeness: expected one of nvlink|pcie-switch|numa|socket|node",
        "\"nvswitch\""}},
      {"policy:\n  default_closeness_policy: maybe\n", {"required|preferred"}},
      {"policy:\n  share_policy: random\n", {"pack|spread"}},
      {"policy:\n  whole_machines: always\n", {"keep|ring|off"}},
      {"policy:\n  nic_alignment: staged\n", {"aligned|rate", "\"staged\""}},
      {"policy:\n  score_range: 0\n", {"policy.score_range: 0 is out of range"}},
      {"bandwidth_overrides:\n  PIX_gen4: 0\n",
       {"bandwidth_overrides.PIX_gen4: expected a positive number"}},
      {"bandwidth_overrides:\n  \"\": 5\n", {"non-empty"}},
      {"bandwidth_overrides: [1]\n", {"bandwidth_overrides: expected a mapping"}},
      {"shared_gpu_resource: gpu-share\n", {"shared_gpu_resource: expected an extended resource"}},
      {"shared_gpu_resource: kubernetes.io/gpu\n", {"shared_gpu_resource"}},
      {"nic_resource: rdma\n", {"config:1:15: nic_resource: expected an extended resource"}},
      {"nic_share_resource: kubernetes.io/x\n", {"nic_share_resource: expected an extended"}},
      {"nic_resources: rdma/hca\n", {"nic_resources: expected a list", "\"rdma/hca\""}},
      {"nic_resources: [rdma/hca, hca]\n",
       {"nic_resources[1]: expected an extended resource", "\"hca\""}},
      {"nic_resources: [[rdma/hca]]\n", {"nic_resources[0]: expected a string"}},
      {"nic_closeness: phb\n",
       {"config:1:16: nic_closeness: unknown NIC closeness \"phb\"", "pix, pxb, numa or node"}},
      {"nic_closeness: PXB\n", {"nic_closeness", "\"PXB\""}},
      {"nic_resource: linkfit.io/gpu-share\n",
       {"nic_resource: names \"linkfit.io/gpu-share\" as shared_gpu_resource does"}},
      {"nic_share_resource: linkfit.io/rdma\n",
       {"nic_share_resource: names \"linkfit.io/rdma\" as nic_resource does"}},
      {"nic_resources: [rdma/hca, rdma/hca]\n",
       {"nic_resources[1]: names \"rdma/hca\" as nic_resources[0] does"}},
      {"nic_resources: [nvidia.com/gpu]\n",
       {"nic_resources[0]: \"nvidia.com/gpu\" is a GPU resource"}},
      {"nic_resource: nvidia.com/mig-1g.10gb\n", {"nic_resource:", "is a GPU resource"}},
      {"kubernetes:\n  enabled: yes\n", {"kubernetes.enabled: expected true or false"}},
      {"kubernetes:\n  qps: 0\n", {"kubernetes.qps: expected a positive number"}},
      {"kubernetes:\n  burst: 0\n", {"kubernetes.burst: 0 is out of range"}},
      {"kubernetes:\n  binder_lease: {duration_ms: 8000}\n",
       {"kubernetes.binder_lease.duration_ms: must exceed (bind_timeout_ms + "
        "bind_settle_margin_ms) by a quarter",
        "got 8000 against 7000"}},
      {"kubernetes:\n  binder_lease: {name: \"\"}\n",
       {"kubernetes.binder_lease: namespace and name must not be empty"}},
      {"kubernetes:\n  binder_lease: {holder: me}\n", {"kubernetes.binder_lease.holder"}},
      {"kubernetes:\n  bind_timeout_ms: 10\n", {"kubernetes.bind_timeout_ms: 10 is out of range"}},
      {"log_level: verbose\n", {"log_level: expected one of debug|info|warning|error|off"}},
      {"mig_profiles_dir: \"\"\n", {"mig_profiles_dir: expected a path"}},
      {"tls:\n  cert_file: a.crt\n", {"tls: cert_file and key_file must be set together"}},
      {"tls:\n  client_ca_file: ca.crt\n", {"tls: client certificate verification needs"}},
      {"tls:\n  cert_file: a\n  key_file: b\n  require_client_cert: true\n",
       {"tls.require_client_cert: needs client_ca_file"}},
      {"log_level: info\nlog_level: debug\n", {"config:2:1: log_level: duplicate key"}},
      {"- a\n- b\n", {"the config must be a mapping"}},
      {"listen: [unclosed\n", {"invalid YAML"}},
  };
  for (const Case& c : cases) {
    auto config = ParseConfig(c.yaml);
    ASSERT_FALSE(config.has_value()) << "accepted: " << c.yaml;
    for (const std::string& part : c.expected) {
      EXPECT_NE(config.error().message.find(part), std::string::npos)
          << "yaml: " << c.yaml << "\nerror: " << config.error().message << "\nexpected: " << part;
    }
  }
}

TEST(ConfigTest, ParseByteSize) {
  EXPECT_EQ(*ParseByteSize("0"), 0u);
  EXPECT_EQ(*ParseByteSize("64Mi"), 64u << 20);
  EXPECT_EQ(*ParseByteSize("3Ki"), 3072u);
  EXPECT_EQ(*ParseByteSize("2k"), 2000u);
  EXPECT_EQ(*ParseByteSize("1Ti"), 1ull << 40);
  EXPECT_FALSE(ParseByteSize(""));
  EXPECT_FALSE(ParseByteSize("Mi"));
  EXPECT_FALSE(ParseByteSize("1.5Gi"));
  EXPECT_FALSE(ParseByteSize("1mi"));
  EXPECT_FALSE(ParseByteSize("99999999999999999999"));
  EXPECT_FALSE(ParseByteSize("20000000T"));
}

TEST(ConfigTest, LoadConfigResolvesPathsAgainstTheFilesDirectory) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/linkfit-config-test.yaml";
  {
    std::ofstream out(path);
    out << "cluster_file: cluster.yaml\nlimits:\n  threads: 3\n";
  }
  auto config = LoadConfig(path);
  std::remove(path.c_str());
  ASSERT_TRUE(config.has_value()) << config.error().message;
  EXPECT_EQ(config->limits.threads, 3);
  ASSERT_TRUE(config->cluster_file.has_value());
  EXPECT_EQ(config->cluster_file->front(), '/');
  EXPECT_NE(config->cluster_file->find("cluster.yaml"), std::string::npos);
  EXPECT_EQ(config->mig_profiles_dir, config->base_dir + "/mig");
}

TEST(ConfigTest, LoadConfigErrorsNameTheFile) {
  auto missing = LoadConfig("/nonexistent/linkfit.yaml");
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message.find("/nonexistent/linkfit.yaml"), std::string::npos);

  const std::string path = ::testing::TempDir() + "/linkfit-config-bad.yaml";
  {
    std::ofstream out(path);
    out << "policy:\n  score_range: -3\n";
  }
  auto bad = LoadConfig(path);
  std::remove(path.c_str());
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find(path + ":2:16: policy.score_range"), std::string::npos)
      << bad.error().message;
}

// The documented example in the repository must stay valid, and its MIG directory must exist.
TEST(ConfigTest, RepositoryExampleLoads) {
  auto config = LoadConfig(std::string(LINKFIT_SOURCE_DIR) + "/config/linkfit.yaml");
  ASSERT_TRUE(config.has_value()) << config.error().message;
  EXPECT_EQ(config->listen_port, 8888);
  EXPECT_NE(config->mig_profiles_dir.find("config/mig"), std::string::npos)
      << config->mig_profiles_dir;
}

}  // namespace
}  // namespace linkfit::app
