#include "linkfit/app/config.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <type_traits>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "linkfit/common/strings.h"

namespace linkfit::app {
namespace {

// One key of a YAML mapping: its name and what to do with its value.
struct KeySpec {
  std::string name;
  std::function<Result<void>(const YAML::Node& value, const std::string& path)> parse;
};

class ConfigParser {
 public:
  ConfigParser(std::string source, std::string base_dir)
      : source_(std::move(source)), base_dir_(std::move(base_dir)) {}

  Result<Config> Parse(std::string_view yaml);

 private:
  // "<source>:<line>:<column>: <path>: <message>", the position being the node's.
  tl::unexpected<Error> Fail(const YAML::Node& node, const std::string& path,
                             const std::string& message) const {
    std::string where = source_;
    const YAML::Mark mark = node.Mark();
    if (!mark.is_null()) {
      where += ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
    }
    return MakeError(where + ": " + (path.empty() ? "" : path + ": ") + message);
  }

  static std::string Join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  static std::string Describe(const YAML::Node& node) {
    if (node.IsNull()) return "null";
    if (node.IsSequence()) return "a list";
    if (node.IsMap()) return "a mapping";
    if (node.IsScalar()) {
      return (node.Tag() == "!" ? "string " : "") + QuoteForMessage(node.Scalar());
    }
    return "nothing";
  }

  Result<void> ParseMap(const YAML::Node& node, const std::string& path,
                        const std::vector<KeySpec>& specs) const;

  // Scalars. A quoted scalar is a string: `threads: "8"` is rejected, as a typed config should.
  Result<std::string> String(const YAML::Node& node, const std::string& path) const;
  Result<bool> Bool(const YAML::Node& node, const std::string& path) const;
  Result<std::int64_t> Integer(const YAML::Node& node, const std::string& path, std::int64_t min,
                               std::int64_t max) const;
  Result<double> Number(const YAML::Node& node, const std::string& path, double min,
                        bool min_exclusive) const;
  Result<std::string> OneOf(const YAML::Node& node, const std::string& path,
                            const std::vector<std::string>& allowed) const;
  std::string ResolvePath(const std::string& value) const;

  // Binds a spec that stores a resolved path (null leaves the default; "" clears it unless
  // `required`).
  KeySpec PathKey(const std::string& name, std::string& out, bool required = false) const;
  KeySpec OptionalPathKey(const std::string& name, std::optional<std::string>& out) const;

  struct ListenAddress {
    std::string text;
    std::string host;
    int port = 0;
  };
  Result<void> ParseListen(const YAML::Node& node, const std::string& path,
                           ListenAddress& address) const;
  Result<void> ParseUrlPrefix(const YAML::Node& node, const std::string& path,
                              Config& config) const;

  std::string source_;
  std::string base_dir_;
};

Result<void> ConfigParser::ParseMap(const YAML::Node& node, const std::string& path,
                                    const std::vector<KeySpec>& specs) const {
  if (node.IsNull()) return {};  // an empty section keeps its defaults
  if (!node.IsMap()) return Fail(node, path, "expected a mapping, got " + Describe(node));
  std::set<std::string> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key = it->first;  // a copy: it-> yields a temporary proxy
    if (!key.IsScalar()) return Fail(key, path, "keys must be strings");
    const std::string& name = key.Scalar();
    const std::string key_path = Join(path, name);
    if (!seen.insert(name).second) return Fail(key, key_path, "duplicate key");
    const KeySpec* spec = nullptr;
    for (const KeySpec& candidate : specs) {
      if (candidate.name == name) spec = &candidate;
    }
    if (spec == nullptr) {
      std::string known;
      for (const KeySpec& candidate : specs) {
        known += (known.empty() ? "" : ", ") + candidate.name;
      }
      return Fail(key, key_path, "unknown key; known keys: " + known);
    }
    if (auto parsed = spec->parse(it->second, key_path); !parsed) return parsed;
  }
  return {};
}

Result<std::string> ConfigParser::String(const YAML::Node& node, const std::string& path) const {
  if (!node.IsScalar()) return Fail(node, path, "expected a string, got " + Describe(node));
  return node.Scalar();
}

Result<bool> ConfigParser::Bool(const YAML::Node& node, const std::string& path) const {
  if (node.IsScalar() && node.Tag() != "!") {
    const std::string& text = node.Scalar();
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
  }
  return Fail(node, path, "expected true or false, got " + Describe(node));
}

Result<std::int64_t> ConfigParser::Integer(const YAML::Node& node, const std::string& path,
                                           std::int64_t min, std::int64_t max) const {
  const std::string range = std::to_string(min) + ".." + std::to_string(max);
  if (!node.IsScalar() || node.Tag() == "!") {
    return Fail(node, path, "expected an integer in " + range + ", got " + Describe(node));
  }
  const auto value = ParseInt(node.Scalar());
  if (!value) {
    return Fail(node, path, "expected an integer in " + range + ", got " + Describe(node));
  }
  if (*value < min || *value > max) {
    return Fail(node, path, std::to_string(*value) + " is out of range " + range);
  }
  return *value;
}

Result<double> ConfigParser::Number(const YAML::Node& node, const std::string& path, double min,
                                    bool min_exclusive) const {
  const std::string expected =
      std::string("expected a ") + (min_exclusive ? "positive" : "non-negative") + " number";
  if (!node.IsScalar() || node.Tag() == "!") {
    return Fail(node, path, expected + ", got " + Describe(node));
  }
  const std::string_view text = Trim(node.Scalar());
  double value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (begin != end && *begin == '+') ++begin;
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value)) {
    return Fail(node, path, expected + ", got " + Describe(node));
  }
  if (value < min || (min_exclusive && value == min)) {
    return Fail(node, path, expected + ", got " + Describe(node));
  }
  return value;
}

Result<std::string> ConfigParser::OneOf(const YAML::Node& node, const std::string& path,
                                        const std::vector<std::string>& allowed) const {
  std::string choices;
  for (const std::string& choice : allowed) choices += (choices.empty() ? "" : "|") + choice;
  if (node.IsScalar()) {
    for (const std::string& choice : allowed) {
      if (node.Scalar() == choice) return choice;
    }
  }
  return Fail(node, path, "expected one of " + choices + ", got " + Describe(node));
}

std::string ConfigParser::ResolvePath(const std::string& value) const {
  if (value.empty() || base_dir_.empty() || value.front() == '/') return value;
  return (std::filesystem::path(base_dir_) / value).lexically_normal().string();
}

KeySpec ConfigParser::PathKey(const std::string& name, std::string& out, bool required) const {
  return {name,
          [this, &out, required](const YAML::Node& node, const std::string& path) -> Result<void> {
            if (node.IsNull()) return {};
            auto text = String(node, path);
            if (!text) return tl::unexpected(text.error());
            if (text->empty() && required) {
              return Fail(node, path, "expected a path, got an empty string");
            }
            out = ResolvePath(*text);
            return {};
          }};
}

KeySpec ConfigParser::OptionalPathKey(const std::string& name,
                                      std::optional<std::string>& out) const {
  return {name, [this, &out](const YAML::Node& node, const std::string& path) -> Result<void> {
            if (node.IsNull()) {
              out.reset();
              return {};
            }
            auto text = String(node, path);
            if (!text) return tl::unexpected(text.error());
            if (text->empty()) {
              out.reset();
            } else {
              out = ResolvePath(*text);
            }
            return {};
          }};
}

bool IsHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

Result<void> ConfigParser::ParseListen(const YAML::Node& node, const std::string& path,
                                       ListenAddress& address) const {
  auto text = String(node, path);
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
  auto text = String(node, path);
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
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    const std::string where = e.mark.is_null() ? source_
                                               : source_ + ":" + std::to_string(e.mark.line + 1) +
                                                     ":" + std::to_string(e.mark.column + 1);
    return MakeError(where + ": invalid YAML: " + e.msg);
  }

  Config config;
  config.base_dir = base_dir_;
  config.mig_profiles_dir = base_dir_.empty() ? "config/mig" : ResolvePath("mig");

  auto string_key = [this](const std::string& name, std::string& out) {
    return KeySpec{name, [this, &out](const YAML::Node& node, const std::string& path) {
                     auto text = String(node, path);
                     if (!text) return Result<void>(tl::unexpected(text.error()));
                     out = *text;
                     return Result<void>();
                   }};
  };
  auto bool_key = [this](const std::string& name, bool& out) {
    return KeySpec{name, [this, &out](const YAML::Node& node, const std::string& path) {
                     auto value = Bool(node, path);
                     if (!value) return Result<void>(tl::unexpected(value.error()));
                     out = *value;
                     return Result<void>();
                   }};
  };
  auto int_key = [this](const std::string& name, auto& out, std::int64_t min, std::int64_t max) {
    return KeySpec{name, [this, &out, min, max](const YAML::Node& node, const std::string& path) {
                     auto value = Integer(node, path, min, max);
                     if (!value) return Result<void>(tl::unexpected(value.error()));
                     out = static_cast<std::remove_reference_t<decltype(out)>>(*value);
                     return Result<void>();
                   }};
  };
  auto number_key = [this](const std::string& name, double& out, bool positive) {
    return KeySpec{name, [this, &out, positive](const YAML::Node& node, const std::string& path) {
                     auto value = Number(node, path, 0.0, positive);
                     if (!value) return Result<void>(tl::unexpected(value.error()));
                     out = *value;
                     return Result<void>();
                   }};
  };
  auto one_of_key = [this](const std::string& name, std::string& out,
                           std::vector<std::string> allowed) {
    return KeySpec{name, [this, &out, allowed = std::move(allowed)](const YAML::Node& node,
                                                                    const std::string& path) {
                     auto value = OneOf(node, path, allowed);
                     if (!value) return Result<void>(tl::unexpected(value.error()));
                     out = *value;
                     return Result<void>();
                   }};
  };
  auto section = [this](const std::string& name, std::vector<KeySpec> specs) {
    return KeySpec{
        name, [this, specs = std::move(specs)](const YAML::Node& node, const std::string& path) {
          return ParseMap(node, path, specs);
        }};
  };

  YAML::Node tls_node;
  const std::vector<KeySpec> tls_specs = {
      PathKey("cert_file", config.tls.cert_file),
      PathKey("key_file", config.tls.key_file),
      PathKey("client_ca_file", config.tls.client_ca_file),
      bool_key("require_client_cert", config.tls.require_client_cert),
  };

  const std::vector<KeySpec> specs =
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
             return ParseMap(node, path, tls_specs);
           }},
          section("limits",
                  {
                      {"max_body_bytes",
                       [&](const YAML::Node& node, const std::string& path) -> Result<void> {
                         if (!node.IsScalar()) {
                           return Fail(node, path,
                                       "expected a size such as 64Mi, got " + Describe(node));
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
                      int_key("read_timeout_ms", config.limits.read_timeout_ms, 1, 3600000),
                      int_key("write_timeout_ms", config.limits.write_timeout_ms, 1, 3600000),
                      int_key("threads", config.limits.threads, 1, 1024),
                      int_key("keep_alive_timeout_s", config.limits.keep_alive_timeout_s, 1, 86400),
                  }),
          section("policy",
                  {
                      section("weights",
                              {
                                  number_key("topology", config.policy.weights.topology, false),
                                  number_key("packing", config.policy.weights.packing, false),
                                  number_key("fragmentation", config.policy.weights.fragmentation,
                                             false),
                                  number_key("balance", config.policy.weights.balance, false),
                              }),
                      one_of_key("default_closeness", config.policy.default_closeness,
                                 {"nvlink", "pcie-switch", "numa", "socket", "node"}),
                      one_of_key("default_closeness_policy", config.policy.default_closeness_policy,
                                 {"required", "preferred"}),
                      one_of_key("share_policy", config.policy.share_policy, {"pack", "spread"}),
                      one_of_key("whole_machines", config.policy.whole_machines,
                                 {"keep", "ring", "off"}),
                      number_key("whole_machine_penalty", config.policy.whole_machine_penalty,
                                 false),
                      int_key("score_range", config.policy.score_range, 1, 1000000),
                  }),
          {"bandwidth_overrides",
           [&](const YAML::Node& node, const std::string& path) -> Result<void> {
             if (node.IsNull()) return {};
             if (!node.IsMap())
               return Fail(node, path, "expected a mapping, got " + Describe(node));
             for (auto it = node.begin(); it != node.end(); ++it) {
               const YAML::Node key = it->first;  // a copy: it-> yields a temporary proxy
               if (!key.IsScalar() || Trim(key.Scalar()).empty()) {
                 return Fail(key, path, "keys must be non-empty strings");
               }
               const std::string key_path = path + "." + key.Scalar();
               if (config.bandwidth_overrides.count(key.Scalar()) != 0) {
                 return Fail(key, key_path, "duplicate key");
               }
               auto gbps = Number(it->second, key_path, 0.0, true);
               if (!gbps) return tl::unexpected(gbps.error());
               config.bandwidth_overrides[key.Scalar()] = *gbps;
             }
             return {};
           }},
          PathKey("mig_profiles_dir", config.mig_profiles_dir, /*required=*/true),
          OptionalPathKey("cluster_file", config.cluster_file),
          OptionalPathKey("state_file", config.state_file),
          {"shared_gpu_resource",
           [&](const YAML::Node& node, const std::string& path) -> Result<void> {
             auto text = String(node, path);
             if (!text) return tl::unexpected(text.error());
             if (!IsExtendedResourceName(*text)) {
               return Fail(node, path,
                           "expected an extended resource name such as linkfit.io/gpu-share, got " +
                               QuoteForMessage(*text));
             }
             config.shared_gpu_resource = *text;
             return {};
           }},
          section(
              "kubernetes",
              {
                  bool_key("enabled", config.kubernetes.enabled),
                  OptionalPathKey("kubeconfig", config.kubernetes.kubeconfig),
                  string_key("context", config.kubernetes.context),
                  string_key("api_server", config.kubernetes.api_server),
                  PathKey("token_file", config.kubernetes.token_file, /*required=*/true),
                  PathKey("ca_file", config.kubernetes.ca_file, /*required=*/true),
                  number_key("qps", config.kubernetes.qps, true),
                  int_key("burst", config.kubernetes.burst, 1, 100000),
                  int_key("request_timeout_ms", config.kubernetes.request_timeout_ms, 100, 600000),
                  int_key("list_page_size", config.kubernetes.list_page_size, 1, 10000),
                  bool_key("require_nri_plugin", config.kubernetes.require_nri_plugin),
                  int_key("bind_timeout_ms", config.kubernetes.bind_timeout_ms, 100, 60000),
                  int_key("bind_settle_margin_ms", config.kubernetes.bind_settle_margin_ms, 0,
                          60000),
                  section(
                      "binder_lease",
                      {
                          bool_key("enabled", config.kubernetes.binder_lease.enabled),
                          string_key("namespace", config.kubernetes.binder_lease.lease_namespace),
                          string_key("name", config.kubernetes.binder_lease.name),
                          int_key("duration_ms", config.kubernetes.binder_lease.duration_ms, 1000,
                                  600000),
                      }),
              }),
          one_of_key("log_level", config.log_level, {"debug", "info", "warning", "error", "off"}),
      };

  if (!root.IsNull() && !root.IsMap()) {
    return Fail(root, "", "the config must be a mapping of keys, got " + Describe(root));
  }
  if (auto parsed = ParseMap(root, "", specs); !parsed) return tl::unexpected(parsed.error());

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
  std::ifstream file(path, std::ios::binary);
  if (!file) return MakeError("cannot read config " + path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) return MakeError("cannot read config " + path);
  std::error_code error;
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const std::filesystem::path absolute = std::filesystem::absolute(dir, error);
  const std::string base_dir = (error ? dir : absolute).lexically_normal().string();
  return ParseConfig(text.str(), base_dir, path);
}

}  // namespace linkfit::app
