// ApiClient over cpp-httplib with OpenSSL (api_client.h). The only file of module `kube` that
// includes httplib.h.

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "kube/json_reader.h"
#include "kube/rate_limiter.h"
#include "linkfit/common/log.h"
#include "linkfit/common/strings.h"
#include "linkfit/kube/api_client.h"

namespace linkfit::kube {
namespace {

class SteadyClock final : public Clock {
 public:
  std::chrono::steady_clock::time_point Now() const override {
    return std::chrono::steady_clock::now();
  }
  void SleepFor(std::chrono::nanoseconds duration) override {
    std::this_thread::sleep_for(duration);
  }
};

struct Endpoint {
  bool tls = true;
  std::string host;
  int port = 443;
};

Result<Endpoint> ParseServer(const std::string& url) {
  Endpoint endpoint;
  std::string rest;
  if (url.starts_with("https://")) {
    rest = url.substr(8);
  } else if (url.starts_with("http://")) {
    endpoint.tls = false;
    endpoint.port = 80;
    rest = url.substr(7);
  } else {
    return MakeError("API server " + QuoteForMessage(url) + ": expected https://host[:port]");
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find('/') != std::string::npos) {
    return MakeError("API server " + QuoteForMessage(url) +
                     ": a path prefix is not supported; expected https://host[:port]");
  }
  std::string host = rest;
  std::string port;
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string::npos) return MakeError("API server " + url + ": bad IPv6 host");
    host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return MakeError("API server " + url + ": bad port");
      port = rest.substr(close + 2);
    }
  } else if (const auto colon = rest.rfind(':'); colon != std::string::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty()) return MakeError("API server " + QuoteForMessage(url) + ": no host");
  if (!port.empty()) {
    const auto number = ParseInt(port);
    if (!number || *number <= 0 || *number > 65535) {
      return MakeError("API server " + QuoteForMessage(url) + ": bad port");
    }
    endpoint.port = static_cast<int>(*number);
  }
  endpoint.host = host;
  return endpoint;
}

std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  if (code == 0) return "unknown OpenSSL error";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  ERR_clear_error();
  return text;
}

// Certificates parsed once, copied into every connection's SSL context.
struct TlsMaterial {
  std::vector<X509*> cas;
  X509* client_cert = nullptr;
  EVP_PKEY* client_key = nullptr;
  ~TlsMaterial() {
    for (X509* ca : cas) X509_free(ca);
    if (client_cert != nullptr) X509_free(client_cert);
    if (client_key != nullptr) EVP_PKEY_free(client_key);
  }
};

Result<std::vector<X509*>> ParseCertificates(const std::string& pem, const std::string& what) {
  std::vector<X509*> certs;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    // Every connection's SSL context shares these certificates; OpenSSL computes a
    // certificate's extension cache lazily, on first use, without a lock for that first fill.
    // Filling it now, before any connection exists, keeps concurrent handshakes read-only.
    X509_check_purpose(cert, -1, 0);
    certs.push_back(cert);
  }
  BIO_free(bio);
  ERR_clear_error();
  if (certs.empty()) return MakeError(what + ": no PEM certificate could be read");
  return certs;
}

// Maps httplib's error to "may the request have reached the server?". Errors while connecting
// (TCP or TLS) happen before a byte of the request is written; Read means the request was
// written and the reply is missing; Write may have sent part or all of it; Canceled and Unknown
// are not known to be before the send, so they count as maybe sent (the safe side for writes).
bool MaybeSent(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection:
    case httplib::Error::BindIPAddress:
    case httplib::Error::ConnectionTimeout:
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLLoadingCerts:
    case httplib::Error::SSLServerVerification:
      return false;
    default:
      return true;
  }
}

std::string ReadTrimmed(const std::string& path, bool* ok) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  *ok = static_cast<bool>(in) || in.eof();
  return std::string(Trim(text.str()));
}

class HttpApiClient final : public ApiClient {
 public:
  HttpApiClient(ClientConfig config, Endpoint endpoint, std::unique_ptr<TlsMaterial> tls,
                ApiCallObserver* observer, Clock& clock)
      : config_(std::move(config)),
        endpoint_(std::move(endpoint)),
        tls_(std::move(tls)),
        observer_(observer),
        clock_(clock),
        limiter_(config_.qps, config_.burst, clock) {}

  ~HttpApiClient() override { Stop(); }

  ApiResult<ApiResponse> Get(const std::string& path, std::string_view verb) override {
    return Call("GET", path, "", "", verb);
  }
  ApiResult<ApiResponse> Post(const std::string& path, const std::string& body,
                              std::string_view verb) override {
    return Call("POST", path, body, "application/json", verb);
  }
  ApiResult<ApiResponse> Patch(const std::string& path, const std::string& body,
                               std::string_view verb) override {
    return Call("PATCH", path, body, "application/merge-patch+json", verb);
  }

  ApiResult<int> Watch(const std::string& path,
                       const std::function<bool(std::string_view line)>& on_line,
                       std::chrono::milliseconds idle_timeout, std::string* error_body) override;

  void Stop() override {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
    for (httplib::ClientImpl* client : live_) client->stop();
    idle_.clear();
  }

  const ClientConfig& config() const override { return config_; }

 private:
  using ClientPtr = std::unique_ptr<httplib::ClientImpl>;

  ClientPtr NewConnection(bool keep_alive, std::chrono::milliseconds read_timeout) const {
    ClientPtr client;
    if (endpoint_.tls) {
      auto ssl = std::make_unique<httplib::SSLClient>(endpoint_.host, endpoint_.port,
                                                      tls_->client_cert, tls_->client_key);
      if (!tls_->cas.empty()) {
        X509_STORE* store = X509_STORE_new();
        for (X509* ca : tls_->cas) X509_STORE_add_cert(store, ca);
        ssl->set_ca_cert_store(store);  // the client owns it
      }
      ssl->enable_server_certificate_verification(!config_.insecure_skip_tls_verify);
      client = std::move(ssl);
    } else {
      client = std::make_unique<httplib::ClientImpl>(endpoint_.host, endpoint_.port);
    }
    const auto seconds = [](std::chrono::milliseconds ms) {
      return std::pair<time_t, time_t>{static_cast<time_t>(ms.count() / 1000),
                                       static_cast<time_t>((ms.count() % 1000) * 1000)};
    };
    const auto [connect_s, connect_us] = seconds(config_.timeout);
    client->set_connection_timeout(connect_s, connect_us);
    const auto [read_s, read_us] = seconds(read_timeout);
    client->set_read_timeout(read_s, read_us);
    client->set_write_timeout(connect_s, connect_us);
    client->set_keep_alive(keep_alive);
    client->set_tcp_nodelay(true);
    if (!config_.username.empty()) {
      client->set_basic_auth(config_.username.c_str(), config_.password.c_str());
    }
    return client;
  }

  // A pooled keep-alive connection, registered so that Stop() can interrupt it.
  ClientPtr Acquire() {
    std::lock_guard<std::mutex> lock(mutex_);
    ClientPtr client;
    if (!idle_.empty()) {
      client = std::move(idle_.back());
      idle_.pop_back();
    } else {
      client = NewConnection(/*keep_alive=*/true, config_.timeout);
    }
    live_.insert(client.get());
    return client;
  }
  void Release(ClientPtr client, bool reusable) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.erase(client.get());
    if (reusable && !stopped_ && idle_.size() < 16) idle_.push_back(std::move(client));
  }

  httplib::Headers Headers(bool force_token_reload) {
    httplib::Headers headers = {{"User-Agent", config_.user_agent}, {"Accept", "application/json"}};
    const std::string token = Token(force_token_reload);
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    return headers;
  }

  // The bearer token; a token file is re-read when a minute has passed (client-go's rhythm:
  // bound service-account tokens are refreshed by the kubelet at 80 % of their hour), or at
  // once after a 401.
  std::string Token(bool force_reload) {
    if (config_.token_file.empty()) return config_.token;
    std::lock_guard<std::mutex> lock(token_mutex_);
    const auto now = clock_.Now();
    if (force_reload || !token_read_ || now - token_read_at_ >= std::chrono::minutes(1)) {
      bool ok = false;
      std::string token = ReadTrimmed(config_.token_file, &ok);
      if (ok && !token.empty()) {
        token_ = std::move(token);
      } else {
        log::Warning("API client: cannot read token file " + config_.token_file +
                     "; keeping the previous token");
      }
      token_read_ = true;
      token_read_at_ = now;
    }
    return token_;
  }

  ApiResult<ApiResponse> Call(const char* method, const std::string& path, const std::string& body,
                              const char* content_type, std::string_view verb) {
    bool reloaded = false;
    bool retried = false;
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopped_) return tl::unexpected(TransportError{"the API client is stopped", false});
      }
      limiter_.Wait();
      ClientPtr client = Acquire();
      const httplib::Headers headers = Headers(reloaded);
      httplib::Result result = method[0] == 'G' ? client->Get(path.c_str(), headers)
                               : method[1] == 'O'
                                   ? client->Post(path.c_str(), headers, body, content_type)
                                   : client->Patch(path.c_str(), headers, body, content_type);
      if (!result) {
        const httplib::Error error = result.error();
        Release(std::move(client), /*reusable=*/false);
        if (observer_ != nullptr) observer_->ApiCall(verb, 0);
        return tl::unexpected(TransportError{
            std::string(method) + " " + path + ": " + httplib::to_string(error), MaybeSent(error)});
      }
      Release(std::move(client), /*reusable=*/true);
      if (observer_ != nullptr) observer_->ApiCall(verb, result->status);
      if (result->status == 401 && !reloaded && !config_.token_file.empty()) {
        reloaded = true;  // the token may have rotated since it was read
        continue;
      }
      if (result->status == 429 && !retried) {
        retried = true;
        double seconds = 1;
        if (result->has_header("Retry-After")) {
          const auto parsed = ParseInt(result->get_header_value("Retry-After"));
          if (parsed && *parsed >= 0) seconds = static_cast<double>(*parsed);
        }
        clock_.SleepFor(
            std::chrono::milliseconds(static_cast<std::int64_t>(std::min(seconds, 10.0) * 1000)));
        continue;
      }
      ApiResponse response;
      response.status = result->status;
      response.body = std::move(result->body);
      response.content_type = result->get_header_value("Content-Type");
      return response;
    }
  }

  const ClientConfig config_;
  const Endpoint endpoint_;
  const std::unique_ptr<TlsMaterial> tls_;
  ApiCallObserver* observer_;
  Clock& clock_;
  RateLimiter limiter_;

  std::mutex mutex_;
  bool stopped_ = false;                 // GUARDED_BY(mutex_)
  std::vector<ClientPtr> idle_;          // GUARDED_BY(mutex_)
  std::set<httplib::ClientImpl*> live_;  // GUARDED_BY(mutex_)

  std::mutex token_mutex_;
  std::string token_;                                    // GUARDED_BY(token_mutex_)
  bool token_read_ = false;                              // GUARDED_BY(token_mutex_)
  std::chrono::steady_clock::time_point token_read_at_;  // GUARDED_BY(token_mutex_)
};

ApiResult<int> HttpApiClient::Watch(const std::string& path,
                                    const std::function<bool(std::string_view line)>& on_line,
                                    std::chrono::milliseconds idle_timeout,
                                    std::string* error_body) {
  constexpr std::size_t kMaxLine = std::size_t{64} << 20;
  ClientPtr client = NewConnection(/*keep_alive=*/false, idle_timeout);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return tl::unexpected(TransportError{"the API client is stopped", false});
    live_.insert(client.get());
  }
  limiter_.Wait();
  httplib::Headers headers = Headers(false);
  headers.emplace("Accept-Encoding", "identity");
  int status = 0;
  std::string buffer;
  bool line_too_long = false;
  bool stopped_by_callback = false;
  httplib::Result result = client->Get(
      path.c_str(), headers,
      [&](const httplib::Response& response) {
        status = response.status;
        return true;
      },
      [&](const char* data, std::size_t length) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          if (stopped_) return false;
        }
        if (status != 200) {
          if (error_body != nullptr && error_body->size() < 65536) error_body->append(data, length);
          return true;
        }
        buffer.append(data, length);
        std::size_t start = 0;
        for (std::size_t newline = buffer.find('\n', start); newline != std::string::npos;
             newline = buffer.find('\n', start)) {
          std::string_view line(buffer.data() + start, newline - start);
          start = newline + 1;
          if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
          if (Trim(line).empty()) continue;
          if (!on_line(line)) {
            stopped_by_callback = true;
            return false;
          }
        }
        buffer.erase(0, start);
        if (buffer.size() > kMaxLine) {
          line_too_long = true;
          return false;
        }
        return true;
      });
  {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.erase(client.get());
  }
  if (observer_ != nullptr) observer_->ApiCall("watch", result ? result->status : status);
  if (line_too_long) {
    return tl::unexpected(TransportError{"watch " + path + ": a line exceeds 64 MiB", true});
  }
  if (stopped_by_callback) return tl::unexpected(TransportError{"watch stopped", true});
  if (!result) {
    return tl::unexpected(
        TransportError{"watch " + path + ": " + httplib::to_string(result.error()), true});
  }
  if (result->status == 200 && !Trim(buffer).empty() && on_line(Trim(buffer)) == false) {
    return tl::unexpected(TransportError{"watch stopped", true});
  }
  return result->status;
}

}  // namespace

Clock& SystemClock() {
  static SteadyClock clock;
  return clock;
}

Result<ApiClientPtr> NewApiClient(ClientConfig config, ApiCallObserver* observer, Clock& clock) {
  // OpenSSL writes with write(2): a connection the server reset would raise SIGPIPE and end the
  // process. A network client turns that into an error return instead (as httplib's server
  // does for its side).
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { std::signal(SIGPIPE, SIG_IGN); });
  Endpoint endpoint;
  LINKFIT_ASSIGN_OR_RETURN(endpoint, ParseServer(config.server));
  auto tls = std::make_unique<TlsMaterial>();
  if (endpoint.tls) {
    if (!config.ca_pem.empty()) {
      LINKFIT_ASSIGN_OR_RETURN(tls->cas,
                               ParseCertificates(config.ca_pem, "CA (" + config.source + ")"));
    }
    if (!config.client_cert_pem.empty() || !config.client_key_pem.empty()) {
      if (config.client_cert_pem.empty() || config.client_key_pem.empty()) {
        return MakeError("client certificate and key must be given together (" + config.source +
                         ")");
      }
      std::vector<X509*> certs;
      LINKFIT_ASSIGN_OR_RETURN(
          certs,
          ParseCertificates(config.client_cert_pem, "client certificate (" + config.source + ")"));
      tls->client_cert = certs.front();
      for (std::size_t i = 1; i < certs.size(); ++i) X509_free(certs[i]);
      BIO* bio = BIO_new_mem_buf(config.client_key_pem.data(),
                                 static_cast<int>(config.client_key_pem.size()));
      tls->client_key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
      BIO_free(bio);
      if (tls->client_key == nullptr) {
        return MakeError("client key (" + config.source + "): " + OpenSslError());
      }
      if (X509_check_private_key(tls->client_cert, tls->client_key) != 1) {
        ERR_clear_error();
        return MakeError("client key (" + config.source +
                         ") does not match the client certificate");
      }
    }
    if (config.insecure_skip_tls_verify) {
      log::Warning(
          "API client: insecure-skip-tls-verify is set: the API server's certificate "
          "is NOT verified (" +
          config.source + ")");
    }
    if (!config.tls_server_name.empty() && config.tls_server_name != endpoint.host) {
      return MakeError("tls-server-name " + config.tls_server_name +
                       " differs from the server's host " + endpoint.host +
                       "; linkfit verifies the certificate against the host in the URL (" +
                       config.source + ")");
    }
  } else if (endpoint.host != "127.0.0.1" && endpoint.host != "localhost" &&
             endpoint.host != "::1") {
    log::Warning("API client: plain http to " + endpoint.host + ": tokens travel unencrypted (" +
                 config.source + ")");
  }
  return ApiClientPtr(std::make_unique<HttpApiClient>(std::move(config), endpoint, std::move(tls),
                                                      observer, clock));
}

std::string StatusMessage(std::string_view body) {
  json::Scratch scratch;
  json::Ctx c;
  simdjson::ondemand::document doc;
  std::string message;
  const bool ok = json::Open(c, body, &doc, scratch, "Status") &&
                  json::ReadEnvelope(
                      c, doc,
                      [&](std::string_view key, simdjson::ondemand::value& value) {
                        if (key == "message")
                          return json::ReadString(c, value, "message", &message);
                        return json::Skip(c, value, 0, "Status");
                      },
                      "Status");
  if (ok && !message.empty()) return message;
  std::string text(Trim(body));
  if (text.size() > 200) text = text.substr(0, 200) + "...";
  return text.empty() ? "(empty body)" : text;
}

}  // namespace linkfit::kube
