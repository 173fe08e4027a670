// The fake API server's lists and watch streams (fake_api_server.h): selectors, paginated lists,
// watches from a resourceVersion with bookmarks, timeouts and a check that the client is still
// there.

#include <poll.h>

#include <cstdlib>
#include <memory>

#include "kube/fake_api_server_impl.h"

namespace linkfit::testing::fake_impl {

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

}  // namespace linkfit::testing::fake_impl
