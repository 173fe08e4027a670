#include "kube/fake_api_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <mutex>
#include <regex>
#include <thread>
#include <utility>

#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "kube/fake_api_server_internal.h"
#include "kube/fake_api_server_leases.h"

namespace linkfit::testing {
namespace {

using fake_internal::FakeLeases;
using fake_internal::FakeStore;
using fake_internal::FindServerSockets;
using fake_internal::Kind;
using fake_internal::MediaType;
using fake_internal::ReasonForCode;
using fake_internal::Reply;
using fake_internal::StatusBody;
using fake_internal::WatchBatch;
using fake_internal::WatchCursor;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

constexpr size_t kMaxBodyBytes = 3 * 1024 * 1024;  // the API server's default request limit
// How often an idle watch checks that its client is still there.
constexpr std::chrono::milliseconds kWatchLivenessPoll{100};
constexpr char kJson[] = "application/json";

void SetReply(httplib::Response& res, const Reply& reply) {
  res.status = reply.status;
  res.set_content(reply.body, kJson);
}

void SetStatus(httplib::Response& res, int code, const std::string& message,
               const json& details = json::object()) {
  res.status = code;
  res.set_content(StatusBody(code, ReasonForCode(code), message, details), kJson);
}

bool IsTrue(const std::string& value) { return value == "1" || value == "true"; }

struct LatencyRule {
  RequestMatch match;
  std::chrono::milliseconds latency;
};
struct FailRule {
  RequestMatch match;
  int remaining;
  int status;
  int retry_after_seconds;
};
struct DropRule {
  RequestMatch match;
  int remaining;
  DropMode mode;
};

// What fault injection decided for one request. A request whose latency reaches its deadline
// (`timed_out`) takes no failure or drop: it never gets that far.
struct FaultPlan {
  std::chrono::milliseconds latency{0};
  bool timed_out = false;
  std::optional<FailRule> fail;
  std::optional<DropMode> drop;
};

// The body of upstream's 504 (WithTimeoutForNonLongRunningRequests): apierrors.NewTimeoutError
// written by encoding/json straight from the StatusError, so without kind and apiVersion, with
// empty details and a trailing newline; no Content-Type is set, and Go sniffs text/plain.
constexpr char kTimeoutBody[] =
    R"({"metadata":{},"status":"Failure","message":"Timeout: request did not complete within )"
    R"(the allotted timeout","reason":"Timeout","details":{},"code":504})"
    "\n";
constexpr char kSniffedText[] = "text/plain; charset=utf-8";

// The state one watch response carries between calls of its content provider.
struct WatchStream {
  WatchCursor cursor;
  std::string pending;  // lines to write first (StartWatch's)
  bool end_after_pending = false;
  int fd = -1;  // TLS: the connection, to notice a client that went away
};

class FakeApiServerImpl final : public FakeApiServer {
 public:
  explicit FakeApiServerImpl(FakeApiServerOptions options)
      : options_(std::move(options)),
        store_(options_.initial_resource_version, options_.history_limit,
               options_.max_list_snapshots),
        tokens_(options_.tokens) {}

  ~FakeApiServerImpl() override {
    Stop();
    std::error_code ignored;
    if (!work_dir_.empty()) std::filesystem::remove_all(work_dir_, ignored);
  }

  Result<void> Start();

  int port() const override { return port_; }
  std::string url() const override {
    return std::string(options_.tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
  }
  const TestPki* pki() const override { return pki_.get(); }
  const std::string& work_dir() const override { return work_dir_; }
  void Stop() override;
  Result<std::string> WriteKubeconfig(const KubeconfigOptions& options) const override;

  void SetTokens(std::set<std::string> tokens) override {
    std::lock_guard<std::mutex> lock(mutex_);
    tokens_ = std::move(tokens);
  }
  void AddToken(const std::string& token) override {
    std::lock_guard<std::mutex> lock(mutex_);
    tokens_.insert(token);
  }
  void RemoveToken(const std::string& token) override {
    std::lock_guard<std::mutex> lock(mutex_);
    tokens_.erase(token);
  }

  Result<json> AddNode(json node) override {
    return Guard([&] { return store_.Create(Kind::kNode, std::move(node)); });
  }
  Result<json> UpdateNode(json node) override {
    return Guard([&] { return store_.Replace(Kind::kNode, std::move(node)); });
  }
  Result<json> DeleteNode(const std::string& name) override {
    return store_.Delete(Kind::kNode, name);
  }
  Result<json> AddPod(json pod) override {
    return Guard([&] { return store_.Create(Kind::kPod, std::move(pod)); });
  }
  Result<json> UpdatePod(json pod) override {
    return Guard([&] { return store_.Replace(Kind::kPod, std::move(pod)); });
  }
  Result<json> SetPodPhase(const std::string& namespace_name, const std::string& name,
                           const std::string& phase) override {
    return Guard([&] {
      return store_.Mutate(Kind::kPod, namespace_name + "/" + name,
                           [&](json& pod) { pod["status"]["phase"] = phase; });
    });
  }
  Result<json> MarkPodTerminating(const std::string& namespace_name,
                                  const std::string& name) override {
    return Guard([&] {
      return store_.Mutate(Kind::kPod, namespace_name + "/" + name, [](json& pod) {
        if (pod["metadata"].contains("deletionTimestamp")) return;
        pod["metadata"]["deletionTimestamp"] = fake_internal::NowRfc3339();
        pod["metadata"]["deletionGracePeriodSeconds"] = 30;
      });
    });
  }
  Result<json> DeletePod(const std::string& namespace_name, const std::string& name) override {
    return store_.Delete(Kind::kPod, namespace_name + "/" + name);
  }
  std::optional<json> GetPod(const std::string& namespace_name,
                             const std::string& name) const override {
    return store_.Get(Kind::kPod, namespace_name + "/" + name);
  }
  std::optional<json> GetNode(const std::string& name) const override {
    return store_.Get(Kind::kNode, name);
  }
  std::optional<json> GetLease(const std::string& namespace_name,
                               const std::string& name) const override {
    return leases_.Find(namespace_name, name);
  }
  std::vector<json> Leases() const override { return leases_.All(); }
  std::vector<json> Pods() const override { return store_.All(Kind::kPod); }
  std::vector<json> Nodes() const override { return store_.All(Kind::kNode); }
  std::string CurrentResourceVersion() const override {
    return std::to_string(store_.CurrentResourceVersion());
  }
  void Compact() override { store_.Compact(); }

  void CutWatches() override { store_.CutWatches(); }
  size_t OpenWatches() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return open_watches_;
  }
  size_t WatchRequests() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return watch_requests_;
  }
  bool WaitForOpenWatches(size_t count, std::chrono::milliseconds timeout) const override {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return open_watches_ == count; });
  }

  void SetLatency(std::chrono::milliseconds latency, const RequestMatch& match) override;
  void FailNext(int count, int status, const RequestMatch& match, int retry_after_seconds) override;
  void DropNext(int count, DropMode mode, const RequestMatch& match) override;
  void SetBindingDelay(std::chrono::milliseconds delay) override {
    SetLatency(delay, RequestMatch{"POST", "/binding"});
  }
  void ClearFaults() override;

  std::vector<RecordedRequest> Requests() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }
  size_t CountRequests(const RequestMatch& match) const override;
  std::vector<BindingRecord> Bindings() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return bindings_;
  }
  std::vector<json> PostedEvents() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return posted_events_;
  }
  void ClearRecords() override {
    std::lock_guard<std::mutex> lock(mutex_);
    requests_.clear();
    bindings_.clear();
    posted_events_.clear();
  }

 private:
  // Runs a store call, turning a json exception (a malformed object) into an error.
  template <typename Function>
  static Result<json> Guard(Function function) {
    try {
      return function();
    } catch (const std::exception& error) {
      return MakeError(std::string("malformed object: ") + error.what());
    }
  }

  bool SetUpTls(SSL_CTX& context);
  void AddRoutes();
  void Route(const std::string& method, const std::string& pattern, Handler handler);
  void Serve(const httplib::Request& req, httplib::Response& res, const Handler& handler);
  std::string Authenticate(const httplib::Request& req) const;
  // `deadline`: none for a long-running request (a watch).
  FaultPlan PlanFaults(const std::string& method, const std::string& path,
                       std::optional<std::chrono::nanoseconds> deadline);
  // Returns false when Stop() cut the sleep short.
  bool SleepUnlessStopping(std::chrono::nanoseconds duration);
  void ShutdownConnection(const httplib::Request& req) const;
  void Record(RecordedRequest record, const httplib::Request& req);

  void ServeCollection(Kind kind, const std::string& namespace_name, const httplib::Request& req,
                       httplib::Response& res);
  void ServeWatch(Kind kind, fake_internal::Selector selector, const httplib::Request& req,
                  httplib::Response& res);
  bool WriteWatch(WatchStream& stream, httplib::DataSink& sink);
  void ServeEvent(const std::string& namespace_name, const httplib::Request& req,
                  httplib::Response& res);

  const FakeApiServerOptions options_;
  FakeStore store_;
  FakeLeases leases_{store_};
  TestPkiPtr pki_;
  std::string work_dir_;
  std::unique_ptr<httplib::Server> server_;
  std::thread listener_;
  int port_ = 0;

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;  // open_watches_ and stopping_
  std::set<std::string> tokens_;             // GUARDED_BY(mutex_)
  std::vector<LatencyRule> latency_rules_;   // GUARDED_BY(mutex_)
  std::vector<FailRule> fail_rules_;         // GUARDED_BY(mutex_)
  std::vector<DropRule> drop_rules_;         // GUARDED_BY(mutex_)
  std::vector<RecordedRequest> requests_;    // GUARDED_BY(mutex_)
  std::vector<BindingRecord> bindings_;      // GUARDED_BY(mutex_)
  std::vector<json> posted_events_;          // GUARDED_BY(mutex_)
  size_t open_watches_ = 0;                  // GUARDED_BY(mutex_)
  size_t watch_requests_ = 0;                // GUARDED_BY(mutex_)
  bool stopping_ = false;                    // GUARDED_BY(mutex_)
};

Result<void> FakeApiServerImpl::Start() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/linkfit-fake-api-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) return MakeError("mkdtemp " + pattern + " failed");
  work_dir_ = buffer.data();

  if (options_.tls) {
    LINKFIT_ASSIGN_OR_RETURN(pki_, TestPki::Create(work_dir_ + "/pki"));
    server_ = std::make_unique<httplib::SSLServer>(
        [this](SSL_CTX& context) { return SetUpTls(context); });
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  if (!server_->is_valid()) return MakeError("the fake API server's TLS setup failed");
  const size_t workers = static_cast<size_t>(std::max(options_.worker_threads, 2));
  server_->new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
  server_->set_payload_max_length(kMaxBodyBytes);
  // Go's net/http, and so the API server, sets TCP_NODELAY; without it the reply's second
  // segment waits for the client's delayed ACK (40 ms per request).
  server_->set_tcp_nodelay(true);
  server_->set_keep_alive_timeout(options_.keep_alive_timeout.count());
  server_->set_read_timeout(5, 0);
  server_->set_write_timeout(5, 0);
  AddRoutes();

  port_ = server_->bind_to_any_port("127.0.0.1");
  if (port_ <= 0) return MakeError("binding 127.0.0.1:0 failed");
  listener_ = std::thread([this] { server_->listen_after_bind(); });
  // Stop() relies on is_running(): wait for the accept loop to start.
  const Clock::time_point give_up = Clock::now() + std::chrono::seconds(10);
  while (!server_->is_running()) {
    if (Clock::now() > give_up) return MakeError("the fake API server did not start listening");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return {};
}

bool FakeApiServerImpl::SetUpTls(SSL_CTX& context) {
  auto read_pem = [](const std::string& pem, auto reader) {
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    auto* value = bio != nullptr ? reader(bio, nullptr, nullptr, nullptr) : nullptr;
    BIO_free(bio);
    return value;
  };
  X509* cert = read_pem(pki_->server_cert_pem(), PEM_read_bio_X509);
  EVP_PKEY* key = read_pem(pki_->server_key_pem(), PEM_read_bio_PrivateKey);
  X509* ca = read_pem(pki_->ca_cert_pem(), PEM_read_bio_X509);
  bool ok = cert != nullptr && key != nullptr && ca != nullptr &&
            SSL_CTX_use_certificate(&context, cert) == 1 &&
            SSL_CTX_use_PrivateKey(&context, key) == 1 &&
            SSL_CTX_check_private_key(&context) == 1 &&
            SSL_CTX_set_min_proto_version(&context, TLS1_2_VERSION) == 1;
  if (ok) {
    SSL_CTX_set_options(&context, SSL_OP_NO_COMPRESSION);
    static constexpr unsigned char kSessionContext[] = "linkfit-fake-api-server";
    ok =
        SSL_CTX_set_session_id_context(&context, kSessionContext, sizeof(kSessionContext) - 1) == 1;
  }
  if (ok && options_.accept_client_certificates) {
    // Verify a certificate when one is sent, but do not require one (tokens work too).
    ok = X509_STORE_add_cert(SSL_CTX_get_cert_store(&context), ca) == 1 &&
         SSL_CTX_add_client_CA(&context, ca) == 1;
    SSL_CTX_set_verify(&context, SSL_VERIFY_PEER, nullptr);
  }
  if (ok) {
    // OpenSSL computes a certificate's cached extensions (key identifiers, purposes) the first
    // time a handshake builds or checks a chain, behind a flag it reads without a lock. Doing it
    // here, before any worker thread exists, leaves the handshakes nothing to write.
    ok = X509_check_purpose(cert, -1, 0) >= 0 && X509_check_purpose(ca, -1, 0) >= 0;
  }
  X509_free(cert);
  EVP_PKEY_free(key);
  X509_free(ca);
  return ok;
}

void FakeApiServerImpl::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    changed_.notify_all();
  }
  store_.Shutdown();
  if (!server_) return;
  server_->stop();
  // Workers waiting for the next request of an idle keep-alive connection would otherwise hold
  // the thread pool's shutdown for keep_alive_timeout.
  if (port_ > 0) {
    for (int fd : FindServerSockets(port_, -1)) ::shutdown(fd, SHUT_RDWR);
  }
  if (listener_.joinable()) listener_.join();
}

Result<std::string> FakeApiServerImpl::WriteKubeconfig(const KubeconfigOptions& options) const {
  std::string default_token;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!tokens_.empty()) default_token = *tokens_.begin();
  }
  return fake_internal::WriteKubeconfigFile(options, url(), pki_.get(), default_token, work_dir_);
}

void FakeApiServerImpl::AddRoutes() {
  Route("GET", "/api/v1/nodes",
        [this](const auto& req, auto& res) { ServeCollection(Kind::kNode, "", req, res); });
  Route("GET", R"(/api/v1/nodes/([^/]+))", [this](const auto& req, auto& res) {
    SetReply(res, store_.GetOne(Kind::kNode, req.matches[1]));
  });
  Route("PATCH", R"(/api/v1/nodes/([^/]+))", [this](const auto& req, auto& res) {
    if (MediaType(req.get_header_value("Content-Type")) != "application/merge-patch+json") {
      SetReply(res, fake_internal::UnsupportedPatchType());
      return;
    }
    const json patch = json::parse(req.body, nullptr, false);
    if (patch.is_discarded()) {
      SetStatus(res, 400, "the body of the request is not JSON");
      return;
    }
    SetReply(res, store_.PatchNode(req.matches[1], patch));
  });
  Route("GET", "/api/v1/pods",
        [this](const auto& req, auto& res) { ServeCollection(Kind::kPod, "", req, res); });
  Route("GET", R"(/api/v1/namespaces/([^/]+)/pods)", [this](const auto& req, auto& res) {
    ServeCollection(Kind::kPod, req.matches[1], req, res);
  });
  Route("GET", R"(/api/v1/namespaces/([^/]+)/pods/([^/]+))", [this](const auto& req, auto& res) {
    SetReply(res, store_.GetOne(Kind::kPod,
                                std::string(req.matches[1]) + "/" + std::string(req.matches[2])));
  });
  Route("POST", R"(/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding)",
        [this](const auto& req, auto& res) {
          const json binding = json::parse(req.body, nullptr, false);
          if (binding.is_discarded()) {
            SetStatus(res, 400, "the body of the request is not JSON");
            return;
          }
          SetReply(res, store_.Bind(req.matches[1], req.matches[2], binding));
        });
  const std::string leases = R"(/apis/coordination.k8s.io/v1/namespaces/([^/]+)/leases)";
  const std::string lease = leases + R"(/([^/]+))";
  Route("POST", leases, [this](const auto& req, auto& res) {
    SetReply(res, leases_.Create(req.matches[1], req.body));
  });
  Route("GET", lease, [this](const auto& req, auto& res) {
    SetReply(res, leases_.Get(req.matches[1], req.matches[2]));
  });
  Route("PUT", lease, [this](const auto& req, auto& res) {
    SetReply(res, leases_.Update(req.matches[1], req.matches[2], req.body));
  });
  Route("PATCH", lease, [this](const auto& req, auto& res) {
    SetReply(res, leases_.Patch(req.matches[1], req.matches[2],
                                req.get_header_value("Content-Type"), req.body));
  });
  Route("DELETE", lease, [this](const auto& req, auto& res) {
    SetReply(res, leases_.Delete(req.matches[1], req.matches[2], req.body));
  });
  Route("POST", R"(/apis/events.k8s.io/v1/namespaces/([^/]+)/events)",
        [this](const auto& req, auto& res) { ServeEvent(req.matches[1], req, res); });

  // Unknown routes (and other statuses httplib answers itself) get a Status body too.
  server_->set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        SetStatus(res, res.status,
                  res.status == 404 ? "the server could not find the requested resource"
                                    : "the request could not be served");
        return httplib::Server::HandlerResponse::Handled;
      }));
}

void FakeApiServerImpl::Route(const std::string& method, const std::string& pattern,
                              Handler handler) {
  auto wrapped = [this, handler = std::move(handler)](const httplib::Request& req,
                                                      httplib::Response& res) {
    Serve(req, res, handler);
  };
  if (method == "GET") {
    server_->Get(pattern, wrapped);
  } else if (method == "POST") {
    server_->Post(pattern, wrapped);
  } else if (method == "PUT") {
    server_->Put(pattern, wrapped);
  } else if (method == "DELETE") {
    server_->Delete(pattern, wrapped);
  } else {
    server_->Patch(pattern, wrapped);
  }
}

void FakeApiServerImpl::Serve(const httplib::Request& req, httplib::Response& res,
                              const Handler& handler) {
  RecordedRequest record;
  record.method = req.method;
  record.path = req.path;
  record.target = req.target;
  record.user_agent = req.get_header_value("User-Agent");
  record.authorization = req.get_header_value("Authorization");
  record.content_type = req.get_header_value("Content-Type");
  record.body = req.body;
  record.user = Authenticate(req);
  const auto refuse = [&](int code, const std::string& message) {
    SetStatus(res, code, message);
    record.status = code;
    Record(std::move(record), req);
  };

  // The request's deadline, as upstream's WithRequestDeadline sets it (before authentication):
  // the `timeout` parameter when it is positive and below the server's request timeout, else
  // the request timeout. Watches are long-running and have none.
  const bool long_running = IsTrue(req.get_param_value("watch"));
  std::optional<std::chrono::nanoseconds> deadline;
  if (!long_running) {
    deadline = options_.request_timeout;
    if (const std::string timeout = req.get_param_value("timeout"); !timeout.empty()) {
      const Result<std::chrono::nanoseconds> asked = fake_internal::ParseGoDuration(timeout);
      if (!asked) {
        return refuse(400,
                      "invalid timeout specified in the request URL - " + asked.error().message);
      }
      if (asked->count() > 0 && *asked < *deadline) deadline = *asked;
    }
  }
  if (record.user.empty()) return refuse(401, "Unauthorized");

  FaultPlan plan = PlanFaults(req.method, req.path, deadline);
  if (plan.timed_out) {
    // Abandoned at its deadline, before anything was applied: the client gets 504.
    if (!SleepUnlessStopping(*deadline)) {
      SetStatus(res, 503, "the fake API server is shutting down");
    } else {
      res.status = 504;
      res.set_content(kTimeoutBody, kSniffedText);
    }
  } else if (plan.latency.count() > 0 && !SleepUnlessStopping(plan.latency)) {
    SetStatus(res, 503, "the fake API server is shutting down");
  } else if (plan.fail) {
    json details = json::object();
    int retry_after = plan.fail->retry_after_seconds;
    if (plan.fail->status == 429 && retry_after <= 0) retry_after = 1;
    if (retry_after > 0) {
      res.set_header("Retry-After", std::to_string(retry_after));
      details["retryAfterSeconds"] = retry_after;
    }
    const std::string message = plan.fail->status == 429
                                    ? "Too many requests, please try again later."
                                    : "injected by the fake API server";
    SetStatus(res, plan.fail->status, message, details);
  } else if (plan.drop != DropMode::kBeforeApply) {
    try {
      handler(req, res);
    } catch (const json::exception& error) {
      SetStatus(res, 400, std::string("malformed request: ") + error.what());
    } catch (const std::exception& error) {
      SetStatus(res, 500, std::string("Internal error occurred: ") + error.what());
    }
  }
  // Recorded before the client can see anything, so that a test reading the records after its
  // request returned (or failed) finds it.
  record.status = plan.drop ? 0 : res.status;
  Record(std::move(record), req);
  if (plan.drop) {
    // The reply httplib writes next goes nowhere: the connection is already shut down.
    if (res.status == -1) res.status = 500;
    ShutdownConnection(req);
  }
}

std::string FakeApiServerImpl::Authenticate(const httplib::Request& req) const {
  if (req.ssl != nullptr && options_.accept_client_certificates) {
    X509* peer = SSL_get0_peer_certificate(req.ssl);
    if (peer != nullptr && SSL_get_verify_result(req.ssl) == X509_V_OK) {
      char common_name[256] = {};
      X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, common_name,
                                sizeof(common_name));
      return std::string("cert:") + common_name;
    }
  }
  const std::string authorization = req.get_header_value("Authorization");
  if (!authorization.empty()) {
    static constexpr char kBearer[] = "Bearer ";
    if (authorization.rfind(kBearer, 0) != 0) return "";
    const std::string token = authorization.substr(sizeof(kBearer) - 1);
    std::lock_guard<std::mutex> lock(mutex_);
    return tokens_.count(token) ? "token" : "";
  }
  return options_.allow_anonymous ? "anonymous" : "";
}

FaultPlan FakeApiServerImpl::PlanFaults(const std::string& method, const std::string& path,
                                        std::optional<std::chrono::nanoseconds> deadline) {
  FaultPlan plan;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const LatencyRule& rule : latency_rules_) {
    if (rule.match.Matches(method, path)) plan.latency = std::max(plan.latency, rule.latency);
  }
  if (deadline && plan.latency.count() > 0 && plan.latency >= *deadline) {
    plan.timed_out = true;
    return plan;
  }
  for (FailRule& rule : fail_rules_) {
    if (rule.remaining > 0 && rule.match.Matches(method, path)) {
      --rule.remaining;
      plan.fail = rule;
      return plan;
    }
  }
  for (DropRule& rule : drop_rules_) {
    if (rule.remaining > 0 && rule.match.Matches(method, path)) {
      --rule.remaining;
      plan.drop = rule.mode;
      return plan;
    }
  }
  return plan;
}

bool FakeApiServerImpl::SleepUnlessStopping(std::chrono::nanoseconds duration) {
  std::unique_lock<std::mutex> lock(mutex_);
  return !changed_.wait_for(lock, duration, [this] { return stopping_; });
}

void FakeApiServerImpl::ShutdownConnection(const httplib::Request& req) const {
  // shutdown(), not close(): httplib still owns the descriptor and closes it itself. Its writes
  // of the reply then fail, so the client reads end-of-stream without a status line.
  if (req.ssl != nullptr) {
    ::shutdown(SSL_get_fd(req.ssl), SHUT_RDWR);
    return;
  }
  for (int fd : FindServerSockets(port_, req.remote_port)) ::shutdown(fd, SHUT_RDWR);
}

void FakeApiServerImpl::Record(RecordedRequest record, const httplib::Request& req) {
  static const std::regex kBinding(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding)");
  std::smatch match;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!record.user.empty() && record.method == "POST" &&
      std::regex_match(record.path, match, kBinding)) {
    bindings_.push_back(
        BindingRecord{match[1], match[2], json::parse(req.body, nullptr, false), record.status});
    if (bindings_.back().body.is_discarded()) bindings_.back().body = nullptr;
  }
  requests_.push_back(std::move(record));
}

void FakeApiServerImpl::SetLatency(std::chrono::milliseconds latency, const RequestMatch& match) {
  std::lock_guard<std::mutex> lock(mutex_);
  latency_rules_.erase(std::remove_if(latency_rules_.begin(), latency_rules_.end(),
                                      [&](const LatencyRule& rule) {
                                        return rule.match.method == match.method &&
                                               rule.match.path_substring == match.path_substring;
                                      }),
                       latency_rules_.end());
  if (latency.count() > 0) latency_rules_.push_back(LatencyRule{match, latency});
}

void FakeApiServerImpl::FailNext(int count, int status, const RequestMatch& match,
                                 int retry_after_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  fail_rules_.push_back(FailRule{match, count, status, retry_after_seconds});
}

void FakeApiServerImpl::DropNext(int count, DropMode mode, const RequestMatch& match) {
  std::lock_guard<std::mutex> lock(mutex_);
  drop_rules_.push_back(DropRule{match, count, mode});
}

void FakeApiServerImpl::ClearFaults() {
  std::lock_guard<std::mutex> lock(mutex_);
  latency_rules_.clear();
  fail_rules_.clear();
  drop_rules_.clear();
}

size_t FakeApiServerImpl::CountRequests(const RequestMatch& match) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<size_t>(std::count_if(
      requests_.begin(), requests_.end(),
      [&](const RecordedRequest& request) { return match.Matches(request.method, request.path); }));
}

void FakeApiServerImpl::ServeCollection(Kind kind, const std::string& namespace_name,
                                        const httplib::Request& req, httplib::Response& res) {
  Result<fake_internal::Selector> selector = fake_internal::ParseSelector(
      kind, req.get_param_value("fieldSelector"), req.get_param_value("labelSelector"));
  if (!selector) {
    SetStatus(res, 400, selector.error().message);
    return;
  }
  selector->namespace_name = namespace_name;
  if (IsTrue(req.get_param_value("watch"))) {
    ServeWatch(kind, std::move(*selector), req, res);
    return;
  }
  fake_internal::ListRequest list;
  list.selector = std::move(*selector);
  list.continue_token = req.get_param_value("continue");
  list.resource_version = req.get_param_value("resourceVersion");
  const std::string limit = req.get_param_value("limit");
  if (!limit.empty()) {
    char* end = nullptr;
    list.limit = std::strtoll(limit.c_str(), &end, 10);
    if (end == limit.c_str() || *end != '\0' || list.limit < 0) {
      SetStatus(res, 400, "limit: Invalid value: \"" + limit + "\"");
      return;
    }
  }
  SetReply(res, store_.List(kind, list));
}

void FakeApiServerImpl::ServeWatch(Kind kind, fake_internal::Selector selector,
                                   const httplib::Request& req, httplib::Response& res) {
  auto stream = std::make_shared<WatchStream>();
  WatchCursor& cursor = stream->cursor;
  cursor.kind = kind;
  cursor.selector = std::move(selector);
  cursor.bookmarks = IsTrue(req.get_param_value("allowWatchBookmarks"));
  cursor.bookmark_interval = options_.bookmark_interval;
  std::chrono::seconds timeout = options_.default_watch_timeout;
  const std::string timeout_seconds = req.get_param_value("timeoutSeconds");
  if (!timeout_seconds.empty()) {
    char* end = nullptr;
    const long long seconds = std::strtoll(timeout_seconds.c_str(), &end, 10);
    if (end == timeout_seconds.c_str() || *end != '\0' || seconds < 0) {
      SetStatus(res, 400, "timeoutSeconds: Invalid value: \"" + timeout_seconds + "\"");
      return;
    }
    if (seconds > 0) timeout = std::chrono::seconds(seconds);
  }
  cursor.deadline = Clock::now() + timeout;
  Result<WatchBatch> first = store_.StartWatch(req.get_param_value("resourceVersion"), cursor);
  if (!first) {
    SetStatus(res, 400, first.error().message);
    return;
  }
  stream->pending = std::move(first->lines);
  stream->end_after_pending = first->end;
  if (req.ssl != nullptr) stream->fd = SSL_get_fd(req.ssl);

  // httplib 0.11 gzips an application/json chunked body when the client accepts gzip, which
  // holds events inside zlib until the stream ends; the API server streams watches unbuffered.
  // The Request object is httplib's own non-const local, so dropping the header is sound.
  const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++watch_requests_;
    ++open_watches_;
    changed_.notify_all();
  }
  res.status = 200;
  res.set_chunked_content_provider(
      kJson, [this, stream](size_t, httplib::DataSink& sink) { return WriteWatch(*stream, sink); },
      [this](bool) {
        std::lock_guard<std::mutex> lock(mutex_);
        --open_watches_;
        changed_.notify_all();
      });
}

bool FakeApiServerImpl::WriteWatch(WatchStream& stream, httplib::DataSink& sink) {
  if (!stream.pending.empty() || stream.end_after_pending) {
    const std::string pending = std::move(stream.pending);
    stream.pending.clear();
    if (!pending.empty() && !sink.write(pending.data(), pending.size())) return false;
    if (stream.end_after_pending) sink.done();
    return true;
  }
  WatchBatch batch = store_.WaitWatch(stream.cursor, kWatchLivenessPoll);
  if (batch.abort) return false;  // cut: no final chunk, the client sees a broken stream
  if (!batch.lines.empty() && !sink.write(batch.lines.data(), batch.lines.size())) return false;
  if (batch.end) {
    sink.done();
    return true;
  }
  if (batch.lines.empty()) {
    // Nothing to send: make sure someone is still reading. A watch client never sends anything
    // after its request, so a readable socket means end-of-stream or a TLS close_notify.
    if (!sink.is_writable()) return false;
    if (stream.fd >= 0) {
      pollfd descriptor{stream.fd, POLLIN | POLLRDHUP, 0};
      if (::poll(&descriptor, 1, 0) > 0) return false;
    }
  }
  return true;
}

void FakeApiServerImpl::ServeEvent(const std::string& namespace_name, const httplib::Request& req,
                                   httplib::Response& res) {
  json event = json::parse(req.body, nullptr, false);
  if (!event.is_object()) {
    SetStatus(res, 400, "the body of the request is not a JSON object");
    return;
  }
  json& metadata = event["metadata"];
  if (!metadata.is_object()) metadata = json::object();
  const std::string body_namespace = metadata.value("namespace", "");
  if (!body_namespace.empty() && body_namespace != namespace_name) {
    SetStatus(res, 400,
              "the namespace of the provided object does not match the namespace sent on the "
              "request");
    return;
  }
  metadata["namespace"] = namespace_name;
  if (metadata.value("name", "").empty()) {
    const std::string prefix = metadata.value("generateName", "");
    if (prefix.empty()) {
      SetStatus(res, 422, "Event.events.k8s.io is invalid: metadata.name: Required value");
      return;
    }
    metadata["name"] = prefix + store_.NewUid().substr(0, 5);
  }
  metadata["uid"] = store_.NewUid();
  metadata["creationTimestamp"] = fake_internal::NowRfc3339();
  metadata["resourceVersion"] = std::to_string(store_.NextResourceVersion());
  event["kind"] = "Event";
  event["apiVersion"] = "events.k8s.io/v1";
  {
    std::lock_guard<std::mutex> lock(mutex_);
    posted_events_.push_back(event);
  }
  res.status = 201;
  res.set_content(event.dump(), kJson);
}

}  // namespace

Result<FakeApiServerPtr> StartFakeApiServer(FakeApiServerOptions options) {
  auto server = std::make_unique<FakeApiServerImpl>(std::move(options));
  if (Result<void> started = server->Start(); !started) {
    return tl::unexpected(started.error());
  }
  return FakeApiServerPtr(std::move(server));
}

}  // namespace linkfit::testing
