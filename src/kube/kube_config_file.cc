// LoadKubeconfig and InClusterConfig (api_client.h).

#include <cstdlib>
#include <filesystem>

#include "kube/pem.h"
#include "linkfit/common/strings.h"
#include "linkfit/common/yaml_reader.h"
#include "linkfit/kube/api_client.h"

namespace linkfit::kube {
namespace {

namespace fs = std::filesystem;

// Kubeconfigs, and the certificates, keys and tokens they name, are a few KiB; a file past this
// is not one of them (a path to /dev/zero must not read forever).
constexpr std::size_t kMaxFileBytes = std::size_t{4} << 20;

Result<std::string> ReadWholeFile(const std::string& path, const std::string& what) {
  auto text = yaml::ReadFile(path, kMaxFileBytes);
  if (!text) return WithContext(text.error(), what);
  return text;
}

Result<std::string> DecodeBase64(std::string_view text, const std::string& what) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  unsigned buffer = 0;
  int bits = 0;
  std::size_t padding = 0;
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == ' ' || c == '\t') continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    const auto value = kAlphabet.find(c);
    if (value == std::string_view::npos || padding > 0) {
      return MakeError(what + ": not valid base64");
    }
    buffer = (buffer << 6) | static_cast<unsigned>(value);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xff));
    }
  }
  // Six bits left over cannot end a base64 text (four characters carry three bytes).
  if (padding > 2 || bits >= 6) return MakeError(what + ": not valid base64");
  return out;
}

// The entry named `name` in a kubeconfig list (clusters, users, contexts): its inner mapping.
Result<YAML::Node> Named(const YAML::Node& root, const char* list, const char* inner,
                         const std::string& name, const std::string& where) {
  const YAML::Node entries = root[list];
  if (entries && entries.IsSequence()) {
    for (const YAML::Node& entry : entries) {
      if (entry.IsMap() && yaml::ScalarOr(entry, "name") == name) {
        const YAML::Node value = entry[inner];
        if (!value || !value.IsMap()) {
          if (value && value.IsNull()) return YAML::Node(YAML::NodeType::Map);
          return MakeError(where + ": " + list + " entry " + name + " has no " + inner);
        }
        return value;
      }
    }
  }
  return MakeError(where + ": no " + std::string(list) + " entry named " + QuoteForMessage(name));
}

enum class PemKind { kCertificates, kPrivateKey };

// `key-data` (base64 PEM, which wins, as in client-go) or `key` (a file), checked to hold PEM
// that OpenSSL parses: certificates or a private key.
Result<std::string> PemFrom(const yaml::Reader& reader, const YAML::Node& map, const char* file_key,
                            const char* data_key, PemKind kind, const std::string& where) {
  const std::string data = yaml::ScalarOr(map, data_key);
  const std::string file = yaml::ScalarOr(map, file_key);
  std::string pem;
  std::string what;
  if (!data.empty()) {
    what = where + ": " + data_key;
    LINKFIT_ASSIGN_OR_RETURN(pem, DecodeBase64(data, what));
  } else if (!file.empty()) {
    const std::string path = reader.Resolve(file);
    what = where + ": " + file_key + " " + path;
    LINKFIT_ASSIGN_OR_RETURN(pem, ReadWholeFile(path, where + ": " + file_key));
  } else {
    return std::string();
  }
  if (kind == PemKind::kCertificates) {
    auto certs = ParsePemCertificates(pem, what);
    if (!certs) return tl::unexpected(certs.error());
  } else {
    auto key = ParsePemPrivateKey(pem, what);
    if (!key) return tl::unexpected(key.error());
  }
  return pem;
}

}  // namespace

Result<ClientConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  std::string text;
  LINKFIT_ASSIGN_OR_RETURN(text, ReadWholeFile(path, "kubeconfig " + path));
  return ParseKubeconfig(text, path, context);
}

Result<ClientConfig> ParseKubeconfig(std::string_view text, const std::string& path,
                                     const std::string& context) {
  const yaml::Reader reader(
      "kubeconfig " + path, fs::path(path).parent_path().string(),
      {.quoted_is_string = false, .yaml11_booleans = true, .syntax_error = "not YAML"});
  const std::string& where = reader.source();
  YAML::Node root;
  LINKFIT_ASSIGN_OR_RETURN(root, reader.Load(text));
  if (!root.IsMap()) {
    return reader.Fail(root, "", "expected a mapping, got " + yaml::Describe(root));
  }
  try {
    const std::string context_name =
        context.empty() ? yaml::ScalarOr(root, "current-context") : context;
    if (context_name.empty()) {
      return MakeError(where + ": no current-context (name one with --context)");
    }
    YAML::Node context_map;
    LINKFIT_ASSIGN_OR_RETURN(context_map, Named(root, "contexts", "context", context_name, where));
    const std::string cluster_name = yaml::ScalarOr(context_map, "cluster");
    const std::string user_name = yaml::ScalarOr(context_map, "user");
    if (cluster_name.empty())
      return MakeError(where + ": context " + context_name + " names no cluster");
    YAML::Node cluster;
    LINKFIT_ASSIGN_OR_RETURN(cluster, Named(root, "clusters", "cluster", cluster_name, where));
    ClientConfig config;
    config.source = where + ", context " + context_name;
    config.server = yaml::ScalarOr(cluster, "server");
    if (config.server.empty()) {
      return MakeError(where + ": cluster " + cluster_name + " has no server");
    }
    const std::string cluster_where = where + ": cluster " + cluster_name;
    LINKFIT_ASSIGN_OR_RETURN(config.ca_pem, PemFrom(reader, cluster, "certificate-authority",
                                                    "certificate-authority-data",
                                                    PemKind::kCertificates, cluster_where));
    // A kubeconfig boolean (YAML 1.1's spellings too); false when absent.
    if (const YAML::Node skip = cluster["insecure-skip-tls-verify"]; skip && !skip.IsNull()) {
      LINKFIT_ASSIGN_OR_RETURN(
          config.insecure_skip_tls_verify,
          reader.Bool(skip, "cluster " + cluster_name + ": insecure-skip-tls-verify"));
    }
    config.tls_server_name = yaml::ScalarOr(cluster, "tls-server-name");
    if (!user_name.empty()) {
      YAML::Node user;
      LINKFIT_ASSIGN_OR_RETURN(user, Named(root, "users", "user", user_name, where));
      const std::string user_where = where + ": user " + user_name;
      if (user["exec"]) {
        return MakeError(user_where +
                         " uses an exec plugin, which linkfit does not support; use a token, "
                         "tokenFile or client certificate");
      }
      if (user["auth-provider"]) {
        return MakeError(user_where +
                         " uses an auth-provider plugin, which linkfit does not support; use a "
                         "token, tokenFile or client certificate");
      }
      config.token = yaml::ScalarOr(user, "token");
      const std::string token_file = yaml::ScalarOr(user, "tokenFile");
      if (!token_file.empty()) {
        config.token_file = reader.Resolve(token_file);
        std::string token;
        LINKFIT_ASSIGN_OR_RETURN(token,
                                 ReadWholeFile(config.token_file, user_where + ": tokenFile"));
      }
      LINKFIT_ASSIGN_OR_RETURN(config.client_cert_pem, PemFrom(reader, user, "client-certificate",
                                                               "client-certificate-data",
                                                               PemKind::kCertificates, user_where));
      LINKFIT_ASSIGN_OR_RETURN(
          config.client_key_pem,
          PemFrom(reader, user, "client-key", "client-key-data", PemKind::kPrivateKey, user_where));
      if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
        return MakeError(user_where + ": client-certificate and client-key must be given together");
      }
      config.username = yaml::ScalarOr(user, "username");
      config.password = yaml::ScalarOr(user, "password");
    }
    return config;
  } catch (const YAML::Exception& e) {
    return MakeError(where + ": " + e.what());
  }
}

Result<ClientConfig> InClusterConfig(const InClusterPaths& paths) {
  const auto variable = [](const std::optional<std::string>& given,
                           const char* name) -> Result<std::string> {
    if (given) return *given;
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') {
      return MakeError(std::string("in-cluster config: ") + name +
                       " is not set (not running in a pod? use --kubeconfig)");
    }
    return std::string(value);
  };
  std::string host;
  std::string port;
  LINKFIT_ASSIGN_OR_RETURN(host, variable(paths.host, "KUBERNETES_SERVICE_HOST"));
  LINKFIT_ASSIGN_OR_RETURN(port, variable(paths.port, "KUBERNETES_SERVICE_PORT"));
  ClientConfig config;
  config.source = "in-cluster service account";
  config.server =
      "https://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + port;
  config.token_file = paths.token_file;
  std::string token;
  LINKFIT_ASSIGN_OR_RETURN(token, ReadWholeFile(paths.token_file, "in-cluster config: token"));
  LINKFIT_ASSIGN_OR_RETURN(config.ca_pem, ReadWholeFile(paths.ca_file, "in-cluster config: CA"));
  // Only checked for PEM text here: NewApiClient parses it and names it on failure.
  if (config.ca_pem.find("-----BEGIN ") == std::string::npos) {
    return MakeError("in-cluster config: CA " + paths.ca_file + " does not hold PEM text");
  }
  return config;
}

}  // namespace linkfit::kube
