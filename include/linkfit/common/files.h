#pragma once

// Reading a whole file the way every reader of outside input in linkfit does: a clear error that
// names the path and the reason, and a size limit, so that a path to /dev/zero or a huge file
// gives an error instead of reading forever.
//
// Thread-safety: a pure function of the file system.

#include <cstddef>
#include <limits>
#include <string>

#include "linkfit/common/result.h"

namespace linkfit {

inline constexpr std::size_t kNoSizeLimit = std::numeric_limits<std::size_t>::max();

// Returns the bytes of the file at `path`, refusing one past `max_bytes`. Errors:
// "cannot read <path>: <reason>" (a directory, a missing or unreadable file),
// "<path> is larger than <max_bytes>" (in MiB where it is a whole number of them).
Result<std::string> ReadFile(const std::string& path, std::size_t max_bytes = kNoSizeLimit);

}  // namespace linkfit
