#pragma once

// Reflector: keeps a sink in step with one kind of object on the API server, as client-go's
// reflector does (../shared/spec/kube-api.md §2, §3):
//
//        +--------------------------------------------------------------+
//        v                                                              |
//   list (paginated: limit + continue; 410 on a token -> start over)    | 410 Gone (status or
//        |  BeginList, ListItem..., EndList(rv)                         | ERROR event), or a
//        v                                                              | list/watch error
//   watch from rv (allowWatchBookmarks, timeoutSeconds)  --------------+ (after backoff)
//        |  Event(ADDED|MODIFIED|DELETED), bookmarks advance rv
//        +-- the stream ends cleanly: watch again from the last rv seen
//
// Errors back off exponentially with jitter (initial_backoff doubling to max_backoff, reset
// after a watch that delivered something). The reflector does not interpret objects beyond
// metadata.resourceVersion; the sink decodes them and, at EndList, removes what it holds that
// the list did not contain (the deletions a cut watch missed), as client-go's Replace does.
//
// Thread-safety: Start() runs the loop on its own thread; the sink is called from that thread
// only, never concurrently. Stop() may be called from any thread and joins the loop; it cuts the
// reflector's own list or watch in progress (through a CancelToken, api_client.h) and leaves the
// ApiClient usable, so one client may serve several reflectors and other callers.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "linkfit/kube/api_client.h"

namespace linkfit::kube {

enum class WatchEventType { kAdded, kModified, kDeleted };

class ReflectorSink {
 public:
  virtual ~ReflectorSink() = default;
  // A list starts (the first, or a relist); the objects follow. A list that fails part-way is
  // started again with another BeginList.
  virtual void BeginList() = 0;
  // One listed object's JSON (valid during the call only).
  virtual void ListItem(std::string_view object_json) = 0;
  // The list is complete as of `resource_version`; objects not listed since BeginList are gone.
  virtual void EndList(std::string_view resource_version) = 0;
  // One watch event's object JSON (valid during the call only).
  virtual void Event(WatchEventType type, std::string_view object_json) = 0;
};

// Progress and problem counts for metrics (thread-safe implementations).
class ReflectorObserver {
 public:
  virtual ~ReflectorObserver() = default;
  virtual void WatchEvent(std::string_view kind, std::string_view type) = 0;  // incl. BOOKMARK
  virtual void Relist(std::string_view kind,
                      std::string_view reason) = 0;  // "initial", "gone", "error"
  // A list or watch error; the reflector has already logged it (observers count, not log).
  virtual void ReflectorError(std::string_view kind, std::string_view message) = 0;
};

struct ReflectorOptions {
  std::string kind;            // "pods", "nodes": metrics label and log prefix
  std::string path;            // "/api/v1/pods"
  std::string field_selector;  // optional, e.g. "status.phase!=Succeeded"
  std::string label_selector;  // optional
  int page_size = 500;
  // The server ends each watch after timeoutSeconds (randomised by up to the same again, as
  // client-go does, so replicas do not reconnect in step).
  int watch_timeout_seconds = 300;
  // No byte (event or bookmark) within this long: the connection is presumed dead.
  std::chrono::milliseconds watch_idle_timeout{std::chrono::seconds(150)};
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{std::chrono::seconds(30)};
};

class Reflector {
 public:
  // `client`, `sink` and `observer` (may be null) must outlive the reflector. `client` may be
  // shared.
  Reflector(ApiClient& client, ReflectorSink& sink, ReflectorOptions options,
            ReflectorObserver* observer = nullptr);
  ~Reflector();  // stops
  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  // Starts the list/watch loop on a new thread. REQUIRES: called at most once.
  void Start();
  // Stops the loop (a list or watch in progress is cut, a backoff wait ends) and joins it.
  // Idempotent.
  void Stop();

  // True once a first list has completed (EndList was called).
  bool synced() const { return synced_.load(); }
  // The resource version the next watch would start from ("" before the first list).
  std::string last_resource_version() const;
  std::uint64_t lists_completed() const { return lists_.load(); }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> synced_{false};
  std::atomic<std::uint64_t> lists_{0};
};

}  // namespace linkfit::kube
