#include "linkfit/common/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "linkfit/common/mutex.h"

namespace linkfit::log {
namespace {

Level LevelFromEnvironment() {
  const char* value = std::getenv("LINKFIT_LOG_LEVEL");
  if (value == nullptr) return Level::kInfo;
  if (std::strcmp(value, "debug") == 0) return Level::kDebug;
  if (std::strcmp(value, "warning") == 0) return Level::kWarning;
  if (std::strcmp(value, "error") == 0) return Level::kError;
  if (std::strcmp(value, "off") == 0) return Level::kOff;
  return Level::kInfo;
}

std::atomic<int>& CurrentLevel() {
  static std::atomic<int> level{static_cast<int>(LevelFromEnvironment())};
  return level;
}

const char* LevelName(Level level) {
  switch (level) {
    case Level::kDebug:
      return "DEBUG";
    case Level::kInfo:
      return "INFO";
    case Level::kWarning:
      return "WARN";
    case Level::kError:
      return "ERROR";
    case Level::kOff:
      break;
  }
  return "";
}

}  // namespace

void SetLevel(Level level) { CurrentLevel().store(static_cast<int>(level)); }

Level GetLevel() { return static_cast<Level>(CurrentLevel().load()); }

bool Enabled(Level level) { return static_cast<int>(level) >= CurrentLevel().load(); }

void Write(Level level, std::string_view message) {
  if (!Enabled(level) || level == Level::kOff) return;
  static Mutex mutex;
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &utc);
  MutexLock lock(mutex);
  std::fprintf(stderr, "%s %s %.*s\n", stamp, LevelName(level), static_cast<int>(message.size()),
               message.data());
}

}  // namespace linkfit::log
