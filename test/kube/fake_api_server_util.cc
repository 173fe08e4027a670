#include "kube/fake_api_server_internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <system_error>
#include <utility>

namespace linkfit::testing::fake_internal {
namespace {

// Fields a fieldSelector may name, per kind (the pod set of pkg/registry/core/pod/strategy.go's
// ToSelectableFields, the node set of node/strategy.go).
const std::set<std::string>& SelectableFields(Kind kind) {
  static const std::set<std::string> pod_fields = {
      "metadata.name",      "metadata.namespace",      "spec.nodeName",    "spec.restartPolicy",
      "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
      "status.podIP",       "status.nominatedNodeName"};
  static const std::set<std::string> node_fields = {"metadata.name", "spec.unschedulable"};
  return kind == Kind::kPod ? pod_fields : node_fields;
}

// The value a field selector compares: strings as they are, booleans "true"/"false" (absent
// booleans are false), anything absent "".
std::string FieldValue(const json& object, const std::string& path) {
  const json* node = &object;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? dot : dot - start);
    if (!node->is_object() || !node->contains(part)) {
      return path == "spec.hostNetwork" || path == "spec.unschedulable" ? "false" : "";
    }
    node = &(*node)[part];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (node->is_string()) return node->get<std::string>();
  if (node->is_boolean()) return node->get<bool>() ? "true" : "false";
  if (node->is_null()) return "";
  return node->dump();
}

bool RequirementMatches(const Requirement& requirement, const std::optional<std::string>& value) {
  switch (requirement.op) {
    case Requirement::Op::kEquals:
      return value.has_value() && *value == requirement.value;
    case Requirement::Op::kNotEquals:
      return !value.has_value() || *value != requirement.value;
    case Requirement::Op::kExists:
      return value.has_value();
    case Requirement::Op::kNotExists:
      return !value.has_value();
  }
  return false;
}

std::string Trim(const std::string& text) {
  const size_t first = text.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  const size_t last = text.find_last_not_of(' ');
  return text.substr(first, last - first + 1);
}

std::vector<std::string> SplitTerms(const std::string& text) {
  std::vector<std::string> terms;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string term =
        Trim(text.substr(start, comma == std::string::npos ? comma : comma - start));
    if (!term.empty()) terms.push_back(term);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return terms;
}

// Splits "key<op>value" on the first of !=, ==, =.
std::optional<Requirement> ParseEquality(const std::string& term) {
  Requirement requirement;
  size_t position = term.find("!=");
  size_t length = 2;
  if (position != std::string::npos) {
    requirement.op = Requirement::Op::kNotEquals;
  } else if ((position = term.find("==")) != std::string::npos) {
    requirement.op = Requirement::Op::kEquals;
  } else if ((position = term.find('=')) != std::string::npos) {
    requirement.op = Requirement::Op::kEquals;
    length = 1;
  } else {
    return std::nullopt;
  }
  requirement.key = Trim(term.substr(0, position));
  requirement.value = Trim(term.substr(position + length));
  if (requirement.key.empty()) return std::nullopt;
  return requirement;
}

}  // namespace

const char* KindName(Kind kind) { return kind == Kind::kPod ? "Pod" : "Node"; }

bool Selector::Matches(const json& object) const {
  const json& metadata = object.contains("metadata") ? object["metadata"] : json::object();
  if (!namespace_name.empty() && FieldValue(object, "metadata.namespace") != namespace_name) {
    return false;
  }
  for (const Requirement& requirement : fields) {
    if (!RequirementMatches(requirement, FieldValue(object, requirement.key))) return false;
  }
  const json object_labels = metadata.contains("labels") && metadata["labels"].is_object()
                                 ? metadata["labels"]
                                 : json::object();
  for (const Requirement& requirement : labels) {
    std::optional<std::string> value;
    if (object_labels.contains(requirement.key) && object_labels[requirement.key].is_string()) {
      value = object_labels[requirement.key].get<std::string>();
    }
    if (!RequirementMatches(requirement, value)) return false;
  }
  return true;
}

Result<Selector> ParseSelector(Kind kind, const std::string& field_selector,
                               const std::string& label_selector) {
  Selector selector;
  for (const std::string& term : SplitTerms(field_selector)) {
    std::optional<Requirement> requirement = ParseEquality(term);
    if (!requirement) return MakeError("invalid field selector term \"" + term + "\"");
    if (!SelectableFields(kind).count(requirement->key)) {
      return MakeError("field label not supported: " + requirement->key);
    }
    selector.fields.push_back(std::move(*requirement));
  }
  if (label_selector.find('(') != std::string::npos) {
    return MakeError(
        "set-based label selectors (in, notin) are not supported by the fake API "
        "server: \"" +
        label_selector + "\"");
  }
  for (const std::string& term : SplitTerms(label_selector)) {
    std::optional<Requirement> requirement = ParseEquality(term);
    if (!requirement) {
      Requirement existence;
      existence.op = term[0] == '!' ? Requirement::Op::kNotExists : Requirement::Op::kExists;
      existence.key = Trim(term[0] == '!' ? term.substr(1) : term);
      if (existence.key.empty() || existence.key.find(' ') != std::string::npos) {
        return MakeError("invalid label selector term \"" + term + "\"");
      }
      requirement = std::move(existence);
    }
    selector.labels.push_back(std::move(*requirement));
  }
  return selector;
}

std::string StatusBody(int code, const std::string& reason, const std::string& message,
                       const json& details) {
  nlohmann::ordered_json status;
  status["kind"] = "Status";
  status["apiVersion"] = "v1";
  status["metadata"] = nlohmann::ordered_json::object();
  status["status"] = "Failure";
  status["message"] = message;
  if (!reason.empty()) status["reason"] = reason;  // StatusReasonUnknown ("") is omitted
  if (details.is_object() && !details.empty()) {
    status["details"] = nlohmann::ordered_json::parse(details.dump());
  }
  status["code"] = code;
  return status.dump();
}

Reply StatusReply(int code, const std::string& reason, const std::string& message,
                  const json& details) {
  return Reply{code, StatusBody(code, reason, message, details)};
}

Reply UnsupportedPatchType() {
  // negotiation.NewUnsupportedMediaTypeError, naming what the fake accepts.
  return StatusReply(415, "UnsupportedMediaType",
                     "the body of the request was in an unknown format - accepted media types "
                     "include: application/merge-patch+json (the fake API server accepts no "
                     "other)");
}

std::string NowRfc3339() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::array<char, 32> buffer{};
  std::strftime(buffer.data(), buffer.size(), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer.data();
}

std::string Base64Encode(const std::string& data, bool url) {
  static constexpr char kStandard[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  static constexpr char kUrl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const char* alphabet = url ? kUrl : kStandard;
  std::string out;
  size_t i = 0;
  for (; i + 2 < data.size(); i += 3) {
    const uint32_t triple = (static_cast<uint32_t>(static_cast<unsigned char>(data[i])) << 16) |
                            (static_cast<uint32_t>(static_cast<unsigned char>(data[i + 1])) << 8) |
                            static_cast<uint32_t>(static_cast<unsigned char>(data[i + 2]));
    for (int shift = 18; shift >= 0; shift -= 6) out += alphabet[(triple >> shift) & 0x3f];
  }
  const size_t rest = data.size() - i;
  if (rest > 0) {
    uint32_t triple = static_cast<uint32_t>(static_cast<unsigned char>(data[i])) << 16;
    if (rest == 2) triple |= static_cast<uint32_t>(static_cast<unsigned char>(data[i + 1])) << 8;
    out += alphabet[(triple >> 18) & 0x3f];
    out += alphabet[(triple >> 12) & 0x3f];
    if (rest == 2) out += alphabet[(triple >> 6) & 0x3f];
    if (!url) out += rest == 2 ? "=" : "==";
  }
  return out;
}

std::optional<std::string> Base64Decode(const std::string& text) {
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : text) {
    uint32_t value = 0;
    if (c >= 'A' && c <= 'Z') {
      value = static_cast<uint32_t>(c - 'A');
    } else if (c >= 'a' && c <= 'z') {
      value = static_cast<uint32_t>(c - 'a' + 26);
    } else if (c >= '0' && c <= '9') {
      value = static_cast<uint32_t>(c - '0' + 52);
    } else if (c == '+' || c == '-') {
      value = 62;
    } else if (c == '/' || c == '_') {
      value = 63;
    } else if (c == '=') {
      break;
    } else {
      return std::nullopt;
    }
    buffer = (buffer << 6) | value;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xff);
    }
  }
  return out;
}

std::string WithKind(Kind kind, const json& object) {
  std::string body = object.dump();
  const std::string prefix =
      std::string(R"({"kind":")") + KindName(kind) + R"(","apiVersion":"v1")";
  if (body.size() <= 2) return prefix + "}";
  return prefix + "," + body.substr(1);
}

const char* ReasonForCode(int code) {
  static const std::map<int, const char*> kReasons = {{400, "BadRequest"},
                                                      {401, "Unauthorized"},
                                                      {403, "Forbidden"},
                                                      {404, "NotFound"},
                                                      {405, "MethodNotAllowed"},
                                                      {409, "Conflict"},
                                                      {410, "Expired"},
                                                      {413, "RequestEntityTooLarge"},
                                                      {415, "UnsupportedMediaType"},
                                                      {422, "Invalid"},
                                                      {429, "TooManyRequests"},
                                                      {500, "InternalError"},
                                                      {503, "ServiceUnavailable"},
                                                      {504, "Timeout"}};
  auto it = kReasons.find(code);
  return it != kReasons.end() ? it->second : "Unknown";
}

std::string MediaType(const std::string& content_type) {
  std::string media = content_type.substr(0, content_type.find(';'));
  media.erase(std::remove(media.begin(), media.end(), ' '), media.end());
  std::transform(media.begin(), media.end(), media.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return media;
}

namespace {

int PortOf(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  }
  return -1;
}

}  // namespace

std::vector<int> FindServerSockets(int local_port, int remote_port) {
  std::vector<int> found;
  try {
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
      const std::string name = entry.path().filename().string();
      if (name.empty() || !std::all_of(name.begin(), name.end(),
                                       [](unsigned char c) { return std::isdigit(c) != 0; })) {
        continue;
      }
      const int fd = std::atoi(name.c_str());
      sockaddr_storage local{};
      socklen_t length = sizeof(local);
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) continue;
      if (PortOf(local) != local_port) continue;
      sockaddr_storage peer{};
      length = sizeof(peer);
      if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0) continue;
      if (remote_port >= 0 && PortOf(peer) != remote_port) continue;
      found.push_back(fd);
    }
  } catch (const std::filesystem::filesystem_error&) {
    // /proc is not mounted: nothing can be found, callers fall back to waiting.
  }
  return found;
}

Result<std::string> WriteKubeconfigFile(const KubeconfigOptions& options, const std::string& url,
                                        const TestPki* pki, const std::string& default_token,
                                        const std::string& work_dir) {
  namespace fs = std::filesystem;
  const fs::path path =
      fs::absolute(options.path.empty() ? work_dir + "/kubeconfig" : options.path);
  const fs::path directory = path.parent_path();
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) return MakeError("creating " + directory.string() + ": " + error.message());
  // File references: absolute, or relative to the kubeconfig's directory (kubectl's rule).
  auto reference = [&](const std::string& file) {
    return json(options.relative_paths ? fs::relative(file, directory).string()
                                       : fs::absolute(file).string())
        .dump();
  };
  const std::string token = options.token.empty() ? default_token : options.token;

  std::string cluster = "    server: " + json(url).dump() + "\n";
  if (pki != nullptr) {
    if (options.insecure_skip_tls_verify) {
      cluster += "    insecure-skip-tls-verify: true\n";
    } else if (options.embed_ca) {
      cluster += "    certificate-authority-data: " + Base64Encode(pki->ca_cert_pem()) + "\n";
    } else {
      cluster += "    certificate-authority: " + reference(pki->ca_cert_path()) + "\n";
    }
  }
  std::string user;
  switch (options.credential) {
    case KubeconfigOptions::Credential::kToken:
      user = "    token: " + json(token).dump() + "\n";
      break;
    case KubeconfigOptions::Credential::kTokenFile: {
      const std::string token_path = (directory / "token").string();
      std::ofstream out(token_path, std::ios::trunc);
      out << token;
      if (!out) return MakeError("writing " + token_path);
      user = "    tokenFile: " + reference(token_path) + "\n";
      break;
    }
    case KubeconfigOptions::Credential::kClientCertificate:
      if (pki == nullptr) return MakeError("client certificates need a TLS fake API server");
      if (options.embed_client_certificate) {
        user = "    client-certificate-data: " + Base64Encode(pki->client_cert_pem()) + "\n" +
               "    client-key-data: " + Base64Encode(pki->client_key_pem()) + "\n";
      } else {
        user = "    client-certificate: " + reference(pki->client_cert_path()) + "\n" +
               "    client-key: " + reference(pki->client_key_path()) + "\n";
      }
      break;
    case KubeconfigOptions::Credential::kNone:
      break;
  }
  const std::string name = json(options.context).dump();
  std::string text =
      "apiVersion: v1\nkind: Config\nclusters:\n- name: " + name + "\n  cluster:\n" + cluster +
      "users:\n- name: " + name + "\n" + (user.empty() ? "  user: {}\n" : "  user:\n" + user) +
      "contexts:\n- name: " + name + "\n  context:\n    cluster: " + name + "\n    user: " + name +
      "\n    namespace: " + json(options.namespace_name).dump() + "\ncurrent-context: " + name +
      "\npreferences: {}\n";
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out) return MakeError("writing " + path.string());
  return path.string();
}

}  // namespace linkfit::testing::fake_internal

namespace linkfit::testing {

nlohmann::json MakeFakePod(const std::string& namespace_name, const std::string& name,
                           const std::string& node_name) {
  nlohmann::json pod = {
      {"metadata", {{"name", name}, {"namespace", namespace_name}}},
      {"spec",
       {{"schedulerName", "default-scheduler"},
        {"containers", {{{"name", "main"}, {"image", "registry.k8s.io/pause:3.9"}}}}}},
      {"status", {{"phase", "Pending"}}}};
  if (!node_name.empty()) pod["spec"]["nodeName"] = node_name;
  return pod;
}

nlohmann::json MakeFakeNode(const std::string& name) {
  return {{"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
          {"spec", nlohmann::json::object()},
          {"status",
           {{"capacity", nlohmann::json::object()},
            {"allocatable", nlohmann::json::object()},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

}  // namespace linkfit::testing
