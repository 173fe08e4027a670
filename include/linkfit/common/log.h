#pragma once

// A minimal leveled logger writing one line per message to stderr. Never call it per node or per
// request on a hot path; it takes a mutex per line.
//
// Thread-safety: all functions are safe to call concurrently.

#include <string_view>

namespace linkfit::log {

enum class Level { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kOff = 4 };

// Sets the minimum level that is written (default kInfo; LINKFIT_LOG_LEVEL=debug|info|warning|
// error|off in the environment overrides the default at the first call).
void SetLevel(Level level);
Level GetLevel();
bool Enabled(Level level);

void Write(Level level, std::string_view message);

inline void Debug(std::string_view message) { Write(Level::kDebug, message); }
inline void Info(std::string_view message) { Write(Level::kInfo, message); }
inline void Warning(std::string_view message) { Write(Level::kWarning, message); }
inline void Error(std::string_view message) { Write(Level::kError, message); }

}  // namespace linkfit::log
