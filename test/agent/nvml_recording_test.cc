// The fake NVML's recording parser (test/agent/fake_nvml/recording.h): every recording of
// test/data/nvml/ loads, and garbage is refused with a message naming the field, so that a broken
// recording fails nvmlInit_v2 instead of answering half of NVML.

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "recording.h"
#include "testing/fixtures.h"

namespace fake_nvml {
namespace {

std::string Recorded(const std::string& name) {
  return linkfit::testing::ReadFileOrDie(
      linkfit::testing::SourcePath("test/data/nvml/" + name + ".json"));
}

TEST(NvmlRecording, EveryRecordingLoads) {
  int count = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(linkfit::testing::SourcePath("test/data/nvml"))) {
    if (entry.path().extension() != ".json") continue;
    ++count;
    auto recording = ParseRecording(linkfit::testing::ReadFileOrDie(entry.path().string()));
    EXPECT_TRUE(recording) << entry.path() << ": " << recording.error().message;
  }
  EXPECT_GE(count, 10);
}

TEST(NvmlRecording, ReadsWhatTheFakeAnswers) {
  auto recording = ParseRecording(Recorded("dgx-a100-mig"));
  ASSERT_TRUE(recording) << recording.error().message;
  EXPECT_EQ(recording->nvml_version, "12.550.54.15");
  ASSERT_EQ(recording->devices.size(), 8u);
  const Device& gpu = recording->devices[6];
  EXPECT_EQ(gpu.name, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(gpu.nvlinks.size(), 12u);
  EXPECT_EQ(gpu.nvlinks[0].remote_type, RemoteType::kSwitch);
  ASSERT_TRUE(gpu.mig);
  EXPECT_EQ(gpu.mig->current, 1u);
  ASSERT_EQ(gpu.mig->instances.size(), 3u);
  EXPECT_EQ(gpu.mig->instances[0].start, 4u);
  EXPECT_EQ(gpu.mig->instances[0].size, 4u);
  EXPECT_FALSE(recording->devices[0].mig->current);
  EXPECT_EQ(recording->ancestors[0][4], 50);
}

// `edit` applied to the DGX A100 recording must be refused with a message containing `expected`.
void ExpectRefused(const std::function<void(nlohmann::json&)>& edit, const std::string& expected) {
  nlohmann::json recording = nlohmann::json::parse(Recorded("dgx-a100-mig"));
  edit(recording);
  auto parsed = ParseRecording(recording.dump());
  ASSERT_FALSE(parsed) << "accepted; expected: " << expected;
  EXPECT_EQ(parsed.error().message, expected);
}

TEST(NvmlRecording, GarbageIsRefusedNamingTheField) {
  EXPECT_FALSE(ParseRecording("{\"devices\": 7"));
  EXPECT_EQ(ParseRecording("").error().message, "not JSON");
  EXPECT_EQ(ParseRecording("[1, 2]").error().message, "recording: expected an object, got [1,2]");
  ExpectRefused([](auto& r) { r.erase("nvml_version"); }, "recording: missing \"nvml_version\"");
  ExpectRefused([](auto& r) { r["nvml"] = 1; }, "recording: unknown key \"nvml\"");
  ExpectRefused([](auto& r) { r["nvml_version"] = ""; },
                "nvml_version: must have 1..79 characters");
  ExpectRefused([](auto& r) { r["devices"][2]["memory_mib"] = "40 GiB"; },
                "devices[2].memory_mib: expected an integer 0..1073741824, got \"40 GiB\"");
  ExpectRefused([](auto& r) { r["devices"][1]["numa_node"] = -1; },
                "devices[1].numa_node: expected an integer 0..1023, got -1");
  ExpectRefused([](auto& r) { r["devices"][0]["bus_id"] = "07:00"; },
                "devices[0].bus_id: \"07:00\" is not a PCI bus id (domain:bus:device.function)");
  ExpectRefused([](auto& r) { r["devices"][3]["nvlinks"][2]["remote_type"] = "nvswitch"; },
                "devices[3].nvlinks[2].remote_type: \"nvswitch\" is not gpu, switch or ibmnpu");
  ExpectRefused([](auto& r) { r["devices"][3]["nvlinks"][2]["version"] = 8; },
                "devices[3].nvlinks[2].version: expected an integer 0..7, got 8");
  ExpectRefused(
      [](auto& r) { r["devices"][3]["nvlinks"][2]["version"] = 0; },
      "devices[3].nvlinks[2].version: 0 is NVML_NVLINK_VERSION_INVALID (omit it instead)");
  ExpectRefused(
      [](auto& r) {
        r["devices"][4]["pcie"] = {{"max_generation", 4}};
      },
      "devices[4].pcie: missing \"max_width\"");
  ExpectRefused(
      [](auto& r) {
        r["devices"][4]["pcie"] = {{"max_generation", 4}, {"max_width", 0}};
      },
      "devices[4].pcie: max_generation and max_width must be at least 1");
  ExpectRefused([](auto& r) { r["devices"][3]["lost"] = "yes"; },
                "devices[3].lost: expected true or false, got \"yes\"");
  ExpectRefused(
      [](auto& r) {
        r["devices"][3]["errors"] = {{"nvmlDeviceGetFoo", 15}};
      },
      "devices[3].errors: \"nvmlDeviceGetFoo\" is not a function the fake can fail");
  ExpectRefused(
      [](auto& r) {
        r["devices"][3]["errors"] = {{"nvmlDeviceGetUUID", 0}};
      },
      "devices[3].errors.nvmlDeviceGetUUID: 0 is NVML_SUCCESS");
  ExpectRefused([](auto& r) { r["devices"][6]["mig"]["instances"][0]["profile"] = 5; },
                "devices[6].mig.instances[0].profile: 5 is not in mig_profiles");
  ExpectRefused([](auto& r) { r["devices"][6]["mig"]["instances"][0]["start"] = 6; },
                "devices[6].mig.instances[0]: slices 6+4 do not fit in 8 memory slices");
  ExpectRefused([](auto& r) { r["devices"][6]["mig"]["instances"][1]["id"] = 1; },
                "devices[6].mig.instances[1].id: GPU instance id 1 repeated");
  ExpectRefused(
      [](auto& r) {
        r["devices"][6]["mig"]["instances"][0] = {
            {"id", 2}, {"profile", 3}, {"start", 0}, {"size", 4}, {"uuid", "MIG-4g-a"}};
        r["devices"][6]["mig"]["instances"][2] = {
            {"id", 3}, {"profile", 3}, {"start", 4}, {"size", 4}, {"uuid", "MIG-4g-b"}};
      },
      "devices[6].mig.instances[2].profile: more than 1 instances of profile 3");
  ExpectRefused([](auto& r) { r["devices"][6]["mig"]["current"] = 0; },
                "devices[6].mig.instances: GPU instances exist only in MIG mode (current 1)");
  ExpectRefused([](auto& r) { r["mig_profiles"][1]["profile"] = 0; },
                "mig_profiles[1].profile: 0 repeated");
  ExpectRefused([](auto& r) { r["ancestors"].erase(7); },
                "ancestors: expected 8 rows (one per device)");
  ExpectRefused([](auto& r) { r["ancestors"][2][5] = 25; },
                "ancestors[2][5]: 25 is not an nvmlGpuTopologyLevel_t (0, 10, 20, 30, 40, 50)");
  ExpectRefused([](auto& r) { r["ancestors"][2][5] = 40; },
                "ancestors[5][2]: not the same as [2][5]");
}

TEST(NvmlRecording, BusIds) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  EXPECT_TRUE(SplitBusId("00000000:C7:1F.7", domain, bus, device, function));
  EXPECT_EQ(bus, 0xc7u);
  EXPECT_EQ(device, 0x1fu);
  EXPECT_EQ(function, 7u);
  EXPECT_TRUE(SplitBusId("0001:07:00.0", domain, bus, device, function));
  EXPECT_EQ(domain, 1u);
  EXPECT_FALSE(SplitBusId("0000:07:00.0x", domain, bus, device, function));
  EXPECT_FALSE(SplitBusId("0000:07:20.0", domain, bus, device, function));  // device > 31
  EXPECT_FALSE(SplitBusId("0000:07:00.8", domain, bus, device, function));  // function > 7
  EXPECT_FALSE(SplitBusId("", domain, bus, device, function));
}

}  // namespace
}  // namespace fake_nvml
