// kube-scheduler's cycle over the client, against a scripted extender on real HTTP: the bodies
// it sends, how it reads the replies, when it prioritizes, and the caller's choice.

#include "linkfit/wire/scheduling_cycle.h"

#include <httplib.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace linkfit::wire {
namespace {

class SchedulingCycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Post("/scheduler/filter",
                 [this](const httplib::Request& request, httplib::Response& reply) {
                   bodies_.push_back(request.body);
                   reply.set_content(filter_reply_, "application/json");
                 });
    server_.Post("/scheduler/prioritize",
                 [this](const httplib::Request& request, httplib::Response& reply) {
                   bodies_.push_back(request.body);
                   reply.set_content(prioritize_reply_, "application/json");
                 });
    server_.Post("/scheduler/bind",
                 [this](const httplib::Request& request, httplib::Response& reply) {
                   bodies_.push_back(request.body);
                   reply.set_content(bind_reply_, "application/json");
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::vector<std::string> bodies_;
  std::string filter_reply_;
  std::string prioritize_reply_ = "[]";
  std::string bind_reply_ = R"({"Error":""})";
  const CyclePod pod_{R"({"metadata":{"name":"p"}})", "p", "ml", "u-1"};
};

TEST_F(SchedulingCycleTest, FiltersPrioritizesChoosesAndBinds) {
  filter_reply_ = R"({"Nodes":null,"NodeNames":["b","c"],"FailedNodes":{"a":"busy","d":"busy"},)"
                  R"("FailedAndUnresolvableNodes":{"d":"no NVLink"},"Error":""})";
  prioritize_reply_ = R"([{"Host":"b","Score":3},{"Host":"c","Score":7}])";
  ExtenderClient client("http://127.0.0.1:" + std::to_string(port_), "/scheduler");
  SchedulingCycle cycle(client);
  const Result<CycleOutcome> outcome = cycle.Schedule(pod_, {"a", "b", "c", "d"});
  ASSERT_TRUE(outcome) << outcome.error().message;
  EXPECT_EQ(outcome->filter.passed, (std::vector<std::string>{"b", "c"}));
  // In request order; a node in both maps is unresolvable, with that map's reason.
  ASSERT_EQ(outcome->filter.failed.size(), 2u);
  EXPECT_EQ(outcome->filter.failed[0], (std::pair<std::string, std::string>{"a", "busy"}));
  EXPECT_EQ(outcome->filter.failed[1], (std::pair<std::string, std::string>{"d", "no NVLink"}));
  EXPECT_EQ(outcome->filter.unresolvable, (std::set<std::string>{"d"}));
  EXPECT_EQ(outcome->node, "c");
  EXPECT_TRUE(outcome->bound());
  ASSERT_EQ(bodies_.size(), 3u);
  EXPECT_EQ(bodies_[0],
            R"({"Pod":{"metadata":{"name":"p"}},"Nodes":null,"NodeNames":["a","b","c","d"]})");
  EXPECT_EQ(bodies_[1], R"({"Pod":{"metadata":{"name":"p"}},"Nodes":null,"NodeNames":["b","c"]})");
  EXPECT_EQ(bodies_[2], R"({"PodName":"p","PodNamespace":"ml","PodUID":"u-1","Node":"c"})");
}

TEST_F(SchedulingCycleTest, OneNodePassingIsBoundWithoutPrioritizeAndTheChoiceIsTheCallers) {
  filter_reply_ = R"({"Nodes":null,"NodeNames":["b"],"FailedNodes":{},"Error":""})";
  ExtenderClient client("http://127.0.0.1:" + std::to_string(port_), "/scheduler");
  SchedulingCycle cycle(client);
  Result<CycleOutcome> outcome = cycle.Schedule(pod_, {"a", "b"});
  ASSERT_TRUE(outcome) << outcome.error().message;
  EXPECT_EQ(outcome->node, "b");
  EXPECT_TRUE(outcome->scores.empty());
  EXPECT_EQ(bodies_.size(), 2u);  // filter, bind
  // Two passing, equal scores: FirstBest takes the first; a caller's choice is taken as given.
  filter_reply_ = R"({"NodeNames":["b","c"]})";
  prioritize_reply_ = R"([{"Host":"b","Score":5},{"Host":"c","Score":5}])";
  outcome = cycle.Schedule(pod_, {"b", "c"});
  ASSERT_TRUE(outcome) << outcome.error().message;
  EXPECT_EQ(outcome->node, "b");
  outcome = cycle.Schedule(pod_, {"b", "c"},
                           [](const std::vector<std::string>&, const std::vector<HostScore>&) {
                             return std::string("c");
                           });
  ASSERT_TRUE(outcome) << outcome.error().message;
  EXPECT_EQ(outcome->node, "c");
}

TEST_F(SchedulingCycleTest, ErrorsInRepliesAreOutcomesAndMalformedRepliesAreErrors) {
  ExtenderClient client("http://127.0.0.1:" + std::to_string(port_), "/scheduler");
  SchedulingCycle cycle(client);
  filter_reply_ = R"({"NodeNames":null,"Error":"bad hint"})";
  Result<CycleOutcome> outcome = cycle.Schedule(pod_, {"a"});
  ASSERT_TRUE(outcome) << outcome.error().message;
  EXPECT_EQ(outcome->filter.error, "bad hint");
  EXPECT_TRUE(outcome->node.empty());
  EXPECT_FALSE(outcome->bound());
  filter_reply_ = R"({"NodeNames":["a"]})";
  bind_reply_ = R"({"Error":"pod no longer fits on a"})";
  outcome = cycle.Schedule(pod_, {"a"});
  ASSERT_TRUE(outcome) << outcome.error().message;
  EXPECT_EQ(outcome->bind_error, "pod no longer fits on a");
  EXPECT_FALSE(outcome->bound());
  filter_reply_ = R"({"NodeNames":["a","b"]})";
  prioritize_reply_ = R"([{"Host":"a"}])";
  outcome = cycle.Schedule(pod_, {"a", "b"});
  ASSERT_FALSE(outcome);
  EXPECT_NE(outcome.error().message.find("not {Host, Score}"), std::string::npos);
  filter_reply_ = R"({"NodeNames":"a"})";
  EXPECT_FALSE(cycle.Filter(pod_, {"a"}));
  filter_reply_ = R"({"FailedNodes":{"a":1}})";
  EXPECT_FALSE(cycle.Filter(pod_, {"a"}));
}

}  // namespace
}  // namespace linkfit::wire
