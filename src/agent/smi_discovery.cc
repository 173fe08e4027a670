// The nvidia-smi fallback of the node agent's discovery (discovery.h), and Discover(): NVML
// first, nvidia-smi when NVML cannot be loaded.

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/smi_mig_table.h"
#include "linkfit/agent/discovery.h"
#include "linkfit/common/log.h"
#include "linkfit/common/strings.h"

namespace linkfit::agent {
namespace {

const std::vector<std::string> kTopo = {"nvidia-smi", "topo", "-m"};
const std::vector<std::string> kQuery = {
    "nvidia-smi", "--query-gpu=index,uuid,name,memory.total,pci.bus_id", "--format=csv"};
const std::vector<std::string> kMigModes = {
    "nvidia-smi", "--query-gpu=index,mig.mode.current,mig.mode.pending", "--format=csv,noheader"};
const std::vector<std::string> kMigInstances = {"nvidia-smi", "mig", "-lgi"};
const std::vector<std::string> kDriver = {"nvidia-smi", "--query-gpu=driver_version",
                                          "--format=csv,noheader"};

// What nvidia-smi prints in a field it could not read.
constexpr std::string_view kErrorMarkers[] = {"[GPU requires reset]", "ERR!", "Unknown Error",
                                              "[GPU is lost]", "[Unknown Error]"};

// The query CSV with the rows of failing GPUs neutralised (their fields would not parse), and
// those GPUs' problems. The columns are the ones kQuery asks for.
struct CleanCsv {
  std::string text;
  std::map<int, std::string> problems;
};

CleanCsv CleanQueryCsv(std::string_view csv) {
  CleanCsv clean;
  for (std::string_view line : Split(csv, '\n')) {
    std::string_view marker;
    for (std::string_view candidate : kErrorMarkers) {
      if (line.find(candidate) != std::string_view::npos) marker = candidate;
    }
    const std::vector<std::string_view> fields = Split(line, ',');
    const auto index = fields.empty() ? std::nullopt : ParseInt(Trim(fields[0]));
    if (marker.empty() || !index || fields.size() != 5) {
      clean.text += std::string(line) + "\n";
      continue;
    }
    clean.problems[static_cast<int>(*index)] =
        "nvidia-smi reports " + std::string(marker) + " for this GPU";
    // Keep what is readable; unreadable fields become unknown.
    std::string row = std::to_string(*index);
    const auto keep = [&](std::size_t f, const char* unknown) {
      const std::string_view value = Trim(fields[f]);
      bool bad = false;
      for (std::string_view candidate : kErrorMarkers) {
        bad = bad || value.find(candidate) != std::string_view::npos;
      }
      row += ", " + (bad ? std::string(unknown) : std::string(value));
    };
    keep(1, "");
    keep(2, "unknown");
    keep(3, "0 MiB");
    keep(4, "");
    clean.text += row + "\n";
  }
  return clean;
}

void MarkUnhealthy(topology::TopologySpec& spec, int gpu, const std::string& problem) {
  for (topology::GpuSpec& entry : spec.gpus) {
    if (entry.index != gpu) continue;
    if (entry.healthy) entry.health_problem = problem;
    entry.healthy = false;
  }
}

// "GPU0-GPU3: asymmetric cells ..." warnings of the topo -m parser mark both GPUs.
void MarkAsymmetricPairs(topology::TopologySpec& spec) {
  for (const std::string& warning : spec.warnings) {
    if (warning.find(": asymmetric cells") == std::string::npos || !StartsWith(warning, "GPU")) {
      continue;
    }
    const std::size_t dash = warning.find("-GPU");
    const std::size_t colon = warning.find(':');
    if (dash == std::string::npos || colon == std::string::npos || dash > colon) continue;
    const auto a = ParseInt(std::string_view(warning).substr(3, dash - 3));
    const auto b = ParseInt(std::string_view(warning).substr(dash + 4, colon - dash - 4));
    if (!a || !b) continue;
    MarkUnhealthy(spec, static_cast<int>(*a),
                  "nvidia-smi topo -m reports asymmetric links with GPU" + std::to_string(*b));
    MarkUnhealthy(spec, static_cast<int>(*b),
                  "nvidia-smi topo -m reports asymmetric links with GPU" + std::to_string(*a));
  }
}

Result<void> AddMigFacts(const CommandRunner& run, Discovery& found) {
  auto modes_text = run(kMigModes);
  if (!modes_text) {
    found.warnings.push_back("MIG modes unknown: " + modes_text.error().message);
    return {};
  }
  auto modes = ParseMigModeCsv(*modes_text);
  if (!modes) return tl::unexpected(modes.error());
  bool any_enabled = false;
  for (topology::GpuSpec& gpu : found.spec.gpus) {
    const auto it = modes->find(gpu.index);
    if (it == modes->end()) continue;
    // [N/A]: no MIG support, i.e. disabled for good.
    gpu.mig_mode = it->second.current == topology::MigMode::kUnknown ? topology::MigMode::kDisabled
                                                                     : it->second.current;
    gpu.mig_mode_pending = it->second.pending;
    any_enabled = any_enabled || gpu.mig_mode == topology::MigMode::kEnabled;
  }
  if (!any_enabled) return {};
  auto table = run(kMigInstances);
  if (!table) return tl::unexpected(table.error());
  auto instances = ParseMigInstanceTable(*table);
  if (!instances) return tl::unexpected(instances.error());
  for (const SmiGpuInstance& instance : *instances) {
    bool placed = false;
    for (topology::GpuSpec& gpu : found.spec.gpus) {
      if (gpu.index != instance.gpu || gpu.mig_mode != topology::MigMode::kEnabled) continue;
      gpu.mig_instances.push_back({instance.profile, instance.start, instance.size, ""});
      placed = true;
    }
    if (!placed) {
      found.warnings.push_back("nvidia-smi mig -lgi lists an instance on GPU " +
                               std::to_string(instance.gpu) + ", which is not in MIG mode");
    }
  }
  return {};
}

}  // namespace

Result<Discovery> DiscoverWithNvidiaSmi(const CommandRunner& run) {
  auto topo = run(kTopo);
  if (!topo) return tl::unexpected(topo.error());
  auto query = run(kQuery);
  if (!query) return tl::unexpected(query.error());
  const CleanCsv csv = CleanQueryCsv(*query);
  auto spec = topology::ParseNvidiaSmi(*topo, csv.text);
  if (!spec) return WithContext(spec.error(), "nvidia-smi");
  if (spec->gpus.empty()) return MakeError("nvidia-smi lists no GPUs");
  Discovery found;
  found.source = "nvidia-smi";
  found.spec = std::move(*spec);
  for (const auto& [gpu, problem] : csv.problems) MarkUnhealthy(found.spec, gpu, problem);
  MarkAsymmetricPairs(found.spec);
  if (auto mig = AddMigFacts(run, found); !mig) return WithContext(mig.error(), "nvidia-smi");
  if (auto driver = run(kDriver); driver) {
    found.driver_version = std::string(Trim(driver->substr(0, driver->find('\n'))));
  }
  for (const std::string& warning : found.warnings) found.spec.warnings.push_back(warning);
  for (const std::string& warning : found.spec.warnings) {
    if (std::find(found.warnings.begin(), found.warnings.end(), warning) == found.warnings.end()) {
      found.warnings.push_back(warning);
    }
  }
  return found;
}

Result<Discovery> Discover(const NvmlOptions& options, const CommandRunner& run) {
  auto nvml = DiscoverWithNvml(options);
  if (nvml) return nvml;
  log::Info("NVML unusable (" + nvml.error().message + "); discovering through nvidia-smi");
  auto smi = DiscoverWithNvidiaSmi(run);
  if (smi) return smi;
  return MakeError("no GPU discovery worked: NVML: " + nvml.error().message +
                   "; nvidia-smi: " + smi.error().message);
}

}  // namespace linkfit::agent
