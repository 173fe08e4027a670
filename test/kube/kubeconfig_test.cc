// LoadKubeconfig and InClusterConfig: what they read (contexts, embedded and relative-path
// credentials, YAML booleans) and what they refuse, each refusal naming the file and the key.

#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "linkfit/kube/api_client.h"

namespace linkfit::kube {
namespace {

namespace fs = std::filesystem;

std::string Base64(std::string_view data) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  // The byte at `k` as an unsigned value (no promotion to int before the shifts).
  const auto byte = [&](std::size_t k) {
    return static_cast<unsigned>(static_cast<unsigned char>(data[k]));
  };
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < data.size(); i += 3) {
    const unsigned n = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    for (int shift = 18; shift >= 0; shift -= 6) out.push_back(kAlphabet[(n >> shift) & 63]);
  }
  if (i + 1 == data.size()) {
    const unsigned n = byte(i) << 16;
    out += {kAlphabet[n >> 18], kAlphabet[(n >> 12) & 63], '=', '='};
  } else if (i + 2 == data.size()) {
    const unsigned n = byte(i) << 16 | byte(i + 1) << 8;
    out += {kAlphabet[n >> 18], kAlphabet[(n >> 12) & 63], kAlphabet[(n >> 6) & 63], '='};
  }
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class KubeconfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "linkfit-kubeconfig-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    fs::create_directories(dir_ + "/certs");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A CA and a client certificate signed by it, in dir_/certs (skips without the openssl CLI).
  void MakeCertificates() {
    if (std::system("openssl version >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "openssl CLI not found";
    }
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::vector<std::string> commands = {
        "openssl req -x509 " + ec + " -keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca",
        "openssl req " + ec + " -keyout client.key -out client.csr -subj /CN=linkfit",
        "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
        "-out client.crt -days 2",
    };
    for (const std::string& command : commands) {
      const std::string full = "cd '" + dir_ + "/certs' && " + command + " >/dev/null 2>&1";
      ASSERT_EQ(std::system(full.c_str()), 0) << command;
    }
    ca_ = ReadFile(dir_ + "/certs/ca.crt");
    cert_ = ReadFile(dir_ + "/certs/client.crt");
    key_ = ReadFile(dir_ + "/certs/client.key");
  }

  std::string Write(const std::string& name, const std::string& text) const {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::trunc | std::ios::binary) << text;
    return path;
  }

  // A kubeconfig with one context "c" -> cluster "k" (`cluster` fields) and user "u" (`user`).
  std::string Config(const std::string& cluster, const std::string& user) const {
    return "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
           "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
           "clusters:\n- name: k\n  cluster:\n    server: https://10.0.0.1:6443\n" +
           cluster + "users:\n- name: u\n  user:\n" + user;
  }

  std::string dir_;
  std::string ca_;
  std::string cert_;
  std::string key_;
};

TEST_F(KubeconfigTest, ReadsTheCurrentContextWithEmbeddedCredentials) {
  MakeCertificates();
  if (IsSkipped() || HasFatalFailure()) return;
  const std::string path =
      Write("config", Config("    certificate-authority-data: " + Base64(ca_) + "\n",
                             "    client-certificate-data: " + Base64(cert_) + "\n" +
                                 "    client-key-data: " + Base64(key_) + "\n"));
  auto config = LoadKubeconfig(path);
  ASSERT_TRUE(config.has_value()) << config.error().message;
  EXPECT_EQ(config->server, "https://10.0.0.1:6443");
  EXPECT_EQ(config->ca_pem, ca_);
  EXPECT_EQ(config->client_cert_pem, cert_);
  EXPECT_EQ(config->client_key_pem, key_);
  EXPECT_FALSE(config->insecure_skip_tls_verify);
  EXPECT_EQ(config->source, "kubeconfig " + path + ", context c");
  // What it read makes a client (the certificate and key parse and match).
  auto client = NewApiClient(*config);
  EXPECT_TRUE(client.has_value()) << client.error().message;
}

TEST_F(KubeconfigTest, RelativePathsAreRelativeToTheKubeconfigsDirectory) {
  MakeCertificates();
  if (IsSkipped() || HasFatalFailure()) return;
  Write("token", "  secret-token\n");
  const std::string path = Write(
      "config", Config("    certificate-authority: certs/ca.crt\n    tls-server-name: api.test\n",
                       "    tokenFile: token\n    client-certificate: certs/client.crt\n"
                       "    client-key: certs/client.key\n"));
  // Loaded from another working directory: the paths still resolve against dir_.
  auto config = LoadKubeconfig(path);
  ASSERT_TRUE(config.has_value()) << config.error().message;
  EXPECT_EQ(config->ca_pem, ca_);
  EXPECT_EQ(config->client_cert_pem, cert_);
  EXPECT_EQ(config->token_file, dir_ + "/token");
  EXPECT_EQ(config->tls_server_name, "api.test");
}

TEST_F(KubeconfigTest, AContextCanBeNamedAndPlainFieldsAreRead) {
  const std::string path = Write(
      "config",
      "current-context: a\n"
      "contexts:\n- name: a\n  context: {cluster: ka, user: ua}\n"
      "- name: b\n  context: {cluster: kb, user: ub}\n"
      "clusters:\n- name: ka\n  cluster: {server: 'https://a:1'}\n"
      "- name: kb\n  cluster: {server: 'https://[fd00::1]:6443', insecure-skip-tls-verify: yes}\n"
      "users:\n- name: ua\n  user: {token: ta}\n"
      "- name: ub\n  user: {username: admin, password: hunter2}\n");
  auto current = LoadKubeconfig(path);
  ASSERT_TRUE(current.has_value()) << current.error().message;
  EXPECT_EQ(current->server, "https://a:1");
  EXPECT_EQ(current->token, "ta");
  auto named = LoadKubeconfig(path, "b");
  ASSERT_TRUE(named.has_value()) << named.error().message;
  EXPECT_EQ(named->server, "https://[fd00::1]:6443");
  EXPECT_TRUE(named->insecure_skip_tls_verify);
  EXPECT_EQ(named->username, "admin");
  EXPECT_EQ(named->password, "hunter2");
  EXPECT_TRUE(named->token.empty());
  EXPECT_EQ(named->source, "kubeconfig " + path + ", context b");
}

TEST_F(KubeconfigTest, RefusalsNameTheFileAndTheKey) {
  MakeCertificates();
  if (IsSkipped() || HasFatalFailure()) return;
  struct Case {
    std::string name;
    std::string text;
    std::vector<std::string> expected;  // all in the message, besides the file's path
  };
  const std::string token = "    token: t\n";
  const std::vector<Case> cases = {
      {"exec",
       Config("", "    exec: {command: aws, apiVersion: x}\n"),
       {"user u uses an exec plugin, which linkfit does not support; use a token, tokenFile or "
        "client certificate"}},
      {"auth-provider",
       Config("", "    auth-provider: {name: gcp}\n"),
       {"user u uses an auth-provider plugin"}},
      {"no such context", Config("", token), {"no contexts entry named", "nope"}},  // see below
      {"missing cluster",
       "current-context: c\ncontexts:\n- name: c\n  context: {cluster: gone, user: u}\n"
       "clusters: []\nusers:\n- name: u\n  user: {token: t}\n",
       {"no clusters entry named", "gone"}},
      {"missing user",
       "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: gone}\n"
       "clusters:\n- name: k\n  cluster: {server: 'https://k'}\nusers: []\n",
       {"no users entry named", "gone"}},
      {"no current context", "contexts: []\n", {"no current-context"}},
      {"no server",
       "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k}\n"
       "clusters:\n- name: k\n  cluster: {}\n",
       {"cluster k has no server"}},
      {"bad base64",
       Config("    certificate-authority-data: '!!!'\n", token),
       {"cluster k", "certificate-authority-data", "base64"}},
      {"truncated base64",
       Config("    certificate-authority-data: QUJDR\n", token),
       {"certificate-authority-data", "base64"}},
      {"CA data that is not PEM",
       Config("    certificate-authority-data: aGVsbG8=\n", token),
       {"cluster k", "certificate-authority-data", "PEM certificate"}},
      {"CA file that is not PEM",
       Config("    certificate-authority: certs/client.key\n", token),
       {"cluster k", "certificate-authority", "certs/client.key", "PEM certificate"}},
      {"missing CA file",
       Config("    certificate-authority: missing.crt\n", token),
       {"certificate-authority", "missing.crt"}},
      {"garbled certificate PEM",
       Config("", "    client-certificate-data: " +
                      Base64("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n") +
                      "\n    client-key-data: " + Base64(key_) + "\n"),
       {"user u", "client-certificate-data", "PEM certificate"}},
      {"key that is a certificate",
       Config("", "    client-certificate: certs/client.crt\n    client-key: certs/ca.crt\n"),
       {"user u", "client-key", "certs/ca.crt", "private key"}},
      {"certificate without key",
       Config("", "    client-certificate: certs/client.crt\n"),
       {"user u", "client-certificate and client-key must be given together"}},
      {"missing token file",
       Config("", "    tokenFile: nowhere\n"),
       {"user u", "tokenFile", "nowhere"}},
      {"bad boolean",
       Config("    insecure-skip-tls-verify: maybe\n", token),
       {"insecure-skip-tls-verify"}},
      {"not YAML", "{{{", {"not YAML"}},
      {"not a mapping", "- a\n- b\n", {"expected a mapping"}},
  };
  for (const Case& c : cases) {
    const std::string path = Write("config", c.text);
    auto config = c.name == "no such context" ? LoadKubeconfig(path, "nope") : LoadKubeconfig(path);
    ASSERT_FALSE(config.has_value()) << c.name;
    const std::string& message = config.error().message;
    EXPECT_NE(message.find("kubeconfig " + path), std::string::npos) << c.name << ": " << message;
    for (const std::string& part : c.expected) {
      EXPECT_NE(message.find(part), std::string::npos) << c.name << ": " << message;
    }
  }
  auto absent = LoadKubeconfig(dir_ + "/absent");
  ASSERT_FALSE(absent.has_value());
  EXPECT_NE(absent.error().message.find(dir_ + "/absent"), std::string::npos);
}

TEST_F(KubeconfigTest, InClusterConfigUsesTheServiceAccountFiles) {
  Write("token", "abc\n");
  Write("ca.crt", "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n");
  InClusterPaths paths{dir_ + "/token", dir_ + "/ca.crt", std::string("10.96.0.1"),
                       std::string("443")};
  auto config = InClusterConfig(paths);
  ASSERT_TRUE(config.has_value()) << config.error().message;
  EXPECT_EQ(config->server, "https://10.96.0.1:443");
  EXPECT_EQ(config->token_file, dir_ + "/token");  // re-read as it rotates, not copied
  EXPECT_TRUE(config->token.empty());
  EXPECT_EQ(config->ca_pem, ReadFile(dir_ + "/ca.crt"));
  paths.host = "fd00::1";
  EXPECT_EQ(InClusterConfig(paths)->server, "https://[fd00::1]:443");
}

TEST_F(KubeconfigTest, InClusterConfigErrorsNameWhatIsMissing) {
  Write("token", "abc\n");
  Write("ca.crt", "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n");
  Write("not-pem", "hello\n");
  const InClusterPaths good{dir_ + "/token", dir_ + "/ca.crt", std::string("10.96.0.1"),
                            std::string("443")};
  struct Case {
    InClusterPaths paths;
    std::string expected;
  };
  std::vector<Case> cases;
  {
    InClusterPaths p = good;
    p.token_file = dir_ + "/absent-token";
    cases.push_back({p, dir_ + "/absent-token"});
  }
  {
    InClusterPaths p = good;
    p.ca_file = dir_ + "/absent-ca";
    cases.push_back({p, dir_ + "/absent-ca"});
  }
  {
    InClusterPaths p = good;
    p.ca_file = dir_ + "/not-pem";
    cases.push_back({p, "PEM"});
  }
  {
    InClusterPaths p = good;
    p.host = std::nullopt;  // read from the environment, where it is unset below
    cases.push_back({p, "KUBERNETES_SERVICE_HOST"});
  }
  {
    InClusterPaths p = good;
    p.port = std::nullopt;
    cases.push_back({p, "KUBERNETES_SERVICE_PORT"});
  }
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  for (const Case& c : cases) {
    auto config = InClusterConfig(c.paths);
    ASSERT_FALSE(config.has_value()) << c.expected;
    EXPECT_NE(config.error().message.find(c.expected), std::string::npos) << config.error().message;
  }
}

}  // namespace
}  // namespace linkfit::kube
