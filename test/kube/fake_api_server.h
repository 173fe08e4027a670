#pragma once

// FakeApiServer: an in-process imitation of the Kubernetes API server (core/v1 pods and nodes as
// shared/spec/kube-api.md describes them, and coordination.k8s.io/v1 Leases), served over real
// HTTPS (or HTTP) on 127.0.0.1, so that linkfit's API client, reflectors, binder and binder lease
// are tested against the protocol and not a mock.
//
//   Transport   HTTPS with a throwaway CA (TestPki) or plain HTTP; port 0, see url().
//   Auth        a bearer token from a set the test may change at any time (token rotation) or a
//               client certificate signed by the CA; anything else answers 401 with a Status.
//   Deadlines   every request but a watch has one, as upstream's WithRequestDeadline sets it: the
//               `timeout` parameter (a Go duration, "5s", "1500ms", "1m30s") when it is positive
//               and below options.request_timeout (the server's --request-timeout, 60 s), else
//               the request timeout. A `timeout` that does not parse answers 400 (before
//               authentication, as upstream). A request whose injected latency reaches its
//               deadline is answered 504 at the deadline (as upstream's timeout filter writes it:
//               a Status without kind and apiVersion, reason Timeout, "Timeout: request did not
//               complete within the allotted timeout", Content-Type text/plain) and is abandoned:
//               nothing is applied (a delayed Binding lands by its deadline or never), and it takes
//               no FailNext / DropNext. It is recorded with status 504.
//   Reads       GET /api/v1/nodes, /api/v1/nodes/NAME, /api/v1/pods,
//               /api/v1/namespaces/NS/pods, /api/v1/namespaces/NS/pods/NAME.
//               Lists take limit + continue (pages of one snapshot; 410 Expired once compacted),
//               resourceVersion=0 (no pagination), fieldSelector (=, ==, != on the pod fields
//               upstream supports: spec.nodeName, status.phase, metadata.name, ...) and
//               labelSelector (k=v, k!=v, k, !k).
//   Watches     the same URLs with watch=1: chunked, one {"type","object"} JSON per line; events
//               after resourceVersion, then live ones; BOOKMARKs every bookmark_interval with
//               allowWatchBookmarks; selector transitions become ADDED / DELETED; a too old
//               resourceVersion gets 200 and one ERROR event (Status 410 Expired); the stream ends
//               cleanly after timeoutSeconds (the `timeout` parameter does not apply).
//   Writes      POST .../pods/NAME/binding (kube-api.md §4: 201, or 400 / 404 / 409 exactly as
//               upstream's BindingREST), PATCH /api/v1/nodes/NAME (application/merge-patch+json,
//               else 415; a no-op patch makes no event), POST
//               /apis/events.k8s.io/v1/namespaces/NS/events (201, recorded).
//   Leases      /apis/coordination.k8s.io/v1/namespaces/NS/leases (POST) and .../leases/NAME
//               (GET, PUT, PATCH, DELETE), as the generic registry serves them with the lease
//               strategy (fake_api_server_leases.h has the detail):
//                 POST    201 with uid, creationTimestamp and resourceVersion; 400 a body that
//                         does not decode or names another namespace; 422 Invalid (no name nor
//                         generateName, a bad name, leaseDurationSeconds <= 0, leaseTransitions
//                         < 0); 500 a resourceVersion set; 409 AlreadyExists.
//                 GET     200, or 404 NotFound (details kind "leases", group coordination.k8s.io).
//                 PUT     metadata.resourceVersion required (422 when absent) and a precondition
//                         (409 Conflict "...the object has been modified; please apply your
//                         changes to the latest version and try again"); a uid in the body is a
//                         precondition too (409); an absent lease is created (201).
//                 PATCH   merge patch only (else 415); 404 when absent; a resourceVersion in the
//                         patch is the precondition (409 as PUT); a changed uid 422.
//                 DELETE  200 with a Success Status naming the lease (upstream returns no object
//                         for leases); DeleteOptions preconditions (uid, resourceVersion): 409.
//               An update or patch that changes nothing answers 200 and keeps the
//               resourceVersion. Bodies are stored as upstream decodes them: unknown fields
//               dropped, acquireTime / renewTime must be MicroTimes (six fractional digits; 400
//               otherwise) and are written back in UTC; a field of the wrong type is 400.
//   Store       one resourceVersion counter for all kinds (etcd's revision): every pod, node and
//               lease write takes the next one; the test-side calls below write through the same
//               path, so watches see them.
//   Faults      latency, "fail the next N" with any status (429 carries Retry-After), "drop" (the
//               connection is shut down, see DropMode), per-binding delay; each scoped by a
//               RequestMatch, for every route (leases included). CutWatches() breaks every open
//               watch mid-stream.
//   Records     every request (method, path, User-Agent, Authorization, body, status), every
//               binding request and every posted Event.
//
// Order in which a request is served: `timeout` parsed (400) -> authenticate (401) -> latency
// (504 at the deadline when it reaches it) -> injected failure or drop before apply, or handler
// -> record -> drop (the connection is shut down) or reply. Records are therefore complete by the
// time the client sees anything.
//
// Not imitated: other resources and verbs (unknown routes answer 404 Status, a known path with an
// unsupported verb too, where upstream says 405), lists and watches of leases, set-based label
// selectors, resourceVersionMatch, sendInitialEvents, watches from a resourceVersion newer than
// the store (upstream waits, then 504), JSON patch, strategic merge patch and apply (415 here),
// protobuf, API priority and fairness beyond the injected 429s, authorisation (403), admission
// (namespaces need not exist), dryRun, fieldValidation=Strict (unknown fields are always dropped,
// with no Warning header), managedFields, finalizers on delete, the validation of labels and
// annotations, a handler that overruns its deadline by itself (only injected latency times out).
//
// Simplified: a list with a resourceVersion other than "" and "0" is served like "" (latest,
// limit honoured); a page holds up to `limit` matching objects and has a continue token only when
// more matches remain (upstream may hand one out with none left); remainingItemCount only without
// selectors, as upstream; a watch's initial ERROR says "too old resource version: RV (C)" with C
// the compaction point, as the watch cache does; a binding without target.name answers 422; the
// deadline counts from when the handler starts (upstream: from when the request arrived); the
// texts of a lease body's decoding errors (400) follow upstream's form but not word for word;
// creationTimestamp and deletionTimestamp in a lease body are ignored.
//
// Thread-safety: every method may be called from any thread while the server runs; the
// test-side store calls are atomic with respect to HTTP requests. Stop() (also run by the
// destructor) returns once every connection has ended: open watches are cut, sleeping injected
// latencies wake up, idle keep-alive connections are shut down.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/test_pki.h"
#include "linkfit/common/result.h"

namespace linkfit::testing {

struct FakeApiServerOptions {
  bool tls = true;  // false: plain HTTP (url() says http://)
  // TLS only: a client certificate signed by the TestPki CA authenticates (CN = user). An
  // untrusted certificate fails the TLS handshake, as upstream's VerifyClientCertIfGiven does.
  bool accept_client_certificates = true;
  std::set<std::string> tokens = {"fake-token"};  // accepted bearer tokens
  bool allow_anonymous = false;                   // true: requests without credentials are served
  uint64_t initial_resource_version = 1000;
  size_t history_limit = 10000;    // watch events kept for resumption
  size_t max_list_snapshots = 64;  // paginated lists whose continue tokens stay valid
  std::chrono::milliseconds bookmark_interval{1000};
  std::chrono::seconds default_watch_timeout{1800};  // when a watch names no timeoutSeconds
  int worker_threads = 64;  // concurrent connections served (each open watch holds one)
  std::chrono::seconds keep_alive_timeout{5};
  // The server's --request-timeout (upstream's default, 60 s): the deadline of every request but
  // a watch, unless its `timeout` parameter asks for a shorter positive one.
  std::chrono::milliseconds request_timeout{60000};
};

// Which requests a fault or a count applies to: `method` ("" for any) and a substring of the
// path without the query ("" for any).
struct RequestMatch {
  std::string method;
  std::string path_substring;

  bool Matches(const std::string& request_method, const std::string& request_path) const {
    return (method.empty() || method == request_method) &&
           request_path.find(path_substring) != std::string::npos;
  }
};

// How a dropped request ends. Either way the server shuts the TCP connection down
// (shutdown(SHUT_RDWR)) without writing a single byte of the reply: the client sees the
// connection closed after sending its request, i.e. an unknown outcome (kube-api.md §1).
enum class DropMode {
  kBeforeApply,  // nothing is applied: the handler does not run
  kAfterApply,   // the handler runs (a binding lands, a patch applies) and its reply is lost
};

struct RecordedRequest {
  std::string method;
  std::string path;    // without the query
  std::string target;  // path and query as sent
  std::string user_agent;
  std::string authorization;  // the Authorization header as sent ("" when absent)
  std::string user;           // "token", "cert:CN", "anonymous", or "" when not authenticated
  std::string content_type;
  std::string body;
  int status = 0;  // the status answered; 0 when the connection was dropped
};

struct BindingRecord {
  std::string namespace_name;
  std::string pod_name;
  nlohmann::json body;  // the Binding as sent (null when it was not JSON)
  int status = 0;       // as in RecordedRequest
};

struct KubeconfigOptions {
  enum class Credential {
    kToken,              // user.token
    kTokenFile,          // user.tokenFile: the token is written to "token" beside the kubeconfig
    kClientCertificate,  // user.client-certificate(-data) + client-key(-data), the TestPki pair
    kNone,
  };
  Credential credential = Credential::kToken;
  std::string token;     // kToken / kTokenFile; "" uses the smallest accepted token
  bool embed_ca = true;  // certificate-authority-data (base64 PEM), else certificate-authority
  bool embed_client_certificate = true;   // *-data, else file paths
  bool relative_paths = false;            // file references relative to the kubeconfig's directory
  bool insecure_skip_tls_verify = false;  // writes insecure-skip-tls-verify: true and no CA
  std::string path;                       // "" writes work_dir()/kubeconfig
  std::string context = "fake";
  std::string namespace_name = "default";
};

class FakeApiServer {
 public:
  virtual ~FakeApiServer() = default;

  // Where it listens: "https://127.0.0.1:PORT" (or http://).
  virtual int port() const = 0;
  virtual std::string url() const = 0;
  // The CA and certificates (null for plain HTTP).
  virtual const TestPki* pki() const = 0;
  // A temporary directory owned by the server (kubeconfigs, token files, the PKI), removed with it.
  virtual const std::string& work_dir() const = 0;
  // Ends every connection and stops listening; idempotent.
  virtual void Stop() = 0;

  // Writes a kubeconfig for this server and returns its path.
  virtual Result<std::string> WriteKubeconfig(const KubeconfigOptions& options = {}) const = 0;

  // Authentication: the accepted bearer tokens, changeable at any time.
  virtual void SetTokens(std::set<std::string> tokens) = 0;
  virtual void AddToken(const std::string& token) = 0;
  virtual void RemoveToken(const std::string& token) = 0;

  // Store, test side. Each write takes the next resourceVersion and makes one watch event
  // (except a replacement equal to the stored object, which changes nothing, as upstream), and
  // returns the object as stored (a delete: its last state). Adds assign metadata.uid and
  // metadata.creationTimestamp when absent; a pod without a namespace goes to "default" and one
  // without status.phase is Pending. Replacements keep uid and creationTimestamp when absent.
  virtual Result<nlohmann::json> AddNode(nlohmann::json node) = 0;
  virtual Result<nlohmann::json> UpdateNode(nlohmann::json node) = 0;
  virtual Result<nlohmann::json> DeleteNode(const std::string& name) = 0;
  virtual Result<nlohmann::json> AddPod(nlohmann::json pod) = 0;
  virtual Result<nlohmann::json> UpdatePod(nlohmann::json pod) = 0;
  virtual Result<nlohmann::json> SetPodPhase(const std::string& namespace_name,
                                             const std::string& name, const std::string& phase) = 0;
  // Sets metadata.deletionTimestamp (and deletionGracePeriodSeconds 30): a MODIFIED event, as a
  // graceful delete makes before the kubelet confirms (nothing when it is already set).
  virtual Result<nlohmann::json> MarkPodTerminating(const std::string& namespace_name,
                                                    const std::string& name) = 0;
  virtual Result<nlohmann::json> DeletePod(const std::string& namespace_name,
                                           const std::string& name) = 0;
  virtual std::optional<nlohmann::json> GetPod(const std::string& namespace_name,
                                               const std::string& name) const = 0;
  virtual std::optional<nlohmann::json> GetNode(const std::string& name) const = 0;
  // Leases (coordination.k8s.io/v1) as stored, without kind/apiVersion (written over HTTP only).
  virtual std::optional<nlohmann::json> GetLease(const std::string& namespace_name,
                                                 const std::string& name) const = 0;
  virtual std::vector<nlohmann::json> Leases() const = 0;  // sorted by namespace/name
  virtual std::vector<nlohmann::json> Pods() const = 0;    // sorted by namespace/name
  virtual std::vector<nlohmann::json> Nodes() const = 0;   // sorted by name
  virtual std::string CurrentResourceVersion() const = 0;
  // Forgets the watch history and every list snapshot: watches from an older resourceVersion get
  // ERROR 410 and outstanding continue tokens answer 410 Expired (etcd compaction).
  virtual void Compact() = 0;

  // Watches.
  // Closes every open watch connection mid-stream (no final chunk), as a load balancer might.
  virtual void CutWatches() = 0;
  virtual size_t OpenWatches() const = 0;
  virtual size_t WatchRequests() const = 0;  // watch requests served since start
  // Returns once OpenWatches() == count, or false after `timeout`.
  virtual bool WaitForOpenWatches(size_t count, std::chrono::milliseconds timeout) const = 0;

  // Fault injection. Each setter takes effect for requests that arrive afterwards.
  // Delays matching requests by `latency` before anything else happens to them (the largest
  // matching latency applies); a zero latency removes the rule of the same match.
  virtual void SetLatency(std::chrono::milliseconds latency, const RequestMatch& match = {}) = 0;
  // Answers the next `count` matching requests with `status` and a Status body (reason from the
  // code: 429 TooManyRequests, 500 InternalError, 503 ServiceUnavailable, 409 Conflict, ...)
  // without handling them. A request that times out in its latency does not count (as for
  // DropNext). A positive `retry_after_seconds` adds `Retry-After` (and
  // details.retryAfterSeconds); a 429 always carries one (1 s when not given).
  virtual void FailNext(int count, int status, const RequestMatch& match = {},
                        int retry_after_seconds = 0) = 0;
  // Drops the next `count` matching requests (see DropMode); a request that times out in its
  // latency does not count.
  virtual void DropNext(int count, DropMode mode, const RequestMatch& match = {}) = 0;
  // Delays every binding before it is applied (SetLatency on POST .../binding).
  virtual void SetBindingDelay(std::chrono::milliseconds delay) = 0;
  virtual void ClearFaults() = 0;

  // Records.
  virtual std::vector<RecordedRequest> Requests() const = 0;
  virtual size_t CountRequests(const RequestMatch& match) const = 0;
  // Every POST .../binding received from an authenticated client, whatever its outcome.
  virtual std::vector<BindingRecord> Bindings() const = 0;
  virtual std::vector<nlohmann::json> PostedEvents() const = 0;
  virtual void ClearRecords() = 0;
};

using FakeApiServerPtr = std::unique_ptr<FakeApiServer>;

// Creates the PKI (when TLS), binds 127.0.0.1 on a free port and starts serving.
Result<FakeApiServerPtr> StartFakeApiServer(FakeApiServerOptions options = {});

// Minimal objects for tests: a pod (no node when `node_name` is empty) requesting nothing, and a
// node with no capacity. Callers add what they need.
nlohmann::json MakeFakePod(const std::string& namespace_name, const std::string& name,
                           const std::string& node_name = "");
nlohmann::json MakeFakeNode(const std::string& name);

}  // namespace linkfit::testing
