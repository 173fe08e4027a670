// The allocation record codec: round trips, the exact encoding, and strict rejection of bad
// records with a message naming the problem.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
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

TEST(AllocationRecordTest, NicsEncodeWithWhatIsKnownAndRoundTrip) {
  AllocationRecord record;
  record.pod = "ml/p";
  record.uid = "u1";
  record.node = "n";
  record.devices.gpus = {0};
  record.devices.nics = {{"mlx5_0", "0000:18:00.0", "uverbs0", 0, 1000, 0},
                         {"mlx5_1", "", "", 1, 250, -1},
                         {"mlx5_2", "", "", -1, 1000, -1}};
  AllocationRecord::Container c;
  c.name = "c";
  c.devices.gpus = {0};
  c.devices.nics = {record.devices.nics[0], record.devices.nics[1]};
  record.containers = {c};
  const std::string text = EncodeAllocationRecord(record);
  EXPECT_EQ(text,
            R"({"v":1,"pod":"ml/p","uid":"u1","node":"n","gpus":[0],"nics":[)"
            R"({"name":"mlx5_0","pci_bus_id":"0000:18:00.0","uverbs":"uverbs0","rail":0,"gpu":0},)"
            R"({"name":"mlx5_1","rail":1,"milli":250},{"name":"mlx5_2"}],)"
            R"("containers":[{"name":"c","gpus":[0],"nics":[)"
            R"({"name":"mlx5_0","pci_bus_id":"0000:18:00.0","uverbs":"uverbs0","rail":0,"gpu":0},)"
            R"({"name":"mlx5_1","rail":1,"milli":250}]}]})");
  auto decoded = DecodeAllocationRecord(text);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(*decoded, record);
  // A pod holding NICs only.
  AllocationRecord nics_only = record;
  nics_only.devices.gpus.clear();
  nics_only.devices.nics = {{"mlx5_3", "", "", -1, 1000, -1}};
  nics_only.containers.clear();
  EXPECT_FALSE(nics_only.devices.empty());
  auto only = DecodeAllocationRecord(EncodeAllocationRecord(nics_only));
  ASSERT_TRUE(only.has_value()) << only.error().message;
  EXPECT_EQ(*only, nics_only);
  // "milli":1000 reads as the whole NIC it means (and is written without it).
  auto explicit_whole = DecodeAllocationRecord(R"({"v":1,"pod":"a/b","uid":"u","node":"n","nics":[)"
                                               R"({"name":"mlx5_0","milli":1000}]})");
  ASSERT_TRUE(explicit_whole.has_value()) << explicit_whole.error().message;
  EXPECT_EQ(explicit_whole->devices.nics[0].milli, 1000);
  EXPECT_EQ(explicit_whole->devices.nics[0].gpu, -1);
  EXPECT_EQ(explicit_whole->devices.nics[0].rail, -1);
}

TEST(AllocationRecordTest, RecordsWithoutNicsReadAndWriteByteForByteAsBefore) {
  // Written before NICs existed (the full record of RoundTripsEveryField).
  const std::string old =
      R"({"v":1,"pod":"ml/train","uid":"6f1c0000-0000-4000-8000-000000000001","node":"dgx-0",)"
      R"("gpus":[4,5],"uuids":["GPU-aa","GPU-bb"],"mig":[{"gpu":0,"profile":"3g.40gb","start":4,)"
      R"("uuid":"MIG-1"}],"shares":[{"gpu":2,"milli":300}],"cpu":"4000m","memory":"17179869184",)"
      R"("containers":[{"name":"setup","init":true,"gpus":[4],"mig":[{"gpu":0,)"
      R"("profile":"3g.40gb","start":4}],"shares":[{"gpu":2,"milli":300}]},)"
      R"({"name":"train","gpus":[4,5],"uuids":["GPU-aa","GPU-bb"]}]})";
  EXPECT_EQ(EncodeAllocationRecord(FullRecord()), old);
  auto decoded = DecodeAllocationRecord(old);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_TRUE(decoded->devices.nics.empty());
  EXPECT_EQ(EncodeAllocationRecord(*decoded), old);
}

std::string ReadSeed(const std::string& relative) {
  std::ifstream file(std::string(LINKFIT_SOURCE_DIR) + "/" + relative);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// The fuzzers' NIC seeds (test/data) are documents the decoders accept.
TEST(AllocationRecordTest, NicSeedsOfTheFuzzersDecode) {
  auto record = DecodeAllocationRecord(ReadSeed("test/data/allocation-records/nics.json"));
  ASSERT_TRUE(record.has_value()) << record.error().message;
  EXPECT_EQ(record->devices.nics.size(), 3u);
  auto devices = DecodeDevicesInUse(ReadSeed("test/data/devices-in-use/nics.json"));
  ASSERT_TRUE(devices.has_value()) << devices.error().message;
  EXPECT_EQ(devices->pods.size(), 2u);
}

TEST(AllocationRecordTest, RejectsBadNicsNamingTheProblem) {
  const std::string head = R"({"v":1,"pod":"a/b","uid":"u","node":"n")";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {head + R"(,"nics":[{"rail":0}]})",
       "allocation.nics[0].name: expected the NIC's device name"},
      {head + R"(,"nics":[{"name":""}]})", "allocation.nics[0].name"},
      {head + R"(,"nics":[{"name":"m","milli":0}]})", "allocation.nics[0].milli"},
      {head + R"(,"nics":[{"name":"m","milli":1001}]})", "allocation.nics[0].milli"},
      {head + R"(,"nics":[{"name":"m","rail":128}]})", "allocation.nics[0].rail"},
      {head + R"(,"nics":[{"name":"m","gpu":16}]})", "allocation.nics[0].gpu"},
      {head + R"(,"nics":[{"name":"m","gpu":-1}]})", "allocation.nics[0].gpu"},
      {head + R"(,"nics":[{"name":"m","speed":1}]})", "unknown key \"speed\""},
      {head + R"(,"nics":[{"name":"m"},{"name":"m"}]})", "NIC m appears twice"},
      {head + R"(,"nics":{"name":"m"}})", "allocation.nics"},
      {head + R"(,"nics":[{"name":"m"}],"containers":[{"name":"c","nics":[{"name":"k"}]}]})",
       "allocation.containers[0].nics: NIC k is not one of the pod's"},
      {head + R"(,"nics":[{"name":"m","milli":100}],"containers":[{"name":"c","nics":[)"
              R"({"name":"m","milli":200}]}]})",
       "NIC m is not one of the pod's"},
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
