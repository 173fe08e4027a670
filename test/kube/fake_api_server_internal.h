#pragma once

// The fake API server's private pieces (fake_api_server.h is the public surface):
//   fake_api_server_util.cc   selectors, Status bodies, base64, sockets, the kubeconfig writer,
//                             Go's parsers (durations, MicroTimes, ParseUint)
//   fake_api_server_store.cc  FakeStore
//   fake_api_server_leases.*  FakeLeases (coordination.k8s.io/v1 Leases)
//   fake_api_server.cc        HTTP: routes, authentication, fault injection, watch streaming
//
// FakeStore: the storage half of the fake API server (fake_api_server.h): pods and nodes as JSON,
// one resourceVersion counter shared by every kind (etcd's revision), a bounded history of watch
// events, list snapshots for continue tokens, and the write paths whose semantics matter to
// linkfit (binding, merge patch). It knows nothing about HTTP beyond the status codes and the
// metav1.Status bodies it returns.
//
//   resourceVersion  every create, update and delete takes the next value and stamps
//                    metadata.resourceVersion; a no-op update takes none.
//   history          the last `history_limit` events; the revision below the oldest one is the
//                    compaction point. A watch or a continue token from before it is expired.
//   Compact()        forgets the whole history and every list snapshot.
//
// Thread-safety: every method may be called concurrently; one mutex guards the state and a
// condition variable wakes the watch streams blocked in WaitWatch().

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/fake_api_server.h"
#include "kube/test_pki.h"
#include "linkfit/common/result.h"

namespace linkfit::testing::fake_internal {

using nlohmann::json;

enum class Kind { kPod, kNode };

// "Pod" / "Node".
const char* KindName(Kind kind);

// One term of a field or label selector.
struct Requirement {
  enum class Op { kEquals, kNotEquals, kExists, kNotExists };
  std::string key;
  Op op = Op::kEquals;
  std::string value;
};

// A parsed fieldSelector + labelSelector (AND of every term), plus the namespace of a namespaced
// URL (a key prefix upstream, so it does not count as a selector for remainingItemCount).
struct Selector {
  std::vector<Requirement> fields;
  std::vector<Requirement> labels;
  std::string namespace_name;

  bool HasTerms() const { return !fields.empty() || !labels.empty(); }
  bool Matches(const json& object) const;
};

// Parses `field_selector` ("spec.nodeName=a,status.phase!=Succeeded"; =, == and !=) and
// `label_selector` ("app=x,tier!=y,key,!key"); fields a kind does not support and set-based
// label terms are errors.
Result<Selector> ParseSelector(Kind kind, const std::string& field_selector,
                               const std::string& label_selector);

// An HTTP answer: the status and a JSON body.
struct Reply {
  int status = 200;
  std::string body;
};

// Returns a metav1.Status failure body.
std::string StatusBody(int code, const std::string& reason, const std::string& message,
                       const json& details = json::object());
Reply StatusReply(int code, const std::string& reason, const std::string& message,
                  const json& details = json::object());

// The 415 of a PATCH whose media type is not application/merge-patch+json.
Reply UnsupportedPatchType();

// The "now" of metadata timestamps, RFC 3339 in UTC.
std::string NowRfc3339();

// Standard base64 (with padding), or URL-safe without padding when `url` (continue tokens).
std::string Base64Encode(const std::string& data, bool url = false);
std::optional<std::string> Base64Decode(const std::string& text);

// Returns `object` serialised with "kind" and "apiVersion":"v1" first, as the API server writes a
// single object (stored objects keep neither, as list items carry neither).
std::string WithKind(Kind kind, const json& object);

struct ListRequest {
  Selector selector;
  int64_t limit = 0;  // 0: no limit
  std::string continue_token;
  std::string resource_version;  // "0": any freshness, limit ignored
};

// Where a watch stream stands; owned by the stream, advanced by WaitWatch.
struct WatchCursor {
  Kind kind = Kind::kPod;
  Selector selector;
  uint64_t resource_version = 0;  // the last revision this stream has passed
  uint64_t cut_generation = 0;
  bool bookmarks = false;
  std::chrono::milliseconds bookmark_interval{1000};
  std::chrono::steady_clock::time_point next_bookmark;
  std::chrono::steady_clock::time_point deadline;
};

// What a watch stream writes next: JSON lines, then whether the stream ends cleanly (`end`) or is
// cut (`abort`: the connection is closed without the final chunk).
struct WatchBatch {
  std::string lines;
  bool end = false;
  bool abort = false;
};

// Returns `text` in double quotes as Go's time package quotes it in its errors: '"' and '\\'
// escaped, every byte outside printable ASCII as \xNN.
std::string GoQuote(const std::string& text);

// Parses a Go duration as time.ParseDuration does ("5s", "1500ms", "1m30s", ".5h", "-2s", "0"),
// or returns its error message ("time: invalid duration \"soon\"", "time: missing unit in
// duration \"5\"", "time: unknown unit \"x\" in duration \"5x\"").
Result<std::chrono::nanoseconds> ParseGoDuration(const std::string& text);

// strconv.ParseUint(text, 10, 64), or its error message ("strconv.ParseUint: parsing \"x\":
// invalid syntax"): how the registry reads a resourceVersion.
Result<uint64_t> ParseGoUint(const std::string& text);

// Parses a metav1.MicroTime as its UnmarshalJSON does (time.Parse with RFC3339Micro,
// "2006-01-02T15:04:05.000000Z07:00": exactly six fractional digits) and returns it as its
// MarshalJSON writes it, in UTC; or time.ParseError's message ("parsing time \"...\" as
// \"2006-01-02T15:04:05.000000Z07:00\": cannot parse \"Z\" as \".000000\"").
Result<std::string> ParseMicroTime(const std::string& text);

// The reason upstream gives a status code (k8s.io/apimachinery/pkg/api/errors), "Unknown" for
// codes it has none for.
const char* ReasonForCode(int code);

// Returns the media type of a Content-Type, lower case ("application/merge-patch+json;
// charset=utf-8" -> "application/merge-patch+json").
std::string MediaType(const std::string& content_type);

// Returns this process's connected sockets whose local port is `local_port` and, when
// `remote_port` is not negative, whose peer port is `remote_port`: the server side of
// connections to a server on `local_port` (httplib does not hand its sockets to handlers).
// Scans /proc/self/fd.
std::vector<int> FindServerSockets(int local_port, int remote_port);

// Writes the kubeconfig of FakeApiServer::WriteKubeconfig and returns its path.
Result<std::string> WriteKubeconfigFile(const KubeconfigOptions& options, const std::string& url,
                                        const TestPki* pki, const std::string& default_token,
                                        const std::string& work_dir);

class FakeStore {
 public:
  FakeStore(uint64_t initial_resource_version, size_t history_limit, size_t max_snapshots);

  // Test-side writes. Each returns the stored object as it now is (for a delete: its last state).
  Result<json> Create(Kind kind, json object);
  Result<json> Replace(Kind kind, json object);
  // Applies `mutate` to a copy of the object and stores it (no event when nothing changed).
  Result<json> Mutate(Kind kind, const std::string& key, const std::function<void(json&)>& mutate);
  Result<json> Delete(Kind kind, const std::string& key);

  std::optional<json> Get(Kind kind, const std::string& key) const;
  std::vector<json> All(Kind kind) const;
  uint64_t CurrentResourceVersion() const;
  void Compact();
  // Takes a revision for an object this store does not keep (a posted Event).
  uint64_t NextResourceVersion();
  std::string NewUid();

  // HTTP-side operations.
  Reply List(Kind kind, const ListRequest& request);
  Reply GetOne(Kind kind, const std::string& key) const;
  Reply Bind(const std::string& namespace_name, const std::string& name, const json& binding);
  Reply PatchNode(const std::string& name, const json& patch);

  // Watches. StartWatch fills `cursor` and returns the first lines (the synthetic ADDED events
  // of a resourceVersion "0" or "" watch, or the single ERROR of an expired one).
  // A resourceVersion that is not a revision is an error (400).
  Result<WatchBatch> StartWatch(const std::string& resource_version, WatchCursor& cursor);
  // Blocks until there is something to send, the stream should end, or `max_wait` passed (then
  // returns an empty batch so that the caller can check its connection).
  WatchBatch WaitWatch(WatchCursor& cursor, std::chrono::milliseconds max_wait);
  void CutWatches();
  // Ends every watch (server stop).
  void Shutdown();

 private:
  struct Event {
    uint64_t resource_version;
    Kind kind;
    std::string type;  // ADDED, MODIFIED, DELETED
    json object;       // the new state (DELETED: the last state, at the delete's revision)
    json previous;     // the state before (null for ADDED)
  };
  struct Snapshot {
    uint64_t resource_version;
    Kind kind;
    std::vector<json> items;  // every object of the kind at that revision, sorted by key
  };

  std::map<std::string, json>& Objects(Kind kind);
  const std::map<std::string, json>& Objects(Kind kind) const;
  // Stamps the next revision on `object`, stores it under `key` (erases it for DELETED), records
  // the event, wakes the watches and returns the stored object. REQUIRES: mutex_ held.
  json CommitLocked(Kind kind, const std::string& key, const std::string& type, json object,
                    json previous);
  // Drops kind/apiVersion, checks metadata.name, defaults a pod's namespace to "default", and
  // returns the store key. REQUIRES: mutex_ held.
  Result<std::string> KeyOfLocked(Kind kind, json& object);
  std::string NewUidLocked();
  void DropExpiredSnapshotsLocked();
  // One line of a watch stream each. REQUIRES (ExpiredLine): mutex_ held.
  std::string EventLine(const std::string& type, Kind kind, const json& object) const;
  std::string BookmarkLine(Kind kind, uint64_t resource_version) const;
  std::string ExpiredLine(uint64_t requested) const;

  const size_t history_limit_;
  const size_t max_snapshots_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t resource_version_;               // GUARDED_BY(mutex_)
  uint64_t compacted_;                      // GUARDED_BY(mutex_)
  std::map<std::string, json> pods_;        // GUARDED_BY(mutex_), key "namespace/name"
  std::map<std::string, json> nodes_;       // GUARDED_BY(mutex_), key name
  std::deque<Event> history_;               // GUARDED_BY(mutex_)
  std::map<uint64_t, Snapshot> snapshots_;  // GUARDED_BY(mutex_), by id
  uint64_t next_snapshot_id_ = 1;           // GUARDED_BY(mutex_)
  uint64_t cut_generation_ = 0;             // GUARDED_BY(mutex_)
  bool shutting_down_ = false;              // GUARDED_BY(mutex_)
  std::mt19937_64 random_;                  // GUARDED_BY(mutex_)
};

}  // namespace linkfit::testing::fake_internal
