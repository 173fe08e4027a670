// The device files of handed devices, for NRI runtimes without CDI: read from a node's driver
// files (a fake /proc tree), and every way they can be missing or ambiguous named.

#include "linkfit/handoff/device_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "handoff/node_testing.h"

namespace linkfit::handoff {
namespace {

namespace fs = std::filesystem;

// A DGX H100 ("GPU-i") with GPU 7 in MIG mode: GPU instances 1 and 2.
topology::TopologySpec Node() {
  topology::TopologySpec spec = linkfit::testing::H100Node();
  spec.gpus[7].mig_mode = topology::MigMode::kEnabled;
  spec.gpus[7].mig_instances = {{"3g.40gb", 0, 4, "MIG-7-0", 1}, {"3g.40gb", 4, 4, "MIG-7-4", 2}};
  return spec;
}

TEST(DeviceFiles, GpusMigInstancesAndControlFilesFromTheDriver) {
  const std::string proc = linkfit::testing::WriteFakeProc(Node(), "files");
  auto files = ReadDeviceFiles(proc, Node());
  ASSERT_TRUE(files) << files.error().message;
  EXPECT_EQ(files->control, (std::vector<DeviceFile>{{"/dev/nvidiactl", 195, 255},
                                                     {"/dev/nvidia-uvm", 510, 0},
                                                     {"/dev/nvidia-uvm-tools", 510, 1}}));
  EXPECT_EQ(files->by_uuid.at("GPU-3"), (std::vector<DeviceFile>{{"/dev/nvidia13", 195, 13}}));
  EXPECT_EQ(files->by_uuid.at("MIG-7-4"),
            (std::vector<DeviceFile>{{"/dev/nvidia17", 195, 17},
                                     {"/dev/nvidia-caps/nvidia-cap172", 511, 172},
                                     {"/dev/nvidia-caps/nvidia-cap272", 511, 272}}));
  // A container handed GPU 3, MIG 7-4 and a share of GPU 3: control files first, each file once.
  HandedDevices handed;
  handed.gpus = {"GPU-3"};
  handed.mig = {"MIG-7-4"};
  handed.shares = {{"GPU-3", 300}};
  auto needed = DeviceFilesFor(handed, *files);
  ASSERT_TRUE(needed) << needed.error().message;
  ASSERT_EQ(needed->size(), 7u);
  EXPECT_EQ((*needed)[0].path, "/dev/nvidiactl");
  EXPECT_EQ((*needed)[3].path, "/dev/nvidia13");
  EXPECT_EQ((*needed)[4].path, "/dev/nvidia17");
  EXPECT_FALSE(DeviceFilesFor({{"GPU-9"}, {}, {}}, *files));
  fs::remove_all(proc);
}

TEST(DeviceFiles, MissingOrAmbiguousDriverFilesAreNamed) {
  const topology::TopologySpec node = Node();
  const std::string proc = linkfit::testing::WriteFakeProc(node, "broken");
  // A GPU the driver does not list.
  topology::TopologySpec extra = node;
  extra.gpus[0].uuid = "GPU-unknown";
  auto unknown = ReadDeviceFiles(proc, extra);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("GPU 0 (GPU-unknown) is not under"), std::string::npos)
      << unknown.error().message;
  // A GPU instance split into two compute instances.
  fs::create_directories(fs::path(proc) / "driver/nvidia/capabilities/gpu17/mig/gi2/ci1");
  auto split = ReadDeviceFiles(proc, node);
  ASSERT_FALSE(split);
  EXPECT_NE(split.error().message.find("expected one compute instance"), std::string::npos)
      << split.error().message;
  // No nvidia-uvm in /proc/devices.
  std::ofstream(fs::path(proc) / "devices") << "Character devices:\n195 nvidia-frontend\n";
  auto no_uvm = ReadDeviceFiles(proc, node);
  ASSERT_FALSE(no_uvm);
  EXPECT_NE(no_uvm.error().message.find("lists no nvidia-uvm"), std::string::npos);
  // Garbage where a minor number belongs.
  std::ofstream(fs::path(proc) / "devices") << "Character devices:\n510 nvidia-uvm\n";
  std::ofstream(fs::path(proc) / "driver/nvidia/gpus/0000:01:00.0/information")
      << "GPU UUID: GPU-1\nDevice Minor: eleven\n";
  auto garbage = ReadDeviceFiles(proc, node);
  ASSERT_FALSE(garbage);
  EXPECT_NE(garbage.error().message.find("not a number: 'eleven'"), std::string::npos)
      << garbage.error().message;
  fs::remove_all(proc);
  EXPECT_FALSE(ReadDeviceFiles(proc, node));  // no /proc at all
}

}  // namespace
}  // namespace linkfit::handoff
