#include "linkfit/app/config.h"

#include <cctype>
#include <filesystem>
#include <utility>
#include <vector>

#include "linkfit/common/strings.h"
#include "linkfit/common/yaml_reader.h"

namespace linkfit::app {
namespace {

using yaml::Empty;
using yaml::Key;
using yaml::Sign;

class ConfigParser {
 public:
  ConfigParser(std::string source, std::string base_dir)
      : reader_(std::move(source), std::move(base_dir)) {}

  Result<Config> Parse(std::string_view yaml);

 private:
  tl::unexpected<Error> Fail(const YAML::Node& node, const std::string& path,
                             const std::string& message) const {
    return reader_.Fail(node, path, message);
  }

  struct ListenAddress {
    std::string text;
    std::string host;
    int port = 0;
  };
  Result<void> ParseListen(const YAML::Node& node, const std::string& path,
                           ListenAddress& address) const;
  Result<void> ParseUrlPrefix(const YAML::Node& node, const std::string& path,
                              Config& config) const;

  yaml::Reader reader_;
};

bool IsHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

Result<void> ConfigParser::ParseListen(const YAML::Node& node, const std::string& path,
                                       ListenAddress& address) const {
  auto text = reader_.String(node, path);
  if (!text) return tl::unexpected(text.error());
  const std::string bad =
      "expected host:port (e.g. 0.0.0.0:8888 or [::]:8888), got " + QuoteForMessage(*text);
  const std::size_t colon = text->rfind(':');
  if (colon == std::string::npos) return Fail(node, path, bad);
  std::string host = text->substr(0, colon);
  const std::string port_text = text->substr(colon + 1);
  if (!host.empty() && host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return Fail(node, path, bad);
    host = host.substr(1, host.size() - 2);
    for (const char c : host) {
      if (!(std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.')) {
        return Fail(node, path, bad + " (bad IPv6 address)");
      }
    }
  } else {
    for (const char c : host) {
      if (c == ':') return Fail(node, path, bad + " (IPv6 addresses need [brackets])");
      if (!IsHostChar(c)) return Fail(node, path, bad);
    }
  }
  const auto port = ParseInt(port_text);
  if (!port || *port < 0 || *port > 65535 || port_text.empty() ||
      port_text.find_first_not_of("0123456789") != std::string::npos) {
    return Fail(node, path, bad + " (port must be 0..65535)");
  }
  address.text = *text;
  address.host = host.empty() ? "0.0.0.0" : host;
  address.port = static_cast<int>(*port);
  return {};
}

Result<void> ConfigParser::ParseUrlPrefix(const YAML::Node& node, const std::string& path,
                                          Config& config) const {
  if (node.IsNull()) {
    config.url_prefix.clear();
    return {};
  }
  auto text = reader_.String(node, path);
  if (!text) return tl::unexpected(text.error());
  std::string prefix = *text;
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (!text->empty() && text->front() != '/') {
    return Fail(node, path, "must start with '/', got " + QuoteForMessage(*text));
  }
  for (const char c : prefix) {
    if (!(IsHostChar(c) || c == '/' || c == '~')) {
      return Fail(node, path,
                  "must be a plain URL path ([A-Za-z0-9._~/-]), got " + QuoteForMessage(*text));
    }
  }
  config.url_prefix = prefix;
  return {};
}

// An extended resource name as kube-scheduler requires for managedResources: "domain/name".
bool IsExtendedResourceName(std::string_view name) {
  const std::size_t slash = name.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == name.size()) return false;
  const std::string_view domain = name.substr(0, slash);
  const std::string_view rest = name.substr(slash + 1);
  if (domain.find('.') == std::string_view::npos || rest.find('/') != std::string_view::npos) {
    return false;
  }
  if (domain == "kubernetes.io" || domain.ends_with(".kubernetes.io")) return false;
  for (const char c : name) {
    if (!(IsHostChar(c) || c == '/')) return false;
  }
  return true;
}

Result<Config> ConfigParser::Parse(std::string_view yaml) {
  YAML::Node root;
  LINKFIT_ASSIGN_OR_RETURN(root, reader_.Load(yaml));

  Config config;
  config.base_dir = reader_.base_dir();
  config.mig_profiles_dir = config.base_dir.empty() ? "config/mig" : reader_.Resolve("mig");
  const yaml::Reader& r = reader_;

  YAML::Node tls_node;
  const std::vector<Key> tls_specs = {
      r.PathKey("cert_file", config.tls.cert_file, Empty::kAllowed),
      r.PathKey("key_file", config.tls.key_file, Empty::kAllowed),
      r.PathKey("client_ca_file", config.tls.client_ca_file, Empty::kAllowed),
      r.BoolKey("require_client_cert", config.tls.require_client_cert),
  };

  const std::vector<Key> specs =
      {
          {"listen",
           [&](const YAML::Node& node, const std::string& path) -> Result<void> {
             ListenAddress address;
             if (auto ok = ParseListen(node, path, address); !ok) return ok;
             config.listen = address.text;
             config.listen_host = address.host;
             config.listen_port = address.port;
             return {};
           }},
          {"ops_listen",
           [&](const YAML::Node& node, const std::string& path) -> Result<void> {
             if (node.IsScalar() && node.Scalar().empty()) {
               config.ops_listen.reset();
               return {};
             }
             ListenAddress address;
             if (auto ok = ParseListen(node, path, address); !ok) return ok;
             config.ops_listen = address.text;
             config.ops_listen_host = address.host;
             config.ops_listen_port = address.port;
             return {};
           }},
          {"url_prefix",
           [&](const YAML::Node& node, const std::string& path) {
             return ParseUrlPrefix(node, path, config);
           }},
          {"tls",
           [&](const YAML::Node& node, const std::string& path) {
             tls_node = node;
             return r.ReadMapping(node, path, tls_specs);
           }},
          r.SectionKey("limits",
                  {
                      {"max_body_bytes",
                       [&](const YAML::Node& node, const std::string& path) -> Result<void> {
                         if (!node.IsScalar()) {
                           return Fail(node, path,
                                       "expected a size such as 64Mi, got " + yaml::Describe(node));
                         }
                         auto size = ParseByteSize(node.Scalar());
                         if (!size) return Fail(node, path, size.error().message);
                         constexpr std::uint64_t kMin = 1024;
                         constexpr std::uint64_t kMax = std::uint64_t{4} << 30;
                         if (*size < kMin || *size > kMax) {
                           return Fail(node, path,
                                       std::to_string(*size) + " bytes is out of range 1Ki..4Gi");
                         }
                         config.limits.max_body_bytes = *size;
                         return {};
                       }},
                      r.IntegerKey("read_timeout_ms", config.limits.read_timeout_ms, 1, 3600000),
                      r.IntegerKey("write_timeout_ms", config.limits.write_timeout_ms, 1, 3600000),
                      r.IntegerKey("threads", config.limits.threads, 1, 1024),
                      r.IntegerKey("keep_alive_timeout_s", config.limits.keep_alive_timeout_s, 1, 86400),
                  }),
          r.SectionKey("policy",
                  {
                      r.SectionKey("weights",
                              {
                                  r.NumberKey("topology", config.policy.weights.topology, Sign::kNonNegative),
                                  r.NumberKey("packing", config.policy.weights.packing, Sign::kNonNegative),
                                  r.NumberKey("fragmentation", config.policy.weights.fragmentation,
                                             Sign::kNonNegative),
                                  r.NumberKey("balance", config.policy.weights.balance, Sign::kNonNegative),
                              }),
                      r.OneOfKey("default_closeness", config.policy.default_closeness,
                                 {"nvlink", "pcie-switch", "numa", "socket", "node"}),
                      r.OneOfKey("default_closeness_policy", config.policy.default_closeness_policy,
                                 {"required", "preferred"}),
                      r.OneOfKey("share_policy", config.policy.share_policy, {"pack", "spread"}),
                      r.OneOfKey("whole_machines", config.policy.whole_machines,
                                 {"keep", "ring", "off"}),
                      r.NumberKey("whole_machine_penalty", config.policy.whole_machine_penalty,
                                 Sign::kNonNegative),
                      r.IntegerKey("score_range", config.policy.score_range, 1, 1000000),
                  }),
          {"bandwidth_overrides",
           [&](const YAML::Node& node, const std::string& path) {
             return r.ReadEntries(node, path,
                                  [&](const std::string& key, const YAML::Node& value,
                                      const std::string& key_path) -> Result<void> {
                                    LINKFIT_ASSIGN_OR_RETURN(
                                        config.bandwidth_overrides[key],
                                        r.Number(value, key_path, Sign::kPositive));
                                    return {};
                                  });
           }},
          r.PathKey("mig_profiles_dir", config.mig_profiles_dir, Empty::kRefused),
          r.OptionalPathKey("cluster_file", config.cluster_file),
          r.OptionalPathKey("state_file", config.state_file),
          {"shared_gpu_resource",
           [&](const YAML::Node& node, const std::string& path) -> Result<void> {
             auto text = reader_.String(node, path);
             if (!text) return tl::unexpected(text.error());
             if (!IsExtendedResourceName(*text)) {
               return Fail(node, path,
                           "expected an extended resource name such as linkfit.io/gpu-share, got " +
                               QuoteForMessage(*text));
             }
             config.shared_gpu_resource = *text;
             return {};
           }},
          r.SectionKey(
              "kubernetes",
              {
                  r.BoolKey("enabled", config.kubernetes.enabled),
                  r.OptionalPathKey("kubeconfig", config.kubernetes.kubeconfig),
                  r.StringKey("context", config.kubernetes.context),
                  r.StringKey("api_server", config.kubernetes.api_server),
                  r.PathKey("token_file", config.kubernetes.token_file, Empty::kRefused),
                  r.PathKey("ca_file", config.kubernetes.ca_file, Empty::kRefused),
                  r.NumberKey("qps", config.kubernetes.qps, Sign::kPositive),
                  r.IntegerKey("burst", config.kubernetes.burst, 1, 100000),
                  r.IntegerKey("request_timeout_ms", config.kubernetes.request_timeout_ms, 100, 600000),
                  r.IntegerKey("list_page_size", config.kubernetes.list_page_size, 1, 10000),
                  r.BoolKey("require_nri_plugin", config.kubernetes.require_nri_plugin),
                  r.IntegerKey("bind_timeout_ms", config.kubernetes.bind_timeout_ms, 100, 60000),
                  r.IntegerKey("bind_settle_margin_ms", config.kubernetes.bind_settle_margin_ms, 0,
                          60000),
                  r.SectionKey(
                      "binder_lease",
                      {
                          r.BoolKey("enabled", config.kubernetes.binder_lease.enabled),
                          r.StringKey("namespace", config.kubernetes.binder_lease.lease_namespace),
                          r.StringKey("name", config.kubernetes.binder_lease.name),
                          r.IntegerKey("duration_ms", config.kubernetes.binder_lease.duration_ms, 1000,
                                  600000),
                      }),
              }),
          r.OneOfKey("log_level", config.log_level, {"debug", "info", "warning", "error", "off"}),
      };

  if (!root.IsNull() && !root.IsMap()) {
    return Fail(root, "", "the config must be a mapping of keys, got " + yaml::Describe(root));
  }
  if (auto parsed = r.ReadMapping(root, "", specs); !parsed) return tl::unexpected(parsed.error());

  // Cross-key checks.
  const KubernetesConfig& k = config.kubernetes;
  if (k.binder_lease.enabled &&
      static_cast<std::int64_t>(k.binder_lease.duration_ms) * 4 / 5 <=
          static_cast<std::int64_t>(k.bind_timeout_ms) + k.bind_settle_margin_ms) {
    return Fail(root, "kubernetes.binder_lease.duration_ms",
                "must exceed (bind_timeout_ms + bind_settle_margin_ms) by a quarter (the lease is "
                "renewed every fifth of its duration and must outlast each Binding's deadline), "
                "got " +
                    std::to_string(k.binder_lease.duration_ms) + " against " +
                    std::to_string(k.bind_timeout_ms + k.bind_settle_margin_ms));
  }
  if (k.binder_lease.lease_namespace.empty() || k.binder_lease.name.empty()) {
    return Fail(root, "kubernetes.binder_lease", "namespace and name must not be empty");
  }
  const TlsConfig& tls = config.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return Fail(tls_node, "tls", "cert_file and key_file must be set together");
  }
  if (tls.cert_file.empty() && (!tls.client_ca_file.empty() || tls.require_client_cert)) {
    return Fail(tls_node, "tls", "client certificate verification needs cert_file and key_file");
  }
  if (tls.require_client_cert && tls.client_ca_file.empty()) {
    return Fail(tls_node, "tls.require_client_cert", "needs client_ca_file");
  }
  return config;
}

}  // namespace

Result<Config> ParseConfig(std::string_view yaml, const std::string& base_dir,
                           const std::string& source) {
  try {
    return ConfigParser(source, base_dir).Parse(yaml);
  } catch (const std::exception& e) {
    return MakeError(source + ": " + e.what());
  }
}

Result<Config> LoadConfig(const std::string& path) {
  auto text = yaml::ReadFile(path);
  if (!text) return WithContext(text.error(), "config");
  std::error_code error;
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const std::filesystem::path absolute = std::filesystem::absolute(dir, error);
  const std::string base_dir = (error ? dir : absolute).lexically_normal().string();
  return ParseConfig(*text, base_dir, path);
}

}  // namespace linkfit::app
