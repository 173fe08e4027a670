// The nvidia-smi loader's line-level pieces (nvidia_smi_text.h): ANSI stripping, the
// `--query-gpu` CSV and where it starts in a combined text. The `topo -m` matrix is read in
// nvidia_smi.cc.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/strings.h"
#include "topology/nvidia_smi_text.h"

namespace linkfit::topology::internal {
namespace {

struct CsvGpu {
  int line = 0;
  std::string uuid;
  std::string name;
  std::uint64_t memory_mib = 0;
  bool has_memory = false;
  std::string pci_bus_id;
};

enum class CsvField : std::uint8_t { kIndex, kUuid, kName, kMemory, kBusId, kOther };

CsvField FieldForHeader(std::string_view header) {
  std::string key = ToLower(Trim(header));
  if (const std::size_t bracket = key.find('['); bracket != std::string::npos) {
    key = std::string(Trim(std::string_view(key).substr(0, bracket)));  // "memory.total [MiB]"
  }
  if (key == "index") return CsvField::kIndex;
  if (key == "uuid" || key == "gpu_uuid") return CsvField::kUuid;
  if (key == "name" || key == "gpu_name") return CsvField::kName;
  if (key == "memory.total") return CsvField::kMemory;
  if (key == "pci.bus_id" || key == "gpu_bus_id") return CsvField::kBusId;
  return CsvField::kOther;
}

Result<std::uint64_t> ParseMemoryMib(std::string_view value) {
  const std::vector<std::string_view> parts = SplitWhitespace(value);
  if (parts.empty() || parts.size() > 2) return MakeError("bad memory.total");
  const std::optional<std::int64_t> number = ParseInt(parts[0]);
  if (!number || *number < 0) return MakeError("bad memory.total");
  if (parts.size() == 2 && ToLower(parts[1]) != "mib") return MakeError("bad memory.total unit");
  return static_cast<std::uint64_t>(*number);
}

bool IsCsvStart(std::string_view line) {
  const std::string_view trimmed = Trim(line);
  const std::string lower = ToLower(trimmed.substr(0, std::min<std::size_t>(trimmed.size(), 16)));
  if (StartsWith(lower, "index")) return Trim(std::string_view(lower).substr(5)).starts_with(",");
  // "0, GPU-..." : digits, optional blanks, a comma, optional blanks, "GPU-".
  std::size_t i = 0;
  while (i < trimmed.size() && IsDigit(trimmed[i])) ++i;
  if (i == 0) return false;
  std::string_view rest = Trim(trimmed.substr(i));
  if (rest.empty() || rest.front() != ',') return false;
  return StartsWith(Trim(rest.substr(1)), "GPU-");
}

}  // namespace

// Removes ANSI escape sequences (ESC [ params final-byte): nvidia-smi underlines the header.
std::string StripAnsi(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '\x1b') {
      out += line[i];
      continue;
    }
    if (i + 1 < line.size() && line[i + 1] == '[') {
      std::size_t j = i + 2;
      while (j < line.size() && !(line[j] >= 0x40 && line[j] <= 0x7e)) ++j;
      i = j;  // skips the final byte too (the loop's ++i)
    }
  }
  return out;
}

Result<void> ParseQueryGpuCsv(std::string_view csv, int gpu_count, std::vector<GpuSpec>& gpus) {
  const std::vector<CsvField> default_fields = {CsvField::kIndex, CsvField::kUuid, CsvField::kName,
                                                CsvField::kMemory, CsvField::kBusId};
  std::vector<CsvField> fields = default_fields;
  bool header_seen = false;
  bool first = true;
  std::vector<CsvGpu> rows(static_cast<std::size_t>(gpu_count));
  int rows_seen = 0;
  int number = 0;
  for (std::string_view raw : Split(csv, '\n')) {
    ++number;
    const std::string line = StripAnsi(Trim(raw));
    if (Trim(line).empty()) continue;
    const std::string prefix = "query-gpu CSV line " + std::to_string(number) + ": ";
    std::vector<std::string_view> values = Split(line, ',');
    for (std::string_view& value : values) value = Trim(value);
    if (first && ToLower(values[0]) == "index") {
      first = false;
      header_seen = true;
      fields.clear();
      for (std::string_view name : values) fields.push_back(FieldForHeader(name));
      continue;
    }
    first = false;
    if (values.size() != fields.size()) {
      return MakeError(prefix + "expected " + std::to_string(fields.size()) + " fields (" +
                       (header_seen ? "as in the header"
                                    : "index, uuid, name, memory.total, "
                                      "pci.bus_id") +
                       "), got " + std::to_string(values.size()) + ": " + QuoteForMessage(line));
    }
    CsvGpu gpu;
    gpu.line = number;
    std::optional<int> index;
    for (std::size_t f = 0; f < fields.size(); ++f) {
      const std::string_view value = values[f];
      switch (fields[f]) {
        case CsvField::kIndex: {
          const std::optional<std::int64_t> parsed = ParseInt(value);
          if (!parsed)
            return MakeError(prefix + "index " + QuoteForMessage(value) + " is not a number");
          if (*parsed < 0 || *parsed >= gpu_count) {
            return MakeError(prefix + "GPU index " + std::to_string(*parsed) +
                             " is not in the topo -m matrix (GPU0..GPU" +
                             std::to_string(gpu_count - 1) + ")");
          }
          index = static_cast<int>(*parsed);
          break;
        }
        case CsvField::kUuid:
          gpu.uuid = value;
          break;
        case CsvField::kName:
          gpu.name = value;
          break;
        case CsvField::kMemory: {
          Result<std::uint64_t> memory = ParseMemoryMib(value);
          if (!memory) {
            return MakeError(prefix + "memory.total " + QuoteForMessage(value) +
                             " is not a number of MiB");
          }
          gpu.memory_mib = *memory;
          gpu.has_memory = true;
          break;
        }
        case CsvField::kBusId:
          gpu.pci_bus_id = value;
          break;
        case CsvField::kOther:
          break;
      }
    }
    if (!index) return MakeError(prefix + "the CSV has no index column");
    CsvGpu& slot = rows[static_cast<std::size_t>(*index)];
    if (slot.line != 0) {
      return MakeError(prefix + "duplicate GPU index " + std::to_string(*index) +
                       " (first at line " + std::to_string(slot.line) + ")");
    }
    slot = std::move(gpu);
    ++rows_seen;
  }
  if (rows_seen == 0) return {};  // a header alone: nothing known
  if (rows_seen != gpu_count) {
    return MakeError("query-gpu CSV lists " + std::to_string(rows_seen) +
                     " GPUs, but the topo -m matrix has " + std::to_string(gpu_count));
  }
  for (std::size_t g = 0; g < rows.size(); ++g) {
    gpus[g].uuid = std::move(rows[g].uuid);
    gpus[g].model = std::move(rows[g].name);
    gpus[g].memory_mib = rows[g].memory_mib;
    gpus[g].pci_bus_id = std::move(rows[g].pci_bus_id);
  }
  return {};
}

NvidiaSmiParts SplitNvidiaSmiText(std::string_view text) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    if (IsCsvStart(text.substr(start, end - start))) {
      return NvidiaSmiParts{text.substr(0, start), text.substr(start)};
    }
    start = end + 1;
  }
  return NvidiaSmiParts{text, std::string_view()};
}

}  // namespace linkfit::topology::internal
