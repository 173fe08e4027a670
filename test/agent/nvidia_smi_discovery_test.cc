// The node agent's nvidia-smi fallback: recorded outputs served by a scripted CommandRunner give
// what linkfit's own nvidia-smi parser gives plus MIG facts and health; failures name the
// command; the `nvidia-smi mig -lgi` and MIG-mode parsers are strict; the real command runner
// runs programs, times them out and bounds their output.

#include <gtest/gtest.h>

#include <map>

#include "agent/run_command.h"
#include "agent/smi_mig_table.h"
#include "linkfit/agent/discovery.h"
#include "linkfit/topology/topology.h"
#include "testing/fixtures.h"

namespace linkfit::agent {
namespace {

std::string Data(const std::string& name) {
  return linkfit::testing::ReadFileOrDie(
      linkfit::testing::SourcePath("test/data/nvidia-smi/" + name));
}

// Serves recorded files by command line; unknown commands fail like a missing subcommand.
struct ScriptedSmi {
  std::map<std::string, Result<std::string>> answers;
  std::vector<std::string> asked;

  CommandRunner Runner() {
    return [this](const std::vector<std::string>& argv) -> Result<std::string> {
      std::string line;
      for (const std::string& arg : argv) line += (line.empty() ? "" : " ") + arg;
      asked.push_back(line);
      const auto it = answers.find(line);
      if (it == answers.end()) return MakeError("`" + line + "`: exit status 2: unknown");
      return it->second;
    };
  }
};

const char* kTopo = "nvidia-smi topo -m";
const char* kQuery = "nvidia-smi --query-gpu=index,uuid,name,memory.total,pci.bus_id --format=csv";
const char* kMigModes =
    "nvidia-smi --query-gpu=index,mig.mode.current,mig.mode.pending --format=csv,noheader";
const char* kLgi = "nvidia-smi mig -lgi";
const char* kDriver = "nvidia-smi --query-gpu=driver_version --format=csv,noheader";

ScriptedSmi Machine(const std::string& id) {
  ScriptedSmi smi;
  smi.answers.emplace(kTopo, Data(id + ".topo.txt"));
  smi.answers.emplace(kQuery, Data(id + ".query.csv"));
  smi.answers.emplace(kDriver, std::string("550.54.15\n550.54.15\n"));
  return smi;
}

TEST(NvidiaSmiDiscovery, GivesWhatLinkfitsParserGivesPlusMigFacts) {
  ScriptedSmi smi = Machine("dgx-a100");
  smi.answers.emplace(kMigModes, Data("dgx-a100.mig-mode.csv"));
  smi.answers.emplace(kLgi, Data("dgx-a100.mig-lgi.txt"));
  auto found = DiscoverWithNvidiaSmi(smi.Runner());
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->source, "nvidia-smi");
  EXPECT_EQ(found->driver_version, "550.54.15");
  auto parsed = topology::ParseNvidiaSmi(Data("dgx-a100.topo.txt"), Data("dgx-a100.query.csv"));
  ASSERT_TRUE(parsed);
  auto expected = topology::BuildTopology(*parsed);
  auto discovered = topology::BuildTopology(found->spec);
  ASSERT_TRUE(expected && discovered);
  EXPECT_EQ((*discovered)->fingerprint(), (*expected)->fingerprint());
  const auto& gpus = found->spec.gpus;
  EXPECT_EQ(gpus[0].mig_mode, topology::MigMode::kDisabled);
  EXPECT_EQ(gpus[6].mig_mode, topology::MigMode::kEnabled);
  EXPECT_EQ(gpus[7].mig_mode_pending, topology::MigMode::kEnabled);
  const std::vector<topology::MigInstanceSpec> instances = {
      {"2g.10gb", 0, 2, ""}, {"1g.5gb", 2, 1, ""}, {"3g.20gb", 4, 4, ""}};
  EXPECT_EQ(gpus[6].mig_instances, instances);
  for (const auto& gpu : gpus) EXPECT_TRUE(gpu.healthy);
}

TEST(NvidiaSmiDiscovery, NoMigSupportAndNoInstanceTableNeeded) {
  ScriptedSmi smi = Machine("pcie-8x-l40s-2socket");
  smi.answers.emplace(kMigModes, Data("pcie-8x-l40s-2socket.mig-mode.csv"));
  auto found = DiscoverWithNvidiaSmi(smi.Runner());
  ASSERT_TRUE(found) << found.error().message;
  for (const auto& gpu : found->spec.gpus) EXPECT_EQ(gpu.mig_mode, topology::MigMode::kDisabled);
  for (const std::string& line : smi.asked) EXPECT_NE(line, kLgi);
  // An old driver without the MIG query: modes unknown, said so, not fatal.
  ScriptedSmi old = Machine("dgx1-v100");
  auto found_old = DiscoverWithNvidiaSmi(old.Runner());
  ASSERT_TRUE(found_old) << found_old.error().message;
  EXPECT_EQ(found_old->spec.gpus[0].mig_mode, topology::MigMode::kUnknown);
  ASSERT_FALSE(found_old->warnings.empty());
}

TEST(NvidiaSmiDiscovery, FailingGpusAreUnhealthyAndTheRestPublished) {
  ScriptedSmi smi = Machine("pcie-8x-l40s-2socket");
  smi.answers.erase(kQuery);
  smi.answers.emplace(kQuery, Data("pcie-8x-l40s-2socket.query-error.csv"));
  smi.answers.emplace(kMigModes, Data("pcie-8x-l40s-2socket.mig-mode.csv"));
  auto found = DiscoverWithNvidiaSmi(smi.Runner());
  ASSERT_TRUE(found) << found.error().message;
  const auto& gpus = found->spec.gpus;
  EXPECT_FALSE(gpus[3].healthy);
  EXPECT_NE(gpus[3].health_problem.find("[GPU requires reset]"), std::string::npos);
  EXPECT_FALSE(gpus[6].healthy);
  EXPECT_NE(gpus[6].health_problem.find("ERR!"), std::string::npos);
  EXPECT_EQ(gpus[6].model, "NVIDIA L40S");  // the readable fields are kept
  for (int g : {0, 1, 2, 4, 5, 7}) EXPECT_TRUE(gpus[static_cast<std::size_t>(g)].healthy) << g;
  EXPECT_TRUE(topology::BuildTopology(found->spec));
}

TEST(NvidiaSmiDiscovery, FailuresNameTheCommand) {
  ScriptedSmi none;
  none.answers.emplace(kTopo, Result<std::string>(MakeError("`nvidia-smi topo -m`: not found")));
  auto missing = DiscoverWithNvidiaSmi(none.Runner());
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("nvidia-smi topo -m"), std::string::npos);

  ScriptedSmi garbage = Machine("dgx-a100");
  garbage.answers.erase(kTopo);
  garbage.answers.emplace(kTopo, std::string("this is not a matrix\n"));
  auto bad = DiscoverWithNvidiaSmi(garbage.Runner());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("nvidia-smi"), std::string::npos);

  ScriptedSmi bad_lgi = Machine("dgx-a100");
  bad_lgi.answers.emplace(kMigModes, Data("dgx-a100.mig-mode.csv"));
  bad_lgi.answers.emplace(kLgi, std::string("|   6  MIG 3g.20gb   9   1   four:4  |\n"));
  auto lgi = DiscoverWithNvidiaSmi(bad_lgi.Runner());
  ASSERT_FALSE(lgi);
  EXPECT_NE(lgi.error().message.find("mig -lgi, line 1"), std::string::npos) << lgi.error().message;
}

TEST(NvidiaSmiDiscovery, DiscoverFallsBackWhenNvmlCannotBeLoaded) {
  ScriptedSmi smi = Machine("dgx-h100");
  NvmlOptions options;
  options.library = "/nonexistent/libnvidia-ml.so.1";
  auto found = Discover(options, smi.Runner());
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->source, "nvidia-smi");
  ScriptedSmi nothing;
  auto neither = Discover(options, nothing.Runner());
  ASSERT_FALSE(neither);
  EXPECT_NE(neither.error().message.find("NVML: cannot load NVML"), std::string::npos);
  EXPECT_NE(neither.error().message.find("nvidia-smi: `nvidia-smi topo -m`"), std::string::npos)
      << neither.error().message;
}

TEST(MigInstanceTable, ParsesRowsAndMessagesAndRefusesGarbage) {
  auto table = ParseMigInstanceTable(Data("dgx-a100.mig-lgi.txt"));
  ASSERT_TRUE(table) << table.error().message;
  ASSERT_EQ(table->size(), 3u);
  EXPECT_EQ((*table)[2].profile, "3g.20gb");
  EXPECT_EQ((*table)[2].profile_id, 9);
  EXPECT_EQ((*table)[2].instance_id, 1);
  EXPECT_EQ((*table)[2].start, 4);
  EXPECT_EQ((*table)[2].size, 4);
  EXPECT_TRUE(ParseMigInstanceTable("No GPU instances found: Not Found\n")->empty());
  EXPECT_TRUE(ParseMigInstanceTable("").value().empty());
  for (const char* bad : {"|   0  MIG 3g.20gb   9   1   6:4  |", "|  0  MIG  |",
                          "|  x  MIG 1g.5gb  19  1  0:1 |", "hello world"}) {
    auto parsed = ParseMigInstanceTable(bad);
    EXPECT_FALSE(parsed) << bad;
  }
  auto modes = ParseMigModeCsv(Data("dgx-a100.mig-mode.csv"));
  ASSERT_TRUE(modes);
  EXPECT_EQ(modes->at(7).pending, topology::MigMode::kEnabled);
  EXPECT_FALSE(ParseMigModeCsv("0, Maybe, Enabled\n"));
  EXPECT_FALSE(ParseMigModeCsv("0, Enabled\n"));
}

TEST(RunCommand, RunsTimesOutAndBoundsOutput) {
  auto echo = RunCommand({"echo", "hello"}, {});
  ASSERT_TRUE(echo) << echo.error().message;
  EXPECT_EQ(*echo, "hello\n");
  auto failed = RunCommand({"sh", "-c", "echo oops >&2; exit 3"}, {});
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().message.find("exit status 3: oops"), std::string::npos)
      << failed.error().message;
  auto missing = RunCommand({"linkfit-no-such-program"}, {});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("not found"), std::string::npos);
  RunLimits quick;
  quick.timeout = std::chrono::milliseconds(200);
  auto slow = RunCommand({"sleep", "5"}, quick);
  ASSERT_FALSE(slow);
  EXPECT_NE(slow.error().message.find("killed after 200 ms"), std::string::npos);
  RunLimits small;
  small.max_output = 1000;
  auto big = RunCommand({"sh", "-c", "yes | head -c 100000"}, small);
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("more than 1000 bytes"), std::string::npos);
}

}  // namespace
}  // namespace linkfit::agent
