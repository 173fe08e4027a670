// The cpp-httplib implementation of Server. This is the only linkfit source file that includes
// httplib.h (a large header; Debian builds it as a library, and its pkg-config flags define
// CPPHTTPLIB_OPENSSL_SUPPORT for every includer because the class layouts depend on it).

#include "linkfit/server/server.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "linkfit/common/log.h"
#include "linkfit/common/strings.h"
#include "linkfit/server/prometheus_metrics.h"

namespace linkfit::server {
namespace {

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kText = "text/plain; charset=utf-8";
constexpr std::string_view kPrometheusText = "text/plain; version=0.0.4; charset=utf-8";

std::string EscapeJson(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out += kHex[(static_cast<unsigned char>(c) >> 4) & 0xF];
          out += kHex[static_cast<unsigned char>(c) & 0xF];
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string JsonErrorBody(std::string_view message) {
  return "{\"error\":\"" + EscapeJson(message) + "\"}";
}

HttpReply JsonError(int status, std::string_view message) {
  return HttpReply{status, JsonErrorBody(message), std::string(kJson)};
}

HttpReply Text(int status, std::string body) {
  return HttpReply{status, std::move(body), std::string(kText)};
}

std::string ReasonPhrase(int status) {
  switch (status) {
    case 400:
      return "bad request";
    case 404:
      return "not found";
    case 405:
      return "method not allowed";
    case 408:
      return "request timeout";
    case 413:
      return "request body too large";
    case 414:
      return "URI too long";
    case 416:
      return "range not satisfiable";
    case 500:
      return "internal error";
    default:
      return "HTTP status " + std::to_string(status);
  }
}

std::string_view OutcomeOf(int status) {
  if (status >= 200 && status < 300) return "ok";
  if (status >= 400 && status < 500) return "bad_request";
  return "error";
}

std::string OpenSslErrors() {
  std::string text;
  while (const unsigned long code = ERR_get_error()) {
    char buffer[256];
    ERR_error_string_n(code, buffer, sizeof(buffer));
    if (!text.empty()) text += "; ";
    text += buffer;
  }
  return text.empty() ? "unknown OpenSSL error" : text;
}

// Loads the certificate, key and (optionally) the client CA into a fresh SSL_CTX. Returns false
// with `error` set when a file cannot be used.
bool ConfigureTls(SSL_CTX& ctx, const TlsOptions& tls, std::string& error) {
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  if (SSL_CTX_use_certificate_chain_file(&ctx, tls.cert_file.c_str()) != 1) {
    error = "cannot load TLS certificate chain " + tls.cert_file + ": " + OpenSslErrors();
    return false;
  }
  if (SSL_CTX_use_PrivateKey_file(&ctx, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    error = "cannot load TLS private key " + tls.key_file + ": " + OpenSslErrors();
    return false;
  }
  if (SSL_CTX_check_private_key(&ctx) != 1) {
    error = "TLS private key " + tls.key_file + " does not match certificate " + tls.cert_file;
    return false;
  }
  if (!tls.client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(&ctx, tls.client_ca_file.c_str(), nullptr) != 1) {
      error = "cannot load TLS client CA " + tls.client_ca_file + ": " + OpenSslErrors();
      return false;
    }
    // Names the acceptable CAs in the CertificateRequest, so clients pick the right cert.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(tls.client_ca_file.c_str())) {
      SSL_CTX_set_client_CA_list(&ctx, names);
    }
    int mode = SSL_VERIFY_PEER;
    if (tls.require_client_cert) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(&ctx, mode, nullptr);
  }
  return true;
}

int PortOf(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  }
  return -1;
}

// Shuts down the reading side of every connection accepted on `port`, so that workers waiting on
// an idle keep-alive connection wake up at once. cpp-httplib 0.11.4 does not track accepted
// sockets, and its keep-alive wait only ends when the client sends, closes or the keep-alive
// timeout (90 s here) passes; without this, Stop would wait that long for an idle
// kube-scheduler connection. Only sockets whose local port is the listening port and that have
// a peer are touched: after the listener is closed, those are exactly our accepted connections.
// A request already being handled still writes its reply (only reading is shut down).
void ShutdownAcceptedConnections(int port) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  std::vector<int> fds;
  while (const dirent* entry = readdir(dir)) {
    if (const auto fd = ParseInt(entry->d_name); fd && *fd > 2)
      fds.push_back(static_cast<int>(*fd));
  }
  closedir(dir);
  for (const int fd : fds) {
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) continue;
    if (PortOf(local) != port) continue;
    sockaddr_storage peer{};
    length = sizeof(peer);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0) continue;
    ::shutdown(fd, SHUT_RD);
  }
}

enum class Route { kNotFound, kVerb, kInspect, kExplain, kRelease, kHealthz, kReadyz, kMetrics };

struct RouteMatch {
  Route route = Route::kNotFound;
  Verb verb = Verb::kFilter;
  std::string_view node;  // for kInspect: empty means all nodes
  bool post = false;      // the route's method: POST, else GET (and HEAD)
};

RouteMatch MatchRoute(std::string_view path, std::string_view prefix) {
  if (path.size() > prefix.size() && StartsWith(path, prefix) && path[prefix.size()] == '/') {
    const std::string_view verb = path.substr(prefix.size() + 1);
    if (verb == "filter") return {Route::kVerb, Verb::kFilter, {}, true};
    if (verb == "prioritize") return {Route::kVerb, Verb::kPrioritize, {}, true};
    if (verb == "bind") return {Route::kVerb, Verb::kBind, {}, true};
    if (verb == "preempt") return {Route::kVerb, Verb::kPreempt, {}, true};
  }
  if (path == "/inspect") return {Route::kInspect, Verb::kFilter, {}, false};
  if (StartsWith(path, "/inspect/")) {
    return {Route::kInspect, Verb::kFilter, path.substr(std::string_view("/inspect/").size()),
            false};
  }
  if (path == "/explain") return {Route::kExplain, Verb::kFilter, {}, true};
  if (path == "/standalone/release") return {Route::kRelease, Verb::kFilter, {}, true};
  if (path == "/healthz") return {Route::kHealthz, Verb::kFilter, {}, false};
  if (path == "/readyz") return {Route::kReadyz, Verb::kFilter, {}, false};
  if (path == "/metrics") return {Route::kMetrics, Verb::kFilter, {}, false};
  return {};
}

bool Serves(RouteSet routes, Route route) {
  switch (routes) {
    case RouteSet::kAll:
      return true;
    case RouteSet::kExtender:
      return route == Route::kVerb || route == Route::kRelease || route == Route::kHealthz ||
             route == Route::kReadyz;
    case RouteSet::kOperations:
      return route == Route::kHealthz || route == Route::kReadyz || route == Route::kMetrics ||
             route == Route::kInspect || route == Route::kExplain;
  }
  return true;
}

enum class BodyStatus { kOk, kTooLarge, kUnreadable };

class HttpServer final : public Server {
 public:
  HttpServer(const ServerOptions& options, ExtenderHandler& handler, PrometheusMetrics& metrics,
             std::unique_ptr<httplib::Server> http)
      : options_(options), handler_(handler), metrics_(metrics), http_(std::move(http)) {
    Install();
  }

  ~HttpServer() override {
    Stop();
    Wait();
  }

  Result<void> Start() override;
  int port() const override { return port_.load(); }
  void Stop() override;
  void Wait() override;

 private:
  void Install();
  void Serve(const httplib::Request& request, httplib::Response& response,
             const httplib::ContentReader* reader);
  HttpReply Dispatch(const httplib::Request& request, httplib::Response& response,
                     const httplib::ContentReader* reader);
  BodyStatus ReadBody(const httplib::Request& request, const httplib::Response& response,
                      const httplib::ContentReader& reader, std::string* body) const;
  HttpReply CallVerb(Verb verb, std::string_view body);
  template <typename Call>
  HttpReply CallHandler(std::string_view what, Call&& call);

  const ServerOptions options_;
  ExtenderHandler& handler_;
  PrometheusMetrics& metrics_;
  const std::unique_ptr<httplib::Server> http_;

  std::atomic<bool> started_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> listen_returned_{false};
  std::atomic<int> port_{0};
  std::mutex wait_mutex_;
  std::thread listener_;  // GUARDED_BY(wait_mutex_) after Start
};

void HttpServer::Install() {
  const ServerOptions& o = options_;
  http_->set_tcp_nodelay(true);
  // Replaces httplib's default (SO_REUSEPORT), which would let a second server bind the same
  // port silently and split the traffic; SO_REUSEADDR alone allows a quick restart.
  http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http_->set_keep_alive_max_count(o.keep_alive_max_requests);
  http_->set_keep_alive_timeout(static_cast<time_t>(o.keep_alive_timeout.count()));
  http_->set_read_timeout(static_cast<time_t>(o.read_timeout.count() / 1000),
                          static_cast<time_t>((o.read_timeout.count() % 1000) * 1000));
  http_->set_write_timeout(static_cast<time_t>(o.write_timeout.count() / 1000),
                           static_cast<time_t>((o.write_timeout.count() % 1000) * 1000));
  http_->set_payload_max_length(o.max_body_bytes);
  const auto threads = static_cast<std::size_t>(o.threads);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };

  // httplib's own answers (malformed request line, unknown method, a body over the limit on a
  // path it read before routing) get the same JSON error shape as ours.
  http_->set_error_handler([](const httplib::Request&, httplib::Response& response) {
    if (response.body.empty()) {
      response.set_content(JsonErrorBody(ReasonPhrase(response.status)), std::string(kJson));
    }
  });
  // A backstop: Serve catches everything itself.
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& response, std::exception_ptr) {
        response.status = 500;
        response.set_content(JsonErrorBody("internal error"), std::string(kJson));
      });

  // One catch-all per method; routing is a few string comparisons in Dispatch (cheaper than
  // httplib's per-route std::regex, and it lets unknown paths and wrong methods be told apart).
  const auto plain = [this](const httplib::Request& request, httplib::Response& response) {
    Serve(request, response, nullptr);
  };
  http_->Get(".*", plain);
  http_->Put(".*", plain);
  http_->Patch(".*", plain);
  http_->Delete(".*", plain);
  http_->Options(".*", plain);
  // POST reads the body itself, to enforce the limit on chunked bodies too and to reserve the
  // string once from Content-Length.
  http_->Post(".*",
              [this](const httplib::Request& request, httplib::Response& response,
                     const httplib::ContentReader& reader) { Serve(request, response, &reader); });
}

void HttpServer::Serve(const httplib::Request& request, httplib::Response& response,
                       const httplib::ContentReader* reader) {
  HttpReply reply;
  try {
    reply = Dispatch(request, response, reader);
  } catch (const std::exception& e) {
    reply = JsonError(500, std::string("internal error: ") + e.what());
  } catch (...) {
    reply = JsonError(500, "internal error");
  }
  response.status = reply.status;
  if (reply.status < 400 && !reply.body.empty() && !reply.content_type.empty() &&
      MatchRoute(request.path, options_.url_prefix).route == Route::kVerb) {
    // Extender replies go out uncompressed. httplib 0.11.4 gzips every `body` whose client
    // accepts gzip, and Go's client (kube-scheduler) always says it does: on loopback or a
    // cluster network that costs far more than it saves (a 1,000-name filter reply: ~3 ms of
    // deflate on the scheduler's critical path). A sized content provider is never compressed,
    // and it writes the reply straight from this string.
    auto body = std::make_shared<const std::string>(std::move(reply.body));
    response.set_content_provider(
        body->size(), reply.content_type,
        [body](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
          return sink.write(body->data() + offset, length);
        });
    return;
  }
  response.body = std::move(reply.body);
  if (!reply.content_type.empty()) response.set_header("Content-Type", reply.content_type);
}

BodyStatus HttpServer::ReadBody(const httplib::Request& request, const httplib::Response& response,
                                const httplib::ContentReader& reader, std::string* body) const {
  const std::size_t limit = options_.max_body_bytes;
  const bool chunked =
      request.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos;
  const std::string length_header = request.get_header_value("Content-Length");
  // RFC 9112 §6.3: a request with neither Content-Length nor chunked encoding has no body
  // (httplib 0.11.4 would wait for the connection to close).
  if (length_header.empty() && !chunked) return BodyStatus::kOk;
  bool too_large = false;
  if (!length_header.empty()) {
    const auto length = ParseInt(length_header);
    if (!length || *length < 0) return BodyStatus::kUnreadable;
    // httplib checks this too before reading and then skips the body, keeping the connection
    // usable; we still call the reader below so that it does.
    too_large = static_cast<std::uint64_t>(*length) > limit;
    if (!too_large && body != nullptr) body->reserve(static_cast<std::size_t>(*length));
  }
  std::size_t received = 0;
  const auto receive = [&](const char* data, std::size_t length) {
    if (length > limit - received) {
      too_large = true;
      return false;
    }
    received += length;
    if (body != nullptr) body->append(data, length);
    return true;
  };
  bool ok = false;
  if (request.is_multipart_form_data()) {
    ok = reader([](const httplib::MultipartFormData&) { return true; }, receive);
  } else {
    ok = reader(receive);
  }
  if (too_large || response.status == 413) return BodyStatus::kTooLarge;
  return ok ? BodyStatus::kOk : BodyStatus::kUnreadable;
}

HttpReply HttpServer::Dispatch(const httplib::Request& request, httplib::Response& response,
                               const httplib::ContentReader* reader) {
  const RouteMatch match = MatchRoute(request.path, options_.url_prefix);
  const bool is_post = request.method == "POST";
  const bool method_ok =
      match.post ? is_post : (request.method == "GET" || request.method == "HEAD");

  if (match.route != Route::kNotFound && !Serves(options_.routes, match.route)) {
    if (reader != nullptr) ReadBody(request, response, *reader, nullptr);  // drain
    return JsonError(404, request.path + " is served on the " +
                              (options_.routes == RouteSet::kExtender ? "operations" : "extender") +
                              " listener, not this one");
  }
  if (match.route == Route::kNotFound || !method_ok) {
    if (reader != nullptr) ReadBody(request, response, *reader, nullptr);  // drain
    if (match.route == Route::kNotFound) {
      return JsonError(404, "no route for " + request.method + " " + request.path);
    }
    response.set_header("Allow", match.post ? "POST" : "GET, HEAD");
    return JsonError(405, "method " + request.method + " not allowed for " + request.path +
                              "; use " + (match.post ? "POST" : "GET"));
  }

  switch (match.route) {
    case Route::kHealthz:
      return Text(200, "ok");
    case Route::kReadyz: {
      bool ready = false;
      try {
        ready = handler_.Ready();
      } catch (...) {
        ready = false;
      }
      return ready ? Text(200, "ok") : Text(503, "not ready");
    }
    case Route::kMetrics:
      return HttpReply{200, metrics_.Render(), std::string(kPrometheusText)};
    case Route::kInspect: {
      const std::string node(match.node);
      return CallHandler("inspect", [&] { return handler_.Inspect(node); });
    }
    case Route::kVerb:
    case Route::kExplain:
    case Route::kRelease:
      break;
    case Route::kNotFound:
      return JsonError(404, "no route");
  }

  std::string body;
  const BodyStatus status =
      reader != nullptr ? ReadBody(request, response, *reader, &body) : BodyStatus::kOk;
  const bool is_verb = match.route == Route::kVerb;
  if (status == BodyStatus::kTooLarge) {
    if (is_verb) metrics_.CountRequest(match.verb, "too_large");
    return JsonError(413, "request body exceeds the limit of " +
                              std::to_string(options_.max_body_bytes) +
                              " bytes (limits.max_body_bytes)");
  }
  if (status == BodyStatus::kUnreadable) {
    if (is_verb) metrics_.CountRequest(match.verb, "bad_request");
    return JsonError(400, "cannot read the request body");
  }
  if (body.empty()) {
    if (is_verb) metrics_.CountRequest(match.verb, "empty_body");
    return JsonError(400, "empty request body; expected JSON");
  }
  if (match.route == Route::kRelease) {
    return CallHandler("release", [&] { return handler_.Release(body); });
  }
  if (!is_verb) return CallHandler("explain", [&] { return handler_.Explain(body); });
  return CallVerb(match.verb, body);
}

HttpReply HttpServer::CallVerb(Verb verb, std::string_view body) {
  const auto start = std::chrono::steady_clock::now();
  HttpReply reply;
  std::string_view outcome = "exception";
  try {
    switch (verb) {
      case Verb::kFilter:
        reply = handler_.Filter(body);
        break;
      case Verb::kPrioritize:
        reply = handler_.Prioritize(body);
        break;
      case Verb::kBind:
        reply = handler_.Bind(body);
        break;
      case Verb::kPreempt:
        reply = handler_.Preempt(body);
        break;
    }
    outcome = OutcomeOf(reply.status);
  } catch (const std::exception& e) {
    log::Error(std::string("handler for ") + std::string(VerbName(verb)) + " threw: " + e.what());
    reply = JsonError(500, std::string("internal error: ") + e.what());
  } catch (...) {
    log::Error(std::string("handler for ") + std::string(VerbName(verb)) + " threw");
    reply = JsonError(500, "internal error");
  }
  const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
  metrics_.ObserveRequest(verb, outcome, seconds.count());
  return reply;
}

template <typename Call>
HttpReply HttpServer::CallHandler(std::string_view what, Call&& call) {
  try {
    return call();
  } catch (const std::exception& e) {
    log::Error(std::string(what) + " handler threw: " + e.what());
    return JsonError(500, std::string("internal error: ") + e.what());
  } catch (...) {
    log::Error(std::string(what) + " handler threw");
    return JsonError(500, "internal error");
  }
}

Result<void> HttpServer::Start() {
  if (stopping_) return MakeError("server was stopped before Start");
  if (started_.exchange(true)) return MakeError("server already started");
  const std::string address = options_.host + ":" + std::to_string(options_.port);
  errno = 0;
  int bound = -1;
  if (options_.port == 0) {
    bound = http_->bind_to_any_port(options_.host);
  } else if (http_->bind_to_port(options_.host, options_.port)) {
    bound = options_.port;
  }
  if (bound < 0) {
    const int saved = errno;
    started_ = false;
    return MakeError("cannot listen on " + address +
                     (saved != 0 ? std::string(": ") + std::strerror(saved) : std::string()));
  }
  port_ = bound;
  std::lock_guard<std::mutex> lock(wait_mutex_);
  try {
    listener_ = std::thread([this] {
      http_->listen_after_bind();
      listen_returned_ = true;
    });
  } catch (const std::exception& e) {
    return MakeError(std::string("cannot start the listener thread: ") + e.what());
  }
  // The socket already listens (connections queue in the backlog); wait only for the accept
  // loop to mark itself running, because httplib's stop() does nothing before that.
  while (!http_->is_running() && !listen_returned_) std::this_thread::yield();
  log::Info("linkfit server listening on " + options_.host + ":" + std::to_string(bound) +
            (options_.tls.enabled() ? " (TLS)" : ""));
  return {};
}

void HttpServer::Stop() {
  if (stopping_.exchange(true) || !started_) return;
  http_->stop();
  ShutdownAcceptedConnections(port_);
}

void HttpServer::Wait() {
  std::lock_guard<std::mutex> lock(wait_mutex_);
  if (listener_.joinable()) listener_.join();
}

Result<void> ValidateOptions(const ServerOptions& options) {
  if (options.port < 0 || options.port > 65535) {
    return MakeError("port " + std::to_string(options.port) + " is out of range 0..65535");
  }
  if (!options.url_prefix.empty() &&
      (options.url_prefix.front() != '/' || options.url_prefix.back() == '/')) {
    return MakeError("url_prefix " + QuoteForMessage(options.url_prefix) +
                     " must start with '/' and not end with '/'");
  }
  if (options.threads < 1) return MakeError("threads must be at least 1");
  if (options.max_body_bytes == 0) return MakeError("max_body_bytes must be positive");
  if (options.keep_alive_max_requests == 0) {
    return MakeError("keep_alive_max_requests must be positive");
  }
  const TlsOptions& tls = options.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return MakeError("TLS needs both cert_file and key_file");
  }
  if (!tls.enabled() && (!tls.client_ca_file.empty() || tls.require_client_cert)) {
    return MakeError("client certificate verification needs TLS (cert_file and key_file)");
  }
  if (tls.require_client_cert && tls.client_ca_file.empty()) {
    return MakeError("require_client_cert needs client_ca_file");
  }
  return {};
}

}  // namespace

Result<ServerPtr> NewServer(const ServerOptions& options, ExtenderHandler& handler,
                            PrometheusMetrics& metrics) {
  if (auto valid = ValidateOptions(options); !valid) return tl::unexpected(valid.error());
  try {
    std::unique_ptr<httplib::Server> http;
    if (options.tls.enabled()) {
      std::string error;
      auto tls_server = std::make_unique<httplib::SSLServer>(
          [&](SSL_CTX& ctx) { return ConfigureTls(ctx, options.tls, error); });
      if (!tls_server->is_valid()) {
        return MakeError(error.empty() ? "cannot create the TLS context: " + OpenSslErrors()
                                       : error);
      }
      http = std::move(tls_server);
    } else {
      http = std::make_unique<httplib::Server>();
    }
    return ServerPtr(std::make_unique<HttpServer>(options, handler, metrics, std::move(http)));
  } catch (const std::exception& e) {
    return MakeError(std::string("cannot create the HTTP server: ") + e.what());
  }
}

}  // namespace linkfit::server
