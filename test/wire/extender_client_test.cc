// The extender client against a real HTTP server: replies of 200, other statuses, bodies that
// are not JSON, the URL prefix, and a server that is not there.

#include "linkfit/wire/extender_client.h"

#include <httplib.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace linkfit::wire {
namespace {

class ExtenderClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Post("/scheduler/filter",
                 [](const httplib::Request& request, httplib::Response& reply) {
                   reply.set_content(R"({"echo":)" + request.body + "}", "application/json");
                 });
    server_.Post("/explain", [](const httplib::Request&, httplib::Response& reply) {
      reply.status = 400;
      reply.set_content(R"({"Error":"request has no Pod"})", "application/json");
    });
    server_.Get("/inspect", [](const httplib::Request&, httplib::Response& reply) {
      reply.set_content("not json", "text/plain");
    });
    port_ =
        server_.bind_to_any_port("127.0.0.1");  // listening: connections queue until the loop runs
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() does nothing before the loop runs: wait for it, so that TearDown's stop ends it.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST_F(ExtenderClientTest, VerbsGoUnderThePrefixAndRepliesParse) {
  ExtenderClient client(Url(), "/scheduler/");
  EXPECT_EQ(client.url_prefix(), "/scheduler");
  const Result<nlohmann::json> reply = client.VerbJson("filter", R"({"Pod":{}})");
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ((*reply)["echo"], nlohmann::json::parse(R"({"Pod":{}})"));
  const Result<std::string> raw = client.Verb("filter", "[1]");
  ASSERT_TRUE(raw) << raw.error().message;
  EXPECT_EQ(*raw, R"({"echo":[1]})");
}

TEST_F(ExtenderClientTest, OtherStatusesAndBodiesAreErrorsNamingTheCall) {
  ExtenderClient client(Url(), "/scheduler");
  const Result<std::string> refused = client.Post("/explain", "{}");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message, R"(POST /explain: HTTP 400: {"Error":"request has no Pod"})");
  // Call gives the status and body as they came.
  const Result<ExtenderClient::Reply> reply = client.Call("POST", "/explain", "{}");
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->status, 400);
  EXPECT_EQ(reply->body, R"({"Error":"request has no Pod"})");
  const Result<nlohmann::json> not_json = client.GetJson("/inspect");
  ASSERT_FALSE(not_json);
  EXPECT_EQ(not_json.error().message, "GET /inspect: reply is not JSON");
  const Result<std::string> missing = client.Get("/nowhere");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("GET /nowhere: HTTP 404"), std::string::npos);
  EXPECT_FALSE(client.Call("PUT", "/explain"));
}

// The observer hears each call that got a 200 reply, with its method and path; a refusal is an
// error, not a round trip to count.
TEST_F(ExtenderClientTest, TheObserverHearsEveryAnsweredCall) {
  ExtenderClient client(Url(), "/scheduler");
  std::vector<std::string> heard;
  client.set_observer([&](std::string_view method, std::string_view path, double ms) {
    EXPECT_GE(ms, 0.0);
    heard.push_back(std::string(method) + " " + std::string(path));
  });
  ASSERT_TRUE(client.Verb("filter", "{}"));
  EXPECT_FALSE(client.Post("/explain", "{}"));
  EXPECT_FALSE(client.GetJson("/inspect"));  // answered 200, but not JSON: heard all the same
  EXPECT_EQ(heard, (std::vector<std::string>{"POST /scheduler/filter", "GET /inspect"}));
}

TEST_F(ExtenderClientTest, AServerThatIsNotThereIsAnErrorNotAReply) {
  ExtenderClient client(Url(), "/scheduler", {.connect_seconds = 1, .read_seconds = 1});
  server_.stop();
  thread_.join();
  thread_ = std::thread([] {});
  const Result<ExtenderClient::Reply> reply = client.Call("GET", "/inspect");
  ASSERT_FALSE(reply);
  EXPECT_EQ(reply.error().message.rfind("GET /inspect: ", 0), 0u) << reply.error().message;
}

}  // namespace
}  // namespace linkfit::wire
