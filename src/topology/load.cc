// ParseTopologyText() and LoadTopologyFile() (spec.h): the format sniffing in front of the JSON
// document parser (document.cc) and the nvidia-smi parser (nvidia_smi.cc).

#include <cstddef>
#include <exception>
#include <fstream>
#include <ios>
#include <sstream>
#include <string>
#include <string_view>

#include "linkfit/topology/spec.h"
#include "topology/nvidia_smi_text.h"

namespace linkfit::topology {
namespace {

// Topology files are a few KiB; the bound keeps a wrong path (a log, a device) from being slurped.
constexpr std::size_t kMaxFileBytes = std::size_t{16} << 20;

bool LooksLikeJson(std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 byte order mark
  for (const char c : text) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    return c == '{';
  }
  return false;
}

}  // namespace

Result<TopologySpec> ParseTopologyText(std::string_view text) {
  if (LooksLikeJson(text)) return ParseTopologyDocument(text);
  return internal::ParseNvidiaSmiText(text);
}

Result<std::string> ReadTopologyFile(const std::string& path) {
  try {
    std::ifstream file(path, std::ios::binary);
    if (!file) return MakeError(path + ": cannot open file");
    std::ostringstream contents;
    char buffer[64 * 1024];
    std::size_t total = 0;
    while (file.read(buffer, sizeof buffer) || file.gcount() > 0) {
      const auto count = static_cast<std::size_t>(file.gcount());
      total += count;
      if (total > kMaxFileBytes) {
        return MakeError(path + ": larger than " + std::to_string(kMaxFileBytes >> 20) +
                         " MiB; not a topology file");
      }
      contents.write(buffer, file.gcount());
    }
    if (file.bad()) return MakeError(path + ": read error");
    return std::move(contents).str();
  } catch (const std::exception& e) {
    return MakeError(path + ": " + e.what());
  }
}

Result<TopologySpec> LoadTopologyFile(const std::string& path) {
  auto text = ReadTopologyFile(path);
  if (!text) return tl::unexpected(text.error());
  Result<TopologySpec> spec = ParseTopologyText(*text);
  if (!spec) return WithContext(spec.error(), path);
  return spec;
}

}  // namespace linkfit::topology
