#include "harness/trace.h"

#include <charconv>
#include <ctime>
#include <iomanip>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>

#include "linkfit/common/strings.h"

namespace linkfit::bench {
namespace {

// A header-indexed view of one CSV file; rows are split on ',' (the traces never quote).
class CsvTable {
 public:
  static Result<CsvTable> Parse(std::string_view csv, const std::string& source) {
    CsvTable table;
    table.source_ = source;
    std::size_t line_number = 0;
    for (std::string_view line : Split(csv, '\n')) {
      ++line_number;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (Trim(line).empty()) continue;
      std::vector<std::string_view> fields = Split(line, ',');
      if (table.columns_.empty()) {
        for (std::size_t i = 0; i < fields.size(); ++i) {
          table.columns_[std::string(Trim(fields[i]))] = i;
        }
        table.header_size_ = fields.size();
        continue;
      }
      if (fields.size() != table.header_size_) {
        return MakeError(source + ":" + std::to_string(line_number) + ": expected " +
                         std::to_string(table.header_size_) + " fields, found " +
                         std::to_string(fields.size()));
      }
      table.rows_.push_back({line_number, std::move(fields)});
    }
    if (table.columns_.empty()) return MakeError(source + ": empty file (no header row)");
    return table;
  }

  Result<std::size_t> Column(const std::string& name) const {
    auto it = columns_.find(name);
    if (it == columns_.end()) return MakeError(source_ + ": missing column '" + name + "'");
    return it->second;
  }
  std::optional<std::size_t> OptionalColumn(const std::string& name) const {
    auto it = columns_.find(name);
    if (it == columns_.end()) return std::nullopt;
    return it->second;
  }

  struct Row {
    std::size_t line = 0;
    std::vector<std::string_view> fields;
  };
  const std::vector<Row>& rows() const { return rows_; }

  std::string Where(const Row& row, const std::string& column) const {
    return source_ + ":" + std::to_string(row.line) + ": column '" + column + "'";
  }

  Result<std::int64_t> Int(const Row& row, std::size_t index, const std::string& column,
                           std::int64_t min_value, std::int64_t max_value) const {
    std::string_view text = Trim(row.fields[index]);
    std::optional<std::int64_t> value = ParseInt(text);
    if (!value) {
      return MakeError(Where(row, column) + ": not an integer: " + QuoteForMessage(text));
    }
    if (*value < min_value || *value > max_value) {
      return MakeError(Where(row, column) + ": " + std::to_string(*value) + " outside [" +
                       std::to_string(min_value) + ", " + std::to_string(max_value) + "]");
    }
    return *value;
  }

  Result<double> Double(const Row& row, std::size_t index, const std::string& column) const {
    std::string text(Trim(row.fields[index]));
    double value = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || value < 0) {
      return MakeError(Where(row, column) +
                       ": not a non-negative number: " + QuoteForMessage(text));
    }
    return value;
  }

 private:
  std::string source_;
  std::map<std::string, std::size_t> columns_;
  std::size_t header_size_ = 0;
  std::vector<Row> rows_;
};

constexpr std::int64_t kMaxCpuMilli = 10'000'000;  // 10,000 cores
constexpr std::int64_t kMaxMemoryMib = 1LL << 32;  // 4 PiB
constexpr std::int64_t kMaxGpusPerNode = 16;

// Parses "YYYY-MM-DD HH:MM:SS" as UTC seconds since the epoch.
std::optional<std::int64_t> ParseTimestamp(std::string_view text) {
  std::tm tm{};
  std::istringstream in{std::string(text)};
  in >> std::get_time(&tm, "%Y-%m-%d %H:%M:%S");
  if (in.fail()) return std::nullopt;
  return static_cast<std::int64_t>(timegm(&tm));
}

}  // namespace

Result<std::vector<NodeRecord>> ParseOpenbNodes(std::string_view csv, const std::string& source) {
  auto table = CsvTable::Parse(csv, source);
  if (!table) return tl::unexpected(table.error());
  auto sn = table->Column("sn");
  auto cpu = table->Column("cpu_milli");
  auto memory = table->Column("memory_mib");
  auto gpu = table->Column("gpu");
  auto model = table->Column("model");
  for (const auto* column : {&sn, &cpu, &memory, &gpu, &model}) {
    if (!*column) return tl::unexpected(column->error());
  }
  std::vector<NodeRecord> nodes;
  for (const auto& row : table->rows()) {
    NodeRecord node;
    node.name = std::string(Trim(row.fields[*sn]));
    if (node.name.empty()) return MakeError(table->Where(row, "sn") + ": empty node name");
    auto cpu_milli = table->Int(row, *cpu, "cpu_milli", 1, kMaxCpuMilli);
    auto memory_mib = table->Int(row, *memory, "memory_mib", 1, kMaxMemoryMib);
    auto gpus = table->Int(row, *gpu, "gpu", 0, kMaxGpusPerNode);
    for (const auto* value : {&cpu_milli, &memory_mib, &gpus}) {
      if (!*value) return tl::unexpected(value->error());
    }
    node.cpu_milli = *cpu_milli;
    node.memory_mib = *memory_mib;
    node.gpu_count = static_cast<int>(*gpus);
    node.gpu_model = std::string(Trim(row.fields[*model]));
    if (node.gpu_count > 0 && node.gpu_model.empty()) {
      return MakeError(table->Where(row, "model") + ": a GPU node needs a GPU model");
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

Result<std::vector<PodRecord>> ParseOpenbPods(std::string_view csv, const std::string& source) {
  auto table = CsvTable::Parse(csv, source);
  if (!table) return tl::unexpected(table.error());
  auto name = table->Column("name");
  auto cpu = table->Column("cpu_milli");
  auto memory = table->Column("memory_mib");
  auto num_gpu = table->Column("num_gpu");
  auto gpu_milli = table->Column("gpu_milli");
  for (const auto* column : {&name, &cpu, &memory, &num_gpu, &gpu_milli}) {
    if (!*column) return tl::unexpected(column->error());
  }
  std::optional<std::size_t> gpu_spec = table->OptionalColumn("gpu_spec");
  std::vector<PodRecord> pods;
  for (const auto& row : table->rows()) {
    PodRecord pod;
    pod.name = std::string(Trim(row.fields[*name]));
    if (pod.name.empty()) return MakeError(table->Where(row, "name") + ": empty pod name");
    auto cpu_milli = table->Int(row, *cpu, "cpu_milli", 0, kMaxCpuMilli);
    auto memory_mib = table->Int(row, *memory, "memory_mib", 0, kMaxMemoryMib);
    auto gpus = table->Int(row, *num_gpu, "num_gpu", 0, kMaxGpusPerNode);
    auto milli = table->Int(row, *gpu_milli, "gpu_milli", 0, 1000);
    for (const auto* value : {&cpu_milli, &memory_mib, &gpus, &milli}) {
      if (!*value) return tl::unexpected(value->error());
    }
    pod.cpu_milli = *cpu_milli;
    pod.memory_mib = *memory_mib;
    pod.num_gpu = static_cast<int>(*gpus);
    pod.gpu_milli = static_cast<int>(*milli);
    if ((pod.num_gpu == 0) != (pod.gpu_milli == 0)) {
      return MakeError(table->Where(row, "gpu_milli") + ": num_gpu " + std::to_string(pod.num_gpu) +
                       " with gpu_milli " + std::to_string(pod.gpu_milli) +
                       " (both or neither must be zero)");
    }
    if (pod.num_gpu > 1 && pod.gpu_milli != 1000) {
      return MakeError(table->Where(row, "gpu_milli") + ": a multi-GPU pod must ask for 1000");
    }
    if (gpu_spec) {
      for (std::string_view model : Split(Trim(row.fields[*gpu_spec]), '|')) {
        if (!Trim(model).empty()) pod.gpu_models.emplace_back(Trim(model));
      }
    }
    pods.push_back(std::move(pod));
  }
  return pods;
}

Result<std::vector<PhillyJob>> ParsePhillyJobs(std::string_view csv, const std::string& source) {
  auto table = CsvTable::Parse(csv, source);
  if (!table) return tl::unexpected(table.error());
  auto timestamp = table->Column("timestamp");
  auto duration = table->Column("duration");
  auto num_gpus = table->Column("num_gpus");
  for (const auto* column : {&timestamp, &duration, &num_gpus}) {
    if (!*column) return tl::unexpected(column->error());
  }
  std::vector<PhillyJob> jobs;
  for (const auto& row : table->rows()) {
    PhillyJob job;
    std::optional<std::int64_t> submit = ParseTimestamp(Trim(row.fields[*timestamp]));
    if (!submit) {
      return MakeError(table->Where(row, "timestamp") + ": expected YYYY-MM-DD HH:MM:SS, got " +
                       QuoteForMessage(row.fields[*timestamp]));
    }
    job.submit_s = *submit;
    auto seconds = table->Double(row, *duration, "duration");
    if (!seconds) return tl::unexpected(seconds.error());
    job.duration_s = *seconds;
    auto gpus = table->Int(row, *num_gpus, "num_gpus", 0, 1024);
    if (!gpus) return tl::unexpected(gpus.error());
    job.num_gpus = static_cast<int>(*gpus);
    jobs.push_back(job);
  }
  return jobs;
}

Result<std::vector<RdmaPodRecord>> ParseAlibaba2025GpuPods(std::string_view csv,
                                                           const std::string& source) {
  auto table = CsvTable::Parse(csv, source);
  if (!table) return tl::unexpected(table.error());
  const char* names[] = {"instance_sn",  "role",           "cpu_request",   "gpu_request",
                         "rdma_request", "memory_request", "creation_time", "deletion_time"};
  std::size_t column[std::size(names)] = {};
  for (std::size_t i = 0; i < std::size(names); ++i) {
    auto found = table->Column(names[i]);
    if (!found) return tl::unexpected(found.error());
    column[i] = *found;
  }
  // A time outside the trace window is an empty field.
  auto time = [&](const auto& row, std::size_t i) -> Result<double> {
    if (Trim(row.fields[column[i]]).empty()) return -1.0;
    return table->Double(row, column[i], names[i]);
  };
  std::vector<RdmaPodRecord> pods;
  for (const auto& row : table->rows()) {
    if (Trim(row.fields[column[1]]) != "HN") continue;
    RdmaPodRecord pod;
    pod.name = std::string(Trim(row.fields[column[0]]));
    auto cpu = table->Int(row, column[2], names[2], 0, kMaxCpuMilli / 1000);
    auto gpu = table->Int(row, column[3], names[3], 0, kMaxGpusPerNode);
    auto rdma = table->Int(row, column[4], names[4], 0, 100);
    auto memory_gib = table->Double(row, column[5], names[5]);
    auto created = time(row, 6);
    auto deleted = time(row, 7);
    if (!cpu) return tl::unexpected(cpu.error());
    if (!gpu) return tl::unexpected(gpu.error());
    if (!rdma) return tl::unexpected(rdma.error());
    if (!memory_gib) return tl::unexpected(memory_gib.error());
    if (!created) return tl::unexpected(created.error());
    if (!deleted) return tl::unexpected(deleted.error());
    pod.cpu_milli = *cpu * 1000;
    pod.num_gpu = static_cast<int>(*gpu);
    pod.rdma_percent = static_cast<int>(*rdma);
    pod.memory_mib = static_cast<std::int64_t>(*memory_gib * 1024.0);
    pod.creation_s = *created;
    pod.deletion_s = *deleted;
    pods.push_back(std::move(pod));
  }
  return pods;
}

Result<std::vector<NodeRecord>> LoadOpenbNodes(const std::string& path) {
  auto text = ReadFile(path);
  if (!text) return tl::unexpected(text.error());
  return ParseOpenbNodes(*text, path);
}

Result<std::vector<PodRecord>> LoadOpenbPods(const std::string& path) {
  auto text = ReadFile(path);
  if (!text) return tl::unexpected(text.error());
  return ParseOpenbPods(*text, path);
}

Result<std::vector<PhillyJob>> LoadPhillyJobs(const std::string& path) {
  auto text = ReadFile(path);
  if (!text) return tl::unexpected(text.error());
  return ParsePhillyJobs(*text, path);
}

Result<std::vector<RdmaPodRecord>> LoadAlibaba2025GpuPods(const std::string& path) {
  auto text = ReadFile(path);
  if (!text) return tl::unexpected(text.error());
  return ParseAlibaba2025GpuPods(*text, path);
}

}  // namespace linkfit::bench
