#include "linkfit/app/config.h"

#include <cctype>
#include <filesystem>
#include <utility>
#include <vector>

#include "linkfit/alloc/nic_choice.h"
#include "linkfit/common/strings.h"
#include "linkfit/common/yaml_reader.h"

namespace linkfit::app {
namespace {

using enum yaml::Empty;
using enum yaml::Sign;
using yaml::Key;

bool IsHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

struct ListenAddress {
  std::string text;
  std::string host;
  int port = 0;
};

Result<ListenAddress> ReadListen(const yaml::Reader& r, const YAML::Node& node,
                                 const std::string& path) {
  std::string text;
  LINKFIT_ASSIGN_OR_RETURN(text, r.String(node, path));
  const std::string bad =
      "expected host:port (e.g. 0.0.0.0:8888 or [::]:8888), got " + QuoteForMessage(text);
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos) return r.Fail(node, path, bad);
  std::string host = text.substr(0, colon);
  const std::string port_text = text.substr(colon + 1);
  if (!host.empty() && host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return r.Fail(node, path, bad);
    host = host.substr(1, host.size() - 2);
    for (const char c : host) {
      if (!(std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.')) {
        return r.Fail(node, path, bad + " (bad IPv6 address)");
      }
    }
  } else {
    for (const char c : host) {
      if (c == ':') return r.Fail(node, path, bad + " (IPv6 addresses need [brackets])");
      if (!IsHostChar(c)) return r.Fail(node, path, bad);
    }
  }
  const auto port = ParseInt(port_text);
  if (!port || *port < 0 || *port > 65535 || port_text.empty() ||
      port_text.find_first_not_of("0123456789") != std::string::npos) {
    return r.Fail(node, path, bad + " (port must be 0..65535)");
  }
  return ListenAddress{text, host.empty() ? "0.0.0.0" : host, static_cast<int>(*port)};
}

// A URL prefix without its trailing slashes; null is none.
Result<std::string> ReadUrlPrefix(const yaml::Reader& r, const YAML::Node& node,
                                  const std::string& path) {
  if (node.IsNull()) return std::string();
  std::string text;
  LINKFIT_ASSIGN_OR_RETURN(text, r.String(node, path));
  std::string prefix = text;
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (!text.empty() && text.front() != '/') {
    return r.Fail(node, path, "must start with '/', got " + QuoteForMessage(text));
  }
  for (const char c : prefix) {
    if (!(IsHostChar(c) || c == '/' || c == '~')) {
      return r.Fail(node, path,
                    "must be a plain URL path ([A-Za-z0-9._~/-]), got " + QuoteForMessage(text));
    }
  }
  return prefix;
}

Result<std::uint64_t> ReadBodySize(const yaml::Reader& r, const YAML::Node& node,
                                   const std::string& path) {
  if (!node.IsScalar()) {
    return r.Fail(node, path, "expected a size such as 64Mi, got " + yaml::Describe(node));
  }
  auto size = ParseByteSize(node.Scalar());
  if (!size) return r.Fail(node, path, size.error().message);
  if (*size < 1024 || *size > (std::uint64_t{4} << 30)) {
    return r.Fail(node, path, std::to_string(*size) + " bytes is out of range 1Ki..4Gi");
  }
  return *size;
}

// An extended resource name as kube-scheduler requires for managedResources: "domain/name",
// the domain a DNS name of one label or more (rdma/hca, the RDMA device plugin's, has one).
bool IsExtendedResourceName(std::string_view name) {
  const std::size_t slash = name.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == name.size()) return false;
  const std::string_view domain = name.substr(0, slash);
  const std::string_view rest = name.substr(slash + 1);
  if (rest.find('/') != std::string_view::npos) return false;
  if (domain == "kubernetes.io" || domain.ends_with(".kubernetes.io")) return false;
  for (const char c : name) {
    if (!(IsHostChar(c) || c == '/')) return false;
  }
  return true;
}

Result<std::string> ReadResourceName(const yaml::Reader& r, const YAML::Node& node,
                                     const std::string& path) {
  std::string text;
  LINKFIT_ASSIGN_OR_RETURN(text, r.String(node, path));
  if (!IsExtendedResourceName(text)) {
    return r.Fail(node, path,
                  "expected an extended resource name such as linkfit.io/gpu-share, got " +
                      QuoteForMessage(text));
  }
  return text;
}

// A list of extended resource names; null is none.
Result<std::vector<std::string>> ReadResourceNames(const yaml::Reader& r, const YAML::Node& node,
                                                   const std::string& path) {
  std::vector<std::string> names;
  if (node.IsNull()) return names;
  if (!node.IsSequence()) {
    return r.Fail(node, path,
                  "expected a list of extended resource names, got " + yaml::Describe(node));
  }
  for (std::size_t i = 0; i < node.size(); ++i) {
    std::string name;
    LINKFIT_ASSIGN_OR_RETURN(name,
                             ReadResourceName(r, node[i], path + "[" + std::to_string(i) + "]"));
    names.push_back(std::move(name));
  }
  return names;
}

Result<std::string> ReadNicCloseness(const yaml::Reader& r, const YAML::Node& node,
                                     const std::string& path) {
  std::string text;
  LINKFIT_ASSIGN_OR_RETURN(text, r.String(node, path));
  if (auto level = alloc::ParseNicCloseness(text); !level) {
    return r.Fail(node, path, level.error().message);
  }
  return text;
}

// The keys of the kubernetes section.
std::vector<Key> KubernetesKeys(const yaml::Reader& r, KubernetesConfig& kube) {
  auto& lease = kube.binder_lease;
  return {
      r.BoolKey("enabled", kube.enabled),
      r.OptionalPathKey("kubeconfig", kube.kubeconfig),
      r.StringKey("context", kube.context),
      r.StringKey("api_server", kube.api_server),
      r.PathKey("token_file", kube.token_file, kRefused),
      r.PathKey("ca_file", kube.ca_file, kRefused),
      r.NumberKey("qps", kube.qps, kPositive),
      r.IntegerKey("burst", kube.burst, 1, 100000),
      r.IntegerKey("request_timeout_ms", kube.request_timeout_ms, 100, 600000),
      r.IntegerKey("list_page_size", kube.list_page_size, 1, 10000),
      r.BoolKey("require_nri_plugin", kube.require_nri_plugin),
      r.IntegerKey("bind_timeout_ms", kube.bind_timeout_ms, 100, 60000),
      r.IntegerKey("bind_settle_margin_ms", kube.bind_settle_margin_ms, 0, 60000),
      r.SectionKey("binder_lease",
                   {
                       r.BoolKey("enabled", lease.enabled),
                       r.StringKey("namespace", lease.lease_namespace),
                       r.StringKey("name", lease.name),
                       r.IntegerKey("duration_ms", lease.duration_ms, 1000, 600000),
                   }),
  };
}

// The config's keys, each storing what it reads in `config` (`tls_node` keeps the tls section
// for the cross-key messages).
std::vector<Key> ConfigKeys(const yaml::Reader& r, Config& config, YAML::Node& tls_node) {
  const auto with = [&r](auto read) {
    return
        [&r, read](const YAML::Node& node, const std::string& path) { return read(r, node, path); };
  };
  std::vector<Key> tls_keys = {
      r.PathKey("cert_file", config.tls.cert_file, kAllowed),
      r.PathKey("key_file", config.tls.key_file, kAllowed),
      r.PathKey("client_ca_file", config.tls.client_ca_file, kAllowed),
      r.BoolKey("require_client_cert", config.tls.require_client_cert),
  };
  LimitsConfig& limits = config.limits;
  PolicyConfig& policy = config.policy;
  return {
      {"listen",
       [&](const YAML::Node& node, const std::string& path) {
         return ReadListen(r, node, path).map([&](const ListenAddress& address) {
           config.listen = address.text;
           config.listen_host = address.host;
           config.listen_port = address.port;
         });
       }},
      {"ops_listen",
       [&](const YAML::Node& node, const std::string& path) {
         if (node.IsScalar() && node.Scalar().empty()) {  // "" turns the ops listener off
           config.ops_listen.reset();
           return Result<void>();
         }
         return ReadListen(r, node, path).map([&](const ListenAddress& address) {
           config.ops_listen = address.text;
           config.ops_listen_host = address.host;
           config.ops_listen_port = address.port;
         });
       }},
      r.StoreKey("url_prefix", config.url_prefix, with(ReadUrlPrefix)),
      {"tls",
       [&r, &tls_node, tls_keys = std::move(tls_keys)](const YAML::Node& node,
                                                       const std::string& path) {
         tls_node = node;
         return r.ReadMapping(node, path, tls_keys);
       }},
      r.SectionKey("limits",
                   {
                       r.StoreKey("max_body_bytes", limits.max_body_bytes, with(ReadBodySize)),
                       r.IntegerKey("read_timeout_ms", limits.read_timeout_ms, 1, 3600000),
                       r.IntegerKey("write_timeout_ms", limits.write_timeout_ms, 1, 3600000),
                       r.IntegerKey("threads", limits.threads, 1, 1024),
                       r.IntegerKey("keep_alive_timeout_s", limits.keep_alive_timeout_s, 1, 86400),
                   }),
      r.SectionKey(
          "policy",
          {
              r.SectionKey("weights",
                           {
                               r.NumberKey("topology", policy.weights.topology, kNonNegative),
                               r.NumberKey("packing", policy.weights.packing, kNonNegative),
                               r.NumberKey("fragmentation", policy.weights.fragmentation,
                                           kNonNegative),
                               r.NumberKey("balance", policy.weights.balance, kNonNegative),
                           }),
              r.OneOfKey("default_closeness", policy.default_closeness,
                         {"nvlink", "pcie-switch", "numa", "socket", "node"}),
              r.OneOfKey("default_closeness_policy", policy.default_closeness_policy,
                         {"required", "preferred"}),
              r.OneOfKey("share_policy", policy.share_policy, {"pack", "spread"}),
              r.OneOfKey("whole_machines", policy.whole_machines, {"keep", "ring", "off"}),
              r.NumberKey("whole_machine_penalty", policy.whole_machine_penalty, kNonNegative),
              r.OneOfKey("nic_alignment", policy.nic_alignment, {"aligned", "rate"}),
              r.IntegerKey("score_range", policy.score_range, 1, 1000000),
          }),
      {"bandwidth_overrides",
       [&](const YAML::Node& node, const std::string& path) {
         return r.ReadEntries(node, path,
                              [&](const std::string& key, const YAML::Node& value,
                                  const std::string& key_path) -> Result<void> {
                                LINKFIT_ASSIGN_OR_RETURN(config.bandwidth_overrides[key],
                                                         r.Number(value, key_path, kPositive));
                                return {};
                              });
       }},
      r.PathKey("mig_profiles_dir", config.mig_profiles_dir, kRefused),
      r.OptionalPathKey("cluster_file", config.cluster_file),
      r.OptionalPathKey("state_file", config.state_file),
      r.StoreKey("shared_gpu_resource", config.shared_gpu_resource, with(ReadResourceName)),
      r.StoreKey("nic_resource", config.nic_resource, with(ReadResourceName)),
      r.StoreKey("nic_resources", config.nic_resources, with(ReadResourceNames)),
      r.StoreKey("nic_share_resource", config.nic_share_resource, with(ReadResourceName)),
      r.StoreKey("nic_closeness", config.nic_closeness, with(ReadNicCloseness)),
      r.SectionKey("kubernetes", KubernetesKeys(r, config.kubernetes)),
      r.OneOfKey("log_level", config.log_level, {"debug", "info", "warning", "error", "off"}),
  };
}

// The resource keys name distinct resources, the NIC keys none that the GPU device plugin
// advertises.
Result<void> CheckResourceNames(const yaml::Reader& r, const YAML::Node& root,
                                const Config& config) {
  std::vector<std::pair<std::string, std::string>> named = {
      {"shared_gpu_resource", config.shared_gpu_resource},
      {"nic_resource", config.nic_resource},
      {"nic_share_resource", config.nic_share_resource},
  };
  for (std::size_t i = 0; i < config.nic_resources.size(); ++i) {
    named.emplace_back("nic_resources[" + std::to_string(i) + "]", config.nic_resources[i]);
  }
  for (std::size_t i = 0; i < named.size(); ++i) {
    const auto& [key, name] = named[i];
    const bool nic_key = i > 0;
    if (nic_key && (name == "nvidia.com/gpu" || name.starts_with("nvidia.com/mig-"))) {
      return r.Fail(root, key, QuoteForMessage(name) + " is a GPU resource");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (named[j].second == name) {
        return r.Fail(root, key,
                      "names " + QuoteForMessage(name) + " as " + named[j].first +
                          " does; each resource has one meaning");
      }
    }
  }
  return {};
}

// Checks what spans keys.
Result<void> CheckAcrossKeys(const yaml::Reader& r, const YAML::Node& root,
                             const YAML::Node& tls_node, const Config& config) {
  if (auto names = CheckResourceNames(r, root, config); !names) {
    return tl::unexpected(names.error());
  }
  const KubernetesConfig& kube = config.kubernetes;
  const auto& lease = kube.binder_lease;
  if (lease.enabled &&
      static_cast<std::int64_t>(lease.duration_ms) * 4 / 5 <=
          static_cast<std::int64_t>(kube.bind_timeout_ms) + kube.bind_settle_margin_ms) {
    return r.Fail(root, "kubernetes.binder_lease.duration_ms",
                  "must exceed (bind_timeout_ms + bind_settle_margin_ms) by a quarter (the lease "
                  "is renewed every fifth of its duration and must outlast each Binding's "
                  "deadline), got " +
                      std::to_string(lease.duration_ms) + " against " +
                      std::to_string(kube.bind_timeout_ms + kube.bind_settle_margin_ms));
  }
  if (lease.lease_namespace.empty() || lease.name.empty()) {
    return r.Fail(root, "kubernetes.binder_lease", "namespace and name must not be empty");
  }
  const TlsConfig& tls = config.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return r.Fail(tls_node, "tls", "cert_file and key_file must be set together");
  }
  if (tls.cert_file.empty() && (!tls.client_ca_file.empty() || tls.require_client_cert)) {
    return r.Fail(tls_node, "tls", "client certificate verification needs cert_file and key_file");
  }
  if (tls.require_client_cert && tls.client_ca_file.empty()) {
    return r.Fail(tls_node, "tls.require_client_cert", "needs client_ca_file");
  }
  return {};
}

// Reads `yaml` over the defaults.
Result<Config> Parse(const yaml::Reader& r, std::string_view yaml) {
  YAML::Node root;
  LINKFIT_ASSIGN_OR_RETURN(root, r.Load(yaml));
  if (!root.IsNull() && !root.IsMap()) {
    return r.Fail(root, "", "the config must be a mapping of keys, got " + yaml::Describe(root));
  }
  Config config;
  config.base_dir = r.base_dir();
  config.mig_profiles_dir = config.base_dir.empty() ? "config/mig" : r.Resolve("mig");
  YAML::Node tls_node;
  if (auto read = r.ReadMapping(root, "", ConfigKeys(r, config, tls_node)); !read) {
    return tl::unexpected(read.error());
  }
  if (auto checked = CheckAcrossKeys(r, root, tls_node, config); !checked) {
    return tl::unexpected(checked.error());
  }
  return config;
}

}  // namespace

Result<Config> ParseConfig(std::string_view yaml, const std::string& base_dir,
                           const std::string& source) {
  try {
    return Parse(yaml::Reader(source, base_dir), yaml);
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
