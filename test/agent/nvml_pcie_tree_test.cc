// The PCIe switches above the GPUs and the figures of their links come from sysfs
// (src/agent/sysfs_pcie.h): a gen3 switch between gen4 GPUs limits the pairs whose path crosses
// its links, and the published document says the figures came from sysfs.

#include <gtest/gtest.h>

#include <string>

#include "agent/sysfs_pcie.h"
#include "fake_nvml/nvml_test_support.h"

namespace linkfit::agent {
namespace {

using testing::Build;
using testing::Fake;
using testing::FakeWith;
using testing::LoadRecording;
using testing::RecordedSysfs;

constexpr const char* kMachine = "pcie-4x-gen4-behind-gen3-switch";

nlohmann::json Expected() {
  return nlohmann::json::parse(linkfit::testing::ReadFileOrDie(
      linkfit::testing::SourcePath(std::string("test/data/nvml/expected/") + kMachine + ".json")));
}

TEST(SysfsPcie, LinkSpeedsNameTheirGeneration) {
  EXPECT_EQ(PcieGenerationOfSpeed("2.5 GT/s PCIe"), 1);
  EXPECT_EQ(PcieGenerationOfSpeed("5.0 GT/s PCIe"), 2);
  EXPECT_EQ(PcieGenerationOfSpeed("8 GT/s"), 3);  // kernels before 4.14
  EXPECT_EQ(PcieGenerationOfSpeed("16.0 GT/s PCIe"), 4);
  EXPECT_EQ(PcieGenerationOfSpeed("32.0 GT/s PCIe\n"), 5);
  EXPECT_EQ(PcieGenerationOfSpeed("64.0 GT/s PCIe"), 6);
  for (const char* garbage :
       {"", "Unknown speed", "16.0", "12.0 GT/s", "GT/s", "16.0 Gb/s", "..5 GT/s", "-8 GT/s"}) {
    EXPECT_EQ(PcieGenerationOfSpeed(garbage), 0) << garbage;
  }
}

TEST(SysfsPcie, ASlowSwitchLimitsThePairsThatCrossIt) {
  const RecordedSysfs sysfs(kMachine);
  NvmlOptions options = Fake(kMachine);
  options.sysfs_root = sysfs.root();
  auto found = DiscoverWithNvml(options);
  ASSERT_TRUE(found) << found.error().message;
  const nlohmann::json published = nlohmann::json::parse(topology::ToTopologyDocument(found->spec));
  EXPECT_EQ(published, Expected()) << published.dump(1);

  const topology::TopologyPtr built = Build(*found);
  ASSERT_NE(built, nullptr);
  EXPECT_EQ(built->bandwidth_mbps(0, 1), 24000u);  // PIX under one gen4 leaf
  EXPECT_EQ(built->bandwidth_mbps(2, 3), 24000u);
  for (const int a : {0, 1}) {
    for (const int b : {2, 3}) {
      // PXB across both leaf uplinks: gen3 (the top switch's ports), x8 (the second leaf's).
      EXPECT_EQ(built->bandwidth_mbps(a, b), 6000u) << a << "-" << b;
    }
  }
  // The tree agrees with NVML's relations: one switch group per leaf and one for the top switch.
  EXPECT_EQ(built->pcie_switch_groups(), (std::vector<topology::GpuMask>{0b0011, 0b1100, 0b1111}));
  for (const std::string& warning : found->warnings) {
    EXPECT_EQ(warning.find("disagree"), std::string::npos) << warning;
  }

  // Without sysfs the same machine reads as gen4 everywhere: the figure is the tree's.
  auto blind = DiscoverWithNvml(Fake(kMachine));
  ASSERT_TRUE(blind) << blind.error().message;
  EXPECT_TRUE(blind->spec.pcie_tree.empty());
  EXPECT_EQ(Build(*blind)->bandwidth_mbps(0, 2), 24000u);
}

// An NVML that does not answer the PCIe link calls: each GPU's link comes from sysfs (its
// function's and its port's maximum, not the 2.5 GT/s it idles at), not from the model table.
TEST(SysfsPcie, AGpuLinkNvmlDoesNotStateComesFromSysfs) {
  nlohmann::json recording = LoadRecording(kMachine);
  for (nlohmann::json& device : recording["devices"]) device.erase("pcie");
  const RecordedSysfs sysfs(kMachine);
  NvmlOptions options = FakeWith(recording, "pcie-tree-no-link-calls");
  options.sysfs_root = sysfs.root();
  auto found = DiscoverWithNvml(options);
  ASSERT_TRUE(found) << found.error().message;
  for (const topology::GpuSpec& gpu : found->spec.gpus) {
    EXPECT_EQ(gpu.pcie_gen, 4) << gpu.index;
    EXPECT_EQ(gpu.pcie_width, 16) << gpu.index;
    EXPECT_EQ(gpu.sources.pcie, topology::FigureSource::kSysfs) << gpu.index;
  }
  for (const GuessedFigure& guess : found->guessed) EXPECT_NE(guess.figure, "pcie");
}

// A GPU sysfs does not know (a bus id without a device link) keeps an empty path; the others
// keep theirs, and the warning names it.
TEST(SysfsPcie, AGpuSysfsDoesNotKnowIsSaid) {
  nlohmann::json recording = LoadRecording(kMachine);
  recording["devices"][3]["bus_id"] = "00000000:0B:00.0";
  const RecordedSysfs sysfs(kMachine);
  NvmlOptions options = FakeWith(recording, "pcie-tree-unknown-gpu");
  options.sysfs_root = sysfs.root();
  auto found = DiscoverWithNvml(options);
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_TRUE(found->spec.gpus[3].pcie_path.empty());
  EXPECT_EQ(found->spec.gpus[0].pcie_path.size(), 3u);  // host bridge, top switch, leaf
  bool said = false;
  for (const std::string& warning : found->warnings) {
    said = said || warning.find("PCIe path of GPUs 3 unknown to sysfs") != std::string::npos;
  }
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace linkfit::agent
