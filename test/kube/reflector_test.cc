// The reflector against a scripted API server on 127.0.0.1:0: each request is answered by the
// next step of a script (list pages, watch streams that end cleanly, are cut or hang, 410s as
// statuses and as ERROR events), and the test asserts the exact sequence of sink calls and the
// resourceVersion, continue token and selectors of every request.

#include "linkfit/kube/reflector.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "linkfit/kube/api_client.h"

namespace linkfit::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// One request the scripted server answered.
struct Request {
  std::string target;                         // as sent (query still encoded)
  std::map<std::string, std::string> params;  // decoded by the server
  bool watch() const { return params.count("watch") != 0; }
  std::string param(const std::string& key) const {
    const auto it = params.find(key);
    return it == params.end() ? "<absent>" : it->second;
  }
};

// How a scripted watch stream ends after its lines.
enum class StreamEnd { kClean, kCut, kHang };

// An API server for one path whose n-th request is answered by the n-th step; requests past the
// script hang (as a quiet watch does) until the server is destroyed.
class ScriptedApi {
 public:
  using Step = std::function<void(httplib::Response&)>;

  explicit ScriptedApi(std::string path) : path_(std::move(path)) {}
  ~ScriptedApi() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      released_ = true;
    }
    changed_.notify_all();
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  void Add(Step step) { steps_.push_back(std::move(step)); }

  // A list page: the objects named (each with its resourceVersion), the list's resourceVersion
  // and continue token.
  void AddPage(const std::vector<std::pair<std::string, std::string>>& items, const std::string& rv,
               const std::string& continue_token = "") {
    nlohmann::json list = {{"kind", "PodList"},
                           {"apiVersion", "v1"},
                           {"metadata", {{"resourceVersion", rv}}},
                           {"items", nlohmann::json::array()}};
    if (!continue_token.empty()) list["metadata"]["continue"] = continue_token;
    for (const auto& [name, item_rv] : items) list["items"].push_back(Object(name, item_rv));
    const std::string body = list.dump();
    Add([body](httplib::Response& res) { res.set_content(body, "application/json"); });
  }

  // A reply with a metav1.Status.
  void AddStatus(int code, const std::string& reason) {
    const std::string body = StatusJson(code, reason);
    Add([code, body](httplib::Response& res) {
      res.status = code;
      res.set_content(body, "application/json");
    });
  }

  // A watch stream: one line per event, then the end.
  void AddStream(std::vector<std::string> lines, StreamEnd end) {
    Add([this, lines = std::move(lines), end](httplib::Response& res) {
      res.set_chunked_content_provider(
          "application/json", [this, lines, end](size_t, httplib::DataSink& sink) {
            for (const std::string& line : lines) {
              const std::string text = line + "\n";
              if (!sink.write(text.data(), text.size())) return false;
            }
            if (end == StreamEnd::kClean) {
              sink.done();
              return true;
            }
            if (end == StreamEnd::kHang) WaitReleased(sink);
            return false;  // ends the connection without the last chunk: a cut stream
          });
    });
  }

  // A watch that sends nothing until the server is destroyed.
  void AddQuiet() {
    Add([this](httplib::Response& res) { AddStreamTo(res); });
  }

  // A watch that sends `lines` once OpenGate() is called, then nothing.
  void AddGatedStream(std::vector<std::string> lines) {
    Add([this, lines = std::move(lines)](httplib::Response& res) {
      res.set_chunked_content_provider(
          "application/json", [this, lines](size_t, httplib::DataSink& sink) {
            {
              std::unique_lock<std::mutex> lock(mutex_);
              changed_.wait_for(lock, seconds(20), [&] { return gate_open_ || released_; });
            }
            for (const std::string& line : lines) {
              const std::string text = line + "\n";
              if (!sink.write(text.data(), text.size())) return false;
            }
            WaitReleased(sink);
            return false;
          });
    });
  }
  void OpenGate() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      gate_open_ = true;
    }
    changed_.notify_all();
  }

  void Start() {
    server_.Get(path_, [this](const httplib::Request& req, httplib::Response& res) {
      Request request{req.target, {}};
      for (const auto& [key, value] : req.params) request.params[key] = value;
      std::size_t index = 0;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        index = requests_.size();
        requests_.push_back(std::move(request));
      }
      changed_.notify_all();
      if (index < steps_.size()) {
        steps_[index](res);
      } else {
        AddStreamTo(res);
      }
    });
    server_.Get("/healthz", [](const httplib::Request&, httplib::Response&) {});
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  std::vector<Request> requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }
  bool WaitForRequests(std::size_t count) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, seconds(20), [&] { return requests_.size() >= count; });
  }

  static nlohmann::json Object(const std::string& name, const std::string& rv) {
    return {{"metadata", {{"name", name}, {"namespace", "ml"}, {"resourceVersion", rv}}},
            {"spec", {{"nodeName", "n1"}}}};
  }
  static std::string Event(const std::string& type, const std::string& name,
                           const std::string& rv) {
    return nlohmann::json{{"type", type}, {"object", Object(name, rv)}}.dump();
  }
  static std::string Bookmark(const std::string& rv) {
    return nlohmann::json{
        {"type", "BOOKMARK"},
        {"object",
         {{"kind", "Pod"},
          {"apiVersion", "v1"},
          {"metadata", {{"resourceVersion", rv}, {"creationTimestamp", nullptr}}}}}}
        .dump();
  }
  static std::string StatusJson(int code, const std::string& reason) {
    nlohmann::json status = {{"kind", "Status"},
                             {"apiVersion", "v1"},
                             {"metadata", nlohmann::json::object()},
                             {"status", "Failure"},
                             {"message", "scripted " + reason},
                             {"reason", reason}};
    if (code != 0) status["code"] = code;
    return status.dump();
  }
  static std::string ErrorEvent(int code, const std::string& reason) {
    return R"({"type":"ERROR","object":)" + StatusJson(code, reason) + "}";
  }

 private:
  void AddStreamTo(httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [this](size_t, httplib::DataSink& sink) {
      WaitReleased(sink);
      return false;
    });
  }
  // Returns when the server is being destroyed or the client went away.
  void WaitReleased(httplib::DataSink& sink) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (int i = 0; i < 2000 && !released_ && sink.is_writable(); ++i) {
      changed_.wait_for(lock, milliseconds(10));
    }
  }

  const std::string path_;
  std::vector<Step> steps_;  // set before Start()
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Request> requests_;
  bool released_ = false;
  bool gate_open_ = false;
};

// Records the sink calls as text: "begin", "item NAME", "end RV", "ADDED NAME", ...
class RecordingSink final : public ReflectorSink {
 public:
  void BeginList() override { Add("begin"); }
  void ListItem(std::string_view json) override { Add("item " + Name(json)); }
  void EndList(std::string_view rv) override { Add("end " + std::string(rv)); }
  void Event(WatchEventType type, std::string_view json) override {
    static constexpr const char* kNames[] = {"ADDED", "MODIFIED", "DELETED"};
    Add(std::string(kNames[static_cast<int>(type)]) + " " + Name(json));
    std::lock_guard<std::mutex> lock(mutex_);
    last_event_json_ = std::string(json);
  }

  std::vector<std::string> calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }
  std::string last_event_json() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_event_json_;
  }
  bool WaitFor(const std::string& call) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, seconds(20), [&] {
      return std::find(calls_.begin(), calls_.end(), call) != calls_.end();
    });
  }

 private:
  static std::string Name(std::string_view json) {
    const auto object = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
    if (object.is_discarded()) return "<not JSON>";
    return object["metadata"].value("name", "<no name>");
  }
  void Add(std::string call) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      calls_.push_back(std::move(call));
    }
    changed_.notify_all();
  }
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> calls_;
  std::string last_event_json_;
};

class RecordingObserver final : public ReflectorObserver {
 public:
  void WatchEvent(std::string_view kind, std::string_view type) override {
    Add(&events_, std::string(kind) + " " + std::string(type));
  }
  void Relist(std::string_view kind, std::string_view reason) override {
    Add(&relists_, std::string(kind) + " " + std::string(reason));
  }
  void ReflectorError(std::string_view kind, std::string_view) override {
    Add(&errors_, std::string(kind));
  }
  std::vector<std::string> events() const { return Get(events_); }
  std::vector<std::string> relists() const { return Get(relists_); }
  std::size_t errors() const { return Get(errors_).size(); }

 private:
  void Add(std::vector<std::string>* list, std::string entry) {
    std::lock_guard<std::mutex> lock(mutex_);
    list->push_back(std::move(entry));
  }
  std::vector<std::string> Get(const std::vector<std::string>& list) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return list;
  }
  mutable std::mutex mutex_;
  std::vector<std::string> events_;
  std::vector<std::string> relists_;
  std::vector<std::string> errors_;
};

ApiClientPtr Client(const std::string& url) {
  ClientConfig config;
  config.server = url;
  config.qps = 0;
  config.timeout = seconds(5);
  config.source = "test";
  auto client = NewApiClient(config);
  EXPECT_TRUE(client.has_value()) << client.error().message;
  return client ? std::move(*client) : nullptr;
}

ReflectorOptions Options() {
  ReflectorOptions options;
  options.kind = "pods";
  options.path = "/api/v1/pods";
  options.page_size = 2;
  options.watch_timeout_seconds = 300;
  options.watch_idle_timeout = seconds(30);
  options.initial_backoff = milliseconds(1);
  options.max_backoff = milliseconds(4);
  return options;
}

TEST(ReflectorTest, ListsWatchesResumesAndRelistsExactlyAsScripted) {
  ScriptedApi api("/api/v1/pods");
  using S = ScriptedApi;
  api.AddPage({{"a", "10"}, {"b", "11"}}, "12", "c1");                           // 1
  api.AddPage({{"c", "12"}}, "12");                                              // 2
  api.AddStream({S::Event("ADDED", "d", "13"), S::Event("MODIFIED", "a", "14"),  // 3
                 S::Bookmark("20"), S::Event("DELETED", "b", "21")},
                StreamEnd::kClean);
  api.AddStream({S::ErrorEvent(410, "Expired")}, StreamEnd::kClean);  // 4
  api.AddPage({{"a", "14"}, {"c", "12"}}, "30", "c2");                // 5
  api.AddStatus(410, "Expired");                                      // 6
  api.AddPage({{"a", "14"}, {"c", "12"}}, "31", "c3");                // 7
  api.AddPage({{"d", "13"}}, "31");                                   // 8
  api.AddStream({S::Event("ADDED", "e", "32")}, StreamEnd::kCut);     // 9
  api.AddStatus(500, "InternalError");                                // 10
  api.AddStatus(410, "Gone");                                         // 11
  api.AddPage({{"a", "14"}}, "40");                                   // 12
  api.Start();                                                        // 13 on: a quiet watch
  ApiClientPtr client = Client(api.url());
  RecordingSink sink;
  RecordingObserver observer;
  ReflectorOptions options = Options();
  options.field_selector = "spec.nodeName!=,status.phase!=Succeeded";
  options.label_selector = "app in (a,b)";
  Reflector reflector(*client, sink, options, &observer);
  EXPECT_FALSE(reflector.synced());
  EXPECT_EQ(reflector.last_resource_version(), "");
  reflector.Start();
  ASSERT_TRUE(api.WaitForRequests(13));
  ASSERT_TRUE(sink.WaitFor("end 40"));

  EXPECT_EQ(sink.calls(), (std::vector<std::string>{
                              "begin",   "item a",     "item b",    "item c", "end 12",  // 1-2
                              "ADDED d", "MODIFIED a", "DELETED b",                      // 3
                              "begin",   "item a",     "item c",                         // 4-5
                              "begin",   "item a",     "item c",    "item d", "end 31",  // 6-8
                              "ADDED e",                                                 // 9
                              "begin",   "item a",     "end 40"}));                      // 10-12
  // The object handed over is the event's object, byte for byte.
  EXPECT_EQ(sink.last_event_json(), ScriptedApi::Object("e", "32").dump());

  const std::vector<Request> requests = api.requests();
  ASSERT_GE(requests.size(), 13u);
  struct Expected {
    bool watch;
    std::string resource_version;  // "<absent>" for lists
    std::string continue_token;
  };
  const std::vector<Expected> expected = {
      {false, "<absent>", "<absent>"}, {false, "<absent>", "c1"},        // 1-2
      {true, "12", "<absent>"},        {true, "21", "<absent>"},         // 3-4
      {false, "<absent>", "<absent>"}, {false, "<absent>", "c2"},        // 5-6
      {false, "<absent>", "<absent>"}, {false, "<absent>", "c3"},        // 7-8
      {true, "31", "<absent>"},        {true, "32", "<absent>"},         // 9-10
      {true, "32", "<absent>"},        {false, "<absent>", "<absent>"},  // 11-12
      {true, "40", "<absent>"}};                                         // 13
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const Request& r = requests[i];
    SCOPED_TRACE("request " + std::to_string(i + 1) + ": " + r.target);
    EXPECT_EQ(r.watch(), expected[i].watch);
    EXPECT_EQ(r.param("resourceVersion"), expected[i].resource_version);
    EXPECT_EQ(r.param("continue"), expected[i].continue_token);
    EXPECT_EQ(r.param("fieldSelector"), options.field_selector);
    EXPECT_EQ(r.param("labelSelector"), options.label_selector);
    EXPECT_NE(r.target.find("fieldSelector=spec.nodeName%21%3D%2Cstatus.phase%21%3DSucceeded"),
              std::string::npos);
    EXPECT_NE(r.target.find("labelSelector=app%20in%20%28a%2Cb%29"), std::string::npos);
    if (r.watch()) {
      EXPECT_EQ(r.param("watch"), "1");
      EXPECT_EQ(r.param("allowWatchBookmarks"), "true");
      EXPECT_EQ(r.param("limit"), "<absent>");
      const int timeout = std::stoi(r.param("timeoutSeconds"));
      EXPECT_GE(timeout, 300);
      EXPECT_LT(timeout, 600);
    } else {
      EXPECT_EQ(r.param("limit"), "2");
    }
  }
  EXPECT_EQ(observer.relists(),
            (std::vector<std::string>{"pods initial", "pods gone", "pods gone", "pods gone"}));
  EXPECT_EQ(observer.events(),
            (std::vector<std::string>{"pods ADDED", "pods MODIFIED", "pods BOOKMARK",
                                      "pods DELETED", "pods ERROR", "pods ADDED"}));
  EXPECT_EQ(observer.errors(), 2u);  // the cut stream and the 500
  EXPECT_TRUE(reflector.synced());
  EXPECT_EQ(reflector.lists_completed(), 3u);
  EXPECT_EQ(reflector.last_resource_version(), "40");

  // Stop cuts the quiet watch at once; the client, which others may share, still works.
  const auto stop = std::chrono::steady_clock::now();
  reflector.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - stop, seconds(2));
  EXPECT_EQ(sink.calls().size(), 20u);
  auto health = client->Get("/healthz", "get");
  ASSERT_TRUE(health.has_value()) << health.error().message;
  EXPECT_EQ(health->status, 200);
}

TEST(ReflectorTest, ErrorEventsRelistWhenExpiredAndBackOffOtherwise) {
  ScriptedApi api("/api/v1/pods");
  using S = ScriptedApi;
  api.AddPage({{"a", "5"}}, "5");                                                      // 1
  api.AddStream({S::Event("MODIFIED", "a", "6"), S::ErrorEvent(500, "InternalError"),  // 2
                 S::Event("MODIFIED", "a", "7")},
                StreamEnd::kHang);
  api.AddStream({S::ErrorEvent(0, "Expired")}, StreamEnd::kHang);  // 3
  api.AddStatus(410, "Expired");   // a 410 on a first page: no token to blame, backs off   4
  api.AddPage({{"a", "8"}}, "9");  // 5
  api.AddStream({S::ErrorEvent(0, "Gone")}, StreamEnd::kHang);  // 6
  api.AddPage({}, "10");                                        // 7
  api.Start();                                                  // 8: quiet watch
  ApiClientPtr client = Client(api.url());
  RecordingSink sink;
  RecordingObserver observer;
  Reflector reflector(*client, sink, Options(), &observer);
  reflector.Start();
  ASSERT_TRUE(api.WaitForRequests(8));
  ASSERT_TRUE(sink.WaitFor("end 10"));
  reflector.Stop();
  // The event after the 500 ERROR on the same stream is not read: the watch is abandoned.
  EXPECT_EQ(sink.calls(),
            (std::vector<std::string>{"begin", "item a", "end 5", "MODIFIED a", "begin", "begin",
                                      "item a", "end 9", "begin", "end 10"}));
  const std::vector<Request> requests = api.requests();
  EXPECT_EQ(requests[1].param("resourceVersion"), "5");
  EXPECT_EQ(requests[2].param("resourceVersion"), "6");  // resumed after the backoff
  EXPECT_EQ(requests[5].param("resourceVersion"), "9");
  EXPECT_EQ(requests[7].param("resourceVersion"), "10");
  EXPECT_EQ(observer.relists(),
            (std::vector<std::string>{"pods initial", "pods gone", "pods error", "pods gone"}));
}

TEST(ReflectorTest, StopEndsABackoffAndAHangingListPromptly) {
  {
    ScriptedApi api("/api/v1/pods");
    api.AddStatus(500, "InternalError");
    api.Start();
    ApiClientPtr client = Client(api.url());
    RecordingSink sink;
    RecordingObserver observer;
    ReflectorOptions options = Options();
    options.initial_backoff = std::chrono::minutes(1);
    options.max_backoff = std::chrono::minutes(1);
    Reflector reflector(*client, sink, options, &observer);
    reflector.Start();
    ASSERT_TRUE(api.WaitForRequests(1));
    // Wait until the list has failed (the error is counted before the backoff begins).
    for (int i = 0; i < 2000 && observer.errors() == 0; ++i) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    ASSERT_EQ(observer.errors(), 1u);
    const auto stop = std::chrono::steady_clock::now();
    reflector.Stop();
    EXPECT_LT(std::chrono::steady_clock::now() - stop, seconds(2));
    EXPECT_EQ(api.requests().size(), 1u);
    EXPECT_FALSE(reflector.synced());
  }
  {
    ScriptedApi api("/api/v1/pods");  // no script: the first list page never comes
    api.Start();
    ApiClientPtr client = Client(api.url());
    RecordingSink sink;
    Reflector reflector(*client, sink, Options());
    reflector.Start();
    ASSERT_TRUE(api.WaitForRequests(1));
    const auto stop = std::chrono::steady_clock::now();
    reflector.Stop();
    reflector.Stop();  // idempotent
    EXPECT_LT(std::chrono::steady_clock::now() - stop, seconds(2));
    EXPECT_EQ(sink.calls(), std::vector<std::string>{"begin"});
    EXPECT_EQ(client->Get("/healthz", "get")->status, 200);
  }
}

TEST(ReflectorTest, OneClientServesTwoReflectorsAndEachStopsAlone) {
  ScriptedApi api("/api/v1/pods");
  api.AddPage({{"a", "1"}}, "1");                                  // the first's list
  api.AddQuiet();                                                  // the first's watch
  api.AddPage({{"a", "1"}}, "1");                                  // the second's list
  api.AddGatedStream({ScriptedApi::Event("ADDED", "late", "2")});  // the second's watch
  api.Start();
  ApiClientPtr client = Client(api.url());
  RecordingSink first_sink;
  RecordingSink second_sink;
  Reflector first(*client, first_sink, Options());
  Reflector second(*client, second_sink, Options());
  first.Start();
  ASSERT_TRUE(api.WaitForRequests(2));
  second.Start();
  ASSERT_TRUE(api.WaitForRequests(4));
  first.Stop();
  // The second reflector's watch outlived the first's Stop(): it delivers what comes next.
  api.OpenGate();
  ASSERT_TRUE(second_sink.WaitFor("ADDED late"));
  EXPECT_EQ(api.requests().size(), 4u);
  EXPECT_EQ(second.lists_completed(), 1u);
  EXPECT_EQ(second.last_resource_version(), "2");
  second.Stop();
  EXPECT_EQ(first_sink.calls(), (std::vector<std::string>{"begin", "item a", "end 1"}));
}

}  // namespace
}  // namespace linkfit::kube
