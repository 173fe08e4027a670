#include "agent/smi_mig_table.h"

#include "linkfit/common/strings.h"

namespace linkfit::agent {
namespace {

Result<int> Number(std::string_view text, const std::string& where, int max) {
  const auto value = ParseInt(text);
  if (!value || *value < 0 || *value > max) {
    return MakeError(where + ": " + QuoteForMessage(text) + " is not a number in 0.." +
                     std::to_string(max));
  }
  return static_cast<int>(*value);
}

bool IsDecoration(std::string_view line) {
  for (char ch : line) {
    if (ch != '+' && ch != '-' && ch != '=' && ch != '|' && ch != ' ') return false;
  }
  return true;
}

Result<topology::MigMode> ModeOf(std::string_view text, const std::string& where) {
  const std::string lower = ToLower(Trim(text));
  if (lower == "enabled") return topology::MigMode::kEnabled;
  if (lower == "disabled") return topology::MigMode::kDisabled;
  if (lower == "[n/a]" || lower == "n/a") return topology::MigMode::kUnknown;
  return MakeError(where + ": MIG mode " + QuoteForMessage(text) +
                   " is not Enabled, Disabled or [N/A]");
}

}  // namespace

Result<std::vector<SmiGpuInstance>> ParseMigInstanceTable(std::string_view text) {
  std::vector<SmiGpuInstance> instances;
  int number = 0;
  for (std::string_view raw : Split(text, '\n')) {
    ++number;
    const std::string where = "nvidia-smi mig -lgi, line " + std::to_string(number);
    std::string_view line = Trim(raw);
    if (line.empty() || IsDecoration(line)) continue;
    // Whole-output messages: no instance anywhere, or a GPU that is not in MIG mode.
    const std::string lower = ToLower(line);
    if (lower.find("no gpu instances found") != std::string::npos ||
        lower.find("not in mig mode") != std::string::npos ||
        lower.find("no mig-enabled devices found") != std::string::npos ||
        lower.find("insufficient permissions") != std::string::npos) {
      continue;
    }
    if (line.front() == '|') line.remove_prefix(1);
    if (!line.empty() && line.back() == '|') line.remove_suffix(1);
    const std::vector<std::string_view> words = SplitWhitespace(line);
    if (words.empty()) continue;
    // Header rows: "GPU instances:", "GPU   Name   Profile  Instance   Placement", "ID  ID ...".
    if (words[0] == "GPU" || words[0] == "ID") continue;
    // GPU, [MIG] profile, profile id, instance id, start:size
    std::size_t at = 1;
    if (words.size() == 6 && words[1] == "MIG") at = 2;
    if (words.size() != at + 4) {
      return MakeError(where + ": expected \"GPU  MIG <profile>  <profile id>  <instance id>  " +
                       "<start>:<size>\", got " + QuoteForMessage(Trim(raw)));
    }
    SmiGpuInstance instance;
    LINKFIT_ASSIGN_OR_RETURN(instance.gpu, Number(words[0], where + ", GPU", 15));
    instance.profile = std::string(words[at]);
    LINKFIT_ASSIGN_OR_RETURN(instance.profile_id,
                             Number(words[at + 1], where + ", profile ID", 63));
    LINKFIT_ASSIGN_OR_RETURN(instance.instance_id,
                             Number(words[at + 2], where + ", instance ID", 63));
    const std::string_view placement = words[at + 3];
    const std::size_t colon = placement.find(':');
    if (colon == std::string_view::npos) {
      return MakeError(where + ": placement " + QuoteForMessage(placement) +
                       " is not <start>:<size>");
    }
    LINKFIT_ASSIGN_OR_RETURN(instance.start,
                             Number(placement.substr(0, colon), where + ", placement start", 7));
    LINKFIT_ASSIGN_OR_RETURN(instance.size,
                             Number(placement.substr(colon + 1), where + ", placement size", 8));
    if (instance.size == 0 || instance.start + instance.size > 8) {
      return MakeError(where + ": placement " + std::string(placement) +
                       " does not fit a GPU's 8 memory slices");
    }
    instances.push_back(std::move(instance));
  }
  return instances;
}

Result<std::map<int, SmiMigModes>> ParseMigModeCsv(std::string_view text) {
  std::map<int, SmiMigModes> modes;
  int number = 0;
  for (std::string_view raw : Split(text, '\n')) {
    ++number;
    const std::string where =
        "nvidia-smi --query-gpu=index,mig.mode.current,mig.mode.pending, line " +
        std::to_string(number);
    const std::string_view line = Trim(raw);
    if (line.empty()) continue;
    const std::vector<std::string_view> fields = Split(line, ',');
    if (fields.size() != 3) {
      return MakeError(where + ": expected 3 fields, got " + QuoteForMessage(line));
    }
    int gpu = 0;
    LINKFIT_ASSIGN_OR_RETURN(gpu, Number(Trim(fields[0]), where + ", index", 15));
    SmiMigModes& entry = modes[gpu];
    LINKFIT_ASSIGN_OR_RETURN(entry.current, ModeOf(fields[1], where));
    LINKFIT_ASSIGN_OR_RETURN(entry.pending, ModeOf(fields[2], where));
  }
  return modes;
}

}  // namespace linkfit::agent
