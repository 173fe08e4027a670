// ParseTopologyText() and LoadTopologyFile() (spec.h): the format sniffing in front of the JSON
// document parser (document.cc) and the nvidia-smi parser (nvidia_smi.cc).

#include <cstddef>
#include <exception>
#include <ios>
#include <string>
#include <string_view>

#include "linkfit/common/files.h"
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
  return ReadFile(path, kMaxFileBytes);
}

Result<TopologySpec> LoadTopologyFile(const std::string& path) {
  auto text = ReadTopologyFile(path);
  if (!text) return tl::unexpected(text.error());
  Result<TopologySpec> spec = ParseTopologyText(*text);
  if (!spec) return WithContext(spec.error(), path);
  return spec;
}

}  // namespace linkfit::topology
