// NVML discovery takes what placement uses from the machine, not from linkfit's table of GPU
// model names: NVLink versions per link, PCIe generation and width per GPU, MIG capability from
// nvmlDeviceGetMigMode. Machines nobody tuned the table on (test/data/nvml/, each with the
// document the agent must publish for it under expected/) and libraries that cannot tell (the
// table is then the fallback, said in a warning).

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fake_nvml/nvml_test_support.h"
#include "linkfit/topology/gpu_models.h"
#include "recording.h"

namespace linkfit::agent {
namespace {

using testing::Build;
using testing::Fake;
using testing::FakeWith;
using testing::LoadRecording;

nlohmann::json Expected(const std::string& machine) {
  return nlohmann::json::parse(linkfit::testing::ReadFileOrDie(
      linkfit::testing::SourcePath("test/data/nvml/expected/" + machine + ".json")));
}

// The document the agent publishes is the expected one, key for key.
void ExpectPublished(const Discovery& found, const nlohmann::json& expected) {
  const nlohmann::json published = nlohmann::json::parse(topology::ToTopologyDocument(found.spec));
  EXPECT_EQ(published, expected) << "published:\n"
                                 << published.dump(1) << "\nexpected:\n"
                                 << expected.dump(1);
}

bool Warned(const Discovery& found, const std::string& text) {
  return std::any_of(found.warnings.begin(), found.warnings.end(),
                     [&](const std::string& w) { return w.find(text) != std::string::npos; });
}

// P100 is absent from linkfit's table: NVML alone says NVLink 1 and PCIe gen 3, so that the
// cross-socket pairs are gen-3 SYS (6 GB/s), not the gen-4 guess (12 GB/s).
TEST(NvmlHardware, AModelTheTableLacksIsDescribedFromNvmlAlone) {
  auto found = DiscoverWithNvml(Fake("p100-4x-nvlink1-2socket"));
  ASSERT_TRUE(found) << found.error().message;
  ExpectPublished(*found, Expected("p100-4x-nvlink1-2socket"));
  EXPECT_FALSE(Warned(*found, "not stated by NVML"));
  EXPECT_TRUE(found->guessed.empty());
  for (const topology::GpuSpec& gpu : found->spec.gpus) {
    EXPECT_EQ(gpu.sources.nvlink, topology::FigureSource::kNvml);
    EXPECT_EQ(gpu.sources.pcie, topology::FigureSource::kNvml);
    EXPECT_EQ(gpu.sources.mig, topology::FigureSource::kNvml);
  }
  const topology::TopologyPtr built = Build(*found);
  ASSERT_NE(built, nullptr);
  EXPECT_EQ(built->bandwidth_mbps(0, 3), 6000u);
  EXPECT_EQ(built->bandwidth_mbps(1, 2), 6000u);
  EXPECT_EQ(built->bandwidth_mbps(0, 1), 40000u);  // two NVLinks
}

// GPU 0's two links to GPU 1 trained at NVLink 2.0 (and one of GPU 0's links to GPU 2, whose
// other end says 1.0): pair 0-1 is NVLink 2, every other NVLinked pair NVLink 1, the fabric the
// lowest.
TEST(NvmlHardware, NvlinkVersionsThatDifferPerLinkArePublishedPerPair) {
  nlohmann::json recording = LoadRecording("p100-4x-nvlink1-2socket");
  for (const std::size_t gpu : {0u, 1u}) {
    for (const std::size_t link : {0u, 1u})
      recording["devices"][gpu]["nvlinks"][link]["version"] = 2;
  }
  recording["devices"][0]["nvlinks"][2]["version"] = 2;
  auto found = DiscoverWithNvml(FakeWith(recording, "p100-mixed-versions"));
  ASSERT_TRUE(found) << found.error().message;
  nlohmann::json expected = Expected("p100-4x-nvlink1-2socket");
  expected["links"][0]["nvlink_generation"] = 2;  // 0-1
  expected["links"][1]["nvlink_generation"] = 1;  // 0-2: the lower end
  expected["links"][4]["nvlink_generation"] = 1;  // 1-3
  expected["links"][5]["nvlink_generation"] = 1;  // 2-3
  ExpectPublished(*found, expected);
  EXPECT_TRUE(Warned(*found, "NVLink versions differ between links (NVLink 1, 2)"));
  // The published document reads back with the pairs' generations.
  auto reparsed = topology::ParseTopologyDocument(topology::ToTopologyDocument(found->spec));
  ASSERT_TRUE(reparsed) << reparsed.error().message;
  EXPECT_EQ(reparsed->links[0].nvlink_generation, 2);
  EXPECT_EQ(reparsed->links[1].nvlink_generation, 1);
}

// A library without nvmlDeviceGetNvLinkVersion and the PCIe link calls (older drivers) is no
// error: the table stands in, and says so.
TEST(NvmlHardware, WithoutTheLinkCallsTheTableIsTheFallback) {
  {
    auto found = DiscoverWithNvml(Fake("dgx-h100", LINKFIT_FAKE_NVML_WITHOUT_LINK_FACTS));
    ASSERT_TRUE(found) << found.error().message;
    EXPECT_TRUE(Warned(*found, "this NVML lacks NVLink versions or PCIe link generation/width"));
    EXPECT_TRUE(Warned(*found,
                       "PCIe generation of NVIDIA H100 80GB HBM3 not stated by NVML; "
                       "gen 5 from linkfit's GPU model table (NVIDIA H100 Tensor Core GPU "
                       "datasheet"));
    EXPECT_TRUE(Warned(*found, "NVLink version not stated by NVML; NVLink 4 from"));
    // One guess per figure and model, not per GPU; each GPU says where its figures came from.
    ASSERT_EQ(found->guessed.size(), 2u);
    EXPECT_EQ(found->guessed[0].figure, "pcie");
    EXPECT_EQ(found->guessed[0].model, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(found->guessed[1].figure, "nvlink");
    for (const topology::GpuSpec& gpu : found->spec.gpus) {
      EXPECT_EQ(gpu.sources.nvlink, topology::FigureSource::kTable);
      EXPECT_EQ(gpu.sources.pcie, topology::FigureSource::kTable);
      EXPECT_EQ(gpu.sources.mig, topology::FigureSource::kNvml);
    }
    const std::string published = topology::ToTopologyDocument(found->spec);
    EXPECT_NE(published.find(R"("sources":{"mig":"nvml","nvlink":"table","pcie":"table"})"),
              std::string::npos);
    EXPECT_EQ(found->spec.fabric.nvlink_generation, 4);
    EXPECT_EQ(found->spec.gpus[0].pcie_width, 0);
    testing::ExpectSameModel(*Build(*found), *linkfit::testing::LoadFixture("dgx-h100"));
  }
  {
    auto found =
        DiscoverWithNvml(Fake("p100-4x-nvlink1-2socket", LINKFIT_FAKE_NVML_WITHOUT_LINK_FACTS));
    ASSERT_TRUE(found) << found.error().message;
    EXPECT_TRUE(Warned(*found,
                       "PCIe generation of Tesla P100-SXM2-16GB not stated by NVML; gen "
                       "4 assumed, unknown to linkfit's GPU model table"));
    EXPECT_TRUE(Warned(*found, "NVLink version not stated by NVML; unknown to"));
    EXPECT_EQ(found->spec.gpus[0].pcie_gen, 0);
    EXPECT_EQ(found->spec.gpus[0].sources.pcie, topology::FigureSource::kAssumed);
    EXPECT_EQ(found->spec.gpus[0].sources.nvlink, topology::FigureSource::kAssumed);
  }
}

// An operator's table (--gpu-models) stands in for the built-in one: a P100 it describes gets
// its figures, and the warning names the operator's source.
TEST(NvmlHardware, AnOperatorsTableReplacesTheBuiltinOne) {
  auto table = topology::GpuModelTable::Parse(R"({"schema": "linkfit-gpu-models/v1", "models": [
      {"name": "P100", "match": ["P100"], "nvlink_generation": 1, "pcie_generation": 3,
       "source": "NVIDIA Tesla P100 datasheet"}]})",
                                              "ops.json");
  ASSERT_TRUE(table) << table.error().message;
  NvmlOptions options = Fake("p100-4x-nvlink1-2socket", LINKFIT_FAKE_NVML_WITHOUT_LINK_FACTS);
  options.gpu_models = &*table;
  auto found = DiscoverWithNvml(options);
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->spec.gpus[0].pcie_gen, 3);
  EXPECT_EQ(found->spec.fabric.nvlink_generation, 1);
  EXPECT_EQ(found->spec.gpus[0].sources.pcie, topology::FigureSource::kTable);
  EXPECT_TRUE(Warned(*found, "gen 3 from linkfit's GPU model table (NVIDIA Tesla P100 datasheet)"));
  // The published document is the expected one but for where the two figures came from.
  nlohmann::json expected = Expected("p100-4x-nvlink1-2socket");
  for (auto& gpu : expected["gpus"]) {
    gpu["sources"]["pcie"] = "table";
    gpu["sources"]["nvlink"] = "table";
    gpu.erase("pcie_width");  // the width call is missing too
  }
  ExpectPublished(*found, expected);
}

// Drivers that export a symbol without implementing it answer NVML_ERROR_FUNCTION_NOT_FOUND
// (13); NOT_SUPPORTED (3) on one link only: both fall back, neither is a fault of the GPU.
TEST(NvmlHardware, FunctionNotFoundAndNotSupportedFallBack) {
  nlohmann::json recording = LoadRecording("dgx-h100");
  for (auto& device : recording["devices"]) {
    device["errors"] = {{"nvmlDeviceGetNvLinkVersion", 13},
                        {"nvmlDeviceGetMaxPcieLinkGeneration", 13},
                        {"nvmlDeviceGetMaxPcieLinkWidth", 3}};
  }
  auto found = DiscoverWithNvml(FakeWith(recording, "h100-function-not-found"));
  ASSERT_TRUE(found) << found.error().message;
  for (const topology::GpuSpec& gpu : found->spec.gpus) {
    EXPECT_TRUE(gpu.healthy) << gpu.index << ": " << gpu.health_problem;
    EXPECT_EQ(gpu.pcie_gen, 5);  // the table's H100
    EXPECT_EQ(gpu.pcie_width, 0);
  }
  EXPECT_EQ(found->spec.fabric.nvlink_generation, 4);
  testing::ExpectSameModel(*Build(*found), *linkfit::testing::LoadFixture("dgx-h100"));

  nlohmann::json one_link = LoadRecording("dgx-h100");
  one_link["devices"][3]["nvlinks"][17].erase("version");
  found = DiscoverWithNvml(FakeWith(one_link, "h100-one-link-without-version"));
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->spec.fabric.nvlink_generation, 4);
  EXPECT_TRUE(Warned(*found, "1 NVLinks did not state their version; taken as NVLink 4"));
}

// MIG capability is nvmlDeviceGetMigMode's answer: SUCCESS on a name the table does not know,
// NOT_SUPPORTED on a name the table calls MIG-capable.
TEST(NvmlHardware, MigCapabilityIsWhatNvmlAnswers) {
  nlohmann::json recording = LoadRecording("dgx-a100");
  for (auto& device : recording["devices"]) device["name"] = "NVIDIA A100X";
  recording["devices"][1]["mig"] = nullptr;
  recording["devices"][1]["name"] = "NVIDIA A100-SXM4-40GB";
  auto found = DiscoverWithNvml(FakeWith(recording, "a100x-mig"));
  ASSERT_TRUE(found) << found.error().message;
  for (const topology::GpuSpec& gpu : found->spec.gpus) {
    EXPECT_EQ(gpu.mig_capable, gpu.index != 1) << gpu.index;
    EXPECT_EQ(gpu.mig_profile_set, "") << gpu.index;  // neither has a set linkfit can use
  }
  EXPECT_TRUE(Warned(*found, "NVIDIA A100X is MIG-capable but linkfit has no MIG profile set"));
  EXPECT_FALSE(Warned(*found, "MIG capability of"));
}

}  // namespace
}  // namespace linkfit::agent

namespace linkfit::agent {
namespace {

// Every query of `gpu` answers NVML_ERROR_GPU_IS_LOST after its handle opened, but for
// `answering` functions.
void LoseAtTheQueries(nlohmann::json& recording, std::size_t gpu,
                      const std::vector<std::string>& answering = {}) {
  nlohmann::json errors = nlohmann::json::object();
  for (const std::string& function : fake_nvml::InjectableFunctions()) {
    if (function == "nvmlDeviceGetHandleByIndex_v2") continue;
    if (std::find(answering.begin(), answering.end(), function) != answering.end()) continue;
    errors[function] = 15;
  }
  recording["devices"][gpu]["errors"] = errors;
}

// A GPU lost at its queries keeps the node's model and memory and is unhealthy; the node stays
// what it is.
TEST(NvmlLostGpu, ALostGpuKeepsTheNodesModel) {
  nlohmann::json recording = LoadRecording("dgx-h100");
  LoseAtTheQueries(recording, 4);
  auto found = DiscoverWithNvml(FakeWith(recording, "h100-lost-at-queries"));
  ASSERT_TRUE(found) << found.error().message;
  const topology::GpuSpec& lost = found->spec.gpus[4];
  EXPECT_FALSE(lost.healthy);
  EXPECT_NE(lost.health_problem.find("GPU is lost (15)"), std::string::npos) << lost.health_problem;
  EXPECT_EQ(lost.model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(lost.memory_mib, 81559u);
  EXPECT_TRUE(Warned(*found,
                     "GPU 4: model and memory unknown to NVML; NVIDIA H100 80GB HBM3 "
                     "taken from the node's healthy majority"));
  for (const topology::GpuSpec& gpu : found->spec.gpus) {
    EXPECT_EQ(gpu.healthy, gpu.index != 4) << gpu.index;
  }
  EXPECT_TRUE(topology::BuildTopology(found->spec));
}

// On a node of two models, a lost GPU whose PCI info still answers takes the model of the GPUs
// with its PCI device id, not the majority's.
TEST(NvmlLostGpu, ALostGpuTakesTheModelOfItsPciDeviceId) {
  nlohmann::json recording = LoadRecording("dgx-h100");
  for (std::size_t g = 0; g < 8; ++g) {
    recording["devices"][g]["pci_device_id"] = g < 3 ? 0x232110DE : 0x233010DE;
    if (g < 3) {
      recording["devices"][g]["name"] = "NVIDIA H100 NVL";
      recording["devices"][g]["memory_mib"] = 95830;
    }
  }
  LoseAtTheQueries(recording, 2, {"nvmlDeviceGetPciInfo_v3"});
  auto found = DiscoverWithNvml(FakeWith(recording, "h100-mixed-lost"));
  ASSERT_TRUE(found) << found.error().message;
  const topology::GpuSpec& lost = found->spec.gpus[2];
  EXPECT_FALSE(lost.healthy);
  EXPECT_EQ(lost.model, "NVIDIA H100 NVL");
  EXPECT_EQ(lost.memory_mib, 95830u);
  EXPECT_TRUE(Warned(*found, "taken from GPU 0 (same PCI device id)"));
}

// NVML states an NVLink's version, not its width: the RTX A6000's bridge links are NVLink 3 at
// 14.0625 GB/s, not 25. The published per-link rate is the table's, said as a guessed figure,
// and the pairs are rated as narrow links (4 x 11 GB/s).
TEST(NvmlHardware, NarrowNvlinksOfAGa102BoardAreTheTablesGuess) {
  auto found = DiscoverWithNvml(Fake("ws-4x-rtxa6000-nvlink-pairs"));
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->spec.fabric.nvlink_generation, 3);
  EXPECT_DOUBLE_EQ(found->spec.fabric.per_link_gbps, 14.0625);
  const auto rate = std::find_if(found->guessed.begin(), found->guessed.end(),
                                 [](const GuessedFigure& g) { return g.figure == "nvlink_rate"; });
  ASSERT_NE(rate, found->guessed.end());
  EXPECT_EQ(rate->model, "NVIDIA RTX A6000");
  EXPECT_NE(rate->warning.find("14.0625 GB/s from linkfit's GPU model table"), std::string::npos)
      << rate->warning;
  const topology::TopologyPtr built = Build(*found);
  ASSERT_NE(built, nullptr);
  const int peer = built->has_nvlink(0, 1) ? 1 : (built->has_nvlink(0, 2) ? 2 : 3);
  EXPECT_EQ(built->bandwidth_mbps(0, peer), 44000u);
  // A100 PCIe boards on NVLink bridges run full-width links: no rate is guessed.
  auto a100 = DiscoverWithNvml(Fake("pcie-8x-a100-nvlink-bridge-pairs"));
  ASSERT_TRUE(a100) << a100.error().message;
  EXPECT_DOUBLE_EQ(a100->spec.fabric.per_link_gbps, 25.0);
  for (const GuessedFigure& guess : a100->guessed) EXPECT_NE(guess.figure, "nvlink_rate");
}

}  // namespace
}  // namespace linkfit::agent
