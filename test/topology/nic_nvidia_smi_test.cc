// NIC columns of `nvidia-smi topo -m`: real published outputs (test/data/nvidia-smi/nics, each
// cited in config/topologies/README.md), the samples generated from the fixtures, the NIC legend
// and its errors.

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "linkfit/topology/spec.h"
#include "linkfit/topology/topology.h"

namespace linkfit::topology {
namespace {

using R = PcieRelation;

std::string ReadFile(const std::string& relative) {
  std::ifstream file(std::string(LINKFIT_SOURCE_DIR) + "/" + relative, std::ios::binary);
  EXPECT_TRUE(file) << "cannot open " << relative;
  std::ostringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

TopologySpec Parse(const std::string& sample) {
  auto spec = ParseNvidiaSmi(ReadFile("test/data/nvidia-smi/" + sample), "");
  EXPECT_TRUE(spec) << spec.error().message;
  if (!spec) return {};
  auto built = BuildTopology(*spec);
  EXPECT_TRUE(built) << built.error().message;
  for (const std::string& warning : spec->warnings) {
    EXPECT_EQ(warning.find("NIC"), std::string::npos) << warning;
    EXPECT_EQ(warning.find("unrecognised"), std::string::npos) << warning;
  }
  return *spec;
}

std::vector<std::string> Names(const TopologySpec& spec) {
  std::vector<std::string> names;
  for (const NicSpec& nic : spec.nics) names.push_back(nic.name);
  return names;
}

// HGX H100 with one compute NIC per GPU, each on the GPU's switch (PIX), and NIC0 on no GPU's
// socket side at all (SYS to every GPU). The stored copy has no NIC legend: labels are the names.
TEST(NicNvidiaSmi, HgxH100WithNineNics) {
  const TopologySpec spec = Parse("nics/hgx-h100-9nic-nccl1453.topo.txt");
  ASSERT_EQ(spec.nics.size(), 9u);
  EXPECT_EQ(Names(spec), (std::vector<std::string>{"NIC0", "NIC1", "NIC2", "NIC3", "NIC4", "NIC5",
                                                   "NIC6", "NIC7", "NIC8"}));
  EXPECT_EQ(spec.nics[0].gpu_relations, std::vector<R>(8, R::kSys));
  EXPECT_EQ(spec.nics[0].numa_node, -1);
  // GPU g's own NIC: GPU0 -> NIC8, GPU1 -> NIC7, ..., GPU3 -> NIC5; GPU4 -> NIC4, ..., GPU7 ->
  // NIC1.
  const std::size_t own[] = {8, 7, 6, 5, 4, 3, 2, 1};
  for (std::size_t g = 0; g < 8; ++g) {
    for (std::size_t n = 1; n < 9; ++n) {
      const R expected = n == own[g] ? R::kPix : ((g < 4) == (n >= 5) ? R::kNode : R::kSys);
      EXPECT_EQ(spec.nics[n].gpu_relations[g], expected) << "GPU" << g << " NIC" << n;
    }
  }
  EXPECT_EQ(spec.nics[8].numa_node, 0);
  EXPECT_EQ(spec.nics[1].numa_node, 1);
}

// 4x L40S on two sockets, one dual-port NIC on the second socket only: NODE to GPUs 2 and 3,
// SYS to 0 and 1. Names come from the NIC legend.
TEST(NicNvidiaSmi, TwoSocketBoxWithNicsOnOneSocket) {
  const TopologySpec spec = Parse("nics/l40s-4x-2socket-nics-one-socket-missalignment106.topo.txt");
  EXPECT_EQ(Names(spec), (std::vector<std::string>{"mlx5_0", "mlx5_1"}));
  for (const NicSpec& nic : spec.nics) {
    EXPECT_EQ(nic.gpu_relations, (std::vector<R>{R::kSys, R::kSys, R::kNode, R::kNode}));
    EXPECT_EQ(nic.numa_node, 1);
    EXPECT_TRUE(nic.pci_bus_id.empty());  // topo -m does not tell
  }
}

// An older driver names the NIC columns after the devices; the NICs sit on the switch of GPUs 2
// and 3 (PIX), NODE to GPUs 0 and 1, SYS to the other socket.
TEST(NicNvidiaSmi, OldDriverColumnsNamedAfterTheDevices) {
  const TopologySpec spec = Parse("nics/v100-8x-mlx5-columns-nccltests29.topo.txt");
  EXPECT_EQ(Names(spec), (std::vector<std::string>{"mlx5_0", "mlx5_1"}));
  const std::vector<R> expected = {R::kNode, R::kNode, R::kPix, R::kPix,
                                   R::kSys,  R::kSys,  R::kSys, R::kSys};
  for (const NicSpec& nic : spec.nics) {
    EXPECT_EQ(nic.gpu_relations, expected);
    EXPECT_EQ(nic.numa_node, 0);
  }
}

// DGX A100 whose output shows no NVLinks (GPU pairs PXB): twelve NIC columns named after the
// devices, two NICs behind each GPU pair's switch (PXB), four NICs SYS to every GPU, and a NUMA
// affinity printed as a range ("6-7") on every GPU row, read as its first node.
TEST(NicNvidiaSmi, DgxA100TwelveNicsWithTwoPerGpuPair) {
  const TopologySpec spec = Parse("nics/dgx-a100-12nic-mlx5-columns-ucxpy749.topo.txt");
  ASSERT_EQ(spec.gpus.size(), 8u);
  ASSERT_EQ(spec.nics.size(), 12u);
  std::vector<std::string> expected_names;
  for (int n = 0; n < 12; ++n) expected_names.push_back("mlx5_" + std::to_string(n));
  EXPECT_EQ(Names(spec), expected_names);
  // NIC -> the GPU pair it is PXB to; -1: SYS to every GPU.
  const int pair_of[] = {0, 0, 1, 1, -1, -1, 2, 2, 3, 3, -1, -1};
  for (std::size_t n = 0; n < 12; ++n) {
    for (std::size_t g = 0; g < 8; ++g) {
      const R expected = pair_of[n] == static_cast<int>(g / 2) ? R::kPxb : R::kSys;
      EXPECT_EQ(spec.nics[n].gpu_relations[g], expected) << "GPU" << g << " " << Names(spec)[n];
    }
    EXPECT_EQ(spec.nics[n].numa_node, pair_of[n] < 0 ? -1 : 6) << Names(spec)[n];
  }
  for (const GpuSpec& gpu : spec.gpus) EXPECT_EQ(gpu.numa_node, 6);
}

// 8x H800 printed by `nvidia-smi topo -mp`, the PCIe-only view: no NVLink anywhere (GPU pairs
// PXB), one NIC behind the switch of GPU pairs 0-1, 4-5 and 6-7, three (one dual-port card) behind
// that of GPUs 2-3, each NODE to the other pair of its socket and SYS across. The legend has no
// NV# line; names come from the NIC legend.
TEST(NicNvidiaSmi, PcieViewWithOneNicPerGpuPair) {
  const TopologySpec spec = Parse("nics/h800-8x-topo-mp-nic-per-gpu-pair-tzhelloworld.topo.txt");
  ASSERT_EQ(spec.gpus.size(), 8u);
  ASSERT_EQ(spec.nics.size(), 6u);
  EXPECT_EQ(Names(spec),
            (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5"}));
  const int pair_of[] = {0, 1, 1, 1, 2, 3};  // NIC -> the GPU pair whose switch it is behind
  for (std::size_t n = 0; n < 6; ++n) {
    for (std::size_t g = 0; g < 8; ++g) {
      const int pair = static_cast<int>(g / 2);
      const R expected = pair == pair_of[n]           ? R::kPxb
                         : pair / 2 == pair_of[n] / 2 ? R::kNode
                                                      : R::kSys;
      EXPECT_EQ(spec.nics[n].gpu_relations[g], expected) << "GPU" << g << " " << Names(spec)[n];
    }
    EXPECT_EQ(spec.nics[n].numa_node, pair_of[n] / 2) << Names(spec)[n];
  }
  for (const GpuSpec& gpu : spec.gpus) EXPECT_EQ(gpu.numa_node, gpu.index / 4);
  for (const LinkSpec& link : spec.links) {
    EXPECT_EQ(link.nvlink_count, 0);
    const R expected = link.a / 2 == link.b / 2   ? R::kPxb
                       : link.a / 4 == link.b / 4 ? R::kNode
                                                  : R::kSys;
    EXPECT_EQ(link.pcie, expected) << "GPU" << link.a << "-GPU" << link.b;
  }
}

// The samples generated from the fixtures: names from the legend, relations as the fixture's
// `nics` list them (its pix/pxb/phb GPUs; the others NODE within the socket, SYS across).
TEST(NicNvidiaSmi, GeneratedSamplesMatchTheirFixtures) {
  for (const char* id : {"dgx-h100", "dgx-a100", "dgx1-v100", "pcie-8x-l40s-2socket"}) {
    SCOPED_TRACE(id);
    const TopologySpec spec = Parse(std::string(id) + ".topo.txt");
    const nlohmann::json fixture =
        nlohmann::json::parse(ReadFile(std::string("config/topologies/") + id + ".json"));
    const nlohmann::json& nics = fixture.at("nics");
    ASSERT_EQ(spec.nics.size(), nics.size());
    for (std::size_t n = 0; n < nics.size(); ++n) {
      for (std::size_t g = 0; g < spec.gpus.size(); ++g) {
        R expected = R::kSys;
        const std::pair<const char*, R> listed[] = {
            {"pix_gpus", R::kPix}, {"pxb_gpus", R::kPxb}, {"phb_gpus", R::kPhb}};
        for (const auto& [key, relation] : listed) {
          for (const auto& gpu : nics[n].value(key, nlohmann::json::array())) {
            if (gpu.get<std::size_t>() == g) expected = relation;
          }
        }
        const int nic_numa = nics[n].at("numa_node").get<int>();
        const auto& gpu = fixture.at("gpus")[g];
        int nic_socket = -1;
        for (const auto& other : fixture.at("gpus")) {
          if (other.at("numa_node") == nic_numa) nic_socket = other.at("socket").get<int>();
        }
        if (expected == R::kSys && gpu.at("socket").get<int>() == nic_socket) expected = R::kNode;
        EXPECT_EQ(spec.nics[n].gpu_relations[g], expected) << "NIC" << n << " GPU" << g;
      }
    }
  }
  EXPECT_EQ(Names(Parse("dgx-h100.topo.txt")),
            (std::vector<std::string>{"mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9",
                                      "mlx5_10", "mlx5_11"}));
}

constexpr const char* kMatrix =
    "\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tPHB\tPIX\tSYS\t0-7\t0\n"
    "GPU1\tPHB\t X \tPXB\tSYS\t0-7\t0\n"
    "NIC0\tPIX\tPXB\t X \tSYS\n"
    "NIC1\tSYS\tSYS\tSYS\t X \n"
    "\nLegend:\n\n  X    = Self\n\n";

TEST(NicNvidiaSmi, LegendErrorsNameTheLine) {
  const struct {
    const char* legend;
    const char* error;
  } cases[] = {
      {"NIC Legend:\n\n  NIC0 mlx5_0\n", "line 13: expected a NIC legend entry"},
      {"NIC Legend:\n\n  NIC0: mlx5 0\n", "line 13: NIC legend entry"},
      {"NIC Legend:\n\n  NIC0: mlx5_0\n  NIC0: mlx5_1\n", "line 14: NIC legend repeats NIC0"},
      {"NIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_0\n", "names device mlx5_0 twice"},
  };
  for (const auto& c : cases) {
    auto spec = ParseNvidiaSmi(std::string(kMatrix) + c.legend, "");
    ASSERT_FALSE(spec) << c.legend;
    EXPECT_NE(spec.error().message.find(c.error), std::string::npos) << spec.error().message;
  }
  // A good legend, then something else: names from the legend; an entry for a NIC the matrix
  // lacks is a warning.
  auto spec = ParseNvidiaSmi(
      std::string(kMatrix) + "NIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n  NIC2: mlx5_2\n$ ",
      "");
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(Names(*spec), (std::vector<std::string>{"mlx5_0", "mlx5_1"}));
  EXPECT_EQ(spec->nics[0].gpu_relations, (std::vector<R>{R::kPix, R::kPxb}));
  EXPECT_EQ(spec->nics[0].numa_node, 0);
  EXPECT_EQ(spec->nics[1].numa_node, -1);
  ASSERT_EQ(spec->warnings.size(), 1u);
  EXPECT_NE(spec->warnings[0].find("NIC2: mlx5_2 has no column"), std::string::npos);
}

// A NIC cell that is no relation is SYS with a warning, as GPU cells are.
TEST(NicNvidiaSmi, BadNicCellIsSysWithAWarning) {
  std::string text = kMatrix;
  text.replace(text.find("PXB\tSYS\t0-7"), 3, "N/A");
  auto spec = ParseNvidiaSmi(text, "");
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->nics[0].gpu_relations, (std::vector<R>{R::kPix, R::kSys}));
  bool warned = false;
  for (const std::string& warning : spec->warnings) {
    warned = warned || warning.find("GPU1-NIC0: unrecognised cell \"N/A\"") != std::string::npos;
  }
  EXPECT_TRUE(warned);
}

}  // namespace
}  // namespace linkfit::topology
