// NVML discovery through the real dlopen path, against the fake libnvidia-ml.so.1
// (test/agent/fake_nvml/) serving recordings of the fixture machines (test/data/nvml/): the
// agent's topology has the same bandwidth matrix, NVLink islands and NUMA/socket groups as the
// project's fixture document, MIG layouts come through with the profile names of the MIG profile
// sets, and health (lost GPUs, Xid events, asymmetric NVLinks) is marked without making the node
// unusable. Bad libraries and recordings: nvml_faults_test.cc.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fake_nvml/nvml_test_support.h"

namespace linkfit::agent {
namespace {

using testing::Build;
using testing::ExpectSameModel;
using testing::Fake;
using testing::FakeSysfs;
using testing::FakeWith;
using testing::LoadRecording;

// Every fixture machine has a recording (the cascaded-switch box's synthetic GPU model is known
// to no table: its PCIe generation comes from NVML alone).
std::vector<std::string> RecordedMachines() { return linkfit::testing::FixtureIds(); }

class EveryRecordedMachine : public ::testing::TestWithParam<std::string> {};

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
  ASSERT_NE(fixture, nullptr);
  ExpectSameModel(*discovered, *fixture);
  std::set<std::string> uuids;
  for (const topology::GpuSpec& gpu : found->spec.gpus) {
    EXPECT_TRUE(gpu.healthy) << gpu.index << ": " << gpu.health_problem;
    EXPECT_EQ(gpu.model, fixture->gpu(gpu.index).model);
    EXPECT_EQ(gpu.memory_mib, fixture->gpu(gpu.index).memory_mib);
    EXPECT_EQ(gpu.mig_capable, fixture->gpu(gpu.index).mig_capable);
    EXPECT_EQ(gpu.mig_profile_set, fixture->gpu(gpu.index).mig_profile_set);
    EXPECT_EQ(gpu.nvlink_physical_links, fixture->gpu(gpu.index).nvlink_physical_links);
    EXPECT_EQ(gpu.numa_node, fixture->gpu(gpu.index).numa_node);
    EXPECT_EQ(gpu.uuid.rfind("GPU-", 0), 0u) << gpu.uuid;
    EXPECT_TRUE(uuids.insert(gpu.uuid).second) << gpu.uuid;
    EXPECT_EQ(gpu.mig_mode, topology::MigMode::kDisabled);  // MIG off, or not supported
    EXPECT_TRUE(gpu.mig_instances.empty());
  }
  // Pair by pair: the PCIe relation and the NVLink count.
  ASSERT_EQ(found->spec.links.size(), fixture->spec().links.size());
  for (const topology::LinkSpec& link : found->spec.links) {
    for (const topology::LinkSpec& expected : fixture->spec().links) {
      if (expected.a != link.a || expected.b != link.b) continue;
      EXPECT_EQ(link.pcie, expected.pcie) << "GPU" << link.a << "-GPU" << link.b;
      EXPECT_EQ(link.nvlink_count, expected.nvlink_count) << "GPU" << link.a << "-GPU" << link.b;
      EXPECT_EQ(link.via_nvswitch, expected.via_nvswitch) << "GPU" << link.a << "-GPU" << link.b;
    }
  }
  EXPECT_EQ(found->spec.fabric.kind, fixture->spec().fabric.kind);
  EXPECT_EQ(found->spec.fabric.nvswitch_count, fixture->spec().fabric.nvswitch_count);
  EXPECT_EQ(found->spec.fabric.nvlink_generation, fixture->spec().fabric.nvlink_generation);
  // What the agent publishes parses back into the same model.
  auto reparsed = topology::ParseTopologyDocument(topology::ToTopologyDocument(found->spec));
  ASSERT_TRUE(reparsed) << reparsed.error().message;
  auto rebuilt = topology::BuildTopology(*reparsed);
  ASSERT_TRUE(rebuilt) << rebuilt.error().message;
  EXPECT_EQ((*rebuilt)->fingerprint(), discovered->fingerprint());
}

INSTANTIATE_TEST_SUITE_P(Machines, EveryRecordedMachine, ::testing::ValuesIn(RecordedMachines()),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Older drivers lack nvmlDeviceGetNvLinkRemoteDeviceType: a remote end that is not one of the
// node's GPUs is then an NVSwitch, and the machines come out the same.
TEST(NvmlDiscovery, WithoutRemoteDeviceTypesNvswitchesAreInferred) {
  for (const std::string id :
       {"dgx1-v100", "dgx2-v100", "dgx-h100", "ws-4x-rtxa6000-nvlink-pairs"}) {
    SCOPED_TRACE(id);
    const FakeSysfs sysfs(id);
    NvmlOptions options = Fake(id, LINKFIT_FAKE_NVML_WITHOUT_REMOTE_TYPE);
    options.sysfs_root = sysfs.root();
    auto found = DiscoverWithNvml(options);
    ASSERT_TRUE(found) << found.error().message;
    const topology::TopologyPtr fixture = linkfit::testing::LoadFixture(id);
    ExpectSameModel(*Build(*found), *fixture);
    EXPECT_EQ(found->spec.fabric.kind, fixture->spec().fabric.kind);
    EXPECT_EQ(found->spec.fabric.nvswitch_count, fixture->spec().fabric.nvswitch_count);
  }
}

// The names and legal placements of the profiles of a MIG profile set (config/mig/<id>.json).
std::map<std::string, std::pair<std::vector<int>, int>> MigPlacements(const std::string& set_id) {
  const auto set = nlohmann::json::parse(linkfit::testing::ReadFileOrDie(
      linkfit::testing::SourcePath("config/mig/" + set_id + ".json")));
  std::map<std::string, std::pair<std::vector<int>, int>> placements;
  for (const auto& profile : set["profiles"]) {
    placements[profile["name"].get<std::string>()] = {
        profile["placements"]["starts"].get<std::vector<int>>(),
        profile["placements"]["size"].get<int>()};
  }
  return placements;
}

// Each instance has a profile name of the GPU's MIG profile set, at a legal placement.
void ExpectInstancesOfTheSet(const topology::GpuSpec& gpu) {
  const auto placements = MigPlacements(gpu.mig_profile_set);
  for (const topology::MigInstanceSpec& instance : gpu.mig_instances) {
    const auto profile = placements.find(instance.profile);
    ASSERT_NE(profile, placements.end())
        << instance.profile << " is not in " << gpu.mig_profile_set;
    const auto& [starts, size] = profile->second;
    EXPECT_EQ(instance.size, size) << instance.profile;
    EXPECT_NE(std::find(starts.begin(), starts.end(), instance.start), starts.end())
        << instance.profile << " at " << instance.start;
  }
}

TEST(NvmlDiscovery, MigModesAndInstancesOfADgxA100) {
  const FakeSysfs sysfs("dgx-a100");
  NvmlOptions options = Fake("dgx-a100-mig");
  options.sysfs_root = sysfs.root();
  auto found = DiscoverWithNvml(options);
  ASSERT_TRUE(found) << found.error().message;
  ExpectSameModel(*Build(*found), *linkfit::testing::LoadFixture("dgx-a100"));
  const auto& gpus = found->spec.gpus;
  for (int g = 0; g < 6; ++g) {
    EXPECT_EQ(gpus[static_cast<std::size_t>(g)].mig_mode, topology::MigMode::kDisabled) << g;
    EXPECT_EQ(gpus[static_cast<std::size_t>(g)].mig_mode_pending, topology::MigMode::kDisabled);
  }
  EXPECT_EQ(gpus[6].mig_mode, topology::MigMode::kEnabled);
  EXPECT_EQ(gpus[6].mig_mode_pending, topology::MigMode::kEnabled);
  EXPECT_EQ(gpus[7].mig_mode, topology::MigMode::kDisabled);
  EXPECT_EQ(gpus[7].mig_mode_pending, topology::MigMode::kEnabled);  // after the next reset
  const std::vector<topology::MigInstanceSpec> expected = {
      {"2g.10gb", 0, 2, "MIG-0b7e2c91-3d4a-5f6b-8c9d-1e2f3a4b5c6d", 5},
      {"1g.5gb", 2, 1, "MIG-7c8d9e0f-1a2b-5c3d-9e4f-5a6b7c8d9e0f", 9},
      {"3g.20gb", 4, 4, "MIG-5a1f0d3c-6b2e-5a8e-9d4c-3f0e1b2a7c61", 1}};  // GPU instance ids
  EXPECT_EQ(gpus[6].mig_instances, expected);
  ExpectInstancesOfTheSet(gpus[6]);
  EXPECT_TRUE(gpus[7].mig_instances.empty());
  for (const topology::GpuSpec& gpu : gpus) EXPECT_TRUE(gpu.healthy) << gpu.index;
}

// The 80 GB parts name the same profiles differently ("1g.10gb" is one slice there, the
// double-memory profile is "1g.20gb").
TEST(NvmlDiscovery, MigInstanceNamesOfADgxH100) {
  nlohmann::json recording = LoadRecording("dgx-h100");
  recording["devices"][3]["mig"] = {
      {"current", 1},
      {"pending", 1},
      {"instances",
       {{{"id", 2}, {"profile", 2}, {"start", 0}, {"size", 4}, {"uuid", "MIG-h100-3g"}},
        {{"id", 7}, {"profile", 9}, {"start", 4}, {"size", 2}, {"uuid", "MIG-h100-1g-double"}},
        {{"id", 13}, {"profile", 0}, {"start", 6}, {"size", 1}, {"uuid", "MIG-h100-1g"}}}}};
  auto found = DiscoverWithNvml(FakeWith(recording, "h100-mig"));
  ASSERT_TRUE(found) << found.error().message;
  const topology::GpuSpec& gpu = found->spec.gpus[3];
  EXPECT_EQ(gpu.mig_profile_set, "h100-80gb");
  const std::vector<topology::MigInstanceSpec> expected = {
      {"3g.40gb", 0, 4, "MIG-h100-3g", 2},
      {"1g.20gb", 4, 2, "MIG-h100-1g-double", 7},
      {"1g.10gb", 6, 1, "MIG-h100-1g", 13}};
  EXPECT_EQ(gpu.mig_instances, expected);
  ExpectInstancesOfTheSet(gpu);
}

// H200 (141 GB): NVIDIA names profiles by the share of the nominal memory ("3g.71gb"), which
// rounding the instance's own memory (69.5 GB) would not give.
TEST(NvmlDiscovery, MigInstanceNamesOfAnH200FollowTheNominalMemory) {
  nlohmann::json recording = LoadRecording("dgx-h100");
  for (auto& device : recording["devices"]) {
    device["name"] = "NVIDIA H200";
    device["memory_mib"] = 143771;
  }
  nlohmann::json profiles = nlohmann::json::array();
  const nlohmann::json set = nlohmann::json::parse(
      linkfit::testing::ReadFileOrDie(linkfit::testing::SourcePath("config/mig/h200-141gb.json")));
  for (const auto& profile : set["profiles"]) {
    profiles.push_back(
        {{"profile", profile["nvml_profile_index"]},
         {"id", profile["nvidia_smi_profile_id"]},
         {"slices", profile["compute_slices"]},
         {"memory_mb", static_cast<int>(profile["memory_gib_observed"].get<double>() * 1024)},
         {"instance_count", profile["max_instances"]}});
  }
  recording["mig_profiles"] = profiles;
  recording["devices"][1]["mig"] = {
      {"current", 1},
      {"pending", 1},
      {"instances",
       {{{"id", 1}, {"profile", 2}, {"start", 0}, {"size", 4}, {"uuid", "MIG-h200-3g"}},
        {{"id", 5}, {"profile", 9}, {"start", 4}, {"size", 2}, {"uuid", "MIG-h200-1g-double"}},
        {{"id", 9}, {"profile", 0}, {"start", 6}, {"size", 1}, {"uuid", "MIG-h200-1g"}}}}};
  auto found = DiscoverWithNvml(FakeWith(recording, "h200-mig"));
  ASSERT_TRUE(found) << found.error().message;
  const topology::GpuSpec& gpu = found->spec.gpus[1];
  EXPECT_EQ(gpu.mig_profile_set, "h200-141gb");
  const std::vector<topology::MigInstanceSpec> expected = {
      {"3g.71gb", 0, 4, "MIG-h200-3g", 1},
      {"1g.35gb", 4, 2, "MIG-h200-1g-double", 5},
      {"1g.18gb", 6, 1, "MIG-h200-1g", 9}};
  EXPECT_EQ(gpu.mig_instances, expected);
  ExpectInstancesOfTheSet(gpu);
}

// DGX H100 whose GPU 5 has fallen off the bus and whose GPU 2 has a pending Xid 79 (and an
// application Xid 13): discovery marks GPU 5, the health watch GPU 2, the rest stays usable.
TEST(NvmlDiscovery, LostGpuAndCriticalXidMarkTheirGpusOnly) {
  auto found = DiscoverWithNvml(Fake("dgx-h100-faulty"));
  ASSERT_TRUE(found) << found.error().message;
  topology::TopologySpec spec = found->spec;
  ASSERT_EQ(spec.gpus.size(), 8u);
  EXPECT_FALSE(spec.gpus[5].healthy);
  EXPECT_NE(spec.gpus[5].health_problem.find("fallen off the bus"), std::string::npos)
      << spec.gpus[5].health_problem;
  EXPECT_NE(spec.gpus[5].health_problem.find("GPU is lost"), std::string::npos);
  EXPECT_EQ(spec.gpus[5].model, spec.gpus[0].model);  // described like its neighbours
  EXPECT_EQ(spec.gpus[5].memory_mib, spec.gpus[0].memory_mib);

  auto watch = WatchHealthWithNvml(Fake("dgx-h100-faulty"));
  ASSERT_TRUE(watch) << watch.error().message;
  const std::vector<HealthWatch::Event> events = (*watch)->Wait(50);
  ASSERT_EQ(events.size(), 1u);  // Xid 13 is the application's, Xid 79 the GPU's
  EXPECT_EQ(events[0].gpu, 2);
  EXPECT_EQ(events[0].problem, "Xid 79: GPU has fallen off the bus");
  EXPECT_TRUE((*watch)->Wait(10).empty());  // drained

  for (const HealthWatch::Event& event : events) {
    auto& gpu = spec.gpus[static_cast<std::size_t>(event.gpu)];
    gpu.healthy = false;
    gpu.health_problem = event.problem;
  }
  for (const topology::GpuSpec& gpu : spec.gpus) {
    EXPECT_EQ(gpu.healthy, gpu.index != 2 && gpu.index != 5) << gpu.index;
  }
  auto built = topology::BuildTopology(spec);
  ASSERT_TRUE(built) << built.error().message;
  // The six healthy GPUs still reach each other through the NVSwitches.
  const topology::TopologyPtr fixture = linkfit::testing::LoadFixture("dgx-h100");
  for (int a : {0, 1, 3, 4, 6, 7}) {
    for (int b : {0, 1, 3, 4, 6, 7}) {
      EXPECT_EQ((*built)->bandwidth_mbps(a, b), fixture->bandwidth_mbps(a, b)) << a << "-" << b;
    }
  }
}

TEST(NvmlDiscovery, AsymmetricNvlinksMakeBothGpusUnhealthy) {
  // DGX-1: GPU 0 and GPU 3 share two NVLinks; GPU 0 now reports only one of them.
  nlohmann::json recording = LoadRecording("dgx1-v100");
  const std::string peer = recording["devices"][3]["bus_id"].get<std::string>();
  nlohmann::json& links = recording["devices"][0]["nvlinks"];
  for (std::size_t i = 0; i < links.size(); ++i) {
    if (links[i]["remote_bus_id"] == peer) {
      links.erase(i);
      break;
    }
  }
  auto found = DiscoverWithNvml(FakeWith(recording, "dgx1-asymmetric"));
  ASSERT_TRUE(found) << found.error().message;
  const auto& gpus = found->spec.gpus;
  EXPECT_FALSE(gpus[0].healthy);
  EXPECT_FALSE(gpus[3].healthy);
  EXPECT_EQ(gpus[0].health_problem, "asymmetric NVLinks: GPU0 sees 1 to GPU3, which sees 2 back");
  EXPECT_EQ(gpus[3].health_problem, gpus[0].health_problem);
  for (int g : {1, 2, 4, 5, 6, 7}) EXPECT_TRUE(gpus[static_cast<std::size_t>(g)].healthy) << g;
  for (const topology::LinkSpec& link : found->spec.links) {
    if (link.a == 0 && link.b == 3) {
      EXPECT_EQ(link.nvlink_count, 1);  // the smaller count
    }
  }
  EXPECT_TRUE(topology::BuildTopology(found->spec));  // the rest of the node stays usable
}

TEST(NvmlDiscovery, WithoutNumaFromNvmlOrSysfsTheGuessIsSaid) {
  auto found = DiscoverWithNvml(Fake("pcie-8x-l40s-2socket"));  // its NVML has no NUMA node
  ASSERT_TRUE(found) << found.error().message;
  for (const topology::GpuSpec& gpu : found->spec.gpus) EXPECT_EQ(gpu.numa_node, 0);
  ASSERT_FALSE(found->warnings.empty());
  EXPECT_NE(found->warnings[0].find("NUMA node unknown"), std::string::npos);
  EXPECT_EQ(found->spec.warnings, found->warnings);
}

}  // namespace
}  // namespace linkfit::agent
