// The PCIe switches above the GPUs and the figures of their links come from sysfs
// (src/agent/sysfs_pcie.h): a gen3 switch between gen4 GPUs limits the pairs whose path crosses
// its links, and the published document says the figures came from sysfs.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
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

namespace linkfit::agent {
namespace {

// Discovery publishes the RDMA NICs sysfs shows, related to each GPU from the PCI paths: a NIC
// on the first leaf switch is PIX to GPUs 0 and 1 and PXB to 2 and 3 (across the top switch).
TEST(SysfsPcie, PublishedDocumentCarriesTheNics) {
  const RecordedSysfs sysfs(kMachine);
  const std::filesystem::path root = sysfs.root();
  const std::string nic =
      "devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0/0000:04:02.0/"
      "0000:0c:00.0";
  std::filesystem::create_directories(root / nic / "infiniband_verbs" / "uverbs0");
  std::ofstream(root / nic / "numa_node") << "0\n";
  std::ofstream(root / nic / "infiniband_verbs" / "uverbs0" / "ibdev") << "mlx5_0\n";
  std::filesystem::create_directories(root / "class" / "infiniband" / "mlx5_0" / "ports" / "1");
  std::filesystem::create_symlink("../../../" + nic, root / "class/infiniband/mlx5_0/device");
  std::ofstream(root / "class/infiniband/mlx5_0/ports/1/link_layer") << "InfiniBand\n";
  NvmlOptions options = Fake(kMachine);
  options.sysfs_root = sysfs.root();
  auto found = DiscoverWithNvml(options);
  ASSERT_TRUE(found) << found.error().message;
  nlohmann::json published = nlohmann::json::parse(topology::ToTopologyDocument(found->spec));
  EXPECT_EQ(published["nics"], nlohmann::json::parse(R"([{"name": "mlx5_0",
    "pci_bus_id": "0000:0c:00.0", "numa_node": 0, "link_layer": "InfiniBand",
    "uverbs": "uverbs0", "gpu_relations": ["PIX", "PIX", "PXB", "PXB"]}])"));
  // The rest of the document is what it was without the NIC.
  published.erase("nics");
  EXPECT_EQ(published, Expected());
  ASSERT_NE(Build(*found), nullptr);

  // --nic-rails sets a rail by name; a name the node lacks is a warning.
  options.nic_rails = {{"mlx5_0", 3}, {"mlx5_9", 1}};
  auto railed = Discover(options, [](const std::vector<std::string>&) -> Result<std::string> {
    return MakeError("nvidia-smi is not run when NVML works");
  });
  ASSERT_TRUE(railed) << railed.error().message;
  ASSERT_EQ(railed->spec.nics.size(), 1u);
  EXPECT_EQ(railed->spec.nics[0].rail, 3);
  EXPECT_EQ(nlohmann::json::parse(topology::ToTopologyDocument(railed->spec))["nics"][0]["rail"],
            3);
  bool warned = false;
  for (const std::string& warning : railed->warnings) {
    warned = warned || warning == "--nic-rails names mlx5_9, which this node does not have";
  }
  EXPECT_TRUE(warned);
}

TEST(SysfsPcie, NicRailsFlagParses) {
  auto rails = ParseNicRails("mlx5_0=0, mlx5_3=1,,mlx5_10=7");
  ASSERT_TRUE(rails) << rails.error().message;
  EXPECT_EQ(*rails, (std::map<std::string, int>{{"mlx5_0", 0}, {"mlx5_3", 1}, {"mlx5_10", 7}}));
  for (const char* bad :
       {"mlx5_0", "mlx5_0=", "=1", "mlx5_0=-1", "mlx5_0=128", "mlx5_0=x", "mlx5_0=1,mlx5_0=2"}) {
    EXPECT_FALSE(ParseNicRails(bad)) << bad;
  }
  EXPECT_NE(ParseNicRails("mlx5_0=1,mlx5_0=2").error().message.find("mlx5_0 is given twice"),
            std::string::npos);
}

}  // namespace
}  // namespace linkfit::agent
