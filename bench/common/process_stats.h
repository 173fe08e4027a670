#pragma once

// What a benchmark reads of its own process: CPU time and the heap malloc has handed out.
//
// Thread-safety: plain functions; the figures are the whole process's.

#include <malloc.h>
#include <time.h>

namespace linkfit::bench {

// CPU seconds the process has used, all threads.
inline double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The bytes malloc has handed out and not had back: blocks in its arenas, and blocks it mmapped
// (a mmapped block counts whole, touched or not).
struct HeapInUse {
  double arenas = 0;
  double mmapped = 0;
  static HeapInUse Now() {
    const struct mallinfo2 info = mallinfo2();
    return {static_cast<double>(info.uordblks), static_cast<double>(info.hblkhd)};
  }
};

}  // namespace linkfit::bench
