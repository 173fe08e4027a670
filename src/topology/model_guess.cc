// What a GPU's model name tells (spec.h: GuessFromModelName, FillModelFacts): NVLink and PCIe
// generations, the MIG profile set and peer-to-peer support of the models linkfit knows. The node
// agent asks NVML first and comes here only for what the machine cannot tell; the nvidia-smi
// fallback has nothing else.

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/strings.h"
#include "linkfit/topology/spec.h"

namespace linkfit::topology {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Splits a model name into upper-case words ("Tesla V100-SXM2-32GB" -> TESLA V100 SXM2 32GB).
std::vector<std::string> ModelWords(std::string_view model) {
  std::vector<std::string> words;
  std::string current;
  for (const char c : model) {
    if (c == ' ' || c == '-' || c == '_' || c == '\t') {
      if (!current.empty()) words.push_back(ToUpper(current));
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) words.push_back(ToUpper(current));
  return words;
}

// "A6000" -> true for prefix 'A' (a letter followed only by digits).
bool IsLetterNumber(std::string_view word, char letter) {
  return word.size() >= 2 && word[0] == letter &&
         std::all_of(word.begin() + 1, word.end(), IsDigit);
}

ModelGuess FactsForModel(std::string_view model, std::uint64_t memory_mib) {
  ModelGuess facts;
  const std::vector<std::string> words = ModelWords(model);
  const auto has = [&](std::string_view w) {
    return std::find(words.begin(), words.end(), w) != words.end();
  };
  const auto has_rtx_series = [&](char series) {  // RTX 30xx / 40xx
    for (std::size_t i = 0; i + 1 < words.size(); ++i) {
      const std::string& next = words[i + 1];
      if (words[i] == "RTX" && next.size() == 4 && next[0] == series && next[1] == '0' &&
          std::all_of(next.begin(), next.end(), IsDigit)) {
        return true;
      }
    }
    return false;
  };
  const auto has_rtx_ampere = [&] {  // RTX A6000, RTX A5000, ...
    for (std::size_t i = 0; i + 1 < words.size(); ++i) {
      if (words[i] == "RTX" && IsLetterNumber(words[i + 1], 'A')) return true;
    }
    return false;
  };
  const bool ampere_datacenter = has("A100") || has("A800") || has("A30") || has("A40") ||
                                 has("A10") || has("A16") || has("A2");
  const bool name_80gb = model.find("80GB") != std::string_view::npos;
  const bool name_40gb = model.find("40GB") != std::string_view::npos;

  if (has("V100")) {
    facts.nvlink_generation = 2;
    facts.pcie_gen = 3;
  } else if (has("T4")) {
    facts.pcie_gen = 3;
  } else if (has("H100") || has("H200") || has("H800") || has("GH200")) {
    facts.nvlink_generation = 4;
    facts.pcie_gen = 5;
  } else if (ampere_datacenter || has_rtx_ampere() || has_rtx_series('3') || has("GA102")) {
    facts.nvlink_generation = 3;
    facts.pcie_gen = 4;
  } else if (has("L4") || has("L40") || has("L40S") || has("ADA") || has_rtx_series('4')) {
    facts.pcie_gen = 4;
  }

  // MIG profile sets exist for these memory variants only (config/mig/*.json).
  if (has("A100")) {
    if (name_80gb || (!name_40gb && memory_mib > 60000)) {
      facts.mig_profile_set = "a100-80gb";
    } else if (name_40gb || (memory_mib > 30000 && memory_mib <= 60000)) {
      facts.mig_profile_set = "a100-40gb";
    }
  } else if (has("H100") && (name_80gb || (memory_mib >= 75000 && memory_mib <= 86000))) {
    facts.mig_profile_set = "h100-80gb";  // not H100 NVL (94 GB): no profile set for it
  } else if (has("H200")) {
    facts.mig_profile_set = "h200-141gb";
  }
  // GeForce boards have peer-to-peer disabled by the driver: traffic is staged through the host.
  facts.p2p_supported = model.find("GeForce") == std::string_view::npos;
  return facts;
}

}  // namespace

ModelGuess GuessFromModelName(std::string_view model, std::uint64_t memory_mib) {
  return FactsForModel(model, memory_mib);
}

void FillModelFacts(TopologySpec& spec) {
  std::set<std::string> models;
  int nvlink_generation = 0;
  for (GpuSpec& gpu : spec.gpus) {
    if (gpu.model.empty()) continue;
    models.insert(gpu.model);
    const ModelGuess facts = FactsForModel(gpu.model, gpu.memory_mib);
    gpu.pcie_gen = facts.pcie_gen;
    gpu.mig_profile_set = facts.mig_profile_set;
    gpu.mig_capable = !facts.mig_profile_set.empty();
    gpu.p2p_supported = facts.p2p_supported;
    if (nvlink_generation == 0) nvlink_generation = facts.nvlink_generation;
  }
  if (models.size() > 1) {
    spec.warnings.push_back("the node mixes " + std::to_string(models.size()) +
                            " GPU models; NVLink generation taken from the first known one");
  }
  if (spec.fabric.kind == NvlinkFabricKind::kNone) return;
  spec.fabric.nvlink_generation = nvlink_generation;
  if (spec.fabric.kind == NvlinkFabricKind::kNvswitch && nvlink_generation >= 2) {
    // NVSwitch gen1 came with NVLink2 (DGX-2), gen2 with NVLink3, gen3 with NVLink4.
    spec.fabric.nvswitch_generation = nvlink_generation - 1;
  }
}

}  // namespace linkfit::topology
