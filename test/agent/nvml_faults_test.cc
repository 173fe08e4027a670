// NVML discovery when the library or the node misbehaves: a missing library, a library without a
// required function (or without an optional one), an NVML too old for MIG, a recording that is
// missing or garbage (nvmlInit_v2 fails), a node without GPUs, and NVML queries that fail for one
// GPU (that GPU is published unhealthy with the NVML error, the rest stays usable).

#include <gtest/gtest.h>

#include <string>

#include "fake_nvml/nvml_test_support.h"

namespace linkfit::agent {
namespace {

using testing::Fake;
using testing::FakeWith;
using testing::LoadRecording;

std::string MessageOf(const Result<Discovery>& found) {
  return found ? std::string("(no error)") : found.error().message;
}

TEST(NvmlFaults, AMissingLibraryIsAnError) {
  auto found = DiscoverWithNvml(Fake("dgx-h100", "/nonexistent/libnvidia-ml.so.1"));
  ASSERT_FALSE(found);
  EXPECT_NE(MessageOf(found).find("cannot load NVML (/nonexistent/libnvidia-ml.so.1)"),
            std::string::npos)
      << MessageOf(found);
  auto watch = WatchHealthWithNvml(Fake("dgx-h100", "/nonexistent/libnvidia-ml.so.1"));
  EXPECT_FALSE(watch);
}

TEST(NvmlFaults, ALibraryWithoutARequiredFunctionIsAnErrorNamingIt) {
  auto found = DiscoverWithNvml(Fake("dgx-h100", LINKFIT_FAKE_NVML_WITHOUT_TOPOLOGY));
  ASSERT_FALSE(found);
  EXPECT_NE(MessageOf(found).find("lacks nvmlDeviceGetTopologyCommonAncestor"), std::string::npos)
      << MessageOf(found);
  EXPECT_NE(MessageOf(found).find(LINKFIT_FAKE_NVML_WITHOUT_TOPOLOGY), std::string::npos);
}

TEST(NvmlFaults, WithoutTheMigApiTheRestIsDiscoveredAndMigIsUnknown) {
  auto found = DiscoverWithNvml(Fake("dgx-a100-mig", LINKFIT_FAKE_NVML_WITHOUT_MIG));
  ASSERT_TRUE(found) << found.error().message;
  for (const topology::GpuSpec& gpu : found->spec.gpus) {
    EXPECT_EQ(gpu.mig_mode, topology::MigMode::kUnknown) << gpu.index;
    EXPECT_TRUE(gpu.mig_instances.empty());
    EXPECT_TRUE(gpu.healthy);
  }
  ASSERT_FALSE(found->warnings.empty());
  EXPECT_NE(found->warnings[0].find("lacks the MIG API"), std::string::npos) << found->warnings[0];
  EXPECT_TRUE(topology::BuildTopology(found->spec));
}

TEST(NvmlFaults, AnNvmlOlderThan11IsRefusedNamingItsVersion) {
  nlohmann::json recording = LoadRecording("dgx1-v100");
  recording["nvml_version"] = "10.440.33.01";
  auto found = DiscoverWithNvml(FakeWith(recording, "old"));
  ASSERT_FALSE(found);
  EXPECT_NE(MessageOf(found).find("NVML 10.440.33.01 is too old"), std::string::npos)
      << MessageOf(found);
  EXPECT_FALSE(WatchHealthWithNvml(FakeWith(recording, "old")));

  recording["nvml_version"] = "11.450.51.06";  // the first NVML with the MIG API
  EXPECT_TRUE(DiscoverWithNvml(FakeWith(recording, "r450")));
}

TEST(NvmlFaults, AMissingRecordingFailsNvmlInit) {
  setenv("LINKFIT_FAKE_NVML", "/nonexistent/recording.json", 1);
  NvmlOptions options;
  options.library = LINKFIT_FAKE_NVML_FULL;
  auto found = DiscoverWithNvml(options);
  ASSERT_FALSE(found);
  EXPECT_NE(MessageOf(found).find("nvmlInit_v2 failed: Driver Not Loaded"), std::string::npos)
      << MessageOf(found);
}

TEST(NvmlFaults, GarbageRecordingsFailNvmlInit) {
  nlohmann::json wrong_type = LoadRecording("dgx-h100");
  wrong_type["devices"][2]["memory_mib"] = "80 GiB";
  nlohmann::json ragged = LoadRecording("dgx-h100");
  ragged["ancestors"][4].erase(0);
  nlohmann::json unknown_link = LoadRecording("dgx-h100");
  unknown_link["devices"][0]["nvlinks"][0]["remote_type"] = "nvswitch";
  for (const auto& [name, recording] :
       {std::pair<std::string, nlohmann::json>{"wrong-type", wrong_type},
        {"ragged", ragged},
        {"unknown-link", unknown_link}}) {
    SCOPED_TRACE(name);
    auto found = DiscoverWithNvml(FakeWith(recording, name));
    ASSERT_FALSE(found);
    EXPECT_NE(MessageOf(found).find("nvmlInit_v2 failed: Unknown Error"), std::string::npos)
        << MessageOf(found);
  }
  const std::string truncated = ::testing::TempDir() + "/nvml-truncated.json";
  std::ofstream(truncated) << "{\"devices\": 7";
  setenv("LINKFIT_FAKE_NVML", truncated.c_str(), 1);
  NvmlOptions options;
  options.library = LINKFIT_FAKE_NVML_FULL;
  auto found = DiscoverWithNvml(options);
  ASSERT_FALSE(found);
  EXPECT_NE(MessageOf(found).find("nvmlInit_v2 failed"), std::string::npos) << MessageOf(found);
}

TEST(NvmlFaults, ANodeWithoutGpusIsAnError) {
  nlohmann::json recording = LoadRecording("dgx1-v100");
  recording["devices"] = nlohmann::json::array();
  recording["ancestors"] = nlohmann::json::array();
  auto found = DiscoverWithNvml(FakeWith(recording, "no-gpus"));
  ASSERT_FALSE(found);
  EXPECT_EQ(MessageOf(found), "NVML sees no GPU on this node");
}

// One GPU's queries fail (lost after its handle was taken, or another NVML error) and another
// cannot be opened: both are published unhealthy naming the NVML error; the others are intact.
TEST(NvmlFaults, FailingQueriesMarkOnlyTheirGpu) {
  nlohmann::json recording = LoadRecording("dgx-h100");
  recording["devices"][3]["errors"] = {{"nvmlDeviceGetMemoryInfo", 15}};  // GPU is lost
  recording["devices"][6]["errors"] = {{"nvmlDeviceGetHandleByIndex_v2", 999}};
  recording["devices"][1]["errors"] = {{"nvmlDeviceGetUUID", 16}};  // reset required
  auto found = DiscoverWithNvml(FakeWith(recording, "failing-queries"));
  ASSERT_TRUE(found) << found.error().message;
  const auto& gpus = found->spec.gpus;
  EXPECT_FALSE(gpus[3].healthy);
  EXPECT_EQ(gpus[3].health_problem, "nvmlDeviceGetMemoryInfo: GPU is lost (15)");
  EXPECT_FALSE(gpus[6].healthy);
  EXPECT_EQ(gpus[6].health_problem, "NVML cannot open the GPU: Unknown Error (999)");
  EXPECT_FALSE(gpus[1].healthy);
  EXPECT_EQ(gpus[1].health_problem, "nvmlDeviceGetUUID: GPU requires restart (16)");
  EXPECT_TRUE(gpus[1].uuid.empty());
  for (int g : {0, 2, 4, 5, 7}) {
    const auto& gpu = gpus[static_cast<std::size_t>(g)];
    EXPECT_TRUE(gpu.healthy) << g << ": " << gpu.health_problem;
    EXPECT_EQ(gpu.memory_mib, 81559u) << g;
  }
  auto built = topology::BuildTopology(found->spec);
  ASSERT_TRUE(built) << built.error().message;
  const topology::TopologyPtr fixture = linkfit::testing::LoadFixture("dgx-h100");
  for (int a : {0, 1, 2, 3, 4, 5, 7}) {  // GPU 6's NVLinks are unknown, the others' are read
    for (int b : {0, 1, 2, 3, 4, 5, 7}) {
      if (a != b) {
        EXPECT_TRUE((*built)->has_nvlink(a, b)) << a << "-" << b;
      }
    }
  }
  EXPECT_FALSE((*built)->has_nvlink(0, 6));
  EXPECT_EQ(fixture->gpu_count(), (*built)->gpu_count());
}

// A PCIe relation NVML cannot give is SYS, said in a warning.
TEST(NvmlFaults, AnUnknownPcieRelationIsSysWithAWarning) {
  nlohmann::json recording = LoadRecording("pcie-8x-l40s-2socket");
  recording["devices"][4]["errors"] = {{"nvmlDeviceGetTopologyCommonAncestor", 999}};
  auto found = DiscoverWithNvml(FakeWith(recording, "no-ancestor"));
  ASSERT_TRUE(found) << found.error().message;
  for (const topology::LinkSpec& link : found->spec.links) {
    if (link.a == 4 || link.b == 4) {
      EXPECT_EQ(link.pcie, topology::PcieRelation::kSys);
    }
  }
  bool said = false;
  for (const std::string& warning : found->warnings) {
    said = said || warning.find("GPU4-GPU5: PCIe relation unknown") != std::string::npos;
  }
  EXPECT_TRUE(said);
  EXPECT_TRUE(topology::BuildTopology(found->spec));
}

}  // namespace
}  // namespace linkfit::agent
