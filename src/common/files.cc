#include "linkfit/common/files.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace linkfit {
namespace {

std::string SizeText(std::size_t bytes) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  return std::to_string(bytes) + " bytes";
}

}  // namespace

Result<std::string> ReadFile(const std::string& path, std::size_t max_bytes) {
  const auto cannot_read = [&path](int error) {
    return MakeError("cannot read " + path + ": " +
                     (error != 0 ? std::strerror(error) : "read failed"));
  };
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) return cannot_read(EISDIR);
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) return cannot_read(errno);
  std::string text;
  char buffer[16384];
  while (in) {
    in.read(buffer, sizeof buffer);
    const auto count = static_cast<std::size_t>(in.gcount());
    if (count > max_bytes - text.size()) {
      return MakeError(path + " is larger than " + SizeText(max_bytes));
    }
    text.append(buffer, count);
  }
  if (in.bad()) return cannot_read(errno);
  return text;
}

}  // namespace linkfit
