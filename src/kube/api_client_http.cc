// ApiClient over cpp-httplib 0.11 with OpenSSL (api_client.h). The only file of module `kube`
// that includes httplib.h.
//
// Connections: non-watch calls share a small pool of keep-alive connections; every watch opens
// its own connection (keep-alive off) with the watch's idle timeout as its read timeout.
//
// Cutting a call (Stop(), or the call's CancelToken): each request in flight is registered as a
// LiveCall. Cutting one sets its flag and calls httplib's ClientImpl::stop(), which shuts the
// socket down when a request is in flight. stop() is a no-op before httplib has created the
// socket, so the socket-options hook, which httplib runs on every new socket before connecting
// it, checks the flag too and makes a socket of a cut call fail to connect. Between the two,
// no request outlives a cut by more than a connect attempt in progress (bounded by the
// connection timeout), and a watch's receiver checks the flag on every chunk as well. A wait on
// the rate limiter is not cut (it is short at the configured QPS).
//
// Why SSLClient and not httplib::Client("https://..."): 0.11's Client takes a client
// certificate only as file paths, while the configuration holds PEM text; SSLClient takes the
// parsed X509/EVP_PKEY and exposes the hostname map that tls_server_name needs.
//
// Limits (httplib 0.11): with tls_server_name the connection goes to the first address the
// URL's host resolves to (no fallback to the others); only the leaf of a client certificate
// chain is sent.

#include <fcntl.h>
#include <httplib.h>
#include <netdb.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "kube/api_endpoint.h"
#include "kube/pem.h"
#include "kube/rate_limiter.h"
#include "linkfit/common/log.h"
#include "linkfit/common/mutex.h"
#include "linkfit/common/strings.h"
#include "linkfit/kube/api_client.h"

namespace linkfit::kube {
namespace {

constexpr std::size_t kMaxWatchLine = std::size_t{64} << 20;
constexpr std::size_t kMaxErrorBody = 64 << 10;
constexpr std::size_t kMaxIdleConnections = 16;
constexpr auto kTokenRereadInterval = std::chrono::minutes(1);
constexpr double kMaxRetryAfterSeconds = 10;

// Maps httplib's error to "may the request have reached the server?" (TransportError.maybe_sent).
// Connection, BindIPAddress, ConnectionTimeout and the TLS errors happen while connecting or in
// the handshake (httplib verifies the server's certificate before it writes the request), so no
// byte of the request left. Write may have sent part or all of it; Read means the request was
// written and the reply is missing; Canceled comes from a receiver that returned false, after
// the send; Unknown and the rest are not known to come before the send. Those count as maybe
// sent: for a write, claiming "not sent" when it was is the dangerous mistake. (httplib 0.11 has
// no ProxyConnection error; linkfit sets no proxy.)
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

// The file's content without surrounding white space; nullopt when it cannot be read.
std::optional<std::string> ReadTrimmed(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::string(Trim(text.str()));
}

// The first address `host` resolves to, as numeric text ("10.0.0.1", "fd00::1").
ApiResult<std::string> ResolveNumeric(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int code = getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (code != 0 || result == nullptr) {
    return tl::unexpected(
        TransportError{"cannot resolve " + host + ": " + gai_strerror(code), false});
  }
  char text[NI_MAXHOST];
  const int name = getnameinfo(result->ai_addr, result->ai_addrlen, text, sizeof text, nullptr, 0,
                               NI_NUMERICHOST);
  freeaddrinfo(result);
  if (name != 0) {
    return tl::unexpected(
        TransportError{"cannot resolve " + host + ": " + gai_strerror(name), false});
  }
  return std::string(text);
}

// Makes a socket that httplib is about to connect fail to connect (ENOTSOCK), so that the
// request is never written: /dev/null's descriptor takes the socket's number (dup2 closes the
// socket itself), and httplib goes on to close that number as its own. On failure, shutting the
// unconnected socket down still marks it so that writes on it fail.
void DoomSocket(::socket_t sock) {
  const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd >= 0 && ::dup2(null_fd, sock) >= 0) {
    ::close(null_fd);
    return;
  }
  if (null_fd >= 0) ::close(null_fd);
  ::shutdown(sock, SHUT_RDWR);
}

// One request in flight and the connection it uses.
struct LiveCall {
  explicit LiveCall(httplib::ClientImpl& client_in) : client(client_in) {}
  // Marks the call cut and shuts its socket down (see the top of this file).
  void Cut() {
    cut.store(true);
    client.stop();
  }
  httplib::ClientImpl& client;
  std::atomic<bool> cut{false};
};

// Certificates parsed once, shared by every connection's SSL context.
struct TlsMaterial {
  std::vector<X509Ptr> cas;
  X509Ptr client_cert;
  EvpPkeyPtr client_key;
};

// An empty, nonexistent CA directory: see NewConnection.
constexpr char kNoSystemCaDirectory[] = "/nonexistent/linkfit-trusts-only-its-ca";

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

  ApiResult<ApiResponse> Get(const std::string& path, std::string_view verb,
                             CancelToken* cancel) override {
    return Call("GET", path, "", "", verb, cancel);
  }
  ApiResult<ApiResponse> Post(const std::string& path, const std::string& body,
                              std::string_view verb, bool retry_throttled) override {
    return Call("POST", path, body, "application/json", verb, nullptr, retry_throttled);
  }
  ApiResult<ApiResponse> Patch(const std::string& path, const std::string& body,
                               std::string_view verb) override {
    return Call("PATCH", path, body, "application/merge-patch+json", verb, nullptr);
  }

  ApiResult<int> Watch(const std::string& path,
                       const std::function<bool(std::string_view line)>& on_line,
                       std::chrono::milliseconds idle_timeout, std::string* error_body,
                       CancelToken* cancel) override;

  void Stop() override {
    MutexLock lock(mutex_);
    stopped_ = true;
    for (LiveCall* call : live_) call->Cut();
    idle_.clear();
  }

  const ClientConfig& config() const override { return config_; }

 private:
  using ClientPtr = std::unique_ptr<httplib::ClientImpl>;

  // Registers a request's connection for its lifetime so that Stop() and `cancel` can cut it.
  // cut() is already true when the client was stopped or the token cancelled before.
  class Registration {
   public:
    Registration(HttpApiClient& owner, httplib::ClientImpl& client, CancelToken* cancel)
        : owner_(owner), call_(client), cancel_(cancel) {
      {
        MutexLock lock(owner_.mutex_);
        if (owner_.stopped_) {
          call_.cut.store(true);
        } else {
          owner_.live_.insert(&call_);
        }
      }
      if (cancel_ != nullptr) hook_ = cancel_->AddHook([this] { call_.Cut(); });
      // Runs on each socket httplib creates for this request, before it connects.
      client.set_socket_options([call = &call_](::socket_t sock) {
        if (call->cut.load()) DoomSocket(sock);
      });
    }
    ~Registration() {
      if (cancel_ != nullptr && hook_ != 0) cancel_->RemoveHook(hook_);
      {
        MutexLock lock(owner_.mutex_);
        owner_.live_.erase(&call_);
      }
      call_.client.set_socket_options(nullptr);
    }
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;

    bool cut() const { return call_.cut.load(); }
    const std::atomic<bool>& cut_flag() const { return call_.cut; }

   private:
    HttpApiClient& owner_;
    LiveCall call_;
    CancelToken* const cancel_;
    std::uint64_t hook_ = 0;
  };

  static TransportError CutError(const std::string& what) {
    return TransportError{what + ": stopped (the client was stopped or the call cancelled)", false};
  }

  ApiResult<ClientPtr> NewConnection(bool keep_alive, std::chrono::milliseconds read_timeout) const;

  // A pooled keep-alive connection, or a new one.
  ApiResult<ClientPtr> Acquire() {
    {
      MutexLock lock(mutex_);
      if (!idle_.empty()) {
        ClientPtr client = std::move(idle_.back());
        idle_.pop_back();
        return client;
      }
    }
    return NewConnection(/*keep_alive=*/true, config_.timeout);
  }
  void Release(ClientPtr client) {
    MutexLock lock(mutex_);
    if (!stopped_ && idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(client));
  }

  httplib::Headers Headers(bool force_token_reload) {
    httplib::Headers headers = {{"User-Agent", config_.user_agent},
                                {"Accept", "application/json"},
                                {"Host", endpoint_.host_header}};
    const std::string token = Token(force_token_reload);
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    return headers;
  }

  // The bearer token. A token file is re-read once a minute has passed since the last read
  // (client-go's rhythm: the kubelet refreshes a bound service-account token at 80 % of its
  // hour), at once when `force_reload` (after a 401), and after a watch answered 401.
  std::string Token(bool force_reload) {
    if (config_.token_file.empty()) return config_.token;
    force_reload = reload_token_.exchange(false) || force_reload;
    MutexLock lock(token_mutex_);
    const auto now = clock_.Now();
    if (force_reload || !token_read_ || now - token_read_at_ >= kTokenRereadInterval) {
      std::optional<std::string> token = ReadTrimmed(config_.token_file);
      if (token && !token->empty()) {
        token_ = std::move(*token);
      } else if (token_read_ || !config_.token.empty()) {
        log::Warning("API client: cannot read token file " + config_.token_file +
                     (token ? " (empty)" : "") + "; keeping the previous token");
      } else {
        log::Warning("API client: cannot read token file " + config_.token_file +
                     (token ? " (empty)" : "") + "; sending no token");
      }
      if (token_.empty()) token_ = config_.token;
      token_read_ = true;
      token_read_at_ = now;
    }
    return token_;
  }

  void Count(std::string_view verb, int code) {
    if (observer_ != nullptr) observer_->ApiCall(verb, code);
  }

  // `retry_throttled`: a 429 is retried once after its Retry-After.
  ApiResult<ApiResponse> Call(const char* method, const std::string& path, const std::string& body,
                              const char* content_type, std::string_view verb, CancelToken* cancel,
                              bool retry_throttled = true);

  const ClientConfig config_;
  const Endpoint endpoint_;
  const std::unique_ptr<TlsMaterial> tls_;
  ApiCallObserver* const observer_;
  Clock& clock_;
  RateLimiter limiter_;

  Mutex mutex_;
  bool stopped_ LINKFIT_GUARDED_BY(mutex_) = false;
  std::vector<ClientPtr> idle_ LINKFIT_GUARDED_BY(mutex_);
  std::set<LiveCall*> live_ LINKFIT_GUARDED_BY(mutex_);

  std::atomic<bool> reload_token_{false};
  Mutex token_mutex_;
  std::string token_ LINKFIT_GUARDED_BY(token_mutex_);
  bool token_read_ LINKFIT_GUARDED_BY(token_mutex_) = false;
  std::chrono::steady_clock::time_point token_read_at_ LINKFIT_GUARDED_BY(token_mutex_);
};

ApiResult<HttpApiClient::ClientPtr> HttpApiClient::NewConnection(
    bool keep_alive, std::chrono::milliseconds read_timeout) const {
  ClientPtr client;
  if (endpoint_.tls) {
    // With a tls_server_name, httplib's host is that name (it sends it as SNI and verifies the
    // certificate against it) and the hostname map sends the connection to the URL's host; the
    // Host header stays the URL's (Headers()).
    const bool other_name =
        !config_.tls_server_name.empty() && config_.tls_server_name != endpoint_.host;
    const std::string& name = other_name ? config_.tls_server_name : endpoint_.host;
    auto ssl = std::make_unique<httplib::SSLClient>(name, endpoint_.port, tls_->client_cert.get(),
                                                    tls_->client_key.get());
    if (!ssl->is_valid()) {
      return tl::unexpected(TransportError{
          "cannot set up TLS with the client certificate (" + config_.source + ")", false});
    }
    if (other_name) {
      std::string address;
      LINKFIT_ASSIGN_OR_RETURN(address, ResolveNumeric(endpoint_.host));
      ssl->set_hostname_addr_map({{config_.tls_server_name, address}});
    }
    if (!tls_->cas.empty()) {
      X509_STORE* store = X509_STORE_new();
      for (const X509Ptr& ca : tls_->cas) X509_STORE_add_cert(store, ca.get());
      ssl->set_ca_cert_store(store);  // the SSL context owns it
      // httplib 0.11 adds the system's CAs to the store unless a CA file or directory is set; a
      // directory with no certificates keeps the trust to the configured CA, as client-go does.
      ssl->set_ca_cert_path("", kNoSystemCaDirectory);
    }
    ssl->enable_server_certificate_verification(!config_.insecure_skip_tls_verify);
    client = std::move(ssl);
  } else {
    client = std::make_unique<httplib::ClientImpl>(endpoint_.host, endpoint_.port);
  }
  const auto split = [](std::chrono::milliseconds ms) {
    return std::pair<time_t, time_t>{static_cast<time_t>(ms.count() / 1000),
                                     static_cast<time_t>((ms.count() % 1000) * 1000)};
  };
  const auto [connect_s, connect_us] = split(config_.timeout);
  client->set_connection_timeout(connect_s, connect_us);
  const auto [read_s, read_us] = split(read_timeout);
  client->set_read_timeout(read_s, read_us);
  client->set_write_timeout(connect_s, connect_us);
  client->set_keep_alive(keep_alive);
  client->set_tcp_nodelay(true);
  if (!config_.username.empty()) {
    client->set_basic_auth(config_.username.c_str(), config_.password.c_str());
  }
  return client;
}

ApiResult<ApiResponse> HttpApiClient::Call(const char* method, const std::string& path,
                                           const std::string& body, const char* content_type,
                                           std::string_view verb, CancelToken* cancel,
                                           bool retry_throttled) {
  const std::string what = std::string(method) + " " + path;
  bool reloaded = false;
  bool retried = !retry_throttled;
  while (true) {
    if (cancel != nullptr && cancel->cancelled()) return tl::unexpected(CutError(what));
    limiter_.Wait();
    ClientPtr client;
    LINKFIT_ASSIGN_OR_RETURN(client, Acquire());
    std::optional<httplib::Result> sent;
    {
      Registration registration(*this, *client, cancel);
      if (registration.cut()) return tl::unexpected(CutError(what));
      const httplib::Headers headers = Headers(reloaded);
      const std::string_view m(method);
      sent.emplace(m == "GET"    ? client->Get(path.c_str(), headers)
                   : m == "POST" ? client->Post(path.c_str(), headers, body, content_type)
                                 : client->Patch(path.c_str(), headers, body, content_type));
      if (!*sent) {
        const httplib::Error error = sent->error();
        Count(verb, 0);
        if (registration.cut()) {
          return tl::unexpected(
              TransportError{what + ": stopped while in flight (" + httplib::to_string(error) + ")",
                             MaybeSent(error)});
        }
        return tl::unexpected(
            TransportError{what + ": " + httplib::to_string(error), MaybeSent(error)});
      }
    }
    Release(std::move(client));
    httplib::Result& result = *sent;
    Count(verb, result->status);
    if (result->status == 401 && !reloaded && !config_.token_file.empty()) {
      reloaded = true;  // the token may have rotated since it was read
      continue;
    }
    if (result->status == 429 && !retried) {
      retried = true;
      double seconds = 1;
      if (result->has_header("Retry-After")) {
        const auto parsed = ParseInt(result->get_header_value("Retry-After"));
        if (parsed && *parsed >= 0)
          seconds = std::min(static_cast<double>(*parsed), kMaxRetryAfterSeconds);
      }
      clock_.SleepFor(std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000)));
      continue;
    }
    ApiResponse response;
    response.status = result->status;
    response.body = std::move(result->body);
    response.content_type = result->get_header_value("Content-Type");
    return response;
  }
}

ApiResult<int> HttpApiClient::Watch(const std::string& path,
                                    const std::function<bool(std::string_view line)>& on_line,
                                    std::chrono::milliseconds idle_timeout, std::string* error_body,
                                    CancelToken* cancel) {
  const std::string what = "watch " + path;
  if (cancel != nullptr && cancel->cancelled()) return tl::unexpected(CutError(what));
  limiter_.Wait();
  ClientPtr client;
  LINKFIT_ASSIGN_OR_RETURN(client, NewConnection(/*keep_alive=*/false, idle_timeout));
  Registration registration(*this, *client, cancel);
  if (registration.cut()) return tl::unexpected(CutError(what));
  const std::atomic<bool>& cut = registration.cut_flag();
  httplib::Headers headers = Headers(false);
  headers.emplace("Accept-Encoding", "identity");
  int status = 0;
  std::string buffer;  // the start of a line whose end has not arrived yet
  bool line_too_long = false;
  bool stopped_by_callback = false;
  // Hands every complete, non-empty line in `buffer` to on_line and keeps the rest. `from` is
  // where the new bytes begin: the bytes before it hold no newline, and are not searched again
  // (a long line arriving in many small reads stays linear).
  const auto drain = [&](std::size_t from) {
    std::size_t start = 0;
    for (std::size_t newline = buffer.find('\n', from); newline != std::string::npos;
         newline = buffer.find('\n', start)) {
      std::string_view line(buffer.data() + start, newline - start);
      start = newline + 1;
      if (Trim(line).empty()) continue;
      if (line.back() == '\r') line.remove_suffix(1);
      if (!on_line(line)) {
        stopped_by_callback = true;
        return false;
      }
    }
    buffer.erase(0, start);
    if (buffer.size() > kMaxWatchLine) {
      line_too_long = true;
      return false;
    }
    return true;
  };
  httplib::Result result = client->Get(
      path.c_str(), headers,
      [&](const httplib::Response& response) {
        status = response.status;
        return !cut.load();
      },
      [&](const char* data, std::size_t length) {
        if (cut.load()) return false;
        if (status != 200) {
          if (error_body != nullptr && error_body->size() < kMaxErrorBody) {
            error_body->append(data, std::min(length, kMaxErrorBody - error_body->size()));
          }
          return true;
        }
        const std::size_t from = buffer.size();
        buffer.append(data, length);
        return drain(from);
      });
  const bool was_cut = cut.load();
  Count("watch", result ? result->status : status);
  if (status == 401) reload_token_.store(true);
  if (was_cut) {
    return tl::unexpected(CutError(what));
  }
  if (line_too_long) {
    return tl::unexpected(TransportError{what + ": a line exceeds 64 MiB", true});
  }
  if (stopped_by_callback)
    return tl::unexpected(TransportError{what + ": ended by the reader", true});
  if (!result) {
    return tl::unexpected(TransportError{what + ": " + httplib::to_string(result.error()), true});
  }
  if (result->status == 200 && !Trim(buffer).empty()) {
    // The last line had no newline.
    buffer.push_back('\n');
    if (!drain(buffer.size() - 1))
      return tl::unexpected(TransportError{what + ": ended by the reader", true});
  }
  return result->status;
}

}  // namespace

Result<ApiClientPtr> NewApiClient(ClientConfig config, ApiCallObserver* observer, Clock& clock) {
  // OpenSSL writes with write(2): a connection the server reset would raise SIGPIPE and end the
  // process. A network client turns that into an error return instead (as httplib's server
  // does for its side).
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { std::signal(SIGPIPE, SIG_IGN); });
  const std::string source = config.source.empty() ? "" : " (" + config.source + ")";
  Endpoint endpoint;
  LINKFIT_ASSIGN_OR_RETURN(endpoint, ParseApiServerUrl(config.server));
  if (!config.username.empty() && (!config.token.empty() || !config.token_file.empty())) {
    return MakeError("username/password and a bearer token may not both be set" + source);
  }
  auto tls = std::make_unique<TlsMaterial>();
  if (endpoint.tls) {
    if (!config.ca_pem.empty()) {
      LINKFIT_ASSIGN_OR_RETURN(tls->cas, ParsePemCertificates(config.ca_pem, "CA" + source));
    }
    if (!config.client_cert_pem.empty() || !config.client_key_pem.empty()) {
      if (config.client_cert_pem.empty() || config.client_key_pem.empty()) {
        return MakeError("client certificate and key must be given together" + source);
      }
      std::vector<X509Ptr> certs;
      LINKFIT_ASSIGN_OR_RETURN(
          certs, ParsePemCertificates(config.client_cert_pem, "client certificate" + source));
      // Intermediates after the leaf are not sent (httplib 0.11 takes one certificate).
      tls->client_cert = std::move(certs.front());
      LINKFIT_ASSIGN_OR_RETURN(tls->client_key,
                               ParsePemPrivateKey(config.client_key_pem, "client key" + source));
      if (X509_check_private_key(tls->client_cert.get(), tls->client_key.get()) != 1) {
        return MakeError("client key does not match the client certificate" + source);
      }
    }
    if (config.insecure_skip_tls_verify) {
      log::Warning(
          "API client: insecure-skip-tls-verify is set: the API server's certificate is NOT "
          "verified" +
          source);
    }
  } else if (endpoint.host != "127.0.0.1" && endpoint.host != "localhost" &&
             endpoint.host != "::1") {
    log::Warning("API client: plain http to " + endpoint.host + ": tokens travel unencrypted" +
                 source);
  }
  return ApiClientPtr(std::make_unique<HttpApiClient>(std::move(config), std::move(endpoint),
                                                      std::move(tls), observer, clock));
}

}  // namespace linkfit::kube
