// The API client's long calls against small scripted servers (api_client_testing.h): watches
// split across chunks, their status, stop and idle timeout, cutting calls with Stop() and
// CancelTokens; and StatusMessage.

#include "kube/api_client_testing.h"

namespace linkfit::kube {
namespace {

// The fixture of api_client_testing.h under a suite name of this file (gtest wants one fixture
// class per suite, and each file has its own copy of the header's).
class ApiClientCallTest : public ApiClientTest {};

struct Lines {
  std::function<bool(std::string_view)> Callback() {
    return [this](std::string_view line) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.emplace_back(line);
      return true;
    };
  }
  std::vector<std::string> Get() {
    std::lock_guard<std::mutex> lock(mutex);
    return lines;
  }
  std::mutex mutex;
  std::vector<std::string> lines;
};

TEST_F(ApiClientCallTest, WatchLinesMaySpanChunks) {
  auto server = TestServer::Plain();
  server->server().Get("/w", [](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [](size_t, httplib::DataSink& sink) {
      for (const char* piece :
           {"{\"a\":", "1}\n{\"b\"", ":2}\r\n", "\n  \n{\"c\":3", "}\n{\"d\":4}"}) {
        sink.write(piece, std::strlen(piece));
      }
      sink.done();
      return true;
    });
  });
  server->Start();
  ApiClientPtr client = Client(Config(server->url("http")));
  Lines lines;
  auto status = client->Watch("/w", lines.Callback(), seconds(5));
  ASSERT_TRUE(status.has_value()) << status.error().message;
  EXPECT_EQ(*status, 200);
  // The last line had no newline: delivered at the clean end.
  EXPECT_EQ(lines.Get(),
            (std::vector<std::string>{R"({"a":1})", R"({"b":2})", R"({"c":3})", R"({"d":4})"}));
}

TEST_F(ApiClientCallTest, AWatchStatusOtherThan200ReturnsItsBody) {
  const std::string status =
      R"json({"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old )json"
      R"json(resource version: 1 (5)","reason":"Expired","code":410})json";
  auto server = TestServer::Plain();
  server->server().Get("/w", [&](const httplib::Request&, httplib::Response& res) {
    res.status = 410;
    res.set_content(status, "application/json");
  });
  server->Start();
  ApiClientPtr client = Client(Config(server->url("http")));
  Lines lines;
  std::string body;
  auto result = client->Watch("/w", lines.Callback(), seconds(5), &body);
  ASSERT_TRUE(result.has_value()) << result.error().message;
  EXPECT_EQ(*result, 410);
  EXPECT_EQ(body, status);
  EXPECT_EQ(StatusMessage(body), "too old resource version: 1 (5)");
  EXPECT_TRUE(lines.Get().empty());
}

TEST_F(ApiClientCallTest, AWatchEndsWhenTheReaderSaysStopOrALineIsTooLong) {
  auto server = TestServer::Plain();
  server->server().Get("/lines", [](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [](size_t, httplib::DataSink& sink) {
      sink.write("1\n2\n3\n", 6);
      sink.done();
      return true;
    });
  });
  server->server().Get("/huge", [](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [](size_t, httplib::DataSink& sink) {
      const std::string mebibyte(std::size_t{1} << 20, 'x');
      for (int i = 0; i < 66 && sink.is_writable(); ++i) {
        if (!sink.write(mebibyte.data(), mebibyte.size())) return false;
      }
      sink.done();
      return true;
    });
  });
  server->Start();
  ApiClientPtr client = Client(Config(server->url("http")));
  std::vector<std::string> seen;
  auto stopped = client->Watch(
      "/lines",
      [&](std::string_view line) {
        seen.emplace_back(line);
        return line != "2";
      },
      seconds(5));
  ASSERT_FALSE(stopped.has_value());
  EXPECT_EQ(seen, (std::vector<std::string>{"1", "2"}));
  std::size_t calls = 0;
  auto huge = client->Watch(
      "/huge",
      [&](std::string_view) {
        ++calls;
        return true;
      },
      seconds(10));
  ASSERT_FALSE(huge.has_value());
  EXPECT_NE(huge.error().message.find("64 MiB"), std::string::npos) << huge.error().message;
  EXPECT_EQ(calls, 0u);
}

TEST_F(ApiClientCallTest, AWatchWithNoByteWithinItsIdleTimeoutFails) {
  auto server = TestServer::Plain();
  TestServer* raw = server.get();
  server->server().Get("/w", [raw](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [raw](size_t, httplib::DataSink&) {
      raw->Block();
      return false;
    });
  });
  server->Start();
  ApiClientPtr client = Client(Config(server->url("http")));
  Lines lines;
  const auto began = std::chrono::steady_clock::now();
  auto result = client->Watch("/w", lines.Callback(), milliseconds(300));
  const auto took = std::chrono::steady_clock::now() - began;
  ASSERT_FALSE(result.has_value());
  EXPECT_GE(took, milliseconds(250));
  EXPECT_LT(took, seconds(5));
}

// A server whose /hang handler sends nothing until released, and whose /stream handler sends
// one line and then nothing.
std::unique_ptr<TestServer> HangingServer() {
  auto server = TestServer::Plain();
  TestServer* raw = server.get();
  server->server().Get("/hang",
                       [raw](const httplib::Request&, httplib::Response&) { raw->Block(); });
  server->server().Get("/stream", [raw](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [raw](size_t, httplib::DataSink& sink) {
      sink.write("{\"first\":1}\n", 12);
      raw->Block();
      return false;
    });
  });
  server->server().Get("/ok", [](const httplib::Request&, httplib::Response&) {});
  server->Start();
  return server;
}

TEST_F(ApiClientCallTest, StopCutsHangingCallsPromptly) {
  for (const char* path : {"/hang", "/stream"}) {
    auto server = HangingServer();
    ApiClientPtr client = Client(Config(server->url("http")));
    Lines lines;
    std::atomic<bool> returned{false};
    ApiResult<int> result = 0;
    std::thread watcher([&] {
      result = client->Watch(path, lines.Callback(), seconds(60));
      returned = true;
    });
    ASSERT_TRUE(server->WaitForRequests(1));
    if (std::string_view(path) == "/stream") {
      for (int i = 0; i < 1000 && lines.Get().empty(); ++i)
        std::this_thread::sleep_for(milliseconds(5));
      EXPECT_EQ(lines.Get(), std::vector<std::string>{"{\"first\":1}"});
    }
    const auto stop = std::chrono::steady_clock::now();
    client->Stop();
    watcher.join();
    EXPECT_LT(std::chrono::steady_clock::now() - stop, seconds(2)) << path;
    EXPECT_FALSE(server->released()) << "the watch returned on its own";
    ASSERT_FALSE(result.has_value());
    EXPECT_NE(result.error().message.find("stopped"), std::string::npos) << result.error().message;
    // Later calls fail at once, without a request.
    auto later = client->Get("/ok", "get");
    ASSERT_FALSE(later.has_value());
    EXPECT_FALSE(later.error().maybe_sent);
    EXPECT_EQ(server->seen().size(), 1u);
  }
}

TEST_F(ApiClientCallTest, ACancelTokenCutsItsOwnCallsOnly) {
  auto server = HangingServer();
  ApiClientPtr client = Client(Config(server->url("http")));
  CancelToken cancel;
  Lines lines;
  ApiResult<int> watched = 0;
  ApiResult<ApiResponse> got = ApiResponse{};
  std::thread watcher(
      [&] { watched = client->Watch("/stream", lines.Callback(), seconds(60), nullptr, &cancel); });
  std::thread getter([&] { got = client->Get("/hang", "get", &cancel); });
  ASSERT_TRUE(server->WaitForRequests(2));
  // The same client serves other callers meanwhile.
  EXPECT_EQ(client->Get("/ok", "get")->status, 200);
  const auto began = std::chrono::steady_clock::now();
  cancel.Cancel();
  watcher.join();
  getter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - began, seconds(2));
  EXPECT_FALSE(server->released());
  EXPECT_FALSE(watched.has_value());
  ASSERT_FALSE(got.has_value());
  EXPECT_TRUE(got.error().maybe_sent);  // it was written: a write's outcome would be unknown
  // After the cut, the client still works; the cancelled token cuts new calls at once.
  EXPECT_EQ(client->Get("/ok", "get")->status, 200);
  const std::size_t requests = server->seen().size();
  EXPECT_FALSE(client->Get("/ok", "get", &cancel).has_value());
  EXPECT_EQ(server->seen().size(), requests);
}

TEST_F(ApiClientCallTest, ACutBeforeTheSocketExistsStillCutsTheCall) {
  // The cut lands after the call registered and before httplib made its socket (the token file
  // is read in between, on the fake clock): ClientImpl::stop() can do nothing then, and the
  // socket hook must fail the connection instead.
  auto server = HangingServer();
  FakeClock clock;
  WriteToken("t");
  ClientConfig config = Config(server->url("http"));
  config.token_file = Dir() + "/token";
  config.qps = 0;  // no rate limit: the token file read is the call's only look at the clock
  ApiClientPtr client = Client(config, clock);
  for (const bool watch : {false, true}) {
    CancelToken cancel;
    clock.OnNow([&] { cancel.Cancel(); });
    const auto began = std::chrono::steady_clock::now();
    bool failed = false;
    bool maybe_sent = true;
    if (watch) {
      Lines lines;
      auto result = client->Watch("/hang", lines.Callback(), seconds(60), nullptr, &cancel);
      failed = !result.has_value();
      if (failed) maybe_sent = result.error().maybe_sent;
    } else {
      auto result = client->Get("/hang", "get", &cancel);
      failed = !result.has_value();
      if (failed) maybe_sent = result.error().maybe_sent;
    }
    clock.OnNow(nullptr);
    EXPECT_TRUE(failed) << watch;
    EXPECT_FALSE(maybe_sent) << watch;
    EXPECT_LT(std::chrono::steady_clock::now() - began, seconds(2)) << watch;
    EXPECT_TRUE(server->seen().empty()) << watch;
  }
  EXPECT_EQ(client->Get("/ok", "get")->status, 200);
}

TEST(StatusMessageTest, ReadsTheMessageOrShortensTheBody) {
  EXPECT_EQ(StatusMessage(R"({"kind":"Status","code":409,"message":"pod a is already assigned"})"),
            "pod a is already assigned");
  EXPECT_EQ(StatusMessage("  upstream connect error  "), "upstream connect error");
  EXPECT_EQ(StatusMessage(""), "(empty body)");
  EXPECT_EQ(StatusMessage(R"({"kind":"Status"})"), R"({"kind":"Status"})");
  const std::string long_body(500, 'x');
  EXPECT_EQ(StatusMessage(long_body), std::string(200, 'x') + "...");
}

}  // namespace
}  // namespace linkfit::kube
