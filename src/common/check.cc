#include "linkfit/common/check.h"

#include <cstdio>
#include <cstdlib>

namespace linkfit::internal {

void CheckFailed(const char* file, int line, const char* condition, std::string_view message) {
  // Straight to stderr, not through log::Write: the logger's own state may be what broke, and
  // the line must be out before abort().
  std::fprintf(stderr, "CHECK failed at %s:%d: %s: %.*s\n", file, line, condition,
               static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
  std::abort();
}

}  // namespace linkfit::internal
