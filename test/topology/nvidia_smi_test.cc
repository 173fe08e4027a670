// Tests of the nvidia-smi parser (ParseNvidiaSmi and the text splitter): every sample in
// test/data/nvidia-smi against the fixture JSON it was written from, then malformed inputs.

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "linkfit/common/strings.h"
#include "linkfit/topology/spec.h"
#include "linkfit/topology/topology.h"
#include "topology/nvidia_smi_text.h"

namespace linkfit::topology {
namespace {

std::string ReadFile(const std::string& relative) {
  std::ifstream file(std::string(LINKFIT_SOURCE_DIR) + "/" + relative, std::ios::binary);
  EXPECT_TRUE(file) << "cannot open " << relative;
  std::ostringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

std::string SamplePath(const std::string& name) { return "test/data/nvidia-smi/" + name; }

NvlinkFabricKind FabricKindFromFixture(const std::string& kind) {
  if (kind == "nvswitch") return NvlinkFabricKind::kNvswitch;
  if (kind == "direct") return NvlinkFabricKind::kDirect;
  if (kind == "bridge") return NvlinkFabricKind::kBridge;
  return NvlinkFabricKind::kNone;
}

// The UUID column of a query-gpu CSV with header, by GPU index.
std::map<int, std::string> UuidsFromCsv(const std::string& csv) {
  std::map<int, std::string> uuids;
  for (std::string_view line : Split(csv, '\n')) {
    const std::vector<std::string_view> fields = Split(line, ',');
    if (fields.size() < 2) continue;
    if (const auto index = ParseInt(fields[0])) uuids[static_cast<int>(*index)] = Trim(fields[1]);
  }
  return uuids;
}

// Checks a parsed spec against the fixture JSON that the sample was generated from.
void ExpectMatchesFixture(const TopologySpec& spec, const nlohmann::json& fixture, bool with_csv) {
  const auto& gpus = fixture.at("gpus");
  ASSERT_EQ(spec.gpus.size(), gpus.size());
  for (std::size_t g = 0; g < gpus.size(); ++g) {
    const auto& expected = gpus[g];
    const GpuSpec& gpu = spec.gpus[g];
    SCOPED_TRACE("GPU" + std::to_string(g));
    EXPECT_EQ(gpu.index, static_cast<int>(g));
    EXPECT_EQ(gpu.numa_node, expected.at("numa_node").get<int>());
    EXPECT_EQ(gpu.socket, expected.at("socket").get<int>());
    EXPECT_EQ(gpu.nvlink_physical_links, expected.at("nvlink_physical_links").get<int>());
    if (!with_csv) continue;
    EXPECT_EQ(gpu.model, expected.at("model").get<std::string>());
    EXPECT_EQ(gpu.memory_mib, expected.at("memory_mib").get<std::uint64_t>());
    const std::string mig = expected.at("mig_profile_set").is_null()
                                ? std::string()
                                : expected.at("mig_profile_set").get<std::string>();
    EXPECT_EQ(gpu.mig_profile_set, mig);
    EXPECT_EQ(gpu.mig_capable, expected.at("mig_capable").get<bool>());
    EXPECT_EQ(gpu.p2p_supported, expected.value("p2p_supported", true));
    if (gpu.model.rfind("generic", 0) != 0) {  // a placeholder name tells no generation
      EXPECT_EQ(gpu.pcie_gen, expected.at("pcie_gen").get<int>());
    }
    EXPECT_TRUE(StartsWith(gpu.uuid, "GPU-")) << gpu.uuid;
    EXPECT_TRUE(StartsWith(gpu.pci_bus_id, "00000000:")) << gpu.pci_bus_id;
  }

  std::map<std::pair<int, int>, const LinkSpec*> links;
  for (const LinkSpec& link : spec.links) links[{link.a, link.b}] = &link;
  const auto& expected_links = fixture.at("links");
  ASSERT_EQ(spec.links.size(), expected_links.size());
  std::map<int, int> socket_of;
  for (const auto& gpu : gpus) socket_of[gpu.at("index").get<int>()] = gpu.at("socket").get<int>();
  for (const auto& expected : expected_links) {
    const int a = expected.at("a").get<int>();
    const int b = expected.at("b").get<int>();
    SCOPED_TRACE("GPU" + std::to_string(a) + "-GPU" + std::to_string(b));
    ASSERT_EQ(links.count({a, b}), 1u);
    const LinkSpec& link = *links[{a, b}];
    const int nvlinks = expected.at("nvlink_count").get<int>();
    EXPECT_EQ(link.nvlink_count, nvlinks);
    const bool via_nvswitch =
        expected.at("nvlink_via").is_string() && expected.at("nvlink_via") == "nvswitch";
    EXPECT_EQ(link.via_nvswitch, via_nvswitch);
    if (nvlinks == 0) {
      EXPECT_EQ(ToString(link.pcie), expected.at("pcie_relation").get<std::string>());
    } else {
      // Hidden by topo -m: inferred from the sockets.
      EXPECT_EQ(link.pcie, socket_of[a] == socket_of[b] ? PcieRelation::kNode : PcieRelation::kSys);
    }
  }

  const auto& fabric = fixture.at("nvlink_fabric");
  EXPECT_EQ(spec.fabric.kind, FabricKindFromFixture(fabric.at("kind").get<std::string>()));
  if (with_csv && fabric.at("nvlink_generation").is_number()) {
    EXPECT_EQ(spec.fabric.nvlink_generation, fabric.at("nvlink_generation").get<int>());
  }
  if (with_csv && fabric.contains("nvswitch_generation")) {
    EXPECT_EQ(spec.fabric.nvswitch_generation, fabric.at("nvswitch_generation").get<int>());
  }
  if (fabric.at("kind") == "none") {
    EXPECT_EQ(spec.fabric.nvlink_generation, 0);
  }
}

class NvidiaSmiSampleTest : public ::testing::TestWithParam<std::string> {};

TEST_P(NvidiaSmiSampleTest, MatchesFixture) {
  const std::string id = GetParam();
  const nlohmann::json fixture =
      nlohmann::json::parse(ReadFile("config/topologies/" + id + ".json"));
  const std::string topo = ReadFile(SamplePath(id + ".topo.txt"));
  const std::string csv = ReadFile(SamplePath(id + ".query.csv"));

  const Result<TopologySpec> spec = ParseNvidiaSmi(topo, csv);
  ASSERT_TRUE(spec) << spec.error().message;
  ExpectMatchesFixture(*spec, fixture, /*with_csv=*/true);
  const std::map<int, std::string> uuids = UuidsFromCsv(csv);
  for (const GpuSpec& gpu : spec->gpus) EXPECT_EQ(gpu.uuid, uuids.at(gpu.index));

  // Without the CSV the matrix facts are unchanged and the model facts unknown.
  const Result<TopologySpec> bare = ParseNvidiaSmi(topo, "");
  ASSERT_TRUE(bare) << bare.error().message;
  ExpectMatchesFixture(*bare, fixture, /*with_csv=*/false);
  for (const GpuSpec& gpu : bare->gpus) {
    EXPECT_TRUE(gpu.model.empty());
    EXPECT_TRUE(gpu.uuid.empty());
  }

  // The samples are clean: the only warnings allowed are the documented inferences.
  for (const std::string& warning : spec->warnings) {
    const bool expected = warning.find("hidden by topo -m") != std::string::npos ||
                          warning.find("NUMA nodes inferred from") != std::string::npos;
    EXPECT_TRUE(expected) << warning;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NvidiaSmiSampleTest,
                         ::testing::Values("dgx1-v100", "dgx2-v100", "dgx-a100", "dgx-h100",
                                           "pcie-8x-l40s-2socket", "ws-4x-rtxa6000-nvlink-pairs",
                                           "pcie-8x-rtx4090-all-sys",
                                           "pcie-8x-a100-nvlink-bridge-pairs",
                                           "pcie-8x-cascaded-switch-2socket"),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(NvidiaSmiVariantTest, CsvWithoutHeaderOrUnits) {
  const std::string topo = ReadFile(SamplePath("dgx-h100.topo.txt"));
  const Result<TopologySpec> with_header =
      ParseNvidiaSmi(topo, ReadFile(SamplePath("dgx-h100.query.csv")));
  const Result<TopologySpec> bare_values =
      ParseNvidiaSmi(topo, ReadFile(SamplePath("dgx-h100.query-noheader-nounits.csv")));
  ASSERT_TRUE(with_header) << with_header.error().message;
  ASSERT_TRUE(bare_values) << bare_values.error().message;
  for (std::size_t g = 0; g < with_header->gpus.size(); ++g) {
    EXPECT_EQ(bare_values->gpus[g].uuid, with_header->gpus[g].uuid);
    EXPECT_EQ(bare_values->gpus[g].memory_mib, 81559u);
    EXPECT_EQ(bare_values->gpus[g].mig_profile_set, "h100-80gb");
  }

  const Result<TopologySpec> l40s =
      ParseNvidiaSmi(ReadFile(SamplePath("pcie-8x-l40s-2socket.topo.txt")),
                     ReadFile(SamplePath("pcie-8x-l40s-2socket.query-noheader.csv")));
  ASSERT_TRUE(l40s) << l40s.error().message;
  EXPECT_EQ(l40s->gpus[7].model, "NVIDIA L40S");
  EXPECT_EQ(l40s->gpus[7].memory_mib, 46068u);
  EXPECT_FALSE(l40s->gpus[7].mig_capable);
}

TEST(NvidiaSmiVariantTest, OldDriverWithoutNumaAffinityInfersNumaFromCpus) {
  // dgx2-v100.topo.txt has only "CPU Affinity" (drivers before 450).
  const Result<TopologySpec> spec = ParseNvidiaSmi(ReadFile(SamplePath("dgx2-v100.topo.txt")), "");
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->gpus[7].numa_node, 0);
  EXPECT_EQ(spec->gpus[8].numa_node, 1);
  EXPECT_TRUE(std::any_of(spec->warnings.begin(), spec->warnings.end(), [](const auto& w) {
    return w.find("NUMA nodes inferred from 2 distinct CPU affinities") != std::string::npos;
  }));
}

TEST(NvidiaSmiVariantTest, CombinedFileWithAnsiHeader) {
  const std::string text = ReadFile(SamplePath("ws-4x-rtxa6000-nvlink-pairs.combined.txt"));
  const internal::NvidiaSmiParts parts = internal::SplitNvidiaSmiText(text);
  EXPECT_TRUE(StartsWith(parts.query_gpu_csv, "index, uuid")) << parts.query_gpu_csv;
  EXPECT_EQ(parts.topo_matrix.find("index,"), std::string_view::npos);

  const Result<TopologySpec> spec = internal::ParseNvidiaSmiText(text);
  ASSERT_TRUE(spec) << spec.error().message;
  ExpectMatchesFixture(
      *spec, nlohmann::json::parse(ReadFile("config/topologies/ws-4x-rtxa6000-nvlink-pairs.json")),
      /*with_csv=*/true);
}

TEST(NvidiaSmiVariantTest, SplitFindsHeaderlessCsv) {
  const std::string text =
      "\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU1\tPIX\t X \n\n"
      "0, GPU-a, Tesla T4, 15360 MiB, 00000000:3B:00.0\n"
      "1, GPU-b, Tesla T4, 15360 MiB, 00000000:86:00.0\n";
  const internal::NvidiaSmiParts parts = internal::SplitNvidiaSmiText(text);
  EXPECT_TRUE(StartsWith(parts.query_gpu_csv, "0, GPU-a")) << parts.query_gpu_csv;
  const Result<TopologySpec> spec = internal::ParseNvidiaSmiText(text);
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->gpus[1].uuid, "GPU-b");
  EXPECT_EQ(spec->gpus[1].pcie_gen, 3);
  EXPECT_EQ(spec->links[0].pcie, PcieRelation::kPix);
  EXPECT_EQ(spec->fabric.kind, NvlinkFabricKind::kNone);
}

TEST(NvidiaSmiInferenceTest, NpsNumaNodesJoinedIntoSocketsThroughNics) {
  // DGX A100 in NPS4 mode: GPUs sit on NUMA nodes 1, 3, 5, 7; NICs reach the GPUs of the other
  // NUMA node of the same socket at NODE, which puts nodes 1 and 3 (and 5 and 7) on one socket.
  const Result<TopologySpec> spec = ParseNvidiaSmi(ReadFile(SamplePath("dgx-a100.topo.txt")), "");
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->gpus[0].numa_node, 3);
  EXPECT_EQ(spec->gpus[2].numa_node, 1);
  EXPECT_EQ(spec->gpus[0].socket, spec->gpus[2].socket);
  EXPECT_NE(spec->gpus[0].socket, spec->gpus[4].socket);
}

TEST(NvidiaSmiInferenceTest, SocketSplitWithoutEvidenceIsAWarning) {
  const std::string topo =
      "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n"
      "GPU0\t X \tNV12\tNV12\tNV12\t0-15\t0\n"
      "GPU1\tNV12\t X \tNV12\tNV12\t0-15\t0\n"
      "GPU2\tNV12\tNV12\t X \tNV12\t16-31\t1\n"
      "GPU3\tNV12\tNV12\tNV12\t X \t16-31\t1\n";
  const Result<TopologySpec> spec =
      ParseNvidiaSmi(topo,
                     "0, GPU-0, NVIDIA A100-SXM4-80GB, 81920 MiB, 0:1\n"
                     "1, GPU-1, NVIDIA A100-SXM4-80GB, 81920 MiB, 0:2\n"
                     "2, GPU-2, NVIDIA A100-SXM4-80GB, 81920 MiB, 0:3\n"
                     "3, GPU-3, NVIDIA A100-SXM4-80GB, 81920 MiB, 0:4\n");
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->fabric.kind, NvlinkFabricKind::kNvswitch);
  EXPECT_EQ(spec->fabric.nvlink_generation, 3);
  EXPECT_EQ(spec->fabric.nvswitch_generation, 2);
  EXPECT_EQ(spec->gpus[2].socket, 1);
  EXPECT_EQ(spec->links[0].pcie, PcieRelation::kNode);  // GPU0-GPU1, one NUMA node
  EXPECT_EQ(spec->links[1].pcie, PcieRelation::kSys);   // GPU0-GPU2
  EXPECT_EQ(spec->gpus[0].mig_profile_set, "a100-80gb");
  EXPECT_TRUE(std::any_of(spec->warnings.begin(), spec->warnings.end(), [](const auto& w) {
    return w.find("assumed one CPU socket per NUMA node") != std::string::npos;
  }));
}

TEST(NvidiaSmiInferenceTest, ModelFacts) {
  struct Case {
    const char* model;
    std::uint64_t memory_mib;
    int pcie_gen;
    const char* mig;
    bool p2p;
  };
  const Case cases[] = {
      {"NVIDIA A100-PCIE-40GB", 40960, 4, "a100-40gb", true},
      {"NVIDIA A100 80GB PCIe", 81920, 4, "a100-80gb", true},
      {"NVIDIA H100 PCIe", 81559, 5, "h100-80gb", true},
      {"NVIDIA H100 NVL", 95830, 5, "", true},
      {"NVIDIA H200", 143771, 5, "h200-141gb", true},
      {"NVIDIA GH200 480GB", 97871, 5, "", true},
      {"Tesla T4", 15360, 3, "", true},
      {"NVIDIA L4", 23034, 4, "", true},
      {"NVIDIA A10", 23028, 4, "", true},
      {"NVIDIA GeForce RTX 3090", 24576, 4, "", false},
      {"NVIDIA RTX 6000 Ada Generation", 49140, 4, "", true},
      {"Some Future GPU", 1024, 0, "", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model);
    const std::string csv =
        std::string("0, GPU-x, ") + c.model + ", " + std::to_string(c.memory_mib) + " MiB, 0:1\n";
    const Result<TopologySpec> spec = ParseNvidiaSmi("\tGPU0\nGPU0\t X \n", csv);
    ASSERT_TRUE(spec) << spec.error().message;
    EXPECT_EQ(spec->gpus[0].pcie_gen, c.pcie_gen);
    EXPECT_EQ(spec->gpus[0].mig_profile_set, c.mig);
    EXPECT_EQ(spec->gpus[0].mig_capable, std::string(c.mig) != "");
    EXPECT_EQ(spec->gpus[0].p2p_supported, c.p2p);
  }
}

// Operators may describe a node either way: the model built from nvidia-smi text must rank pairs
// exactly as the one built from the full topology document does.
TEST_P(NvidiaSmiSampleTest, SameBandwidthAsTheFixtureDocument) {
  const std::string id = GetParam();
  const Result<TopologySpec> smi = ParseNvidiaSmi(ReadFile(SamplePath(id + ".topo.txt")),
                                                  ReadFile(SamplePath(id + ".query.csv")));
  ASSERT_TRUE(smi) << smi.error().message;
  const Result<TopologySpec> document =
      ParseTopologyDocument(ReadFile("config/topologies/" + id + ".json"));
  ASSERT_TRUE(document) << document.error().message;
  const Result<TopologyPtr> from_smi = BuildTopology(*smi);
  const Result<TopologyPtr> from_document = BuildTopology(*document);
  ASSERT_TRUE(from_smi) << from_smi.error().message;
  ASSERT_TRUE(from_document) << from_document.error().message;
  // The placeholder model of the cascaded-switch fixture tells no PCIe generation.
  const bool same_pcie_gen = id != "pcie-8x-cascaded-switch-2socket";
  const int n = (*from_smi)->gpu_count();
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      SCOPED_TRACE("GPU" + std::to_string(a) + "-GPU" + std::to_string(b));
      EXPECT_EQ((*from_smi)->has_nvlink(a, b), (*from_document)->has_nvlink(a, b));
      if ((*from_smi)->has_nvlink(a, b) || same_pcie_gen) {
        EXPECT_EQ((*from_smi)->bandwidth_mbps(a, b), (*from_document)->bandwidth_mbps(a, b));
      }
    }
  }
}

TEST(LoadTopologyFileTest, DetectsTheFormat) {
  const std::string dir = std::string(LINKFIT_SOURCE_DIR) + "/";
  const Result<TopologySpec> smi =
      LoadTopologyFile(dir + SamplePath("ws-4x-rtxa6000-nvlink-pairs.combined.txt"));
  ASSERT_TRUE(smi) << smi.error().message;
  EXPECT_EQ(smi->gpus.size(), 4u);
  EXPECT_EQ(smi->gpus[3].model, "NVIDIA RTX A6000");

  const Result<TopologySpec> json = LoadTopologyFile(dir + "config/topologies/dgx-h100.json");
  ASSERT_TRUE(json) << json.error().message;
  EXPECT_EQ(json->gpus.size(), 8u);

  const std::string missing = dir + "test/data/nvidia-smi/no-such-file.txt";
  const Result<TopologySpec> error = LoadTopologyFile(missing);
  ASSERT_FALSE(error);
  EXPECT_EQ(error.error().message.rfind("cannot read " + missing + ": ", 0), 0u)
      << error.error().message;

  const std::string csv_only = dir + SamplePath("dgx-h100.query.csv");
  const Result<TopologySpec> not_topology = LoadTopologyFile(csv_only);
  ASSERT_FALSE(not_topology);
  EXPECT_TRUE(StartsWith(not_topology.error().message, csv_only + ": not `nvidia-smi topo -m`"))
      << not_topology.error().message;
}

// ---------------------------------------------------------------------------------------------
// Malformed input.

// A 4-GPU matrix in which the cell for GPU0->GPU1 and GPU1->GPU0 can be replaced.
std::string FourGpus(std::string_view cell01, std::string_view cell10) {
  return "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n"
         "GPU0\t X \t" +
         std::string(cell01) +
         "\tPIX\tPIX\t0-7\t0\n"
         "GPU1\t" +
         std::string(cell10) +
         "\t X \tPIX\tPIX\t0-7\t0\n"
         "GPU2\tPIX\tPIX\t X \tNV4\t0-7\t0\n"
         "GPU3\tPIX\tPIX\tNV4\t X \t0-7\t0\n";
}

std::string ManyGpus(int count) {
  std::string text;
  for (int c = 0; c < count; ++c) text += "\tGPU" + std::to_string(c);
  text += "\n";
  for (int r = 0; r < count; ++r) {
    text += "GPU" + std::to_string(r);
    for (int c = 0; c < count; ++c) text += r == c ? "\t X " : "\tSYS";
    text += "\n";
  }
  return text;
}

TEST(NvidiaSmiErrorTest, BadMatrixIsAnError) {
  struct Case {
    const char* name;
    std::string topo;
    const char* message_part;
  };
  const std::string good = FourGpus("NV4", "NV4");
  std::string missing_row = good;
  missing_row.erase(missing_row.find("GPU2\tPIX"), good.find("GPU3\tPIX") - good.find("GPU2\tPIX"));
  std::string duplicate_row = good;
  duplicate_row.replace(duplicate_row.find("GPU3\tPIX"), 4, "GPU2");
  std::string short_row = good;
  const std::string full_row3 = "GPU3\tPIX\tPIX\tNV4\t X \t0-7\t0";
  short_row.replace(short_row.find(full_row3), full_row3.size(), "GPU3\tPIX\tPIX");
  const Case cases[] = {
      {"empty", "", "no header line"},
      {"blank", "\n \n\t\n", "no header line"},
      {"garbage", "the quick brown fox\n\x01\x02\xff\xfe\n", "no header line"},
      {"json-ish", "{\"gpus\": []}", "no header line"},
      {"missing row", missing_row, "no row for GPU2"},
      {"duplicate row", duplicate_row, "duplicate row GPU2"},
      {"short row", short_row, "row GPU3 has 2 cells"},
      {"duplicate column", "\tGPU0\tGPU0\nGPU0\t X \tX\n", "duplicate column GPU0"},
      {"gap in columns", "\tGPU0\tGPU2\nGPU0\t X \tSYS\nGPU2\tSYS\t X \n", "GPU0..GPU1"},
      {"row outside header", "\tGPU0\tGPU1\nGPU0\t X \tSYS\nGPU5\tSYS\t X \n",
       "row GPU5 has no column"},
      {"17 GPUs", ManyGpus(17), "at most 16"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Result<TopologySpec> spec = ParseNvidiaSmi(c.topo, "");
    ASSERT_FALSE(spec);
    EXPECT_NE(spec.error().message.find(c.message_part), std::string::npos) << spec.error().message;
  }
  EXPECT_TRUE(ParseNvidiaSmi(ManyGpus(16), ""));
  const Result<TopologySpec> line_named = ParseNvidiaSmi(duplicate_row, "");
  ASSERT_FALSE(line_named);
  EXPECT_NE(line_named.error().message.find("line 5"), std::string::npos)
      << line_named.error().message;
}

TEST(NvidiaSmiErrorTest, BadCellsBecomeSysWithAWarning) {
  struct Case {
    const char* name;
    const char* cell01;
    const char* cell10;
    const char* warning_part;
  };
  const Case cases[] = {
      {"asymmetric NVLink", "NV2", "SYS", "GPU0-GPU1: asymmetric cells \"NV2\" and \"SYS\""},
      {"asymmetric count", "NV2", "NV4", "asymmetric cells \"NV2\" and \"NV4\""},
      {"unknown token", "FOO", "FOO", "GPU0-GPU1: unrecognised cell \"FOO\""},
      {"unknown on one side", "PIX", "NV", "unrecognised cell \"NV\""},
      {"NV0", "NV0", "NV0", "unrecognised cell \"NV0\""},
      {"X off the diagonal", "X", "X", "unrecognised cell \"X\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Result<TopologySpec> spec = ParseNvidiaSmi(FourGpus(c.cell01, c.cell10), "");
    ASSERT_TRUE(spec) << spec.error().message;
    const LinkSpec& link = spec->links[0];
    ASSERT_EQ(link.a, 0);
    ASSERT_EQ(link.b, 1);
    EXPECT_EQ(link.nvlink_count, 0);
    EXPECT_EQ(link.pcie, PcieRelation::kSys);
    EXPECT_TRUE(
        std::any_of(spec->warnings.begin(), spec->warnings.end(),
                    [&](const auto& w) { return w.find(c.warning_part) != std::string::npos; }))
        << "warnings: " << (spec->warnings.empty() ? std::string("none") : spec->warnings.front());
    EXPECT_EQ(spec->links.back().nvlink_count, 4);  // GPU2-GPU3 unaffected
  }
  // Old drivers print SOC for SYS.
  const Result<TopologySpec> soc = ParseNvidiaSmi(FourGpus("SOC", "SYS"), "");
  ASSERT_TRUE(soc);
  EXPECT_EQ(soc->links[0].pcie, PcieRelation::kSys);
  EXPECT_EQ(soc->fabric.kind, NvlinkFabricKind::kBridge);
}

TEST(NvidiaSmiErrorTest, BadCsvIsAnError) {
  const std::string topo = FourGpus("NV4", "NV4");
  const std::string header = "index, uuid, name, memory.total [MiB], pci.bus_id\n";
  const auto row = [](int index, std::string_view memory) {
    return std::to_string(index) + ", GPU-" + std::to_string(index) + ", NVIDIA RTX A6000, " +
           std::string(memory) + ", 00000000:0" + std::to_string(index) + ":00.0\n";
  };
  const std::string rows012 = row(0, "49140 MiB") + row(1, "49140 MiB") + row(2, "49140 MiB");
  struct Case {
    const char* name;
    std::string csv;
    const char* message_part;
  };
  const Case cases[] = {
      {"bad memory", header + rows012 + row(3, "lots MiB"), "line 5: memory.total \"lots MiB\""},
      {"bad memory unit", header + rows012 + row(3, "48 GB"), "line 5: memory.total"},
      {"N/A memory", header + rows012 + row(3, "[N/A]"), "line 5: memory.total"},
      {"index not in matrix", header + rows012 + row(7, "49140 MiB"),
       "line 5: GPU index 7 is not in the topo -m matrix"},
      {"negative index", header + rows012 + row(-1, "49140 MiB"), "GPU index -1"},
      {"non-numeric index", header + rows012 + "x, GPU-3, A, 1 MiB, 0:0\n", "index \"x\""},
      {"duplicate index", header + rows012 + row(2, "49140 MiB"), "line 5: duplicate GPU index 2"},
      {"too few GPUs", header + rows012, "lists 3 GPUs, but the topo -m matrix has 4"},
      {"too many fields", header + rows012 + row(3, "1 MiB, extra"), "line 5: expected 5 fields"},
      {"too few fields", rows012 + "3, GPU-3\n", "line 4: expected 5 fields"},
      {"not a csv", "No devices were found\n", "line 1: expected 5 fields"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Result<TopologySpec> spec = ParseNvidiaSmi(topo, c.csv);
    ASSERT_FALSE(spec);
    EXPECT_NE(spec.error().message.find(c.message_part), std::string::npos) << spec.error().message;
  }
  EXPECT_TRUE(ParseNvidiaSmi(topo, header + rows012 + row(3, "49140 MiB")));
  EXPECT_TRUE(ParseNvidiaSmi(topo, header));  // a header alone: models unknown
}

TEST(NvidiaSmiErrorTest, NeverCrashesOnMangledSamples) {
  // Truncating a real sample anywhere must give a value or an error, never a crash.
  const std::string text = ReadFile(SamplePath("ws-4x-rtxa6000-nvlink-pairs.combined.txt"));
  for (std::size_t cut = 0; cut <= text.size(); cut += 7) {
    const Result<TopologySpec> spec = internal::ParseNvidiaSmiText(text.substr(0, cut));
    if (spec) {
      EXPECT_EQ(spec->gpus.size(), 4u);
    }
  }
}

}  // namespace
}  // namespace linkfit::topology
