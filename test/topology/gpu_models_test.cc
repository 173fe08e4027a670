// GpuModelTable: config/gpus.json describes the models as the name rules it replaced did, but for
// the figures checked against NVIDIA's pages since (A10, A16, A2 have no NVLink; Blackwell), each
// figure with its source; a bad file is refused with the file, entry and field named; garbage
// never crashes the parser.

#include "linkfit/topology/gpu_models.h"

#include <cstdint>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "testing/fixtures.h"

namespace linkfit::topology {
namespace {

struct ModelCase {
  const char* model;
  std::uint64_t memory_mib;
  int nvlink_generation;
  int pcie_generation;
  const char* mig_profile_set;
  bool p2p;
};

// What the name rules before config/gpus.json (FactsForModel in model_guess.cc) answered for
// these names, printed by that code; the corrections are marked.
constexpr ModelCase kCases[] = {
    {"Tesla V100-SXM2-32GB", 32768, 2, 3, "", true},
    {"Tesla V100-PCIE-16GB", 16384, 2, 3, "", true},
    {"Tesla T4", 15360, 0, 3, "", true},
    {"NVIDIA A100-SXM4-40GB", 40960, 3, 4, "a100-40gb", true},
    {"NVIDIA A100-SXM4-80GB", 81920, 3, 4, "a100-80gb", true},
    {"NVIDIA A100 80GB PCIe", 81920, 3, 4, "a100-80gb", true},
    {"NVIDIA A100-PCIE-40GB", 40960, 3, 4, "a100-40gb", true},
    {"NVIDIA A100", 0, 3, 4, "", true},
    {"NVIDIA A100", 81920, 3, 4, "a100-80gb", true},
    {"NVIDIA A100", 40960, 3, 4, "a100-40gb", true},
    {"NVIDIA A100", 20000, 3, 4, "", true},
    {"NVIDIA H100 80GB HBM3", 81559, 4, 5, "h100-80gb", true},
    {"NVIDIA H100 NVL", 95830, 4, 5, "", true},
    {"NVIDIA H100 PCIe", 81559, 4, 5, "h100-80gb", true},
    {"NVIDIA H200", 143771, 4, 5, "h200-141gb", true},
    {"NVIDIA H800", 81559, 4, 5, "", true},
    {"NVIDIA GH200 480GB", 97871, 4, 5, "", true},
    {"NVIDIA A800-SXM4-80GB", 81920, 3, 4, "", true},
    {"NVIDIA A30", 24576, 3, 4, "", true},
    {"NVIDIA A40", 46068, 3, 4, "", true},
    {"NVIDIA A10", 23028, 0, 4, "", true},  // corrected: no NVLink
    {"NVIDIA A10G", 23028, 0, 0, "", true},
    {"NVIDIA A16", 15356, 0, 4, "", true},  // corrected: no NVLink
    {"NVIDIA A2", 15356, 0, 4, "", true},   // corrected: no NVLink
    {"NVIDIA RTX A6000", 49140, 3, 4, "", true},
    {"NVIDIA RTX A5500", 24564, 3, 4, "", true},
    {"NVIDIA GeForce RTX 3090", 24576, 3, 4, "", false},
    {"NVIDIA GeForce RTX 4090", 24564, 0, 4, "", false},
    {"NVIDIA L40S", 46068, 0, 4, "", true},
    {"NVIDIA L4", 23034, 0, 4, "", true},
    {"NVIDIA L40", 46068, 0, 4, "", true},
    {"NVIDIA RTX 6000 Ada Generation", 49140, 0, 4, "", true},
    {"Tesla P100-SXM2-16GB", 16384, 0, 0, "", true},
    {"generic-pcie-gen3-16GB", 16384, 0, 0, "", true},
    {"NVIDIA B200", 183359, 5, 6, "", true},   // added: NVLink 5, PCIe gen 6
    {"NVIDIA GB200", 189471, 5, 6, "", true},  // added
    {"unknown", 0, 0, 0, "", true},
    {"GA102", 0, 3, 4, "", true},
    {"NVIDIA GeForce GTX 1080", 8192, 0, 0, "", false},
    {"NVIDIA RTX 3090", 24576, 3, 4, "", true},
    {"NVIDIA GeForce RTX 309", 1, 0, 0, "", false},
};

TEST(GpuModelTableTest, BuiltinTableAnswersAsTheNameRulesDid) {
  const GpuModelTable& table = GpuModelTable::Builtin();
  ASSERT_FALSE(table.entries().empty());
  for (const ModelCase& c : kCases) {
    SCOPED_TRACE(std::string(c.model) + " " + std::to_string(c.memory_mib) + " MiB");
    const GpuModelFacts facts = table.Lookup(c.model, c.memory_mib);
    EXPECT_EQ(facts.nvlink_generation.value, c.nvlink_generation);
    EXPECT_EQ(facts.nvlink_generation.known(), c.nvlink_generation > 0);
    EXPECT_EQ(facts.pcie_generation.value, c.pcie_generation);
    EXPECT_EQ(facts.mig_profile_set.value, c.mig_profile_set);
    EXPECT_EQ(facts.p2p.value, c.p2p);
  }
}

// GA102 boards run narrower NVLinks than their generation's (4 links, 112.5 GB/s both ways
// together): the table says so, NVML cannot.
TEST(GpuModelTableTest, NarrowNvlinksOfGa102Boards) {
  const GpuModelTable& table = GpuModelTable::Builtin();
  for (const char* model : {"NVIDIA RTX A6000", "NVIDIA A40", "NVIDIA GeForce RTX 3090"}) {
    const GpuModelFacts facts = table.Lookup(model, 0);
    EXPECT_DOUBLE_EQ(facts.nvlink_link_gbps.value, 14.0625) << model;
    EXPECT_EQ(facts.nvlink_generation.value, 3) << model;
    EXPECT_NE(facts.nvlink_link_gbps.source.find("112.5 GB/s"), std::string::npos) << model;
  }
  for (const char* model : {"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA A10"}) {
    EXPECT_FALSE(table.Lookup(model, 0).nvlink_link_gbps.known()) << model;
  }
}

TEST(GpuModelTableTest, EveryFigureNamesItsSource) {
  const GpuModelFacts h100 = GpuModelTable::Builtin().Lookup("NVIDIA H100 80GB HBM3", 81559);
  EXPECT_NE(h100.pcie_generation.source.find("H100"), std::string::npos)
      << h100.pcie_generation.source;
  EXPECT_NE(h100.mig_profile_set.source.find("Multi-Instance GPU"), std::string::npos)
      << h100.mig_profile_set.source;
  for (const GpuModelTable::Entry& entry : GpuModelTable::Builtin().entries()) {
    EXPECT_FALSE(entry.source.empty()) << entry.name;
  }
}

TEST(GpuModelTableTest, TheFileOnDiskIsTheBuiltinOne) {
  auto loaded = GpuModelTable::LoadFile(testing::SourcePath("config/gpus.json"));
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->entries().size(), GpuModelTable::Builtin().entries().size());
  const auto missing = GpuModelTable::LoadFile("/nonexistent/gpus.json");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "/nonexistent/gpus.json: cannot be read");
}

// An operator's table describes a model linkfit's does not know; patterns with '#' and '*'.
TEST(GpuModelTableTest, AnOperatorsTableAndPatterns) {
  auto table = GpuModelTable::Parse(R"({"schema": "linkfit-gpu-models/v1", "models": [
      {"name": "B200", "match": ["B200", "GB2##"], "nvlink_generation": 5, "pcie_generation": 6,
       "source": "NVIDIA DGX B200 datasheet"},
      {"name": "RTX Ax", "match": ["RTX A*"], "pcie_generation": 4, "source": "s"}]})",
                                    "mine.json");
  ASSERT_TRUE(table) << table.error().message;
  EXPECT_EQ(table->Lookup("NVIDIA B200", 0).nvlink_generation.value, 5);
  EXPECT_EQ(table->Lookup("NVIDIA GB200", 0).pcie_generation.value, 6);
  EXPECT_EQ(table->Lookup("NVIDIA GB200", 0).pcie_generation.source, "NVIDIA DGX B200 datasheet");
  EXPECT_FALSE(table->Lookup("NVIDIA GB20", 0).pcie_generation.known());
  EXPECT_EQ(table->Lookup("NVIDIA RTX A", 0).pcie_generation.value, 4);  // '*': no digit too
  EXPECT_FALSE(table->Lookup("NVIDIA RTX AB", 0).pcie_generation.known());
  EXPECT_FALSE(table->Lookup("NVIDIA H100", 0).mig_profile_set.known());
}

TEST(GpuModelTableTest, BadFilesNameTheFileEntryAndField) {
  const std::string head = R"({"schema": "linkfit-gpu-models/v1", "models": [)";
  const std::string ok = R"({"name": "A", "match": ["A1"], "pcie_generation": 4, "source": "s"})";
  struct Bad {
    std::string text;
    std::string message;
  };
  const Bad cases[] = {
      {"", "f.json: not valid JSON"},
      {"[]", "f.json: expected an object"},
      {R"({"models": []})", "f.json: schema: expected \"linkfit-gpu-models/v1\""},
      {R"({"schema": "linkfit-gpu-models/v2", "models": []})",
       "f.json: schema: expected \"linkfit-gpu-models/v1\""},
      {R"({"schema": "linkfit-gpu-models/v1"})", "f.json: models: expected an array"},
      {R"({"schema": "linkfit-gpu-models/v1", "models": [], "extra": 1})",
       "f.json: extra: unknown field"},
      {head + ok + ", 7]}", "f.json: models[1]: expected an object"},
      {head + R"({"name": "X", "match": ["X"], "source": "s"}]})",
       "f.json: models[0] (X): states no figure (nvlink_generation, nvlink_link_GBps, "
       "pcie_generation, mig_profile_set, p2p)"},
      {head + R"({"name": "X", "match": ["X"], "nvlink_link_GBps": 0, "source": "s"}]})",
       "f.json: models[0] (X): nvlink_link_GBps: expected a number of GB/s above 0, at most "
       "1000"},
      {head + R"({"name": "X", "match": ["X"], "nvlink_link_GBps": "14", "source": "s"}]})",
       "f.json: models[0] (X): nvlink_link_GBps: expected a number of GB/s above 0, at most "
       "1000"},
      {head + R"({"name": "X", "match": ["X"], "pcie_generation": 4}]})",
       "f.json: models[0] (X): source: missing"},
      {head + R"({"name": "X", "match": ["X"], "pcie_generation": 4, "source": ""}]})",
       "f.json: models[0] (X): source: expected a non-empty string"},
      {head + R"({"match": ["X"], "pcie_generation": 4, "source": "s"}]})",
       "f.json: models[0]: name: missing"},
      {head + R"({"name": "X", "pcie_generation": 4, "source": "s"}]})",
       "f.json: models[0] (X): match: missing"},
      {head + R"({"name": "X", "match": [], "pcie_generation": 4, "source": "s"}]})",
       "f.json: models[0] (X): match: expected a non-empty array"},
      {head + R"({"name": "X", "match": ["A-1"], "pcie_generation": 4, "source": "s"}]})",
       "f.json: models[0] (X): match: \"A-1\": expected words of letters, digits, '#' and '*'"},
      {head + R"({"name": "X", "match": ["  "], "pcie_generation": 4, "source": "s"}]})",
       "f.json: models[0] (X): match: \"  \": expected words of letters, digits, '#' and '*'"},
      {head + R"({"name": "X", "match": [1], "pcie_generation": 4, "source": "s"}]})",
       "f.json: models[0] (X): match: expected strings"},
      {head + ok + R"(, {"name": "Y", "match": ["Y"], "pcie_generation": "4", "source": "s"}]})",
       "f.json: models[1] (Y): pcie_generation: expected an integer 1..7"},
      {head + R"({"name": "X", "match": ["X"], "pcie_generation": 8, "source": "s"}]})",
       "f.json: models[0] (X): pcie_generation: 8 is outside 1..7"},
      {head + R"({"name": "X", "match": ["X"], "nvlink_generation": 0, "source": "s"}]})",
       "f.json: models[0] (X): nvlink_generation: 0 is outside 1..9"},
      {head + R"({"name": "X", "match": ["X"], "p2p": "no", "source": "s"}]})",
       "f.json: models[0] (X): p2p: expected true or false"},
      {head + R"({"name": "X", "match": ["X"], "mig_profile_set": "A100 80", "source": "s"}]})",
       "f.json: models[0] (X): mig_profile_set: expected a MIG profile set id like a100-80gb"},
      {head + R"({"name": "X", "match": ["X"], "p2p": true, "memory_mib_min": -1,
                  "source": "s"}]})",
       "f.json: models[0] (X): memory_mib_min: expected a whole number of MiB"},
      {head + R"({"name": "X", "match": ["X"], "p2p": true, "memory_mib_min": 9,
                  "memory_mib_max": 8, "source": "s"}]})",
       "f.json: models[0] (X): memory_mib_min: above memory_mib_max"},
      {head + R"({"name": "X", "match": ["X"], "p2p": true, "nvlink": 3, "source": "s"}]})",
       "f.json: models[0] (X): nvlink: unknown field"},
  };
  for (const Bad& bad : cases) {
    const auto parsed = GpuModelTable::Parse(bad.text, "f.json");
    ASSERT_FALSE(parsed) << bad.text;
    EXPECT_EQ(parsed.error().message, bad.message) << bad.text;
  }
}

// Truncations and byte flips of the real file: refused or accepted, never a crash.
TEST(GpuModelTableTest, GarbageNeverCrashes) {
  const std::string text = testing::ReadFileOrDie(testing::SourcePath("config/gpus.json"));
  for (std::size_t cut = 0; cut < text.size(); cut += 7) {
    (void)GpuModelTable::Parse(std::string_view(text).substr(0, cut), "cut.json");
  }
  std::mt19937 random(34);
  for (int round = 0; round < 2000; ++round) {
    std::string mutated = text;
    for (int flips = 0; flips < 4; ++flips) {
      mutated[random() % mutated.size()] = static_cast<char>(random() % 256);
    }
    const auto parsed = GpuModelTable::Parse(mutated, "flip.json");
    if (parsed) (void)parsed->Lookup("NVIDIA A100-SXM4-80GB", 81920);
  }
}

}  // namespace
}  // namespace linkfit::topology
