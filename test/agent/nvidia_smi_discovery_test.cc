// The node agent's nvidia-smi fallback: recorded outputs (test/data/nvidia-smi) served by a
// scripted CommandRunner give what linkfit's own nvidia-smi parser gives for the same text plus
// the MIG facts and health; failing GPUs are published unhealthy; failures of each command name
// it; Discover() falls back to nvidia-smi when NVML cannot be loaded.

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "linkfit/agent/discovery.h"
#include "linkfit/topology/topology.h"
#include "sysfs_tree.h"
#include "testing/fixtures.h"

namespace linkfit::agent {
namespace {

using topology::MigMode;

std::string Data(const std::string& name) {
  return linkfit::testing::ReadFileOrDie(
      linkfit::testing::SourcePath("test/data/nvidia-smi/" + name));
}

const char* kTopo = "nvidia-smi topo -m";
const char* kQuery = "nvidia-smi --query-gpu=index,uuid,name,memory.total,pci.bus_id --format=csv";
const char* kMigModes =
    "nvidia-smi --query-gpu=index,mig.mode.current,mig.mode.pending --format=csv,noheader";
const char* kLgi = "nvidia-smi mig -lgi";
const char* kDriver = "nvidia-smi --query-gpu=driver_version --format=csv,noheader";

// Serves answers by command line; an unknown command fails as nvidia-smi does for a field it
// does not know.
struct ScriptedSmi {
  std::map<std::string, Result<std::string>> answers;
  std::vector<std::string> asked;

  void Set(const std::string& line, Result<std::string> answer) {
    answers.insert_or_assign(line, std::move(answer));
  }
  CommandRunner Runner() {
    return [this](const std::vector<std::string>& argv) -> Result<std::string> {
      std::string line;
      for (const std::string& arg : argv) line += (line.empty() ? "" : " ") + arg;
      asked.push_back(line);
      const auto it = answers.find(line);
      if (it == answers.end()) return MakeError("`" + line + "`: exit status 2: Invalid field");
      return it->second;
    };
  }
  bool Asked(const std::string& line) const {
    return std::find(asked.begin(), asked.end(), line) != asked.end();
  }
};

ScriptedSmi Machine(const std::string& id) {
  ScriptedSmi smi;
  smi.Set(kTopo, Data(id + ".topo.txt"));
  smi.Set(kQuery, Data(id + ".query.csv"));
  smi.Set(kDriver, std::string("550.54.15\n550.54.15\n"));
  return smi;
}

topology::TopologySpec ParsedByLinkfit(const std::string& id) {
  auto parsed = topology::ParseNvidiaSmi(Data(id + ".topo.txt"), Data(id + ".query.csv"));
  EXPECT_TRUE(parsed) << id << ": " << parsed.error().message;
  return parsed ? *parsed : topology::TopologySpec{};
}

// The published form, which covers every field but the loader's warnings.
std::string Published(const topology::TopologySpec& spec) {
  return topology::ToTopologyDocument(spec);
}

// linkfit builds a topology from what the agent publishes, and reads the document back as is.
void ExpectLinkfitReads(const topology::TopologySpec& spec) {
  EXPECT_TRUE(topology::BuildTopology(spec));
  auto reread = topology::ParseTopologyDocument(Published(spec));
  ASSERT_TRUE(reread) << reread.error().message;
  EXPECT_EQ(Published(*reread), Published(spec));
}

TEST(NvidiaSmiDiscovery, EveryRecordedMachineGivesWhatLinkfitsParserGives) {
  for (const std::string& id : linkfit::testing::FixtureIds()) {
    SCOPED_TRACE(id);
    ScriptedSmi smi = Machine(id);  // no MIG query answer: modes unknown, as the parser has them
    auto found = DiscoverWithNvidiaSmi(smi.Runner());
    ASSERT_TRUE(found) << found.error().message;
    EXPECT_EQ(found->source, "nvidia-smi");
    EXPECT_EQ(found->driver_version, "550.54.15");
    EXPECT_EQ(Published(found->spec), Published(ParsedByLinkfit(id)));
    EXPECT_EQ(found->warnings, found->spec.warnings);
    EXPECT_NE(std::find_if(found->warnings.begin(), found->warnings.end(),
                           [](const std::string& w) { return w.find("MIG modes unknown") == 0; }),
              found->warnings.end());
    EXPECT_FALSE(smi.Asked(kLgi));
    ExpectLinkfitReads(found->spec);
  }
}

TEST(NvidiaSmiDiscovery, DgxA100WithMigInstances) {
  ScriptedSmi smi = Machine("dgx-a100");
  smi.Set(kMigModes, Data("dgx-a100.mig-mode.csv"));
  smi.Set(kLgi, Data("dgx-a100.mig-lgi.txt"));
  auto found = DiscoverWithNvidiaSmi(smi.Runner());
  ASSERT_TRUE(found) << found.error().message;
  topology::TopologySpec expected = ParsedByLinkfit("dgx-a100");
  for (topology::GpuSpec& gpu : expected.gpus) {
    EXPECT_EQ(gpu.mig_profile_set, "a100-40gb");  // the parser's model facts, kept
    gpu.mig_mode = MigMode::kDisabled;
    gpu.mig_mode_pending = MigMode::kDisabled;
  }
  expected.gpus[6].mig_mode = MigMode::kEnabled;
  expected.gpus[6].mig_mode_pending = MigMode::kEnabled;
  expected.gpus[6].mig_instances = {
      {"2g.10gb", 0, 2, "", 5}, {"1g.5gb", 2, 1, "", 9}, {"3g.20gb", 4, 4, "", 1}};
  expected.gpus[7].mig_mode_pending = MigMode::kEnabled;
  EXPECT_EQ(Published(found->spec), Published(expected));
  ExpectLinkfitReads(found->spec);
  // nvidia-smi tells no generation and no MIG capability: each came from the table, once per
  // figure and model.
  for (const topology::GpuSpec& gpu : found->spec.gpus) {
    EXPECT_EQ(gpu.sources.nvlink, topology::FigureSource::kTable);
    EXPECT_EQ(gpu.sources.pcie, topology::FigureSource::kTable);
    EXPECT_EQ(gpu.sources.mig, topology::FigureSource::kTable);
  }
  ASSERT_EQ(found->guessed.size(), 3u);
  EXPECT_EQ(found->guessed[0].figure, "nvlink");
  EXPECT_EQ(found->guessed[0].model, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(found->guessed[2].warning,
            "mig figure of NVIDIA A100-SXM4-40GB not told by nvidia-smi; taken from linkfit's GPU "
            "model table");
}

TEST(NvidiaSmiDiscovery, MigCapableButNoGpuInMigModeNeedsNoInstanceTable) {
  ScriptedSmi smi = Machine("dgx-h100");
  smi.Set(kMigModes, Data("dgx-h100.mig-mode.csv"));
  auto found = DiscoverWithNvidiaSmi(smi.Runner());
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_FALSE(smi.Asked(kLgi));
  for (const topology::GpuSpec& gpu : found->spec.gpus) {
    EXPECT_TRUE(gpu.mig_capable);
    EXPECT_EQ(gpu.mig_profile_set, "h100-80gb");
    EXPECT_EQ(gpu.mig_mode, MigMode::kDisabled);
    EXPECT_EQ(gpu.mig_mode_pending, MigMode::kDisabled);
    EXPECT_TRUE(gpu.mig_instances.empty());
  }
  // In MIG mode without an instance: some drivers print the message and exit non-zero.
  ScriptedSmi empty = Machine("dgx-a100");
  empty.Set(kMigModes, std::string("0, Enabled, Enabled\n1, Disabled, Disabled\n"));
  empty.Set(kLgi, Result<std::string>(
                      MakeError("`nvidia-smi mig -lgi`: exit status 6: No GPU instances found: "
                                "Not Found")));
  auto none = DiscoverWithNvidiaSmi(empty.Runner());
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_EQ(none->spec.gpus[0].mig_mode, MigMode::kEnabled);
  EXPECT_TRUE(none->spec.gpus[0].mig_instances.empty());
  EXPECT_EQ(none->spec.gpus[2].mig_mode, MigMode::kUnknown);  // not in the mode output
}

TEST(NvidiaSmiDiscovery, NoMigSupportMeansDisabledAndNotCapable) {
  ScriptedSmi smi = Machine("pcie-8x-l40s-2socket");
  smi.Set(kMigModes, Data("pcie-8x-l40s-2socket.mig-mode.csv"));
  auto found = DiscoverWithNvidiaSmi(smi.Runner());
  ASSERT_TRUE(found) << found.error().message;
  for (const topology::GpuSpec& gpu : found->spec.gpus) {
    EXPECT_EQ(gpu.mig_mode, MigMode::kDisabled);
    EXPECT_EQ(gpu.mig_mode_pending, MigMode::kUnknown);
    EXPECT_FALSE(gpu.mig_capable);
  }
  // [N/A] overrides the model: an A100 that cannot do MIG here gets no profile set.
  ScriptedSmi a100 = Machine("dgx-a100");
  a100.Set(kMigModes, std::string("0, [N/A], [N/A]\n"));
  auto passthrough = DiscoverWithNvidiaSmi(a100.Runner());
  ASSERT_TRUE(passthrough) << passthrough.error().message;
  EXPECT_FALSE(passthrough->spec.gpus[0].mig_capable);
  EXPECT_EQ(passthrough->spec.gpus[0].mig_profile_set, "");
  EXPECT_EQ(passthrough->spec.gpus[1].mig_profile_set, "a100-40gb");
}

TEST(NvidiaSmiDiscovery, GpusWithErrorMarkersAreUnhealthyAndTheRestPublished) {
  ScriptedSmi smi = Machine("pcie-8x-l40s-2socket");
  smi.Set(kQuery, Data("pcie-8x-l40s-2socket.query-error.csv"));
  smi.Set(kMigModes, std::string("0, [N/A], [N/A]\n1, ERR!, [N/A]\n3, [GPU requires reset], "
                                 "[GPU requires reset]\n"));
  auto found = DiscoverWithNvidiaSmi(smi.Runner());
  ASSERT_TRUE(found) << found.error().message;
  const auto& gpus = found->spec.gpus;
  ASSERT_EQ(gpus.size(), 8u);
  EXPECT_FALSE(gpus[3].healthy);
  EXPECT_EQ(gpus[3].health_problem, "nvidia-smi reports [GPU requires reset] for this GPU");
  EXPECT_EQ(gpus[3].model, "unknown");
  EXPECT_EQ(gpus[3].pci_bus_id, "00000000:3E:00.0");
  EXPECT_FALSE(gpus[6].healthy);
  EXPECT_EQ(gpus[6].health_problem, "nvidia-smi reports ERR! for this GPU");
  EXPECT_EQ(gpus[6].model, "NVIDIA L40S");  // the readable fields are kept
  EXPECT_EQ(gpus[6].memory_mib, 0u);
  EXPECT_FALSE(gpus[1].healthy);
  EXPECT_EQ(gpus[1].health_problem, "nvidia-smi reports ERR! for its MIG mode");
  EXPECT_EQ(gpus[1].mig_mode, MigMode::kUnknown);
  for (int g : {0, 2, 4, 5, 7}) EXPECT_TRUE(gpus[static_cast<std::size_t>(g)].healthy) << g;
  ExpectLinkfitReads(found->spec);
}

TEST(NvidiaSmiDiscovery, AGpuTheQueryCannotOpenIsUnhealthy) {
  ScriptedSmi smi = Machine("pcie-8x-l40s-2socket");
  smi.Set(kQuery, Data("pcie-8x-l40s-2socket.query-lost.csv"));
  auto found = DiscoverWithNvidiaSmi(smi.Runner());
  ASSERT_TRUE(found) << found.error().message;
  const auto& gpus = found->spec.gpus;
  ASSERT_EQ(gpus.size(), 8u);
  EXPECT_FALSE(gpus[5].healthy);
  EXPECT_NE(gpus[5].health_problem.find("missing from `nvidia-smi --query-gpu="), std::string::npos)
      << gpus[5].health_problem;
  EXPECT_NE(gpus[5].health_problem.find("Unable to determine the device handle for "
                                        "GPU00000000:AB:00.0: Unknown Error"),
            std::string::npos);
  EXPECT_EQ(gpus[5].uuid, "");
  for (int g : {0, 1, 2, 3, 4, 6, 7}) EXPECT_TRUE(gpus[static_cast<std::size_t>(g)].healthy) << g;
  ExpectLinkfitReads(found->spec);
}

TEST(NvidiaSmiDiscovery, AGpuMissingFromTopoIsUnhealthyWithSysLinks) {
  ScriptedSmi smi = Machine("dgx-h100");
  smi.Set(kTopo, Data("dgx-h100.topo-gpu7-missing.txt"));
  smi.Set(kMigModes, Data("dgx-h100.mig-mode.csv"));
  auto found = DiscoverWithNvidiaSmi(smi.Runner());
  ASSERT_TRUE(found) << found.error().message;
  const auto& spec = found->spec;
  ASSERT_EQ(spec.gpus.size(), 8u);
  const topology::GpuSpec& lost = spec.gpus[7];
  EXPECT_FALSE(lost.healthy);
  EXPECT_NE(lost.health_problem.find("missing from nvidia-smi topo -m"), std::string::npos);
  EXPECT_EQ(lost.uuid, "GPU-75898c19-5d2d-bba4-bb3c-3bdffc0039ce");
  EXPECT_EQ(lost.memory_mib, 81559u);
  EXPECT_EQ(lost.mig_profile_set, "h100-80gb");
  EXPECT_EQ(lost.mig_mode, MigMode::kDisabled);
  int links_to_lost = 0;
  for (const topology::LinkSpec& link : spec.links) {
    if (link.b != 7) continue;
    ++links_to_lost;
    EXPECT_EQ(link.nvlink_count, 0);
    EXPECT_EQ(link.pcie, topology::PcieRelation::kSys);
  }
  EXPECT_EQ(links_to_lost, 7);
  // topo -m related its NICs to the GPUs it saw; the lost GPU is SYS to each (never closer).
  ASSERT_EQ(spec.nics.size(), 8u);
  for (const topology::NicSpec& nic : spec.nics) {
    ASSERT_EQ(nic.gpu_relations.size(), 8u) << nic.name;
    EXPECT_EQ(nic.gpu_relations[7], topology::PcieRelation::kSys) << nic.name;
  }
  EXPECT_EQ(spec.nics[0].gpu_relations[0], topology::PcieRelation::kPxb);
  for (int g = 0; g < 7; ++g) EXPECT_TRUE(spec.gpus[static_cast<std::size_t>(g)].healthy) << g;
  ExpectLinkfitReads(spec);

  // A gap (GPU 9 without a GPU 8) is not a GPU that fell off the matrix: refused, named.
  ScriptedSmi gap = Machine("dgx-h100");
  gap.Set(kQuery, Data("dgx-h100.query.csv") +
                      "9, GPU-00000000-0000-0000-0000-000000000009, NVIDIA H100 80GB HBM3, "
                      "81559 MiB, 00000000:DC:00.0\n");
  auto refused = DiscoverWithNvidiaSmi(gap.Runner());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("lists GPU 9"), std::string::npos)
      << refused.error().message;
}

// Cut short at any line, any of the outputs gives a spec linkfit builds, or an error.
TEST(NvidiaSmiDiscovery, TruncatedOutputsGiveAUsableSpecOrAnError) {
  for (const char* command : {kTopo, kQuery, kMigModes, kLgi}) {
    ScriptedSmi smi = Machine("dgx-a100");
    smi.Set(kMigModes, Data("dgx-a100.mig-mode.csv"));
    smi.Set(kLgi, Data("dgx-a100.mig-lgi.txt"));
    const std::string full = *smi.answers.at(command);
    for (std::size_t cut = full.find('\n'); cut != std::string::npos;
         cut = full.find('\n', cut + 1)) {
      SCOPED_TRACE(std::string(command) + " cut after byte " + std::to_string(cut));
      smi.Set(command, full.substr(0, cut));
      auto found = DiscoverWithNvidiaSmi(smi.Runner());
      if (!found) {
        EXPECT_FALSE(found.error().message.empty());
        continue;
      }
      EXPECT_FALSE(found->spec.gpus.empty());
      ExpectLinkfitReads(found->spec);
    }
  }
}

// Each command's failure: the error names the command.
TEST(NvidiaSmiDiscovery, FailuresNameTheCommand) {
  const auto expect_named = [](ScriptedSmi& smi, const std::string& command,
                               const std::string& detail) {
    auto found = DiscoverWithNvidiaSmi(smi.Runner());
    ASSERT_FALSE(found) << command;
    EXPECT_NE(found.error().message.find(command), std::string::npos) << found.error().message;
    EXPECT_NE(found.error().message.find(detail), std::string::npos) << found.error().message;
  };
  ScriptedSmi missing;
  missing.Set(kTopo, Result<std::string>(MakeError("`nvidia-smi topo -m`: not found")));
  expect_named(missing, kTopo, "not found");

  // A runner whose errors do not say which command: the discovery says it.
  ScriptedSmi terse = Machine("dgx-a100");
  terse.Set(kQuery, Result<std::string>(MakeError("exit status 9")));
  expect_named(terse, kQuery, "exit status 9");

  ScriptedSmi bad_topo = Machine("dgx-a100");
  bad_topo.Set(kTopo, std::string("this is not a matrix\n"));
  expect_named(bad_topo, kTopo, "");

  ScriptedSmi bad_query = Machine("dgx-a100");
  bad_query.Set(kQuery, std::string("index, uuid, name, memory.total [MiB], pci.bus_id\n"
                                    "0, GPU-x, NVIDIA A100-SXM4-40GB, lots, 00000000:07:00.0\n"));
  expect_named(bad_query, kQuery, "memory.total");

  ScriptedSmi header_only = Machine("dgx-a100");
  header_only.Set(kQuery, std::string("index, uuid, name, memory.total [MiB], pci.bus_id\n"));
  expect_named(header_only, kQuery, "lists no GPUs");

  ScriptedSmi bad_modes = Machine("dgx-a100");
  bad_modes.Set(kMigModes, std::string("0, Sometimes, Disabled\n"));
  expect_named(bad_modes, "mig.mode.current", "line 1");

  ScriptedSmi lgi_fails = Machine("dgx-a100");
  lgi_fails.Set(kMigModes, Data("dgx-a100.mig-mode.csv"));
  lgi_fails.Set(kLgi, Result<std::string>(MakeError(
                          "`nvidia-smi mig -lgi`: exit status 4: Failed to display GPU instances: "
                          "Insufficient Permissions")));
  expect_named(lgi_fails, kLgi, "Insufficient Permissions");

  ScriptedSmi lgi_garbage = Machine("dgx-a100");
  lgi_garbage.Set(kMigModes, Data("dgx-a100.mig-mode.csv"));
  lgi_garbage.Set(kLgi, std::string("|   6  MIG 3g.20gb   9   1   four:4  |\n"));
  expect_named(lgi_garbage, "mig -lgi, line 1", "placement start");
}

TEST(NvidiaSmiDiscovery, DriverVersionProblemsAreWarnings) {
  ScriptedSmi smi = Machine("dgx1-v100");
  smi.Set(kDriver, std::string("550.54.15\n535.104.05\n"));
  auto mixed = DiscoverWithNvidiaSmi(smi.Runner());
  ASSERT_TRUE(mixed) << mixed.error().message;
  EXPECT_EQ(mixed->driver_version, "");
  EXPECT_NE(std::find_if(mixed->warnings.begin(), mixed->warnings.end(),
                         [](const std::string& w) { return w.find("535.104.05") != w.npos; }),
            mixed->warnings.end());
  smi.answers.erase(kDriver);
  auto unknown = DiscoverWithNvidiaSmi(smi.Runner());
  ASSERT_TRUE(unknown) << unknown.error().message;
  EXPECT_EQ(unknown->driver_version, "");
}

TEST(NvidiaSmiDiscovery, DiscoverFallsBackWhenNvmlCannotBeLoaded) {
  ScriptedSmi smi = Machine("dgx-h100");
  NvmlOptions options;
  options.library = "/nonexistent/libnvidia-ml.so.1";
  options.sysfs_root = "/nonexistent-sysfs";  // not this machine's NICs
  auto found = Discover(options, smi.Runner());
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->source, "nvidia-smi");
  EXPECT_EQ(Published(found->spec), Published(ParsedByLinkfit("dgx-h100")));

  ScriptedSmi nothing;  // nvidia-smi fails too: the error says why both failed
  auto neither = Discover(options, nothing.Runner());
  ASSERT_FALSE(neither);
  EXPECT_NE(neither.error().message.find("NVML: "), std::string::npos);
  EXPECT_NE(neither.error().message.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos)
      << neither.error().message;
  EXPECT_NE(neither.error().message.find("nvidia-smi: `nvidia-smi topo -m`"), std::string::npos)
      << neither.error().message;
}

// The 4x L40S box of test/data/nvidia-smi/nics (two sockets, one dual-port NIC on socket 1) as
// sysfs shows it: each GPU below a host bridge of its own, the NIC's two functions on the
// host bridge pci0000:c0 on NUMA node `nic_numa`.
void BuildL40sBox(testing::SysfsTree& tree, int nic_numa) {
  const int bridges[] = {0x00, 0x20, 0x80, 0xa0};
  for (int g = 0; g < 4; ++g) {
    char path[64];
    std::snprintf(path, sizeof(path), "pci0000:%02x/0000:%02x:01.0/0000:%02x:00.0", bridges[g],
                  bridges[g], bridges[g] + 1);
    tree.Function(path, "0x10de", "0x26b9", g / 2);
  }
  for (int f = 0; f < 2; ++f) {
    const std::string function = "pci0000:c0/0000:c0:01.0/0000:c1:00." + std::to_string(f);
    tree.Function(function, "0x15b3", "0x1017", nic_numa);
    tree.Rdma("mlx5_" + std::to_string(f), function, "Ethernet", "25 Gb/sec (1X EDR)", "4: ACTIVE",
              f, "");
  }
}

// Through nvidia-smi, the NICs come from sysfs where it shows some (bus ids, ports); where topo -m
// and sysfs disagree on a relation, a warning names it and sysfs's is published.
TEST(NvidiaSmiDiscovery, NicsComeFromSysfsWhereItShowsSome) {
  ScriptedSmi smi;
  smi.Set(kTopo, Data("nics/l40s-4x-2socket-nics-one-socket-missalignment106.topo.txt"));
  smi.Set(kQuery, std::string("index, uuid, name, memory.total [MiB], pci.bus_id\n"
                              "0, GPU-0, NVIDIA L40S, 46068 MiB, 00000000:01:00.0\n"
                              "1, GPU-1, NVIDIA L40S, 46068 MiB, 00000000:21:00.0\n"
                              "2, GPU-2, NVIDIA L40S, 46068 MiB, 00000000:81:00.0\n"
                              "3, GPU-3, NVIDIA L40S, 46068 MiB, 00000000:A1:00.0\n"));
  NvmlOptions options;
  options.library = "/nonexistent/libnvidia-ml.so.1";
  {
    testing::SysfsTree tree;
    BuildL40sBox(tree, /*nic_numa=*/1);
    options.sysfs_root = tree.root();
    auto found = Discover(options, smi.Runner());
    ASSERT_TRUE(found) << found.error().message;
    ASSERT_EQ(found->spec.nics.size(), 2u);
    EXPECT_EQ(found->spec.nics[1].pci_bus_id, "0000:c1:00.1");
    EXPECT_EQ(found->spec.nics[1].link_layer, topology::NicLinkLayer::kEthernet);
    using R = topology::PcieRelation;
    EXPECT_EQ(found->spec.nics[0].gpu_relations,
              (std::vector<R>{R::kSys, R::kSys, R::kNode, R::kNode}));
    for (const std::string& warning : found->warnings) {
      EXPECT_EQ(warning.find("sysfs says"), std::string::npos) << warning;
    }
  }
  testing::SysfsTree moved;  // sysfs puts the card on socket 0: it disagrees with topo -m
  BuildL40sBox(moved, /*nic_numa=*/0);
  options.sysfs_root = moved.root();
  auto found = Discover(options, smi.Runner());
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->spec.nics[0].gpu_relations[0], topology::PcieRelation::kNode);
  bool warned = false;
  for (const std::string& warning : found->warnings) {
    warned = warned || warning ==
                           "NIC mlx5_0 to GPU0: sysfs says NODE, nvidia-smi topo -m SYS; "
                           "publishing sysfs's";
  }
  EXPECT_TRUE(warned);
}

}  // namespace
}  // namespace linkfit::agent
