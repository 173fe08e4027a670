// The strict parsers of `nvidia-smi mig -lgi` and of the MIG-mode query CSV
// (src/agent/smi_mig_table.h): good tables, the "no instance" messages, and garbage refused
// with the line named.

#include <gtest/gtest.h>

#include "agent/smi_mig_table.h"
#include "testing/fixtures.h"

namespace linkfit::agent {
namespace {

using topology::MigMode;

std::string Data(const std::string& name) {
  return linkfit::testing::ReadFileOrDie(
      linkfit::testing::SourcePath("test/data/nvidia-smi/" + name));
}

constexpr const char* kTableHead =
    "+-------------------------------------------------------+\n"
    "| GPU instances:                                        |\n"
    "| GPU   Name             Profile  Instance   Placement  |\n"
    "|                          ID       ID       Start:Size |\n"
    "|=======================================================|\n";

std::string Table(const std::string& rows) { return kTableHead + rows; }

TEST(MigInstanceTable, ParsesTheRecordedTable) {
  auto table = ParseMigInstanceTable(Data("dgx-a100.mig-lgi.txt"));
  ASSERT_TRUE(table) << table.error().message;
  ASSERT_EQ(table->size(), 3u);
  const SmiGpuInstance& first = (*table)[0];
  EXPECT_EQ(first.gpu, 6);
  EXPECT_EQ(first.profile, "2g.10gb");
  EXPECT_EQ(first.profile_id, 14);
  EXPECT_EQ(first.instance_id, 5);
  EXPECT_EQ(first.start, 0);
  EXPECT_EQ(first.size, 2);
  const SmiGpuInstance& last = (*table)[2];
  EXPECT_EQ(last.profile, "3g.20gb");
  EXPECT_EQ(last.profile_id, 9);
  EXPECT_EQ(last.instance_id, 1);
  EXPECT_EQ(last.start, 4);
  EXPECT_EQ(last.size, 4);
}

TEST(MigInstanceTable, AcceptsUnknownProfilesAndSeveralGpus) {
  auto table =
      ParseMigInstanceTable(Table("|   0  MIG 1g.10gb+me      20        7          6:1     |\n"
                                  "+-------------------------------------------------------+\n"
                                  "|   1  MIG 7g.80gb          0        0          0:8     |\n"
                                  "+-------------------------------------------------------+\n"
                                  "|  12  4g.96gb             5        3          0:4     |\n"));
  ASSERT_TRUE(table) << table.error().message;
  ASSERT_EQ(table->size(), 3u);
  EXPECT_EQ((*table)[0].profile, "1g.10gb+me");
  EXPECT_EQ((*table)[1].gpu, 1);
  EXPECT_EQ((*table)[1].size, 8);
  EXPECT_EQ((*table)[2].gpu, 12);
  EXPECT_EQ((*table)[2].profile, "4g.96gb");  // printed without "MIG ": kept as is
}

TEST(MigInstanceTable, NoInstanceMessagesAreEmptyTables) {
  for (const char* text :
       {"", "\n\n", "No GPU instances found: Not Found\n", "No MIG-enabled devices found.\n",
        "Unable to get GPU instances for GPU 1: Not in MIG mode\n", kTableHead}) {
    auto table = ParseMigInstanceTable(text);
    ASSERT_TRUE(table) << text << ": " << table.error().message;
    EXPECT_TRUE(table->empty()) << text;
  }
}

TEST(MigInstanceTable, RefusesGarbageNamingTheLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"hello world\n", "line 1: expected"},
      {"Failed to display GPU instances: Insufficient Permissions\n", "line 1: expected"},
      {Table("|   0  MIG 3g.20gb   9   1   6:4  |\n"), "line 6: placement 6:4 does not fit"},
      {Table("|   0  MIG 3g.20gb   9   1   4:0  |\n"), "line 6: placement 4:0 does not fit"},
      {Table("|   0  MIG  |\n"), "line 6: expected"},
      {Table("|  x  MIG 1g.5gb  19  1  0:1 |\n"), "line 6, GPU: \"x\""},
      {Table("|  16  MIG 1g.5gb  19  1  0:1 |\n"), "line 6, GPU: \"16\" is not a number in 0..15"},
      {Table("|  0  MIG 1g.5gb  nineteen  1  0:1 |\n"), "line 6, profile ID"},
      {Table("|  0  MIG 1g.5gb  19  -1  0:1 |\n"), "line 6, instance ID"},
      {Table("|  0  MIG 1g.5gb  19  1  01 |\n"), "line 6: placement \"01\" is not <start>:<size>"},
      {Table("|  0  MIG 1g.5gb  19  1  0:1  extra |\n"), "line 6: expected"},
      {Table("|  0  XYZ 1g.5gb  19  1  0:1 |\n"), "line 6: expected"},
      {Table("| GPU   Name   Something else |\n"), "line 6: expected"},
      {Table("|  0  MIG 1g.5gb  19  1  0:1 |\n|  0  MIG 1g.5gb  19  1  1:1 |\n"),
       "line 7: instance ID 1 is the same as GPU 0's instance at line 6"},
      {Table("|  0  MIG 2g.10gb  14  1  0:2 |\n|  0  MIG 1g.5gb  19  2  1:1 |\n"),
       "line 7: placement 1:1 overlaps the memory slices as GPU 0's instance at line 6"},
  };
  for (const auto& [text, message] : cases) {
    auto table = ParseMigInstanceTable(text);
    ASSERT_FALSE(table) << text;
    EXPECT_NE(table.error().message.find("nvidia-smi mig -lgi, " + message), std::string::npos)
        << table.error().message;
  }
  // The same placement on two GPUs is fine.
  EXPECT_TRUE(ParseMigInstanceTable(
      Table("|  0  MIG 1g.5gb  19  1  0:1 |\n|  1  MIG 1g.5gb  19  1  0:1 |\n")));
}

TEST(MigModeCsv, ParsesModesAndUnreadableFields) {
  auto modes = ParseMigModeCsv(Data("dgx-a100.mig-mode.csv"));
  ASSERT_TRUE(modes) << modes.error().message;
  ASSERT_EQ(modes->size(), 8u);
  EXPECT_EQ(modes->at(6).current, MigMode::kEnabled);
  EXPECT_EQ(modes->at(7).current, MigMode::kDisabled);
  EXPECT_EQ(modes->at(7).pending, MigMode::kEnabled);
  EXPECT_TRUE(modes->at(0).supported);

  auto none = ParseMigModeCsv(Data("pcie-8x-l40s-2socket.mig-mode.csv"));
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_FALSE(none->at(0).supported);
  EXPECT_EQ(none->at(0).current, MigMode::kUnknown);
  EXPECT_EQ(none->at(0).problem, "");

  auto broken = ParseMigModeCsv(
      "0, [GPU requires reset], [GPU requires reset]\n"
      "Unable to determine the device handle for GPU00000000:07:00.0: Unknown Error\n"
      "2, Enabled, [Unknown Error]\n");
  ASSERT_TRUE(broken) << broken.error().message;
  EXPECT_EQ(broken->size(), 2u);
  EXPECT_EQ(broken->at(0).problem, "nvidia-smi reports [GPU requires reset] for its MIG mode");
  EXPECT_FALSE(broken->at(0).supported);
  EXPECT_EQ(broken->at(2).current, MigMode::kEnabled);
  EXPECT_EQ(broken->at(2).problem, "nvidia-smi reports [Unknown Error] for its MIG mode");
}

TEST(MigModeCsv, RefusesGarbageNamingTheLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"0, Maybe, Enabled\n", "line 1: MIG mode \"Maybe\""},
      {"0, Enabled\n", "line 1: expected 3 fields"},
      {"0, Enabled, Enabled\nzero, Enabled, Enabled\n", "line 2, index"},
      {"0, Enabled, Enabled\n0, Disabled, Disabled\n", "line 2: GPU 0 is listed twice"},
      {"index, mig.mode.current, mig.mode.pending\n", "line 1, index"},
  };
  for (const auto& [text, message] : cases) {
    auto modes = ParseMigModeCsv(text);
    ASSERT_FALSE(modes) << text;
    EXPECT_NE(modes.error().message.find(message), std::string::npos) << modes.error().message;
  }
}

TEST(SmiErrorMarkers, FindsTheMarkersNvidiaSmiPrints) {
  EXPECT_EQ(FindSmiErrorMarker("3, [GPU requires reset], x"), "[GPU requires reset]");
  EXPECT_EQ(FindSmiErrorMarker("ERR!"), "ERR!");
  EXPECT_EQ(FindSmiErrorMarker("[Unknown Error]"), "[Unknown Error]");
  EXPECT_EQ(FindSmiErrorMarker("Unknown Error"), "Unknown Error");
  EXPECT_EQ(FindSmiErrorMarker("[GPU is lost]"), "[GPU is lost]");
  EXPECT_EQ(FindSmiErrorMarker("0, GPU-abc, NVIDIA A100, 40536 MiB, 00000000:07:00.0"), "");
  EXPECT_TRUE(IsSmiDeviceHandleError(
      "  Unable to determine the device handle for GPU0000:07:00.0: GPU is lost"));
  EXPECT_FALSE(IsSmiDeviceHandleError("0, Enabled, Enabled"));
}

}  // namespace
}  // namespace linkfit::agent
