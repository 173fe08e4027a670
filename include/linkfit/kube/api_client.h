#pragma once

// ApiClient: linkfit's client of the Kubernetes API server (../shared/spec/kube-api.md). It owns
// transport and the client-side rules every caller needs: HTTPS with verification on by default,
// bearer tokens re-read from a rotating token file, client certificates, a token-bucket rate
// limit (kube-scheduler's 50 QPS / burst 100 by default), per-request timeouts, one retry
// after the `Retry-After` of a 429, a user agent, and a count of every call by verb and code.
// What the bodies mean is the caller's business (the reflector, the binder).
//
//   ClientConfig  where the server is and how to authenticate: LoadKubeconfig() or
//                 InClusterConfig(); both refuse what linkfit does not support (exec and
//                 auth-provider plugins, missing files, PEM that does not parse) with a message
//                 naming the file and the key.
//   ApiClient     Get / Post / Patch return the reply (any status) or a TransportError that
//                 says whether the request may have reached the server: for a write, a reply
//                 lost after sending is an *unknown outcome* (kube-api.md §1), never a failure.
//                 Watch streams a chunked reply line by line until it ends, the callback says
//                 stop, or Stop() is called.
//   CancelToken   cuts the reads it is passed to (Get, Watch) and only those, so that a
//                 reflector can stop its own list or watch on a client that others share.
//
// Thread-safety: every ApiClient method may be called concurrently (each call uses its own
// connection); Stop() may be called from any thread and makes running and later calls return
// promptly with a TransportError. A CancelToken may be cancelled from any thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "linkfit/common/mutex.h"
#include "linkfit/common/result.h"

namespace linkfit::kube {

// Time source of the rate limiter and the token-file refresh (tests inject a fake).
class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::steady_clock::time_point Now() const = 0;
  // Blocks for `duration` (a fake clock may advance instead of sleeping).
  virtual void SleepFor(std::chrono::nanoseconds duration) = 0;
};
// The process's steady clock.
Clock& SystemClock();

struct ClientConfig {
  std::string server;  // "https://host:port" (http:// only for tests on loopback)
  // TLS: the CA bundle (PEM text) that signs the server's certificate; empty uses the system's
  // store. insecure_skip_tls_verify turns verification off (kubeconfig's key; logged loudly).
  std::string ca_pem;
  bool insecure_skip_tls_verify = false;
  // The name the server certificate must hold and the TLS SNI, when not the URL's host; the
  // connection still goes to the URL's host (its first resolved address) with its Host header.
  std::string tls_server_name;
  // Authentication, at most one of: a bearer token, a token file (re-read when it changes, at
  // most once a minute, as client-go does: bound service-account tokens rotate hourly; the file
  // wins over `token`), a client certificate and key (PEM text), or basic auth (not together
  // with a token, as client-go refuses).
  std::string token;
  std::string token_file;
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string username;
  std::string password;
  // Client-side rate limit: a token bucket refilled at `qps`, holding at most `burst`.
  double qps = 50;
  int burst = 100;
  std::chrono::milliseconds timeout{10000};  // connect + read of one non-watch request
  std::string user_agent = "linkfit/0.1";
  std::string source;  // where this came from ("kubeconfig FILE, context C" / "in-cluster")
};

// Reads a kubeconfig file: `context` (or current-context) -> its cluster (server,
// certificate-authority[-data], insecure-skip-tls-verify, tls-server-name) and user (token,
// tokenFile, client-certificate[-data] + client-key[-data], username/password). Relative file
// paths are relative to the kubeconfig's directory. exec and auth-provider users, a missing
// context/cluster/user, unreadable files and PEM that does not parse are errors naming the file
// and the key.
Result<ClientConfig> LoadKubeconfig(const std::string& path, const std::string& context = "");
// The same for kubeconfig text already read: `path` names it in messages and its directory
// anchors relative paths.
Result<ClientConfig> ParseKubeconfig(std::string_view text, const std::string& path,
                                     const std::string& context = "");

// Where InClusterConfig looks (tests point it at a temporary directory and fake variables).
struct InClusterPaths {
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  // Values of KUBERNETES_SERVICE_HOST / _PORT; nullopt reads the environment.
  std::optional<std::string> host;
  std::optional<std::string> port;
};
// The pod's own service account: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
// (IPv6 hosts bracketed), the token file (re-read as it rotates) and the CA file. Errors name the
// missing variable or file.
Result<ClientConfig> InClusterConfig(const InClusterPaths& paths = {});

struct ApiResponse {
  int status = 0;
  std::string body;
  std::string content_type;
};

// A request that got no HTTP reply.
struct TransportError {
  std::string message;
  // True when the request may have reached the server (the connection broke or timed out after
  // the request was written): for a write the outcome is unknown.
  bool maybe_sent = false;
};

template <typename T>
using ApiResult = tl::expected<T, TransportError>;

// Cancels the ApiClient calls it is passed to, and only those (a reflector's Stop() cuts its own
// list or watch without stopping a client that others share). A cancelled call returns a
// TransportError promptly; one started after Cancel() returns it at once.
//
// Thread-safety: every method may be called from any thread. Cancel() is permanent and
// idempotent.
class CancelToken {
 public:
  CancelToken() = default;
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  void Cancel();
  bool cancelled() const;

  // For ApiClient implementations: runs `hook` once when Cancel() is called (at once, on this
  // thread, when it already was) unless RemoveHook(id) came first. Hooks run under the token's
  // lock, so RemoveHook() returns only after a running hook finished; a hook must not call the
  // token.
  std::uint64_t AddHook(std::function<void()> hook);
  void RemoveHook(std::uint64_t id);

 private:
  mutable Mutex mutex_;
  bool cancelled_ LINKFIT_GUARDED_BY(mutex_) = false;
  std::uint64_t next_id_ LINKFIT_GUARDED_BY(mutex_) = 1;
  std::vector<std::pair<std::uint64_t, std::function<void()>>> hooks_ LINKFIT_GUARDED_BY(mutex_);
};

// Counts of API calls for metrics (verb: "list", "watch", "get", "bind", "patch", "post", ...;
// code: the HTTP status, or 0 when no reply came). Implementations must be thread-safe.
class ApiCallObserver {
 public:
  virtual ~ApiCallObserver() = default;
  virtual void ApiCall(std::string_view verb, int code) = 0;
};

class ApiClient {
 public:
  virtual ~ApiClient() = default;

  // `path` includes the query, e.g. "/api/v1/pods?limit=500". `verb` labels the metrics.
  // A 429 is retried once after its Retry-After (at most 10 s; 1 s when absent or malformed),
  // a 401 once after re-reading the token file, other statuses are returned as they are. The
  // rate limiter is waited on before each try. `cancel` (may be null) cuts this call.
  virtual ApiResult<ApiResponse> Get(const std::string& path, std::string_view verb,
                                     CancelToken* cancel = nullptr) = 0;
  // `retry_throttled` false: a 429 is returned as it is (a caller that bounds when its write may
  // land, as the binder does, cannot let the client send it again later).
  virtual ApiResult<ApiResponse> Post(const std::string& path, const std::string& body,
                                      std::string_view verb, bool retry_throttled = true) = 0;
  // Merge patch (Content-Type: application/merge-patch+json).
  virtual ApiResult<ApiResponse> Patch(const std::string& path, const std::string& body,
                                       std::string_view verb) = 0;

  // Opens a watch (a GET whose chunked reply is one JSON object per line) and calls `on_line`
  // for every complete, non-empty line, without the newline. Returns the HTTP status when the
  // server ended the stream (200 for a clean end; a non-200 status's body goes to `error_body`
  // when non-null), or a TransportError when the connection failed, no byte arrived within
  // `idle_timeout`, a line passed 64 MiB, `on_line` returned false, Stop() was called or
  // `cancel` (may be null) was cancelled. `on_line` runs on the calling thread.
  virtual ApiResult<int> Watch(const std::string& path,
                               const std::function<bool(std::string_view line)>& on_line,
                               std::chrono::milliseconds idle_timeout,
                               std::string* error_body = nullptr,
                               CancelToken* cancel = nullptr) = 0;

  // Makes every running and later call return a TransportError promptly (shutdown).
  virtual void Stop() = 0;

  virtual const ClientConfig& config() const = 0;
};
using ApiClientPtr = std::unique_ptr<ApiClient>;

// Returns a client for `config`, or an error naming what is wrong (a server URL that is not
// http(s)://host[:port], a CA or client certificate that OpenSSL rejects). `observer` (may be
// null) and `clock` must outlive the client.
Result<ApiClientPtr> NewApiClient(ClientConfig config, ApiCallObserver* observer = nullptr,
                                  Clock& clock = SystemClock());

// The `message` of a metav1.Status body, or the body itself (shortened) when it is not one.
std::string StatusMessage(std::string_view body);

}  // namespace linkfit::kube
