#include "kube/fake_api_server_impl.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include <openssl/pem.h>

namespace linkfit::testing::fake_impl {

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

}  // namespace linkfit::testing::fake_impl

namespace linkfit::testing {

using fake_impl::FakeApiServerImpl;

Result<FakeApiServerPtr> StartFakeApiServer(FakeApiServerOptions options) {
  auto server = std::make_unique<FakeApiServerImpl>(std::move(options));
  if (Result<void> started = server->Start(); !started) {
    return tl::unexpected(started.error());
  }
  return FakeApiServerPtr(std::move(server));
}

}  // namespace linkfit::testing
