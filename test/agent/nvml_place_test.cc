// `linkfit place` on the document the agent publishes for each machine of test/data/nvml/ with an
// expected document (expected/) answers exactly as on the expected document: every request size
// 1..N at every closeness level, required, through the command's own code (app::RunPlace).

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fake_nvml/nvml_test_support.h"
#include "linkfit/app/cli.h"

namespace linkfit::agent {
namespace {

using testing::Fake;

constexpr const char* kMachines[] = {"p100-4x-nvlink1-2socket", "gb200-tray-grace",
                                     "pcie-4x-gen4-behind-gen3-switch"};
constexpr const char* kClosenessLevels[] = {"node", "socket", "numa", "pcie-switch", "nvlink"};

std::string ExpectedPath(const std::string& machine) {
  return linkfit::testing::SourcePath("test/data/nvml/expected/" + machine + ".json");
}

// Writes what discovery publishes for `options` to a file; returns its path.
std::string PublishedFile(const NvmlOptions& options, const std::string& name) {
  auto found = DiscoverWithNvml(options);
  EXPECT_TRUE(found) << (found ? "" : found.error().message);
  const std::string path = ::testing::TempDir() + "/published-" + name + ".json";
  std::ofstream(path) << (found ? topology::ToTopologyDocument(found->spec) : "");
  return path;
}

// `linkfit place --json` on `path`, its status and what it printed.
std::string Place(const std::string& path, int gpus, const std::string& closeness) {
  std::ostringstream out;
  std::ostringstream err;
  const int status = app::RunPlace({"--topology", path, "--gpus", std::to_string(gpus),
                                    "--closeness", closeness, "--required", "--json"},
                                   out, err);
  return std::to_string(status) + " " + out.str() + err.str();
}

int GpuCount(const std::string& path) {
  auto spec = topology::LoadTopologyFile(path);
  EXPECT_TRUE(spec) << (spec ? "" : spec.error().message);
  return spec ? static_cast<int>(spec->gpus.size()) : 0;
}

// Every answer of `linkfit place` on the two documents, as "k closeness: answer" lines that
// differ.
std::vector<std::string> Differences(const std::string& published, const std::string& expected) {
  std::vector<std::string> differences;
  const int n = GpuCount(expected);
  EXPECT_EQ(GpuCount(published), n);
  for (int k = 1; k <= n; ++k) {
    for (const char* closeness : kClosenessLevels) {
      const std::string mine = Place(published, k, closeness);
      const std::string theirs = Place(expected, k, closeness);
      if (mine != theirs) {
        differences.push_back(std::to_string(k) + " " + closeness + ": published " + mine +
                              "expected " + theirs);
      }
    }
  }
  return differences;
}

TEST(NvmlPlace, PlacementOnThePublishedDocumentIsPlacementOnTheExpectedOne) {
  for (const std::string machine : kMachines) {
    SCOPED_TRACE(machine);
    // With its recorded sysfs tree where it has one (test/data/sysfs/).
    std::optional<testing::RecordedSysfs> sysfs;
    NvmlOptions options = Fake(machine);
    if (std::filesystem::exists(
            linkfit::testing::SourcePath("test/data/sysfs/" + machine + ".txt"))) {
      sysfs.emplace(machine);
      options.sysfs_root = sysfs->root();
    }
    const std::string published = PublishedFile(options, machine);
    for (const std::string& difference : Differences(published, ExpectedPath(machine))) {
      ADD_FAILURE() << difference;
    }
    // Not vacuous: the largest request is placed on both.
    const int n = GpuCount(published);
    EXPECT_EQ(Place(published, n, "node").rfind("0 {\"best_possible_ring_gbps\"", 0), 0u)
        << Place(published, n, "node");
  }
}

// The comparison sees a guessed figure: without NVML's link calls the P100's PCIe generation is
// assumed (gen 4), and the cross-socket rings come out faster than on the expected document.
TEST(NvmlPlace, AGuessedFigureChangesPlacement) {
  const std::string published = PublishedFile(
      Fake("p100-4x-nvlink1-2socket", LINKFIT_FAKE_NVML_WITHOUT_LINK_FACTS), "p100-guessed");
  EXPECT_FALSE(Differences(published, ExpectedPath("p100-4x-nvlink1-2socket")).empty());
}

}  // namespace
}  // namespace linkfit::agent
