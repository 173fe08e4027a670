#include "agent/smi_mig_table.h"

#include <algorithm>

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

// One MIG mode field; an unreadable one is kUnknown with the problem noted.
Result<topology::MigMode> ModeOf(std::string_view text, const std::string& where,
                                 std::string& problem) {
  const std::string lower = ToLower(Trim(text));
  if (lower == "enabled") return topology::MigMode::kEnabled;
  if (lower == "disabled") return topology::MigMode::kDisabled;
  if (lower == "[n/a]" || lower == "n/a") return topology::MigMode::kUnknown;
  if (const std::string_view marker = FindSmiErrorMarker(text); !marker.empty()) {
    if (problem.empty())
      problem = "nvidia-smi reports " + std::string(marker) + " for its MIG mode";
    return topology::MigMode::kUnknown;
  }
  return MakeError(where + ": MIG mode " + QuoteForMessage(Trim(text)) +
                   " is not Enabled, Disabled or [N/A]");
}

// Whole-output messages that mean "no instances here": none exists, or a GPU is not in MIG mode.
bool IsNoInstanceMessage(std::string_view line) {
  const std::string lower = ToLower(line);
  return lower.find("no gpu instances found") != std::string::npos ||
         lower.find("not in mig mode") != std::string::npos ||
         lower.find("no mig-enabled devices found") != std::string::npos;
}

// The table's title and its two column-header rows.
bool IsHeader(const std::vector<std::string_view>& words) {
  static const std::vector<std::vector<std::string_view>> kHeaders = {
      {"GPU", "instances:"},
      {"GPU", "Name", "Profile", "Instance", "Placement"},
      {"ID", "ID", "Start:Size"}};
  return std::find(kHeaders.begin(), kHeaders.end(), words) != kHeaders.end();
}

// "GPU  [MIG] <profile>  <profile id>  <instance id>  <start>:<size>", the borders removed.
Result<SmiGpuInstance> ParseRow(const std::vector<std::string_view>& words,
                                const std::string& where, std::string_view raw) {
  const std::size_t at = words.size() == 6 && words[1] == "MIG" ? 2 : 1;
  if (words.size() != at + 4) {
    return MakeError(where + ": expected \"GPU  MIG <profile>  <profile id>  <instance id>  " +
                     "<start>:<size>\", got " + QuoteForMessage(raw));
  }
  SmiGpuInstance instance;
  LINKFIT_ASSIGN_OR_RETURN(instance.gpu, Number(words[0], where + ", GPU", topology::kMaxGpus - 1));
  instance.profile = std::string(words[at]);
  LINKFIT_ASSIGN_OR_RETURN(instance.profile_id, Number(words[at + 1], where + ", profile ID", 63));
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
  return instance;
}

}  // namespace

Result<std::vector<SmiGpuInstance>> ParseMigInstanceTable(std::string_view text) {
  std::vector<SmiGpuInstance> instances;
  std::vector<int> lines;  // the line of each instance, for overlap messages
  int number = 0;
  for (std::string_view raw : Split(text, '\n')) {
    ++number;
    const std::string where = "nvidia-smi mig -lgi, line " + std::to_string(number);
    std::string_view line = Trim(raw);
    if (line.empty() || IsDecoration(line) || IsSmiDeviceHandleError(line)) continue;
    if (IsNoInstanceMessage(line)) continue;
    if (line.front() == '|') line.remove_prefix(1);
    if (!line.empty() && line.back() == '|') line.remove_suffix(1);
    const std::vector<std::string_view> words = SplitWhitespace(line);
    if (IsHeader(words)) continue;
    SmiGpuInstance instance;
    LINKFIT_ASSIGN_OR_RETURN(instance, ParseRow(words, where, Trim(raw)));
    for (std::size_t i = 0; i < instances.size(); ++i) {
      const SmiGpuInstance& other = instances[i];
      if (other.gpu != instance.gpu) continue;
      const std::string earlier = " as GPU " + std::to_string(other.gpu) + "'s instance at line " +
                                  std::to_string(lines[i]);
      if (other.instance_id == instance.instance_id) {
        return MakeError(where + ": instance ID " + std::to_string(instance.instance_id) +
                         " is the same" + earlier);
      }
      if (instance.start < other.start + other.size &&
          other.start < instance.start + instance.size) {
        return MakeError(where + ": placement " + std::to_string(instance.start) + ":" +
                         std::to_string(instance.size) + " overlaps the memory slices" + earlier);
      }
    }
    instances.push_back(std::move(instance));
    lines.push_back(number);
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
    if (line.empty() || IsSmiDeviceHandleError(line)) continue;  // that GPU's modes stay unknown
    const std::vector<std::string_view> fields = Split(line, ',');
    if (fields.size() != 3) {
      return MakeError(where + ": expected 3 fields, got " + QuoteForMessage(line));
    }
    int gpu = 0;
    LINKFIT_ASSIGN_OR_RETURN(gpu,
                             Number(Trim(fields[0]), where + ", index", topology::kMaxGpus - 1));
    if (modes.count(gpu) != 0) {
      return MakeError(where + ": GPU " + std::to_string(gpu) + " is listed twice");
    }
    SmiMigModes entry;
    LINKFIT_ASSIGN_OR_RETURN(entry.current, ModeOf(fields[1], where, entry.problem));
    LINKFIT_ASSIGN_OR_RETURN(entry.pending, ModeOf(fields[2], where, entry.problem));
    entry.supported = entry.current != topology::MigMode::kUnknown;
    modes.emplace(gpu, std::move(entry));
  }
  return modes;
}

std::string_view FindSmiErrorMarker(std::string_view text) {
  // Longest first, so that "[Unknown Error]" is reported rather than "Unknown Error".
  static constexpr std::string_view kMarkers[] = {"[GPU requires reset]", "[GPU is lost]",
                                                  "[Unknown Error]", "Unknown Error", "ERR!"};
  for (std::string_view marker : kMarkers) {
    if (text.find(marker) != std::string_view::npos) return marker;
  }
  return {};
}

bool IsSmiDeviceHandleError(std::string_view line) {
  return StartsWith(Trim(line), "Unable to determine the device handle");
}

}  // namespace linkfit::agent
