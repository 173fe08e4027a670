// Parser for `nvidia-smi topo -m` text and `nvidia-smi --query-gpu=...` CSV (spec.h).
//
// What `topo -m` prints (driver 535; older drivers differ as noted):
//
//   \tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID     <- header (ANSI-underlined)
//   GPU0\t X \tNV18\tPXB\t0-55,112-167\t0\t\tN/A                     <- one row per GPU
//   GPU1\tNV18\t X \tNODE\t0-55,112-167\t0\t\tN/A
//   NIC0\tPXB\tNODE\t X \t\t\t                                       <- NIC rows (not needed)
//
//   Legend: ...                                                      <- legend, NIC legend
//
// Older drivers name NIC columns after the device (mlx5_0), lack "GPU NUMA ID" (< 525) or even
// "NUMA Affinity" (< 450), and print SOC for SYS. Cells never contain blanks, so rows are split on
// runs of whitespace; that also absorbs the empty fields that the double tabs produce.
//
// The text hides what linkfit would like to know: the PCIe relation of NVLinked pairs, whether
// NVLinks go through NVSwitches, and which NUMA nodes share a socket. The parser infers these
// conservatively and records every inference in TopologySpec::warnings.
//
// The GPU rows' cells in the NIC columns become TopologySpec::nics (nvidia_smi_nics.cc, which
// also reads the NIC legend).
//
// The CSV and the split of a combined text are in nvidia_smi_csv.cc, what a model name tells in
// model_guess.cc, the fabric inferred from the links in nvidia_smi_fabric.cc, the NIC columns in
// nvidia_smi_nics.cc. What remains stays one file: the matrix, its cells and the NUMA and socket
// inference share the Line, Cell and Matrix types, which exist only here.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "linkfit/common/strings.h"
#include "linkfit/topology/spec.h"
#include "topology/nvidia_smi_text.h"

namespace linkfit::topology {
namespace {

using internal::DisjointSets;
using internal::InferFabric;
using internal::ParseQueryGpuCsv;
using internal::StripAnsi;

// Bounds that keep the work linear in a sane input and reject absurd ones early.
constexpr std::size_t kMaxTextBytes = std::size_t{4} << 20;
constexpr std::size_t kMaxDeviceColumns = 256;
constexpr int kMaxNvlinkCount = 64;
constexpr int kMaxNumaNode = 1023;
constexpr int kMaxGpuLabel = 999;

// ---------------------------------------------------------------------------------------------
// Lines and tokens.

struct Line {
  int number = 0;    // 1-based, for messages
  std::string text;  // without ANSI escape sequences
};

std::vector<Line> SplitLines(std::string_view text) {
  std::vector<Line> lines;
  int number = 0;
  for (std::string_view raw : Split(text, '\n')) {
    lines.push_back(Line{++number, StripAnsi(raw)});
  }
  return lines;
}

// Parses "GPU<n>" (the label of a GPU column or row); nullopt for anything else.
std::optional<int> ParseGpuLabel(std::string_view token) {
  if (!StartsWith(token, "GPU") || token.size() < 4 || token.size() > 6) return std::nullopt;
  const std::string_view digits = token.substr(3);
  if (!std::all_of(digits.begin(), digits.end(), IsDigit)) return std::nullopt;
  const std::optional<std::int64_t> value = ParseInt(digits);
  if (!value || *value > kMaxGpuLabel) return std::nullopt;
  return static_cast<int>(*value);
}

// Returns the integer that `text` starts with ("0-1" -> 0, "3" -> 3); nullopt for "N/A".
std::optional<int> ParseLeadingInt(std::string_view text, int max_value) {
  std::size_t digits = 0;
  while (digits < text.size() && digits < 9 && IsDigit(text[digits])) ++digits;
  if (digits == 0) return std::nullopt;
  const std::optional<std::int64_t> value = ParseInt(text.substr(0, digits));
  if (!value || *value > max_value) return std::nullopt;
  return static_cast<int>(*value);
}

std::string LinePrefix(int number) { return "line " + std::to_string(number) + ": "; }

std::string PairName(int a, int b) {
  return "GPU" + std::to_string(a) + "-GPU" + std::to_string(b);
}

// ---------------------------------------------------------------------------------------------
// Cells.

enum class CellKind : std::uint8_t { kSelf, kNvlink, kPcie, kUnknown };

struct Cell {
  CellKind kind = CellKind::kUnknown;
  int nvlinks = 0;
  PcieRelation pcie = PcieRelation::kSys;
};

// Parses one matrix cell: X, NV#, PIX, PXB, PHB, NODE, SYS or SOC (the pre-2017 name of SYS).
Cell ParseCell(std::string_view token) {
  const std::string upper = ToUpper(token);
  if (upper == "X") return Cell{CellKind::kSelf, 0, PcieRelation::kSys};
  if (upper == "SYS" || upper == "SOC") return Cell{CellKind::kPcie, 0, PcieRelation::kSys};
  if (upper == "NODE") return Cell{CellKind::kPcie, 0, PcieRelation::kNode};
  if (upper == "PHB") return Cell{CellKind::kPcie, 0, PcieRelation::kPhb};
  if (upper == "PXB") return Cell{CellKind::kPcie, 0, PcieRelation::kPxb};
  if (upper == "PIX") return Cell{CellKind::kPcie, 0, PcieRelation::kPix};
  if (StartsWith(upper, "NV") && upper.size() > 2 && upper.size() <= 4) {
    const std::string_view digits = std::string_view(upper).substr(2);
    if (std::all_of(digits.begin(), digits.end(), IsDigit)) {
      const std::optional<std::int64_t> count = ParseInt(digits);
      if (count && *count >= 1 && *count <= kMaxNvlinkCount) {
        return Cell{CellKind::kNvlink, static_cast<int>(*count), PcieRelation::kSys};
      }
    }
  }
  return Cell{};
}

bool SameCell(const Cell& a, const Cell& b) {
  return a.kind == b.kind && a.nvlinks == b.nvlinks && a.pcie == b.pcie;
}

// ---------------------------------------------------------------------------------------------
// The matrix.

enum class TrailingColumn : std::uint8_t { kCpuAffinity, kNumaAffinity, kGpuNumaId, kOther };

struct GpuRow {
  int line = 0;
  std::vector<std::string> cells;  // one per device column (GPUs and NICs, header order)
  std::string cpu_affinity;        // empty when absent
  std::string numa_affinity;       // empty when absent
};

struct Matrix {
  int header_line = 0;
  int gpu_count = 0;
  std::vector<int> column_gpu;  // per device column: GPU index, or -1 for a NIC/other device
  std::vector<std::string> column_label;  // per device column: "GPU0", "NIC0", "mlx5_0"
  std::vector<TrailingColumn> trailing;
  std::vector<GpuRow> rows;  // by GPU index
  bool has_cpu_affinity = false;
  bool has_numa_affinity = false;
};

bool IsHeaderLine(const std::vector<std::string_view>& tokens) {
  if (tokens.empty() || !ParseGpuLabel(tokens.front())) return false;
  // A GPU row also starts with "GPU<n>", but always contains its "X" cell.
  return std::none_of(tokens.begin(), tokens.end(), [](std::string_view t) { return t == "X"; });
}

// Parses the header tokens into device columns and trailing (affinity) columns.
Result<void> ParseHeader(const std::vector<std::string_view>& tokens, int line, Matrix& matrix,
                         std::vector<std::string>& warnings) {
  std::set<int> seen_gpus;
  std::size_t i = 0;
  for (; i < tokens.size(); ++i) {
    const std::string_view token = tokens[i];
    const std::string_view next = i + 1 < tokens.size() ? tokens[i + 1] : std::string_view();
    if ((token == "CPU" || token == "NUMA") && next == "Affinity") break;
    if (token == "GPU" && next == "NUMA") break;
    if (const std::optional<int> gpu = ParseGpuLabel(token)) {
      if (!seen_gpus.insert(*gpu).second) {
        return MakeError(LinePrefix(line) + "duplicate column GPU" + std::to_string(*gpu) +
                         " in the topo -m header");
      }
      matrix.column_gpu.push_back(*gpu);
    } else {
      matrix.column_gpu.push_back(-1);
    }
    matrix.column_label.emplace_back(token);
    if (matrix.column_gpu.size() > kMaxGpus + kMaxDeviceColumns) {
      return MakeError(LinePrefix(line) + "the topo -m header has more than " +
                       std::to_string(kMaxGpus + kMaxDeviceColumns) + " device columns");
    }
  }
  bool warned_unknown = false;
  while (i < tokens.size()) {
    const auto matches = [&](std::initializer_list<std::string_view> words) {
      std::size_t k = i;
      for (std::string_view word : words) {
        if (k >= tokens.size() || tokens[k] != word) return false;
        ++k;
      }
      return true;
    };
    if (matches({"CPU", "Affinity"})) {
      matrix.trailing.push_back(TrailingColumn::kCpuAffinity);
      matrix.has_cpu_affinity = true;
      i += 2;
    } else if (matches({"NUMA", "Affinity"})) {
      matrix.trailing.push_back(TrailingColumn::kNumaAffinity);
      matrix.has_numa_affinity = true;
      i += 2;
    } else if (matches({"GPU", "NUMA", "ID"})) {
      matrix.trailing.push_back(TrailingColumn::kGpuNumaId);
      i += 3;
    } else {
      if (!warned_unknown) {
        warnings.push_back(LinePrefix(line) + "ignoring unknown topo -m header column " +
                           QuoteForMessage(tokens[i]));
        warned_unknown = true;
      }
      matrix.trailing.push_back(TrailingColumn::kOther);
      ++i;
    }
  }

  matrix.gpu_count = static_cast<int>(seen_gpus.size());
  if (matrix.gpu_count == 0) {
    return MakeError(LinePrefix(line) + "the topo -m header has no GPU columns");
  }
  if (matrix.gpu_count > kMaxGpus) {
    return MakeError(LinePrefix(line) + "the topo -m header has " +
                     std::to_string(matrix.gpu_count) + " GPUs; linkfit supports at most " +
                     std::to_string(kMaxGpus));
  }
  // std::set is ordered: the indexes are 0..n-1 exactly when the largest is n-1.
  if (*seen_gpus.rbegin() != matrix.gpu_count - 1) {
    return MakeError(LinePrefix(line) + "GPU columns must be GPU0..GPU" +
                     std::to_string(matrix.gpu_count - 1) + ", found GPU" +
                     std::to_string(*seen_gpus.rbegin()));
  }
  return {};
}

// Finds the header and the GPU rows; stops at the first line that is not a row (the legend).
Result<Matrix> ParseMatrix(std::string_view text, std::vector<std::string>& warnings) {
  const std::vector<Line> lines = SplitLines(text);
  Matrix matrix;
  std::size_t pos = 0;
  for (; pos < lines.size(); ++pos) {
    const std::vector<std::string_view> tokens = SplitWhitespace(lines[pos].text);
    if (!IsHeaderLine(tokens)) continue;
    matrix.header_line = lines[pos].number;
    if (Result<void> header = ParseHeader(tokens, matrix.header_line, matrix, warnings); !header) {
      return tl::unexpected(header.error());
    }
    break;
  }
  if (matrix.header_line == 0) {
    return MakeError(
        "not `nvidia-smi topo -m` output: no header line of GPU columns (\"GPU0 GPU1 ...\") found");
  }

  std::set<std::string, std::less<>> device_names;
  {
    const std::vector<std::string_view> header = SplitWhitespace(lines[pos].text);
    for (std::size_t c = 0; c < matrix.column_gpu.size(); ++c) {
      if (matrix.column_gpu[c] < 0) device_names.emplace(header[c]);
    }
  }

  const std::size_t columns = matrix.column_gpu.size();
  matrix.rows.resize(static_cast<std::size_t>(matrix.gpu_count));
  bool any_row = false;
  for (++pos; pos < lines.size(); ++pos) {
    const Line& line = lines[pos];
    const std::vector<std::string_view> tokens = SplitWhitespace(line.text);
    if (tokens.empty()) {
      if (any_row) break;
      continue;
    }
    const std::optional<int> gpu = ParseGpuLabel(tokens.front());
    if (!gpu) {
      if (device_names.count(tokens.front()) > 0) {
        any_row = true;  // a NIC row: tolerated, not needed
        continue;
      }
      break;  // "Legend:" or anything else ends the table
    }
    any_row = true;
    if (*gpu >= matrix.gpu_count) {
      return MakeError(LinePrefix(line.number) + "row GPU" + std::to_string(*gpu) +
                       " has no column in the header (line " + std::to_string(matrix.header_line) +
                       ")");
    }
    GpuRow& row = matrix.rows[static_cast<std::size_t>(*gpu)];
    if (row.line != 0) {
      return MakeError(LinePrefix(line.number) + "duplicate row GPU" + std::to_string(*gpu) +
                       " (first at line " + std::to_string(row.line) + ")");
    }
    if (tokens.size() - 1 < columns) {
      return MakeError(LinePrefix(line.number) + "row GPU" + std::to_string(*gpu) + " has " +
                       std::to_string(tokens.size() - 1) + " cells, but the header has " +
                       std::to_string(columns) + " GPU/NIC columns");
    }
    row.line = line.number;
    for (std::size_t c = 0; c < columns; ++c) row.cells.emplace_back(tokens[1 + c]);
    for (std::size_t t = 0; t < matrix.trailing.size() && 1 + columns + t < tokens.size(); ++t) {
      const std::string_view value = tokens[1 + columns + t];
      if (matrix.trailing[t] == TrailingColumn::kCpuAffinity) row.cpu_affinity = value;
      if (matrix.trailing[t] == TrailingColumn::kNumaAffinity) row.numa_affinity = value;
    }
  }
  for (int g = 0; g < matrix.gpu_count; ++g) {
    if (matrix.rows[static_cast<std::size_t>(g)].line == 0) {
      return MakeError("no row for GPU" + std::to_string(g) + " (header at line " +
                       std::to_string(matrix.header_line) + ")");
    }
  }
  return matrix;
}

// ---------------------------------------------------------------------------------------------
// NUMA nodes and sockets.

// Returns each GPU's NUMA node: from "NUMA Affinity" when printed; else by grouping equal
// "CPU Affinity" values (drivers before 450); else 0.
std::vector<int> AssignNumaNodes(const Matrix& matrix, std::vector<std::string>& warnings) {
  const std::size_t n = matrix.rows.size();
  std::vector<int> numa(n, 0);
  std::vector<std::optional<int>> parsed(n);
  std::vector<int> unknown;
  for (std::size_t g = 0; g < n; ++g) {
    parsed[g] = ParseLeadingInt(matrix.rows[g].numa_affinity, kMaxNumaNode);
    if (!parsed[g]) unknown.push_back(static_cast<int>(g));
  }
  if (matrix.has_numa_affinity && unknown.size() < n) {
    for (std::size_t g = 0; g < n; ++g) numa[g] = parsed[g].value_or(0);
    if (!unknown.empty()) {
      warnings.push_back("NUMA affinity of GPUs " + JoinInts(unknown) +
                         " is not a number; assumed NUMA node 0");
    }
    return numa;
  }

  // No usable NUMA column: GPUs with the same CPU affinity share a NUMA node, and the nodes are
  // numbered in the order of their first CPU, which is how Linux numbers them.
  std::map<std::pair<int, std::string>, int> groups;
  bool usable = matrix.has_cpu_affinity;
  for (std::size_t g = 0; g < n && usable; ++g) {
    const std::optional<int> first_cpu = ParseLeadingInt(matrix.rows[g].cpu_affinity, 1 << 20);
    if (!first_cpu) usable = false;
    if (usable) groups.emplace(std::make_pair(*first_cpu, matrix.rows[g].cpu_affinity), 0);
  }
  if (usable && groups.size() > 1) {
    int next = 0;
    for (auto& [key, id] : groups) id = next++;
    for (std::size_t g = 0; g < n; ++g) {
      const int first_cpu = ParseLeadingInt(matrix.rows[g].cpu_affinity, 1 << 20).value_or(0);
      numa[g] = groups[std::make_pair(first_cpu, matrix.rows[g].cpu_affinity)];
    }
    warnings.push_back("no NUMA Affinity in topo -m; NUMA nodes inferred from " +
                       std::to_string(groups.size()) + " distinct CPU affinities");
  } else if (n > 1 && (matrix.has_numa_affinity || !usable)) {
    warnings.push_back("NUMA affinity unknown; all GPUs assumed on NUMA node 0");
  }
  return numa;
}

// Groups NUMA nodes into sockets. A PCIe relation closer than SYS (between two GPUs, or from
// both to one NIC) cannot cross the inter-socket link, so it puts both NUMA nodes on one
// socket (DGX A100 in NPS4 mode: NODE between NUMA nodes 1 and 3). Without such evidence each
// NUMA node is assumed to be its own socket; a warning says so when nothing (a visible SYS
// relation) confirms the split. Sockets are numbered by their lowest NUMA node.
std::vector<int> AssignSockets(const Matrix& matrix, const std::vector<int>& numa,
                               const std::vector<std::vector<Cell>>& gpu_cells,
                               std::vector<std::string>& warnings) {
  const std::size_t n = numa.size();
  DisjointSets sets(n);  // over GPUs; GPUs on one NUMA node are joined first
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = a + 1; b < n; ++b) {
      if (numa[a] == numa[b]) sets.Union(a, b);
    }
  }
  const std::size_t columns = matrix.column_gpu.size();
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = a + 1; b < n; ++b) {
      const Cell& cell = gpu_cells[a][b];
      if (cell.kind == CellKind::kPcie && cell.pcie != PcieRelation::kSys) sets.Union(a, b);
    }
  }
  for (std::size_t c = 0; c < columns; ++c) {
    if (matrix.column_gpu[c] >= 0) continue;
    std::optional<std::size_t> first;
    for (std::size_t g = 0; g < n; ++g) {
      const Cell cell = ParseCell(matrix.rows[g].cells[c]);
      if (cell.kind != CellKind::kPcie || cell.pcie == PcieRelation::kSys) continue;
      if (first) sets.Union(*first, g);
      first = g;
    }
  }

  // Number sockets by their lowest NUMA node.
  std::map<std::size_t, int> lowest_numa;  // root -> lowest NUMA node
  for (std::size_t g = 0; g < n; ++g) {
    const std::size_t root = sets.Find(g);
    auto [it, inserted] = lowest_numa.emplace(root, numa[g]);
    if (!inserted) it->second = std::min(it->second, numa[g]);
  }
  std::vector<std::pair<int, std::size_t>> order;
  for (const auto& [root, low] : lowest_numa) order.emplace_back(low, root);
  std::sort(order.begin(), order.end());
  std::map<std::size_t, int> socket_of_root;
  for (std::size_t s = 0; s < order.size(); ++s) {
    socket_of_root[order[s].second] = static_cast<int>(s);
  }
  std::vector<int> socket(n);
  for (std::size_t g = 0; g < n; ++g) socket[g] = socket_of_root[sets.Find(g)];

  // Is every split confirmed by a visible SYS relation (between GPUs, or through one NIC)?
  const int sockets = static_cast<int>(order.size());
  std::set<std::pair<int, int>> confirmed;
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = a + 1; b < n; ++b) {
      const Cell& cell = gpu_cells[a][b];
      if (socket[a] != socket[b] && cell.kind == CellKind::kPcie) {
        confirmed.emplace(std::min(socket[a], socket[b]), std::max(socket[a], socket[b]));
      }
    }
  }
  for (std::size_t c = 0; c < columns; ++c) {
    if (matrix.column_gpu[c] >= 0) continue;
    std::set<int> near;
    std::set<int> far;
    for (std::size_t g = 0; g < n; ++g) {
      const Cell cell = ParseCell(matrix.rows[g].cells[c]);
      if (cell.kind != CellKind::kPcie) continue;
      (cell.pcie == PcieRelation::kSys ? far : near).insert(socket[g]);
    }
    for (int s : near) {
      for (int t : far) {
        if (s != t) confirmed.emplace(std::min(s, t), std::max(s, t));
      }
    }
  }
  const std::size_t socket_pairs =
      static_cast<std::size_t>(sockets) * static_cast<std::size_t>(sockets - 1) / 2;
  if (confirmed.size() < socket_pairs) {
    warnings.push_back("assumed one CPU socket per NUMA node group (" + std::to_string(sockets) +
                       " sockets): topo -m shows no PCIe path that confirms the split");
  }
  return socket;
}

// ---------------------------------------------------------------------------------------------
// Links and the fabric.

// Reads the GPU block as cells, reconciling the two triangles. Returns cells[a][b] for a != b.
std::vector<std::vector<Cell>> ReadGpuCells(const Matrix& matrix,
                                            std::vector<std::string>& warnings) {
  const std::size_t n = matrix.rows.size();
  std::vector<std::size_t> column_of(n);
  for (std::size_t c = 0; c < matrix.column_gpu.size(); ++c) {
    if (matrix.column_gpu[c] >= 0) column_of[static_cast<std::size_t>(matrix.column_gpu[c])] = c;
  }
  const auto raw = [&](std::size_t a, std::size_t b) -> const std::string& {
    return matrix.rows[a].cells[column_of[b]];
  };
  std::vector<std::vector<Cell>> cells(n, std::vector<Cell>(n));
  const Cell sys{CellKind::kPcie, 0, PcieRelation::kSys};
  for (std::size_t a = 0; a < n; ++a) {
    if (ParseCell(raw(a, a)).kind != CellKind::kSelf) {
      warnings.push_back("GPU" + std::to_string(a) + ": diagonal cell " +
                         QuoteForMessage(raw(a, a)) + " is not X; ignored");
    }
    for (std::size_t b = a + 1; b < n; ++b) {
      const Cell ab = ParseCell(raw(a, b));
      const Cell ba = ParseCell(raw(b, a));
      const std::string pair = PairName(static_cast<int>(a), static_cast<int>(b));
      Cell chosen = ab;
      if (ab.kind == CellKind::kUnknown || ab.kind == CellKind::kSelf ||
          ba.kind == CellKind::kUnknown || ba.kind == CellKind::kSelf) {
        warnings.push_back(
            pair + ": unrecognised cell " +
            QuoteForMessage(ab.kind == CellKind::kNvlink || ab.kind == CellKind::kPcie
                                ? raw(b, a)
                                : raw(a, b)) +
            "; treated as SYS without NVLink");
        chosen = sys;
      } else if (!SameCell(ab, ba)) {
        warnings.push_back(pair + ": asymmetric cells " + QuoteForMessage(raw(a, b)) + " and " +
                           QuoteForMessage(raw(b, a)) + "; treated as SYS without NVLink");
        chosen = sys;
      }
      cells[a][b] = chosen;
      cells[b][a] = chosen;
    }
  }
  return cells;
}

Result<TopologySpec> ParseNvidiaSmiImpl(std::string_view topo_text, std::string_view csv,
                                        const GpuModelTable& table) {
  if (topo_text.size() > kMaxTextBytes || csv.size() > kMaxTextBytes) {
    return MakeError("nvidia-smi text is larger than " + std::to_string(kMaxTextBytes >> 20) +
                     " MiB");
  }
  TopologySpec spec;
  Result<Matrix> matrix = ParseMatrix(topo_text, spec.warnings);
  if (!matrix) return tl::unexpected(matrix.error());
  const std::size_t n = static_cast<std::size_t>(matrix->gpu_count);

  const std::vector<std::vector<Cell>> cells = ReadGpuCells(*matrix, spec.warnings);
  const std::vector<int> numa = AssignNumaNodes(*matrix, spec.warnings);
  const std::vector<int> socket = AssignSockets(*matrix, numa, cells, spec.warnings);

  spec.gpus.resize(n);
  for (std::size_t g = 0; g < n; ++g) {
    spec.gpus[g].index = static_cast<int>(g);
    spec.gpus[g].numa_node = numa[g];
    spec.gpus[g].socket = socket[g];
  }
  if (Result<void> parsed = ParseQueryGpuCsv(csv, matrix->gpu_count, spec.gpus); !parsed) {
    return tl::unexpected(parsed.error());
  }

  std::vector<internal::NicColumn> nic_columns;
  for (std::size_t c = 0; c < matrix->column_gpu.size(); ++c) {
    if (matrix->column_gpu[c] >= 0) continue;
    internal::NicColumn& column = nic_columns.emplace_back();
    column.label = matrix->column_label[c];
    for (const GpuRow& row : matrix->rows) column.cells.push_back(row.cells[c]);
  }
  if (auto nics = internal::ReadNicColumns(topo_text, nic_columns, spec); !nics) {
    return tl::unexpected(nics.error());
  }

  int inferred_pcie = 0;
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = a + 1; b < n; ++b) {
      LinkSpec link;
      link.a = static_cast<int>(a);
      link.b = static_cast<int>(b);
      const Cell& cell = cells[a][b];
      if (cell.kind == CellKind::kNvlink) {
        link.nvlink_count = cell.nvlinks;
        // topo -m hides the PCIe relation under NVLink. NODE within a socket is the usual
        // layout (one switch or host bridge per GPU); SYS across sockets is certain.
        link.pcie = socket[a] == socket[b] ? PcieRelation::kNode : PcieRelation::kSys;
        ++inferred_pcie;
      } else {
        link.pcie = cell.pcie;
      }
      spec.links.push_back(link);
    }
  }
  if (inferred_pcie > 0) {
    spec.warnings.push_back("PCIe relation of " + std::to_string(inferred_pcie) +
                            " NVLinked GPU pairs is hidden by topo -m; inferred NODE within a "
                            "socket and SYS across sockets");
  }
  InferFabric(spec);
  FillModelFacts(spec, table);
  return spec;
}

}  // namespace

Result<TopologySpec> ParseNvidiaSmi(std::string_view topo_matrix_text,
                                    std::string_view query_gpu_csv, const GpuModelTable& table) {
  try {
    return ParseNvidiaSmiImpl(topo_matrix_text, query_gpu_csv, table);
  } catch (const std::exception& e) {
    // Only allocation failures can get here; the parser itself does not throw.
    return MakeError(std::string("nvidia-smi text: ") + e.what());
  }
}

namespace internal {

Result<TopologySpec> ParseNvidiaSmiText(std::string_view text) {
  const NvidiaSmiParts parts = SplitNvidiaSmiText(text);
  return ParseNvidiaSmi(parts.topo_matrix, parts.query_gpu_csv);
}

}  // namespace internal
}  // namespace linkfit::topology
