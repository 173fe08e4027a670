// LoadKubeconfig and InClusterConfig (api_client.h).

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kube/pem.h"
#include "linkfit/common/strings.h"
#include "linkfit/kube/api_client.h"

namespace linkfit::kube {
namespace {

namespace fs = std::filesystem;

// Kubeconfigs, and the certificates, keys and tokens they name, are a few KiB; a file past this
// is not one of them (a path to /dev/zero must not read forever).
constexpr std::size_t kMaxFileBytes = std::size_t{4} << 20;

Result<std::string> ReadWholeFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(what + ": cannot read " + path);
  std::string text(kMaxFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return MakeError(what + ": cannot read " + path);
  const auto read = static_cast<std::size_t>(in.gcount());
  if (read > kMaxFileBytes) {
    return MakeError(what + ": " + path +
                     " is larger than 4 MiB; not a kubeconfig, certificate, "
                     "key or token");
  }
  text.resize(read);
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
      if (entry["name"] && entry["name"].as<std::string>("") == name) {
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

std::string StringAt(const YAML::Node& map, const char* key) {
  const YAML::Node value = map[key];
  return value && value.IsScalar() ? value.Scalar() : "";
}

std::string Resolve(const std::string& base, const std::string& path) {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  return (fs::path(base) / path).lexically_normal().string();
}

enum class PemKind { kCertificates, kPrivateKey };

// `key-data` (base64 PEM, which wins, as in client-go) or `key` (a file), checked to hold PEM
// that OpenSSL parses: certificates or a private key.
Result<std::string> PemFrom(const YAML::Node& map, const char* file_key, const char* data_key,
                            PemKind kind, const std::string& base, const std::string& where) {
  const std::string data = StringAt(map, data_key);
  const std::string file = StringAt(map, file_key);
  std::string pem;
  std::string what;
  if (!data.empty()) {
    what = where + ": " + data_key;
    LINKFIT_ASSIGN_OR_RETURN(pem, DecodeBase64(data, what));
  } else if (!file.empty()) {
    const std::string path = Resolve(base, file);
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

// A kubeconfig boolean ("true", but YAML's other spellings too); false when absent.
Result<bool> BoolAt(const YAML::Node& map, const char* key, const std::string& where) {
  const YAML::Node value = map[key];
  if (!value || value.IsNull()) return false;
  bool result = false;
  if (!value.IsScalar() || !YAML::convert<bool>::decode(value, result)) {
    return MakeError(where + ": " + key + " is not true or false");
  }
  return result;
}

}  // namespace

Result<ClientConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  std::string text;
  LINKFIT_ASSIGN_OR_RETURN(text, ReadWholeFile(path, "kubeconfig " + path));
  return ParseKubeconfig(text, path, context);
}

Result<ClientConfig> ParseKubeconfig(std::string_view text, const std::string& path,
                                     const std::string& context) {
  const std::string where = "kubeconfig " + path;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return MakeError(where + ": not YAML: " + e.what());
  }
  if (!root.IsMap()) return MakeError(where + ": expected a mapping");
  const std::string base = fs::path(path).parent_path().string();
  try {
    const std::string context_name = context.empty() ? StringAt(root, "current-context") : context;
    if (context_name.empty()) {
      return MakeError(where + ": no current-context (name one with --context)");
    }
    YAML::Node context_map;
    LINKFIT_ASSIGN_OR_RETURN(context_map, Named(root, "contexts", "context", context_name, where));
    const std::string cluster_name = StringAt(context_map, "cluster");
    const std::string user_name = StringAt(context_map, "user");
    if (cluster_name.empty())
      return MakeError(where + ": context " + context_name + " names no cluster");
    YAML::Node cluster;
    LINKFIT_ASSIGN_OR_RETURN(cluster, Named(root, "clusters", "cluster", cluster_name, where));
    ClientConfig config;
    config.source = where + ", context " + context_name;
    config.server = StringAt(cluster, "server");
    if (config.server.empty()) {
      return MakeError(where + ": cluster " + cluster_name + " has no server");
    }
    const std::string cluster_where = where + ": cluster " + cluster_name;
    LINKFIT_ASSIGN_OR_RETURN(config.ca_pem,
                             PemFrom(cluster, "certificate-authority", "certificate-authority-data",
                                     PemKind::kCertificates, base, cluster_where));
    LINKFIT_ASSIGN_OR_RETURN(config.insecure_skip_tls_verify,
                             BoolAt(cluster, "insecure-skip-tls-verify", cluster_where));
    config.tls_server_name = StringAt(cluster, "tls-server-name");
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
      config.token = StringAt(user, "token");
      const std::string token_file = StringAt(user, "tokenFile");
      if (!token_file.empty()) {
        config.token_file = Resolve(base, token_file);
        std::string token;
        LINKFIT_ASSIGN_OR_RETURN(token,
                                 ReadWholeFile(config.token_file, user_where + ": tokenFile"));
      }
      LINKFIT_ASSIGN_OR_RETURN(config.client_cert_pem,
                               PemFrom(user, "client-certificate", "client-certificate-data",
                                       PemKind::kCertificates, base, user_where));
      LINKFIT_ASSIGN_OR_RETURN(
          config.client_key_pem,
          PemFrom(user, "client-key", "client-key-data", PemKind::kPrivateKey, base, user_where));
      if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
        return MakeError(user_where + ": client-certificate and client-key must be given together");
      }
      config.username = StringAt(user, "username");
      config.password = StringAt(user, "password");
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
