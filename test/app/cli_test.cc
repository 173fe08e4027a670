// The command line as a user runs it: `linkfit topo`, `place` (whole GPUs and MIG) and `explain`,
// including their error paths and exit codes.

#include "linkfit/app/cli.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "testing/fixtures.h"

namespace linkfit::app {
namespace {

using linkfit::testing::SourcePath;

struct CliRun {
  int code = 0;
  std::string out;
  std::string err;
};

CliRun Cli(std::vector<std::string> args) {
  std::ostringstream out;
  std::ostringstream err;
  CliRun run;
  run.code = RunCli(args, out, err);
  run.out = out.str();
  run.err = err.str();
  return run;
}

std::string Fixture(const std::string& id) {
  return SourcePath("config/topologies/" + id + ".json");
}

TEST(CliTopo, JsonHasTheMatrixNumaAndIslands) {
  const CliRun run = Cli({"topo", "--topology", Fixture("ws-4x-rtxa6000-nvlink-pairs"), "--json"});
  ASSERT_EQ(run.code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json["gpus"], 4);
  EXPECT_EQ(json["bandwidth_gbps"].size(), 4u);
  EXPECT_DOUBLE_EQ(json["bandwidth_gbps"][0][1].get<double>(), 44.0);  // NV4 x 11 GB/s
  EXPECT_EQ(json["numa"], nlohmann::json({0, 0, 0, 0}));
  EXPECT_EQ(json["islands"], nlohmann::json({{0, 1}, {2, 3}}));
}

TEST(CliTopo, ReadsNvidiaSmiText) {
  const CliRun run =
      Cli({"topo", "--topology", SourcePath("test/data/nvidia-smi/dgx1-v100.topo.txt")});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("NVLink islands:     {0,1,2,3,4,5,6,7}"), std::string::npos) << run.out;
}

// NICs: one line each (name, rail, NUMA node, relations to the GPUs) and, with --json, the
// document's `nics`; a NIC-less topology prints no NIC section and has no "nics" key.
TEST(CliTopo, PrintsNics) {
  const std::string sample = SourcePath("test/data/nvidia-smi/dgx-h100.topo.txt");
  const CliRun run = Cli({"topo", "--topology", sample});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("NICs (relation to GPU0..7):\n"
                         "  mlx5_0  rail 0  NUMA 0  PXB NODE NODE NODE SYS SYS SYS SYS\n"),
            std::string::npos)
      << run.out;
  const CliRun json_run = Cli({"topo", "--topology", sample, "--json"});
  ASSERT_EQ(json_run.code, 0) << json_run.err;
  const auto nics = nlohmann::json::parse(json_run.out)["nics"];
  ASSERT_EQ(nics.size(), 8u);
  EXPECT_EQ(nics[7]["name"], "mlx5_11");
  EXPECT_EQ(nics[7]["rail"], 7);
  EXPECT_EQ(nics[7]["gpu_relations"][7], "PXB");

  const CliRun plain = Cli({"topo", "--topology", Fixture("pcie-8x-rtx4090-all-sys")});
  EXPECT_EQ(plain.out.find("NICs"), std::string::npos) << plain.out;
  const CliRun plain_json =
      Cli({"topo", "--topology", Fixture("pcie-8x-rtx4090-all-sys"), "--json"});
  EXPECT_FALSE(nlohmann::json::parse(plain_json.out).contains("nics"));
  // The fixture schema's NICs (name, NUMA node, the GPUs at PXB).
  const CliRun fixture = Cli({"topo", "--topology", Fixture("dgx-h100")});
  EXPECT_NE(fixture.out.find("  NIC0  rail 0  NUMA 0  PXB"), std::string::npos) << fixture.out;
}

TEST(CliPlace, ChoosesTheBestSetAndReportsItsQuality) {
  const CliRun run = Cli(
      {"place", "--topology", Fixture("dgx1-v100"), "--gpus", "2", "--used", "1,2,3", "--json"});
  ASSERT_EQ(run.code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json["gpus"], nlohmann::json({5, 6}));
  EXPECT_DOUBLE_EQ(json["ring_gbps"].get<double>(), 40.0);
  EXPECT_EQ(json["numa_span"], 1);
}

TEST(CliPlace, RequiredClosenessThatCannotBeMetIsAnErrorWithAReason) {
  const CliRun run = Cli({"place", "--topology", Fixture("pcie-8x-l40s-2socket"), "--gpus", "2",
                          "--closeness", "nvlink", "--required", "--json"});
  EXPECT_EQ(run.code, 1);
  EXPECT_EQ(nlohmann::json::parse(run.out)["error"], "node has no 2 GPUs joined by NVLink");
}

TEST(CliPlace, MigProfileGoesToTheBestFit) {
  const CliRun run =
      Cli({"place", "--topology", Fixture("dgx-a100"), "--mig-profile", "3g.20gb", "--mig-used",
           "0:3g.20gb@4", "--mig-profiles-dir", SourcePath("config/mig"), "--json"});
  ASSERT_EQ(run.code, 0) << run.out << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json["gpu"], 0);
  EXPECT_EQ(json["start"], 0);
}

TEST(CliPlace, BadInputsAreUsageErrors) {
  EXPECT_EQ(Cli({"place", "--topology", Fixture("dgx1-v100"), "--gpus", "zero"}).code, 2);
  EXPECT_EQ(Cli({"place", "--topology", Fixture("dgx1-v100"), "--gpus", "2", "--used", "9"}).code,
            2);
  EXPECT_EQ(
      Cli({"place", "--topology", Fixture("dgx1-v100"), "--gpus", "2", "--closeness", "rack"}).code,
      2);
  EXPECT_EQ(Cli({"place", "--gpus", "2"}).code, 2);
  EXPECT_EQ(Cli({"place", "--topology", "/nonexistent.json", "--gpus", "2", "--json"}).code, 1);
  EXPECT_EQ(Cli({"place", "--bogus"}).code, 2);
  EXPECT_EQ(Cli({"frobnicate"}).code, 2);
}

TEST(CliExplain, OneLinePerNode) {
  const std::string pod = ::testing::TempDir() + "/pod.json";
  std::ofstream(pod) << R"({"metadata":{"name":"t","namespace":"ml","uid":"u1","annotations":{
      "linkfit.io/closeness":"nvlink","linkfit.io/closeness-policy":"required"}},
      "spec":{"containers":[{"name":"m","resources":{"limits":{"nvidia.com/gpu":"4"}}}]}})";
  const CliRun run = Cli({"explain", "--config", SourcePath("config/demo.yaml"), "--pod", pod});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("dgx-h100-0: fits on GPUs 4,5,6,7 (ring 370 GB/s)"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("l40s-0: never fits: node has no 4 GPUs joined by NVLink"),
            std::string::npos)
      << run.out;
}

}  // namespace
}  // namespace linkfit::app
