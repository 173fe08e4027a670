#pragma once

// Helpers of the NVML discovery tests (test/agent/nvml_*_test.cc): options that load the fake
// libnvidia-ml.so.1 of this directory with a recording of test/data/nvml/, edited recordings in
// temporary files, a fake sysfs tree built from a fixture, and the comparison of a discovered
// topology with the fixture's. LINKFIT_FAKE_NVML_* name the built fakes
// (test/agent/CMakeLists.txt).
//
// Thread-safety: test code; the helpers set the process environment (LINKFIT_FAKE_NVML).

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "linkfit/agent/discovery.h"
#include "linkfit/topology/topology.h"
#include "testing/fixtures.h"

namespace linkfit::agent::testing {

// Options loading `library` (the full fake by default) with test/data/nvml/<recording>.json, and
// no sysfs.
inline NvmlOptions Fake(const std::string& recording,
                        const char* library = LINKFIT_FAKE_NVML_FULL) {
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

// A sysfs tree recorded as text (test/data/sysfs/<name>.txt, format in its README.md), built
// under a temporary directory. Removed with the object.
class RecordedSysfs {
 public:
  explicit RecordedSysfs(const std::string& name)
      : root_(std::filesystem::temp_directory_path() /
              ("linkfit-sysfs-rec-" + name + "-" + std::to_string(getpid()))) {
    std::istringstream lines(linkfit::testing::ReadFileOrDie(
        linkfit::testing::SourcePath("test/data/sysfs/" + name + ".txt")));
    std::string line;
    while (std::getline(lines, line)) {
      if (line.empty() || line[0] == '#') continue;
      const std::size_t kind_end = line.find(' ');
      const std::size_t path_end = line.find(' ', kind_end + 1);
      const std::string kind = line.substr(0, kind_end);
      const std::filesystem::path path = root_ / line.substr(kind_end + 1, path_end - kind_end - 1);
      const std::string value = line.substr(path_end + 1);
      std::filesystem::create_directories(path.parent_path());
      if (kind == "file") {
        std::ofstream(path) << value << "\n";
      } else {
        EXPECT_EQ(kind, "link") << line;
        std::filesystem::create_symlink(value, path);
      }
    }
  }
  ~RecordedSysfs() { std::filesystem::remove_all(root_); }
  std::string root() const { return root_.string(); }

 private:
  std::filesystem::path root_;
};

inline topology::TopologyPtr Build(const Discovery& found) {
  auto built = topology::BuildTopology(found.spec);
  EXPECT_TRUE(built) << built.error().message;
  return built ? *built : nullptr;
}

// Same bandwidth matrix, NVLink islands, NUMA and socket groups.
inline void ExpectSameModel(const topology::Topology& discovered,
                            const topology::Topology& fixture) {
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

// The recording test/data/nvml/<name>.json, to edit.
inline nlohmann::json LoadRecording(const std::string& name) {
  return nlohmann::json::parse(linkfit::testing::ReadFileOrDie(
      linkfit::testing::SourcePath("test/data/nvml/" + name + ".json")));
}

// Options loading `library` with `recording` written to a temporary file named after `name`.
inline NvmlOptions FakeWith(const nlohmann::json& recording, const std::string& name,
                            const char* library = LINKFIT_FAKE_NVML_FULL) {
  const std::string path = ::testing::TempDir() + "/nvml-" + name + ".json";
  std::ofstream(path) << recording.dump();
  setenv("LINKFIT_FAKE_NVML", path.c_str(), 1);
  NvmlOptions options;
  options.library = library;
  options.sysfs_root = "/nonexistent-sysfs";
  return options;
}

}  // namespace linkfit::agent::testing
