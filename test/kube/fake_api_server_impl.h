#pragma once

// Internal to the fake API server (fake_api_server.h): the implementation class, shared by
// fake_api_server.cc (transport, authentication, routes, faults, records) and
// fake_api_server_watch.cc (lists and watch streams).
//
// Thread-safety: as FakeApiServer; members marked GUARDED_BY(mutex_) are read and written under
// mutex_.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <httplib.h>
#include <openssl/ssl.h>

#include "kube/fake_api_server.h"
#include "kube/fake_api_server_internal.h"
#include "kube/fake_api_server_leases.h"

namespace linkfit::testing::fake_impl {

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

inline constexpr size_t kMaxBodyBytes = 3 * 1024 * 1024;  // the API server's default request limit
// How often an idle watch checks that its client is still there.
inline constexpr std::chrono::milliseconds kWatchLivenessPoll{100};
inline constexpr char kJson[] = "application/json";

inline void SetReply(httplib::Response& res, const Reply& reply) {
  res.status = reply.status;
  res.set_content(reply.body, kJson);
}

inline void SetStatus(httplib::Response& res, int code, const std::string& message,
                      const json& details = json::object()) {
  res.status = code;
  res.set_content(StatusBody(code, ReasonForCode(code), message, details), kJson);
}

inline bool IsTrue(const std::string& value) { return value == "1" || value == "true"; }

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
inline constexpr char kTimeoutBody[] =
    R"({"metadata":{},"status":"Failure","message":"Timeout: request did not complete within )"
    R"(the allotted timeout","reason":"Timeout","details":{},"code":504})"
    "\n";
inline constexpr char kSniffedText[] = "text/plain; charset=utf-8";

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

}  // namespace linkfit::testing::fake_impl
