// The nvidia-smi fallback of the node agent's discovery (discovery.h), and Discover(): NVML
// first, nvidia-smi when NVML cannot be loaded.
//
// The topology comes from linkfit's own parser of `topo -m` + the query CSV
// (topology::ParseNvidiaSmi), so the agent publishes what linkfit reads from the same text. The
// query CSV is prepared first so that one failing GPU does not sink the node: a row with an
// error marker keeps its readable fields and makes the GPU unhealthy; a GPU that topo -m lists
// but the query does not, or the other way round, is published unhealthy with SYS links.
//
// MIG facts, from `--query-gpu=index,mig.mode.current,mig.mode.pending`: "Enabled"/"Disabled"
// make a GPU MIG-capable with that mode; "[N/A]" means no MIG support (mode kDisabled,
// mig_capable false, no profile set); an unreadable field makes the GPU unhealthy with its modes
// unknown. A driver too old for the query leaves all modes kUnknown, with a warning.
// `nvidia-smi mig -lgi` is read only when some GPU is in MIG mode.

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/smi_mig_table.h"
#include "agent/sysfs_nics.h"
#include "linkfit/agent/discovery.h"
#include "linkfit/common/log.h"
#include "linkfit/common/strings.h"

namespace linkfit::agent {
namespace {

using Argv = std::vector<std::string>;
const Argv kTopo = {"nvidia-smi", "topo", "-m"};
const Argv kQuery = {"nvidia-smi", "--query-gpu=index,uuid,name,memory.total,pci.bus_id",
                     "--format=csv"};
const Argv kMigModes = {"nvidia-smi", "--query-gpu=index,mig.mode.current,mig.mode.pending",
                        "--format=csv,noheader"};
const Argv kMigInstances = {"nvidia-smi", "mig", "-lgi"};
const Argv kDriver = {"nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"};

std::string Quoted(const Argv& argv) {
  std::string line;
  for (const std::string& arg : argv) line += (line.empty() ? "" : " ") + arg;
  return "`" + line + "`";
}

// Runs a command; its error names the command even when the runner's does not.
Result<std::string> Run(const CommandRunner& run, const Argv& argv) {
  Result<std::string> output = run(argv);
  if (output) return output;
  const std::string what = Quoted(argv);
  if (output.error().message.find(what.substr(1, what.size() - 2)) != std::string::npos) {
    return output;
  }
  return WithContext(output.error(), what);
}

// The query CSV as linkfit's strict parser can take it (removed lines left empty, so its line
// numbers stay right), and what was taken out.
struct PreparedQuery {
  std::string csv;
  std::map<int, std::string> problems;            // GPU index -> why it is unhealthy
  std::vector<topology::GpuSpec> beyond_matrix;   // rows whose GPU topo -m does not list
  std::vector<std::string> device_handle_errors;  // nvidia-smi's lines for GPUs it cannot open
};

// A row's readable fields (the columns kQuery asks for), unreadable ones made unknown.
std::vector<std::string> ReadableFields(const std::vector<std::string_view>& fields) {
  const char* unknown[] = {"", "", "unknown", "0 MiB", ""};
  std::vector<std::string> row;
  for (std::size_t f = 0; f < fields.size(); ++f) {
    const std::string_view value = Trim(fields[f]);
    row.emplace_back(FindSmiErrorMarker(value).empty() ? value : unknown[f]);
  }
  return row;
}

PreparedQuery PrepareQueryCsv(std::string_view csv, int matrix_gpus) {
  PreparedQuery prepared;
  std::vector<bool> listed(static_cast<std::size_t>(matrix_gpus), false);
  bool any_row = false;
  for (std::string_view line : Split(csv, '\n')) {
    const std::vector<std::string_view> fields = Split(line, ',');
    const auto index = ParseInt(Trim(fields[0]));
    if (IsSmiDeviceHandleError(line)) {
      prepared.device_handle_errors.emplace_back(Trim(line));
      prepared.csv += "\n";
      continue;
    }
    if (fields.size() != 5 || !index || *index < 0 || *index >= topology::kMaxGpus) {
      prepared.csv += std::string(line) + "\n";  // the header, or garbage the parser will name
      continue;
    }
    any_row = true;
    const int gpu = static_cast<int>(*index);
    const std::vector<std::string> row = ReadableFields(fields);
    if (const std::string_view marker = FindSmiErrorMarker(line); !marker.empty()) {
      prepared.problems[gpu] = "nvidia-smi reports " + std::string(marker) + " for this GPU";
    }
    if (gpu >= matrix_gpus) {
      topology::GpuSpec extra;
      extra.index = gpu;
      extra.uuid = row[1];
      extra.model = row[2].empty() ? "unknown" : row[2];
      const auto mib = ParseInt(SplitWhitespace(row[3]).empty() ? "" : SplitWhitespace(row[3])[0]);
      extra.memory_mib = mib && *mib > 0 ? static_cast<std::uint64_t>(*mib) : 0;
      extra.pci_bus_id = row[4];
      prepared.beyond_matrix.push_back(std::move(extra));
      prepared.csv += "\n";
      continue;
    }
    listed[static_cast<std::size_t>(gpu)] = true;
    prepared.csv += row[0] + ", " + row[1] + ", " + row[2] + ", " + row[3] + ", " + row[4] + "\n";
  }
  if (!any_row) return prepared;  // the parser leaves the GPUs unknown; the caller refuses that
  for (int gpu = 0; gpu < matrix_gpus; ++gpu) {
    if (listed[static_cast<std::size_t>(gpu)]) continue;
    prepared.csv += std::to_string(gpu) + ", , unknown, 0 MiB, \n";
    std::string problem = "listed by nvidia-smi topo -m but missing from " + Quoted(kQuery);
    if (!prepared.device_handle_errors.empty()) {
      problem += " (" + prepared.device_handle_errors.front() + ")";
    }
    prepared.problems[gpu] = problem;
  }
  return prepared;
}

void MarkUnhealthy(topology::GpuSpec& gpu, const std::string& problem) {
  if (gpu.healthy) gpu.health_problem = problem;
  gpu.healthy = false;
}

// GPUs the query lists beyond topo -m's matrix join unhealthy, with SYS links to all others and
// SYS to every NIC (topo -m, which relates NICs to GPUs, did not see them).
Result<void> AddGpusMissingFromMatrix(topology::TopologySpec& spec,
                                      std::vector<topology::GpuSpec> extras,
                                      const topology::GpuModelTable& table) {
  std::sort(extras.begin(), extras.end(),
            [](const auto& a, const auto& b) { return a.index < b.index; });
  topology::TopologySpec facts;  // model facts of the newcomers alone
  facts.gpus = extras;
  topology::FillModelFacts(facts, table);
  for (topology::GpuSpec& extra : facts.gpus) {
    if (extra.index != static_cast<int>(spec.gpus.size())) {
      return MakeError(Quoted(kQuery) + " lists GPU " + std::to_string(extra.index) +
                       ", but `nvidia-smi topo -m` lists GPU0..GPU" +
                       std::to_string(spec.gpus.size() - 1) + " and no GPU" +
                       std::to_string(spec.gpus.size()));
    }
    for (const topology::GpuSpec& gpu : spec.gpus) {
      spec.links.push_back({gpu.index, extra.index, 0, false, topology::PcieRelation::kSys});
    }
    for (topology::NicSpec& nic : spec.nics)
      nic.gpu_relations.push_back(topology::PcieRelation::kSys);
    MarkUnhealthy(extra, "listed by " + Quoted(kQuery) + " but missing from nvidia-smi topo -m");
    spec.warnings.push_back("GPU" + std::to_string(extra.index) +
                            " is missing from nvidia-smi topo -m; published unhealthy");
    spec.gpus.push_back(std::move(extra));
  }
  // Links in the order every loader gives them: by first GPU, then second.
  std::sort(spec.links.begin(), spec.links.end(), [](const auto& x, const auto& y) {
    return std::make_pair(x.a, x.b) < std::make_pair(y.a, y.b);
  });
  return {};
}

Result<topology::TopologySpec> ParseTopology(const std::string& topo, const std::string& query,
                                             const topology::GpuModelTable& table) {
  auto shape = topology::ParseNvidiaSmi(topo, "", table);
  if (!shape) return WithContext(shape.error(), Quoted(kTopo));
  const int matrix_gpus = static_cast<int>(shape->gpus.size());
  if (matrix_gpus == 0) return MakeError(Quoted(kTopo) + " lists no GPUs");
  PreparedQuery prepared = PrepareQueryCsv(query, matrix_gpus);
  auto spec = topology::ParseNvidiaSmi(topo, prepared.csv, table);
  if (!spec) return WithContext(spec.error(), Quoted(kQuery));
  if (std::all_of(spec->gpus.begin(), spec->gpus.end(),
                  [](const topology::GpuSpec& gpu) { return gpu.model.empty(); })) {
    return MakeError(Quoted(kQuery) + " lists no GPUs" +
                     (prepared.device_handle_errors.empty()
                          ? std::string()
                          : ": " + prepared.device_handle_errors.front()));
  }
  if (auto added = AddGpusMissingFromMatrix(*spec, std::move(prepared.beyond_matrix), table);
      !added) {
    return tl::unexpected(added.error());
  }
  for (const auto& [gpu, problem] : prepared.problems) {
    if (gpu < static_cast<int>(spec->gpus.size())) {
      MarkUnhealthy(spec->gpus[static_cast<std::size_t>(gpu)], problem);
    }
  }
  return spec;
}

// "GPU0-GPU3: asymmetric cells ..." warnings of the topo -m parser mark both GPUs.
void MarkAsymmetricPairs(topology::TopologySpec& spec) {
  const int count = static_cast<int>(spec.gpus.size());
  for (const std::string& warning : spec.warnings) {
    if (warning.find(": asymmetric cells") == std::string::npos || !StartsWith(warning, "GPU")) {
      continue;
    }
    const std::size_t dash = warning.find("-GPU");
    const std::size_t colon = warning.find(':');
    if (dash == std::string::npos || colon == std::string::npos || dash > colon) continue;
    const auto a = ParseInt(std::string_view(warning).substr(3, dash - 3));
    const auto b = ParseInt(std::string_view(warning).substr(dash + 4, colon - dash - 4));
    if (!a || !b || *a < 0 || *b < 0 || *a >= count || *b >= count) continue;
    const std::string problem = "nvidia-smi topo -m reports asymmetric links between GPU" +
                                std::to_string(*a) + " and GPU" + std::to_string(*b);
    MarkUnhealthy(spec.gpus[static_cast<std::size_t>(*a)], problem);
    MarkUnhealthy(spec.gpus[static_cast<std::size_t>(*b)], problem);
  }
}

void ApplyMigModes(const std::map<int, SmiMigModes>& modes, topology::TopologySpec& spec) {
  for (topology::GpuSpec& gpu : spec.gpus) {
    const auto it = modes.find(gpu.index);
    if (it == modes.end()) continue;  // a GPU the query skipped: modes unknown
    const SmiMigModes& mode = it->second;
    if (!mode.problem.empty()) MarkUnhealthy(gpu, mode.problem);
    if (mode.supported) {
      gpu.mig_capable = true;
      gpu.mig_mode = mode.current;
      gpu.mig_mode_pending = mode.pending;
    } else if (mode.problem.empty()) {  // "[N/A]": no MIG on this GPU, whatever its model
      gpu.mig_capable = false;
      gpu.mig_profile_set.clear();
      gpu.mig_mode = topology::MigMode::kDisabled;
      gpu.mig_mode_pending = topology::MigMode::kUnknown;
    }
  }
}

Result<void> AddMigInstances(const CommandRunner& run, Discovery& found) {
  Result<std::string> table = Run(run, kMigInstances);
  // Some drivers exit non-zero when no instance exists at all.
  if (!table && table.error().message.find("No GPU instances found") != std::string::npos) {
    table = std::string();
  }
  if (!table) return tl::unexpected(table.error());
  auto instances = ParseMigInstanceTable(*table);
  if (!instances) return tl::unexpected(instances.error());
  for (const SmiGpuInstance& instance : *instances) {
    const auto gpu = std::find_if(found.spec.gpus.begin(), found.spec.gpus.end(),
                                  [&](const auto& g) { return g.index == instance.gpu; });
    if (gpu == found.spec.gpus.end() || gpu->mig_mode != topology::MigMode::kEnabled) {
      found.warnings.push_back("nvidia-smi mig -lgi lists an instance on GPU " +
                               std::to_string(instance.gpu) + ", which is not in MIG mode");
      continue;
    }
    gpu->mig_instances.push_back(
        {instance.profile, instance.start, instance.size, "", instance.instance_id});
  }
  return {};
}

Result<void> AddMigFacts(const CommandRunner& run, Discovery& found) {
  Result<std::string> modes_text = Run(run, kMigModes);
  if (!modes_text) {  // drivers before R450 know no MIG fields
    found.warnings.push_back("MIG modes unknown: " + modes_text.error().message);
    return {};
  }
  auto modes = ParseMigModeCsv(*modes_text);
  if (!modes) return tl::unexpected(modes.error());
  ApplyMigModes(*modes, found.spec);
  const bool any_enabled =
      std::any_of(found.spec.gpus.begin(), found.spec.gpus.end(),
                  [](const auto& gpu) { return gpu.mig_mode == topology::MigMode::kEnabled; });
  return any_enabled ? AddMigInstances(run, found) : Result<void>{};
}

// "550.54.15", one line per GPU, all the same; anything else is a warning.
void AddDriverVersion(const CommandRunner& run, Discovery& found) {
  Result<std::string> text = Run(run, kDriver);
  if (!text) {
    found.warnings.push_back("driver version unknown: " + text.error().message);
    return;
  }
  std::string version;
  for (std::string_view line : Split(*text, '\n')) {
    const std::string_view value = Trim(line);
    if (value.empty()) continue;
    const auto digit = [](char ch) { return ch >= '0' && ch <= '9'; };
    const bool well_formed =
        digit(value.front()) &&
        std::all_of(value.begin(), value.end(), [&](char ch) { return digit(ch) || ch == '.'; });
    if (!well_formed || (!version.empty() && version != value)) {
      found.warnings.push_back("driver version unknown: " + Quoted(kDriver) + " printed " +
                               QuoteForMessage(value));
      return;
    }
    version = std::string(value);
  }
  found.driver_version = version;
}

// nvidia-smi tells no generation and no MIG capability: each such figure of each model came
// from the table (or was assumed), said once per figure and model.
void NoteGuessedFigures(Discovery& found) {
  std::set<std::pair<std::string, std::string>> said;
  for (const topology::GpuSpec& gpu : found.spec.gpus) {
    const std::pair<const char*, topology::FigureSource> figures[] = {
        {"nvlink", gpu.sources.nvlink}, {"pcie", gpu.sources.pcie}, {"mig", gpu.sources.mig}};
    for (const auto& [figure, source] : figures) {
      if (source != topology::FigureSource::kTable && source != topology::FigureSource::kAssumed) {
        continue;
      }
      if (!said.emplace(figure, gpu.model).second) continue;
      const std::string warning = std::string(figure) + " figure of " + gpu.model +
                                  " not told by nvidia-smi; " +
                                  (source == topology::FigureSource::kTable
                                       ? "taken from linkfit's GPU model table"
                                       : "assumed, unknown to linkfit's GPU model table");
      found.warnings.push_back(warning);
      found.guessed.push_back({figure, gpu.model, warning});
    }
  }
}

}  // namespace

Result<Discovery> DiscoverWithNvidiaSmi(const CommandRunner& run,
                                        const topology::GpuModelTable& table) {
  Result<std::string> topo = Run(run, kTopo);
  if (!topo) return tl::unexpected(topo.error());
  Result<std::string> query = Run(run, kQuery);
  if (!query) return tl::unexpected(query.error());
  Discovery found;
  found.source = "nvidia-smi";
  LINKFIT_ASSIGN_OR_RETURN(found.spec, ParseTopology(*topo, *query, table));
  MarkAsymmetricPairs(found.spec);
  if (auto mig = AddMigFacts(run, found); !mig) return tl::unexpected(mig.error());
  AddDriverVersion(run, found);
  NoteGuessedFigures(found);
  // The parser's findings first, then the agent's; both lists end up the same.
  for (const std::string& warning : found.warnings) found.spec.warnings.push_back(warning);
  found.warnings = found.spec.warnings;
  return found;
}

Result<std::map<std::string, int>> ParseNicRails(std::string_view text) {
  std::map<std::string, int> rails;
  for (std::string_view entry : Split(text, ',')) {
    entry = Trim(entry);
    if (entry.empty()) continue;
    const std::size_t equals = entry.find('=');
    const std::string name(Trim(entry.substr(0, std::min(equals, entry.size()))));
    const auto rail = equals == std::string_view::npos ? std::optional<std::int64_t>()
                                                       : ParseInt(Trim(entry.substr(equals + 1)));
    if (name.empty() || !rail || *rail < 0 || *rail >= topology::kMaxNics) {
      return MakeError("--nic-rails: " + QuoteForMessage(entry) +
                       " is not NAME=RAIL with RAIL in 0.." +
                       std::to_string(topology::kMaxNics - 1));
    }
    if (!rails.emplace(name, static_cast<int>(*rail)).second) {
      return MakeError("--nic-rails: " + name + " is given twice");
    }
  }
  return rails;
}

namespace {

Result<Discovery> WithRails(Result<Discovery> found, const std::map<std::string, int>& rails) {
  if (!found) return found;
  for (const auto& entry : rails) {
    const std::string& name = entry.first;
    const auto nic = std::find_if(found->spec.nics.begin(), found->spec.nics.end(),
                                  [&](const topology::NicSpec& n) { return n.name == name; });
    if (nic != found->spec.nics.end()) {
      nic->rail = entry.second;
      continue;
    }
    const std::string warning = "--nic-rails names " + name + ", which this node does not have";
    found->warnings.push_back(warning);
    found->spec.warnings.push_back(warning);
  }
  return found;
}

// The NICs sysfs shows replace those of topo -m, which know no bus id, port or Data Direct
// function; a relation the two disagree on is a warning (sysfs's is published).
void NicsFromSysfs(const std::string& sysfs_root, Discovery& found) {
  std::vector<std::string> warnings;
  std::vector<topology::NicSpec> nics = ReadNics(sysfs_root, found.spec, warnings);
  if (nics.empty()) return;
  for (const topology::NicSpec& nic : nics) {
    const auto seen = std::find_if(found.spec.nics.begin(), found.spec.nics.end(),
                                   [&](const topology::NicSpec& n) { return n.name == nic.name; });
    if (seen == found.spec.nics.end()) continue;
    for (std::size_t g = 0; g < nic.gpu_relations.size() && g < seen->gpu_relations.size(); ++g) {
      if (nic.gpu_relations[g] == seen->gpu_relations[g]) continue;
      warnings.push_back(
          "NIC " + nic.name + " to GPU" + std::to_string(g) + ": sysfs says " +
          std::string(topology::ToString(nic.gpu_relations[g])) + ", nvidia-smi topo -m " +
          std::string(topology::ToString(seen->gpu_relations[g])) + "; publishing sysfs's");
    }
  }
  found.spec.nics = std::move(nics);
  for (std::string& warning : warnings) {
    found.spec.warnings.push_back(warning);
    found.warnings.push_back(std::move(warning));
  }
}

}  // namespace

Result<Discovery> Discover(const NvmlOptions& options, const CommandRunner& run) {
  auto nvml = DiscoverWithNvml(options);
  if (nvml) return WithRails(std::move(nvml), options.nic_rails);
  log::Warning("NVML unusable (" + nvml.error().message + "); discovering through nvidia-smi");
  auto smi = DiscoverWithNvidiaSmi(run, options.gpu_models != nullptr
                                            ? *options.gpu_models
                                            : topology::GpuModelTable::Builtin());
  if (smi) {
    NicsFromSysfs(options.sysfs_root, *smi);
    return WithRails(std::move(smi), options.nic_rails);
  }
  return MakeError("no GPU discovery worked: NVML: " + nvml.error().message +
                   "; nvidia-smi: " + smi.error().message);
}

}  // namespace linkfit::agent
