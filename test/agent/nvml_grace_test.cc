// NUMA on platforms whose GPU memory is itself a NUMA node (Grace: a GB200 tray's GPUs report
// nodes 2, 10, 18, 26 through nvmlDeviceGetNumaNodeId, nodes without CPUs). Placement's NUMA
// closeness means the CPU-side node: from NVML's memory affinity, else sysfs numa_node of the PCI
// function, never the GPU memory's own node. The tray is also a GPU model linkfit's table lacks,
// on NVLink 5 with 18 links per GPU.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fake_nvml/nvml_test_support.h"

namespace linkfit::agent {
namespace {

using testing::Build;
using testing::Fake;
using testing::FakeWith;
using testing::LoadRecording;

const std::vector<topology::GpuMask> kTwoGraceNodes = {0b0011, 0b1100};

// A sysfs tree with the given files (relative path -> content), removed with the object.
class Sysfs {
 public:
  explicit Sysfs(const std::vector<std::pair<std::string, std::string>>& files)
      : root_(std::filesystem::temp_directory_path() /
              ("linkfit-grace-sysfs-" + std::to_string(getpid()))) {
    for (const auto& [relative, content] : files) {
      const std::filesystem::path path = root_ / relative;
      std::filesystem::create_directories(path.parent_path());
      std::ofstream(path) << content << "\n";
    }
  }
  ~Sysfs() { std::filesystem::remove_all(root_); }
  std::string root() const { return root_.string(); }

 private:
  std::filesystem::path root_;
};

TEST(NvmlGrace, ATrayIsPublishedWithItsCpuSideNumaNodes) {
  auto found = DiscoverWithNvml(Fake("gb200-tray-grace"));
  ASSERT_TRUE(found) << found.error().message;
  const nlohmann::json published = nlohmann::json::parse(topology::ToTopologyDocument(found->spec));
  const nlohmann::json expected = nlohmann::json::parse(linkfit::testing::ReadFileOrDie(
      linkfit::testing::SourcePath("test/data/nvml/expected/gb200-tray-grace.json")));
  EXPECT_EQ(published, expected) << published.dump(1);
  const topology::TopologyPtr built = Build(*found);
  ASSERT_NE(built, nullptr);
  EXPECT_EQ(built->numa_groups(), kTwoGraceNodes);
  EXPECT_EQ(built->bandwidth_mbps(0, 3), 370000u);  // NVLink 5 through NVSwitches, not 230
}

TEST(NvmlGrace, WithoutMemoryAffinitySysfsNamesTheCpuSideNode) {
  nlohmann::json recording = LoadRecording("gb200-tray-grace");
  for (auto& device : recording["devices"]) device.erase("memory_affinity");
  const Sysfs sysfs({{"bus/pci/devices/0008:01:00.0/numa_node", "0"},
                     {"bus/pci/devices/0009:01:00.0/numa_node", "0"},
                     {"bus/pci/devices/0018:01:00.0/numa_node", "1"},
                     {"bus/pci/devices/0019:01:00.0/numa_node", "1"}});
  NvmlOptions options = FakeWith(recording, "grace-sysfs");
  options.sysfs_root = sysfs.root();
  auto found = DiscoverWithNvml(options);
  ASSERT_TRUE(found) << found.error().message;
  std::vector<int> numa;
  for (const topology::GpuSpec& gpu : found->spec.gpus) numa.push_back(gpu.numa_node);
  EXPECT_EQ(numa, (std::vector<int>{0, 0, 1, 1}));
}

// Neither affinity nor the PCI function's node: NVML's node is refused where sysfs shows it has
// no CPUs, and the guess is said.
TEST(NvmlGrace, AMemoryOnlyNodeIsNeverTakenForTheCpuSide) {
  nlohmann::json recording = LoadRecording("gb200-tray-grace");
  for (auto& device : recording["devices"]) device.erase("memory_affinity");
  const Sysfs sysfs({{"devices/system/node/node0/cpulist", "0-71"},
                     {"devices/system/node/node2/cpulist", ""},
                     {"devices/system/node/node10/cpulist", ""},
                     {"devices/system/node/node18/cpulist", ""},
                     {"devices/system/node/node26/cpulist", ""}});
  NvmlOptions options = FakeWith(recording, "grace-memory-nodes");
  options.sysfs_root = sysfs.root();
  auto found = DiscoverWithNvml(options);
  ASSERT_TRUE(found) << found.error().message;
  for (const topology::GpuSpec& gpu : found->spec.gpus) EXPECT_EQ(gpu.numa_node, 0) << gpu.index;
  bool said = false;
  for (const std::string& warning : found->warnings) {
    said = said || warning ==
                       "GPU 1: NVML's NUMA node 10 has no CPUs (the GPU's own memory); not "
                       "a CPU-side node";
  }
  EXPECT_TRUE(said);
}

// An affinity that also lists the GPU's own memory node yields the CPU node.
TEST(NvmlGrace, TheGpusOwnNodeInTheAffinityIsSkipped) {
  nlohmann::json recording = LoadRecording("gb200-tray-grace");
  recording["devices"][2]["memory_affinity"] = {1, 18};
  recording["devices"][3]["memory_affinity"] = {26, 1};
  auto found = DiscoverWithNvml(FakeWith(recording, "grace-own-node-listed"));
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->spec.gpus[2].numa_node, 1);
  EXPECT_EQ(found->spec.gpus[3].numa_node, 1);
}

}  // namespace
}  // namespace linkfit::agent

namespace linkfit::agent {
namespace {

// Profiles of newer NVML (+gfx 0xA, -me 0xD, +me.all 0xF and 0x10) are read up to the API's
// NVML_GPU_INSTANCE_PROFILE_COUNT and published with NVML's names; GB200 has no profile set in
// linkfit, so the names are NVML's own sizes.
TEST(NvmlGrace, NewerMigProfilesArePublishedWithTheirNvmlNames) {
  nlohmann::json recording = LoadRecording("gb200-tray-grace");
  recording["mig_profiles"] = {
      {{"profile", 0}, {"id", 19}, {"slices", 1}, {"memory_mb", 23552}, {"instance_count", 7}},
      {{"profile", 10}, {"id", 47}, {"slices", 1}, {"memory_mb", 23552}, {"instance_count", 7}},
      {{"profile", 13}, {"id", 48}, {"slices", 1}, {"memory_mb", 23552}, {"instance_count", 7}},
      {{"profile", 15}, {"id", 49}, {"slices", 1}, {"memory_mb", 23552}, {"instance_count", 1}},
      {{"profile", 16}, {"id", 50}, {"slices", 2}, {"memory_mb", 47104}, {"instance_count", 1}}};
  recording["devices"][1]["mig"] = {
      {"current", 1},
      {"pending", 1},
      {"instances",
       {{{"id", 3}, {"profile", 10}, {"start", 0}, {"size", 1}, {"uuid", "MIG-gfx"}},
        {{"id", 4}, {"profile", 13}, {"start", 1}, {"size", 1}, {"uuid", "MIG-no-me"}},
        {{"id", 5}, {"profile", 15}, {"start", 2}, {"size", 1}, {"uuid", "MIG-all-me"}},
        {{"id", 6}, {"profile", 16}, {"start", 4}, {"size", 2}, {"uuid", "MIG-2g-all-me"}},
        {{"id", 7}, {"profile", 0}, {"start", 7}, {"size", 1}, {"uuid", "MIG-plain"}}}}};
  auto found = DiscoverWithNvml(FakeWith(recording, "gb200-newer-profiles"));
  ASSERT_TRUE(found) << found.error().message;
  const std::vector<topology::MigInstanceSpec> expected = {
      {"1g.23gb+gfx", 0, 1, "MIG-gfx", 3},
      {"1g.23gb-me", 1, 1, "MIG-no-me", 4},
      {"1g.23gb+me.all", 2, 1, "MIG-all-me", 5},
      {"2g.46gb+me.all", 4, 2, "MIG-2g-all-me", 6},
      {"1g.23gb", 7, 1, "MIG-plain", 7}};
  EXPECT_EQ(found->spec.gpus[1].mig_instances, expected);
  EXPECT_EQ(found->spec.gpus[1].mig_mode, topology::MigMode::kEnabled);
}

}  // namespace
}  // namespace linkfit::agent
