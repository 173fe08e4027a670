#pragma once

// Invariants the code relies on, checked where breaking them would corrupt state silently:
//
//   LINKFIT_CHECK(condition, message)   always on; on failure writes
//                                       "CHECK failed at file:line: condition: message" to stderr
//                                       and aborts (a core, a restart, the stores rebuilt from the
//                                       API server: better than devices handed out twice).
//   LINKFIT_DCHECK(condition, message)  the same in builds without NDEBUG (dev, asan, tsan,
//                                       fuzz); in release builds the condition is not evaluated
//                                       (it still compiles), so hot paths may carry it.
//
// `message` is anything a std::string_view is made from; it is built only on failure. These are
// for broken invariants (a bug in linkfit), never for bad input: input errors are values
// (Result) that name the problem.
//
// Thread-safety: both macros may be used from any thread.

#include <string_view>

namespace linkfit::internal {

[[noreturn]] void CheckFailed(const char* file, int line, const char* condition,
                              std::string_view message);

}  // namespace linkfit::internal

#define LINKFIT_CHECK(condition, message)                                          \
  do {                                                                             \
    if (!(condition)) [[unlikely]] {                                               \
      ::linkfit::internal::CheckFailed(__FILE__, __LINE__, #condition, (message)); \
    }                                                                              \
  } while (false)

#ifdef NDEBUG
#define LINKFIT_DCHECK(condition, message) \
  do {                                     \
    if (false) {                           \
      static_cast<void>(condition);        \
      static_cast<void>(message);          \
    }                                      \
  } while (false)
#else
#define LINKFIT_DCHECK(condition, message) LINKFIT_CHECK(condition, message)
#endif
