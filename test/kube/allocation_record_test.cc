// The allocation record codec: round trips, the exact encoding, and strict rejection of bad
// records with a message naming the problem.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "linkfit/kube/annotations.h"

namespace linkfit::kube {
namespace {

AllocationRecord FullRecord() {
  AllocationRecord record;
  record.pod = "ml/train";
  record.uid = "6f1c0000-0000-4000-8000-000000000001";
  record.node = "dgx-0";
  record.devices.gpus = {4, 5};
  record.devices.uuids = {"GPU-aa", "GPU-bb"};
  record.devices.mig = {{0, "3g.40gb", 4, "MIG-1"}};
  record.devices.shares = {{2, 300}};
  record.cpu_milli = 4000;
  record.memory_bytes = 17179869184;
  AllocationRecord::Container train;
  train.name = "train";
  train.devices.gpus = {4, 5};
  train.devices.uuids = {"GPU-aa", "GPU-bb"};
  AllocationRecord::Container setup;
  setup.name = "setup";
  setup.init = true;
  setup.devices.gpus = {4};
  setup.devices.mig = {{0, "3g.40gb", 4, ""}};
  setup.devices.shares = {{2, 300}};
  record.containers = {setup, train};
  return record;
}

TEST(AllocationRecordTest, EncodesCompactlyInTheDocumentedOrder) {
  AllocationRecord record;
  record.pod = "ml/p";
  record.uid = "u1";
  record.node = "n";
  record.devices.gpus = {0, 1};
  AllocationRecord::Container c;
  c.name = "c";
  c.devices.gpus = {0, 1};
  record.containers = {c};
  EXPECT_EQ(EncodeAllocationRecord(record),
            R"({"v":1,"pod":"ml/p","uid":"u1","node":"n","gpus":[0,1],)"
            R"("containers":[{"name":"c","gpus":[0,1]}]})");
}

TEST(AllocationRecordTest, RoundTripsEveryField) {
  const AllocationRecord record = FullRecord();
  const std::string text = EncodeAllocationRecord(record);
  auto decoded = DecodeAllocationRecord(text);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message << "\n" << text;
  EXPECT_EQ(*decoded, record);
}

TEST(AllocationRecordTest, AcceptsAPodWithoutDevices) {
  auto decoded = DecodeAllocationRecord(R"({"v":1,"pod":"a/b","uid":"u","node":"n","cpu":"500m"})");
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_TRUE(decoded->devices.empty());
  EXPECT_EQ(decoded->cpu_milli, 500);
}

TEST(AllocationRecordTest, RejectsBadRecordsNamingTheProblem) {
  const std::string head = R"({"v":1,"pod":"a/b","uid":"u","node":"n")";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "empty allocation record"},
      {"[]", "must be a JSON object"},
      {"{\"v\":1", "JSON"},
      {R"({"v":2,"pod":"a/b","uid":"u","node":"n"})", "version 2 is not supported"},
      {R"({"pod":"a/b","uid":"u","node":"n"})", "version 0 is not supported"},
      {R"({"v":1,"pod":"a/b","node":"n"})", "missing uid"},
      {head + R"(,"gpus":[16]})", "allocation.gpus[0]: expected an integer in [0, 15]"},
      {head + R"(,"gpus":[1,1]})", "GPU 1 appears twice"},
      {head + R"(,"gpus":["1"]})", "allocation.gpus[0]"},
      {head + R"(,"gpus":[1],"uuids":["a","b"]})", "2 UUIDs for 1 GPUs"},
      {head + R"(,"shares":[{"gpu":1,"milli":0}]})", "milli"},
      {head + R"(,"shares":[{"gpu":1,"milli":1001}]})", "milli"},
      {head + R"(,"mig":[{"gpu":1,"start":8,"profile":"1g"}]})", "start"},
      {head + R"(,"mig":[{"gpu":1,"start":0}]})", "expected a MIG profile name"},
      {head + R"(,"colour":"blue"})", "unknown key \"colour\""},
      {head + R"(,"gpus":[0],"containers":[{"name":"c","gpus":[1]}]})",
       "GPU 1 is not one of the pod's"},
      {head + R"(,"gpus":[0],"containers":[{"gpus":[0]}]})", "no name"},
      {head + R"(,"containers":[{"name":"c","init":"yes"}]})", "init: expected a boolean"},
      {head + R"(,"cpu":"lots"})", "cpu: expected a non-negative quantity"},
      {head + "} trailing", "JSON"},
  };
  for (const auto& [text, expected] : cases) {
    auto decoded = DecodeAllocationRecord(text);
    ASSERT_FALSE(decoded.has_value()) << text;
    EXPECT_NE(decoded.error().message.find(expected), std::string::npos)
        << text << " -> " << decoded.error().message;
  }
}

}  // namespace
}  // namespace linkfit::kube
