// NVML discovery through the real dlopen path, against the fake libnvidia-ml.so.1
// (test/agent/fake_nvml/) serving recordings of the fixture machines (test/data/nvml/): the
// agent's topology has the same bandwidth matrix, NVLink islands and NUMA/socket groups as the
// project's fixture document, MIG layouts and health come through, and bad libraries or data are
// clear errors.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "linkfit/agent/discovery.h"
#include "linkfit/topology/topology.h"
#include "testing/fixtures.h"

namespace linkfit::agent {
namespace {

NvmlOptions Fake(const std::string& recording, const char* library = LINKFIT_FAKE_NVML_FULL) {
  setenv("LINKFIT_FAKE_NVML",
         linkfit::testing::SourcePath("test/data/nvml/" + recording + ".json").c_str(), 1);
  NvmlOptions options;
  options.library = library;
  options.sysfs_root = "/nonexistent-sysfs";
  return options;
}

// A sysfs tree with what the fixture says about the machine: each GPU's PCI device with its NUMA
// node, each NUMA node's CPUs, each first CPU's socket. Removed with the object.
class FakeSysfs {
 public:
  explicit FakeSysfs(const std::string& fixture_id)
      : root_(std::filesystem::temp_directory_path() /
              ("linkfit-sysfs-" + fixture_id + "-" + std::to_string(getpid()))) {
    const auto doc = nlohmann::json::parse(linkfit::testing::ReadFileOrDie(
        linkfit::testing::SourcePath("config/topologies/" + fixture_id + ".json")));
    const auto query = linkfit::testing::ReadFileOrDie(
        linkfit::testing::SourcePath("test/data/nvidia-smi/" + fixture_id + ".query.csv"));
    for (const auto& gpu : doc["gpus"]) {
      // The bus id of GPU i is the fifth field of its query line.
      const std::string index = std::to_string(gpu["index"].get<int>()) + ", ";
      const std::size_t line = query.find("\n" + index);
      const std::size_t end = query.find('\n', line + 1);
      const std::string row = query.substr(line + 1, end - line - 1);
      std::string bus = row.substr(row.rfind(", ") + 2);
      bus = bus.substr(bus.size() - 12);
      for (char& c : bus) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      Write("bus/pci/devices/" + bus + "/numa_node", std::to_string(gpu["numa_node"].get<int>()));
    }
    if (!doc.contains("system")) return;
    for (const auto& numa : doc["system"]["numa_nodes"]) {
      const std::string cpus = numa["cpus"].get<std::string>();
      Write("devices/system/node/node" + std::to_string(numa["id"].get<int>()) + "/cpulist", cpus);
      const std::string first = cpus.substr(0, cpus.find_first_of(",-"));
      Write("devices/system/cpu/cpu" + first + "/topology/physical_package_id",
            std::to_string(numa["socket"].get<int>()));
    }
  }
  ~FakeSysfs() { std::filesystem::remove_all(root_); }
  std::string root() const { return root_.string(); }

 private:
  void Write(const std::string& relative, const std::string& value) {
    const std::filesystem::path path = root_ / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << value << "\n";
  }
  std::filesystem::path root_;
};

topology::TopologyPtr Build(const Discovery& found) {
  auto built = topology::BuildTopology(found.spec);
  EXPECT_TRUE(built) << built.error().message;
  return built ? *built : nullptr;
}

void ExpectSameModel(const topology::Topology& discovered, const topology::Topology& fixture) {
  ASSERT_EQ(discovered.gpu_count(), fixture.gpu_count());
  for (int a = 0; a < fixture.gpu_count(); ++a) {
    for (int b = 0; b < fixture.gpu_count(); ++b) {
      EXPECT_EQ(discovered.bandwidth_mbps(a, b), fixture.bandwidth_mbps(a, b))
          << "GPU" << a << "-GPU" << b;
    }
  }
  EXPECT_EQ(discovered.nvlink_islands(), fixture.nvlink_islands());
  EXPECT_EQ(discovered.numa_groups(), fixture.numa_groups());
  EXPECT_EQ(discovered.socket_groups(), fixture.socket_groups());
}

class EveryRecordedMachine : public ::testing::TestWithParam<const char*> {};

TEST_P(EveryRecordedMachine, MatchesTheFixture) {
  const FakeSysfs sysfs(GetParam());
  NvmlOptions options = Fake(GetParam());
  options.sysfs_root = sysfs.root();
  auto found = DiscoverWithNvml(options);
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->source, "nvml");
  EXPECT_EQ(found->driver_version, "550.54.15");
  const topology::TopologyPtr discovered = Build(*found);
  ASSERT_NE(discovered, nullptr);
  const topology::TopologyPtr fixture = linkfit::testing::LoadFixture(GetParam());
  ExpectSameModel(*discovered, *fixture);
  for (const topology::GpuSpec& gpu : found->spec.gpus) {
    EXPECT_TRUE(gpu.healthy) << gpu.index << ": " << gpu.health_problem;
    EXPECT_EQ(gpu.model, fixture->gpu(gpu.index).model);
    EXPECT_EQ(gpu.mig_profile_set, fixture->gpu(gpu.index).mig_profile_set);
    EXPECT_EQ(gpu.uuid.rfind("GPU-", 0), 0u) << gpu.uuid;
  }
  EXPECT_EQ(found->spec.fabric.kind, fixture->spec().fabric.kind);
  EXPECT_EQ(found->spec.fabric.nvswitch_count, fixture->spec().fabric.nvswitch_count);
  // What the agent publishes parses back into the same model.
  auto reparsed = topology::ParseTopologyDocument(topology::ToTopologyDocument(found->spec));
  ASSERT_TRUE(reparsed) << reparsed.error().message;
  auto rebuilt = topology::BuildTopology(*reparsed);
  ASSERT_TRUE(rebuilt);
  EXPECT_EQ((*rebuilt)->fingerprint(), discovered->fingerprint());
}

INSTANTIATE_TEST_SUITE_P(Machines, EveryRecordedMachine,
                         ::testing::Values("dgx1-v100", "dgx-h100", "pcie-8x-l40s-2socket"),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

TEST(NvmlDiscovery, MigModesAndInstancesOfADgxA100) {
  const FakeSysfs sysfs("dgx-a100");
  NvmlOptions options = Fake("dgx-a100-mig");
  options.sysfs_root = sysfs.root();
  auto found = DiscoverWithNvml(options);
  ASSERT_TRUE(found) << found.error().message;
  ExpectSameModel(*Build(*found), *linkfit::testing::LoadFixture("dgx-a100"));
  const auto& gpus = found->spec.gpus;
  EXPECT_EQ(gpus[0].mig_mode, topology::MigMode::kDisabled);
  EXPECT_EQ(gpus[6].mig_mode, topology::MigMode::kEnabled);
  EXPECT_EQ(gpus[7].mig_mode, topology::MigMode::kDisabled);
  EXPECT_EQ(gpus[7].mig_mode_pending, topology::MigMode::kEnabled);
  const std::vector<topology::MigInstanceSpec> expected = {
      {"2g.10gb", 0, 2, "MIG-0b7e2c91-3d4a-5f6b-8c9d-1e2f3a4b5c6d"},
      {"1g.5gb", 2, 1, "MIG-7c8d9e0f-1a2b-5c3d-9e4f-5a6b7c8d9e0f"},
      {"3g.20gb", 4, 4, "MIG-5a1f0d3c-6b2e-5a8e-9d4c-3f0e1b2a7c61"}};
  EXPECT_EQ(gpus[6].mig_instances, expected);
  EXPECT_TRUE(gpus[7].mig_instances.empty());
}

TEST(NvmlDiscovery, ALostGpuIsUnhealthyAndTheRestStaysUsable) {
  auto found = DiscoverWithNvml(Fake("dgx-h100-faulty"));
  ASSERT_TRUE(found) << found.error().message;
  const auto& gpus = found->spec.gpus;
  ASSERT_EQ(gpus.size(), 8u);
  EXPECT_FALSE(gpus[5].healthy);
  EXPECT_NE(gpus[5].health_problem.find("fallen off the bus"), std::string::npos)
      << gpus[5].health_problem;
  EXPECT_EQ(gpus[5].model, gpus[0].model);  // described like its neighbours
  for (int g : {0, 1, 2, 3, 4, 6, 7}) EXPECT_TRUE(gpus[static_cast<std::size_t>(g)].healthy) << g;
  auto built = topology::BuildTopology(found->spec);
  ASSERT_TRUE(built) << built.error().message;
}

TEST(NvmlDiscovery, AsymmetricNvlinksMakeBothGpusUnhealthy) {
  // DGX-1: GPU 0 and GPU 3 share two NVLinks; GPU 0 now reports only one of them.
  nlohmann::json recording = nlohmann::json::parse(linkfit::testing::ReadFileOrDie(
      linkfit::testing::SourcePath("test/data/nvml/dgx1-v100.json")));
  const std::string peer = recording["devices"][3]["bus_id"].get<std::string>();
  nlohmann::json& links = recording["devices"][0]["nvlinks"];
  for (std::size_t i = 0; i < links.size(); ++i) {
    if (links[i]["remote_bus_id"] == peer) {
      links.erase(i);
      break;
    }
  }
  const std::string path = ::testing::TempDir() + "/dgx1-asymmetric.json";
  std::ofstream(path) << recording.dump();
  NvmlOptions options;
  options.library = LINKFIT_FAKE_NVML_FULL;
  setenv("LINKFIT_FAKE_NVML", path.c_str(), 1);
  auto found = DiscoverWithNvml(options);
  ASSERT_TRUE(found) << found.error().message;
  const auto& gpus = found->spec.gpus;
  EXPECT_FALSE(gpus[0].healthy);
  EXPECT_FALSE(gpus[3].healthy);
  EXPECT_NE(gpus[0].health_problem.find("asymmetric NVLinks"), std::string::npos)
      << gpus[0].health_problem;
  for (int g : {1, 2, 4, 5, 6, 7}) EXPECT_TRUE(gpus[static_cast<std::size_t>(g)].healthy) << g;
  EXPECT_TRUE(topology::BuildTopology(found->spec));  // the rest of the node stays usable
}

TEST(NvmlHealthWatch, ReportsCriticalXidsAndSkipsApplicationOnes) {
  auto watch = WatchHealthWithNvml(Fake("dgx-h100-faulty"));
  ASSERT_TRUE(watch) << watch.error().message;
  const std::vector<HealthWatch::Event> events = (*watch)->Wait(50);
  ASSERT_EQ(events.size(), 1u);  // Xid 13 is the application's, Xid 79 the GPU's
  EXPECT_EQ(events[0].gpu, 2);
  EXPECT_EQ(events[0].problem, "Xid 79: GPU has fallen off the bus");
  EXPECT_TRUE((*watch)->Wait(10).empty());
}

TEST(NvmlDiscovery, WithoutNumaFromNvmlOrSysfsTheGuessIsSaid) {
  auto found = DiscoverWithNvml(Fake("pcie-8x-l40s-2socket"));  // its NVML has no NUMA call
  ASSERT_TRUE(found) << found.error().message;
  for (const topology::GpuSpec& gpu : found->spec.gpus) EXPECT_EQ(gpu.numa_node, 0);
  ASSERT_FALSE(found->warnings.empty());
  EXPECT_NE(found->warnings[0].find("NUMA node unknown"), std::string::npos);
}

TEST(NvmlDiscovery, BadLibrariesAndDataAreClearErrors) {
  auto missing = DiscoverWithNvml(Fake("dgx-h100", "/nonexistent/libnvidia-ml.so.1"));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("cannot load NVML"), std::string::npos);

  auto no_topology = DiscoverWithNvml(Fake("dgx-h100", LINKFIT_FAKE_NVML_WITHOUT_TOPOLOGY));
  ASSERT_FALSE(no_topology);
  EXPECT_NE(no_topology.error().message.find("lacks nvmlDeviceGetTopologyCommonAncestor"),
            std::string::npos)
      << no_topology.error().message;

  // Without the MIG API the rest is discovered; MIG is unknown, and said so.
  auto no_mig = DiscoverWithNvml(Fake("dgx-a100-mig", LINKFIT_FAKE_NVML_WITHOUT_MIG));
  ASSERT_TRUE(no_mig) << no_mig.error().message;
  EXPECT_EQ(no_mig->spec.gpus[6].mig_mode, topology::MigMode::kUnknown);
  ASSERT_FALSE(no_mig->warnings.empty());
  EXPECT_NE(no_mig->warnings[0].find("lacks the MIG API"), std::string::npos)
      << no_mig->warnings[0];

  const std::string dir = ::testing::TempDir();
  const std::string old_path = dir + "/old-nvml.json";
  std::string text = linkfit::testing::ReadFileOrDie(
      linkfit::testing::SourcePath("test/data/nvml/dgx1-v100.json"));
  text.replace(text.find("12.550.54.15"), 12, "10.440.33.01");
  std::ofstream(old_path) << text;
  NvmlOptions options;
  options.library = LINKFIT_FAKE_NVML_FULL;
  setenv("LINKFIT_FAKE_NVML", old_path.c_str(), 1);
  auto old = DiscoverWithNvml(options);
  ASSERT_FALSE(old);
  EXPECT_NE(old.error().message.find("10.440.33.01 is too old"), std::string::npos)
      << old.error().message;

  std::ofstream(dir + "/garbage.json") << "{\"devices\": 7";
  setenv("LINKFIT_FAKE_NVML", (dir + "/garbage.json").c_str(), 1);
  auto garbage = DiscoverWithNvml(options);
  ASSERT_FALSE(garbage);
  EXPECT_NE(garbage.error().message.find("nvmlInit_v2 failed"), std::string::npos)
      << garbage.error().message;
}

}  // namespace
}  // namespace linkfit::agent
