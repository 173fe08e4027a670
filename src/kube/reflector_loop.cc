// The Reflector's list/watch loop (reflector.h).
//
// Stopping: the loop's calls carry the reflector's own CancelToken, so Stop() cuts a list page
// or watch in progress without stopping the ApiClient, which others may share; a backoff sleeps
// on a condition variable that Stop() notifies.

#include <simdjson.h>

#include <cctype>
#include <random>
#include <thread>

#include "kube/json_reader.h"
#include "kube/watch_event.h"
#include "linkfit/common/log.h"
#include "linkfit/common/mutex.h"
#include "linkfit/kube/reflector.h"

namespace linkfit::kube {
namespace {

namespace od = simdjson::ondemand;

std::string UrlEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

enum class LineVerdict { kContinue, kGone, kFailed };

}  // namespace

struct Reflector::Impl {
  Impl(ApiClient& client_in, ReflectorSink& sink_in, ReflectorOptions options_in,
       ReflectorObserver* observer_in, Reflector& owner_in)
      : client(client_in),
        sink(sink_in),
        options(std::move(options_in)),
        observer(observer_in),
        owner(owner_in) {}

  ApiClient& client;
  ReflectorSink& sink;
  const ReflectorOptions options;
  ReflectorObserver* observer;
  Reflector& owner;

  std::thread thread;
  Mutex mutex;
  CondVar wake;
  bool stopping LINKFIT_GUARDED_BY(mutex) = false;
  bool started LINKFIT_GUARDED_BY(mutex) = false;
  std::string rv LINKFIT_GUARDED_BY(mutex);
  CancelToken cancel;  // cuts the loop's calls at Stop()
  std::mt19937_64 rng{std::random_device{}()};

  bool Stopping() {
    MutexLock lock(mutex);
    return stopping;
  }
  void SetRv(std::string value) {
    MutexLock lock(mutex);
    rv = std::move(value);
  }
  std::string Rv() {
    MutexLock lock(mutex);
    return rv;
  }
  // Sleeps for `delay` with up to 50 % jitter, or until Stop().
  void Sleep(std::chrono::milliseconds delay) {
    const auto jitter = std::chrono::milliseconds(
        delay.count() > 0
            ? static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(delay.count() / 2 + 1))
            : 0);
    const auto deadline = std::chrono::steady_clock::now() + delay + jitter;
    MutexLock lock(mutex);
    while (!stopping && wake.WaitUntil(mutex, deadline)) {
    }
  }
  void Error(const std::string& message) {
    log::Warning(options.kind + ": " + message);
    if (observer != nullptr) observer->ReflectorError(options.kind, message);
  }
  std::string Selectors() const {
    std::string query;
    if (!options.field_selector.empty()) {
      query += "&fieldSelector=" + UrlEncode(options.field_selector);
    }
    if (!options.label_selector.empty()) {
      query += "&labelSelector=" + UrlEncode(options.label_selector);
    }
    return query;
  }

  enum class ListResult { kDone, kRetry, kStopped };
  ListResult List();
  enum class WatchResult { kResume, kRelist, kBackoff, kStopped };
  WatchResult Watch(bool* delivered);
  LineVerdict HandleLine(std::string_view line, json::Scratch& line_scratch,
                         json::Scratch& rv_scratch, bool* delivered);
  void Run();
};

Reflector::Impl::ListResult Reflector::Impl::List() {
  sink.BeginList();
  std::string continue_token;
  // The pages' parser and padded buffer grow to a whole page (megabytes of nodes); they live for
  // one list only, so that a watching reflector does not keep them (issue 11).
  json::Scratch scratch;
  while (true) {
    if (Stopping()) return ListResult::kStopped;
    std::string path = options.path + "?limit=" + std::to_string(options.page_size) + Selectors();
    if (!continue_token.empty()) path += "&continue=" + UrlEncode(continue_token);
    auto reply = client.Get(path, "list", &cancel);
    if (!reply) {
      if (Stopping()) return ListResult::kStopped;
      Error("list failed: " + reply.error().message);
      return ListResult::kRetry;
    }
    if (reply->status == 410 && !continue_token.empty()) {
      // The continue token expired (compaction): start the list over at once. (A 410 on a first
      // page has no token to blame: it backs off as an error below.)
      if (observer != nullptr) observer->Relist(options.kind, "gone");
      sink.BeginList();
      continue_token.clear();
      continue;
    }
    if (reply->status != 200) {
      Error("list answered " + std::to_string(reply->status) + ": " + StatusMessage(reply->body));
      return ListResult::kRetry;
    }
    json::Ctx c;
    od::document doc;
    std::string list_rv;
    std::string next;
    std::size_t items = 0;
    const bool ok =
        json::Open(c, reply->body, &doc, scratch, "list") &&
        json::ReadEnvelope(
            c, doc,
            [&](std::string_view key, od::value& value) {
              if (key == "metadata") {
                return json::ForEachField(c, value, "metadata", true,
                                          [&](std::string_view mkey, od::value& mvalue) {
                                            if (mkey == "resourceVersion") {
                                              return json::ReadString(c, mvalue, "rv", &list_rv);
                                            }
                                            if (mkey == "continue") {
                                              return json::ReadString(c, mvalue, "continue", &next);
                                            }
                                            return json::Skip(c, mvalue, 2, "metadata");
                                          });
              }
              if (key == "items") {
                return json::ForEachElement(c, value, "items", [&](std::size_t, od::value& item) {
                  od::object object;
                  std::string_view raw;
                  if (item.get_object().get(object) != simdjson::SUCCESS ||
                      object.raw_json().get(raw) != simdjson::SUCCESS) {
                    return json::Fail(c, "items: an item is not an object");
                  }
                  sink.ListItem(raw);
                  ++items;
                  return true;
                });
              }
              return json::Skip(c, value, 1, "list");
            },
            "list");
    if (!ok) {
      Error("list page does not parse: " + c.error);
      return ListResult::kRetry;
    }
    if (next.empty()) {
      SetRv(list_rv);
      sink.EndList(list_rv);
      return ListResult::kDone;
    }
    continue_token = next;
  }
}

// Handles one line of a watch: {"type":...,"object":{...}}. `line_scratch` holds the line's parse
// (the object's bytes live there while the sink reads them); `rv_scratch` the second, short
// parse for the object's resourceVersion.
LineVerdict Reflector::Impl::HandleLine(std::string_view line, json::Scratch& line_scratch,
                                        json::Scratch& rv_scratch, bool* delivered) {
  const Result<WatchLine> decoded = DecodeWatchLine(line, line_scratch);
  if (!decoded) {
    Error(decoded.error().message);
    return LineVerdict::kFailed;
  }
  const std::string_view type = decoded->type;
  const std::string_view raw = decoded->object_json;
  if (observer != nullptr) observer->WatchEvent(options.kind, type);
  if (type == "ERROR") {
    if (StatusIsGone(raw)) return LineVerdict::kGone;
    Error("watch ERROR event: " + StatusMessage(raw));
    return LineVerdict::kFailed;
  }
  WatchEventType kind = WatchEventType::kModified;
  if (type == "ADDED") {
    kind = WatchEventType::kAdded;
  } else if (type == "DELETED") {
    kind = WatchEventType::kDeleted;
  } else if (type != "MODIFIED" && type != "BOOKMARK") {
    Error("unknown watch event type " + std::string(type));
    return LineVerdict::kContinue;
  }
  *delivered = true;  // the connection is healthy, a bookmark included
  // The resume point moves before the sink sees the event, so that last_resource_version() is
  // never behind what the sink holds.
  std::string object_rv = ResourceVersionIn(raw, rv_scratch);
  if (!object_rv.empty()) SetRv(std::move(object_rv));
  if (type != "BOOKMARK") sink.Event(kind, raw);
  return LineVerdict::kContinue;
}

Reflector::Impl::WatchResult Reflector::Impl::Watch(bool* delivered) {
  const int timeout = options.watch_timeout_seconds +
                      static_cast<int>(rng() % static_cast<std::uint64_t>(
                                                   std::max(1, options.watch_timeout_seconds)));
  const std::string path = options.path + "?watch=1&resourceVersion=" + UrlEncode(Rv()) +
                           "&allowWatchBookmarks=true&timeoutSeconds=" + std::to_string(timeout) +
                           Selectors();
  LineVerdict verdict = LineVerdict::kContinue;
  std::string error_body;
  json::Scratch line_scratch;
  json::Scratch rv_scratch;
  auto result = client.Watch(
      path,
      [&](std::string_view line) {
        if (Stopping()) return false;
        verdict = HandleLine(line, line_scratch, rv_scratch, delivered);
        return verdict == LineVerdict::kContinue;
      },
      options.watch_idle_timeout, &error_body, &cancel);
  const bool gone = verdict == LineVerdict::kGone;
  const bool failed = verdict == LineVerdict::kFailed;
  if (Stopping()) return WatchResult::kStopped;
  if (gone) return WatchResult::kRelist;  // Run() counts the relist
  if (failed) return WatchResult::kBackoff;
  if (!result) {
    Error("watch ended: " + result.error().message);
    return WatchResult::kBackoff;
  }
  if (*result == 410) return WatchResult::kRelist;
  if (*result != 200) {
    Error("watch answered " + std::to_string(*result) + ": " + StatusMessage(error_body));
    return WatchResult::kBackoff;
  }
  return WatchResult::kResume;
}

void Reflector::Impl::Run() {
  std::chrono::milliseconds backoff = options.initial_backoff;
  bool need_list = true;
  const char* reason = "initial";
  while (!Stopping()) {
    if (need_list) {
      if (observer != nullptr) observer->Relist(options.kind, reason);
      const ListResult listed = List();
      if (listed == ListResult::kStopped) return;
      if (listed == ListResult::kRetry) {
        reason = "error";
        Sleep(backoff);
        backoff = std::min(options.max_backoff, backoff * 2);
        continue;
      }
      // Counted once List() has returned and freed its pages and parser, so that whoever waits
      // for synced() (ClusterSource's ready hook trims malloc) finds them freed.
      owner.lists_++;
      owner.synced_ = true;
      need_list = false;
      backoff = options.initial_backoff;
    }
    bool delivered = false;
    const auto watch_began = std::chrono::steady_clock::now();
    const WatchResult watched = Watch(&delivered);
    if (delivered) backoff = options.initial_backoff;
    switch (watched) {
      case WatchResult::kStopped:
        return;
      case WatchResult::kRelist:
        need_list = true;
        reason = "gone";
        break;
      case WatchResult::kResume:
        // A clean end: resume at once, unless the watch closed within a second having delivered
        // nothing, which client-go also treats as an error ("very short watch": a broken proxy
        // or a server that refuses at once would otherwise be hammered).
        if (!delivered &&
            std::chrono::steady_clock::now() - watch_began < std::chrono::seconds(1)) {
          Sleep(backoff);
          backoff = std::min(options.max_backoff, backoff * 2);
        }
        break;
      case WatchResult::kBackoff:
        Sleep(backoff);
        backoff = std::min(options.max_backoff, backoff * 2);
        break;
    }
  }
}

Reflector::Reflector(ApiClient& client, ReflectorSink& sink, ReflectorOptions options,
                     ReflectorObserver* observer)
    : impl_(std::make_unique<Impl>(client, sink, std::move(options), observer, *this)) {}

Reflector::~Reflector() { Stop(); }

void Reflector::Start() {
  MutexLock lock(impl_->mutex);
  if (impl_->started) return;
  impl_->started = true;
  impl_->thread = std::thread([this] { impl_->Run(); });
}

void Reflector::Stop() {
  {
    MutexLock lock(impl_->mutex);
    if (impl_->stopping) return;
    impl_->stopping = true;
  }
  impl_->wake.NotifyAll();
  impl_->cancel.Cancel();  // cuts a list page or watch in progress; the client stays usable
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::string Reflector::last_resource_version() const {
  MutexLock lock(impl_->mutex);
  return impl_->rv;
}

}  // namespace linkfit::kube
