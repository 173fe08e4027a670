#include "linkfit/common/malloc_settings.h"

#include <malloc.h>

namespace linkfit {

void UseStartUpMallocSettings() {
  mallopt(M_MMAP_THRESHOLD, 128 << 10);
  mallopt(M_TRIM_THRESHOLD, 128 << 10);
}

void UseServingMallocSettings() {
  malloc_trim(0);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  mallopt(M_MXFAST, 0);
}

void ReturnFreeMemory() { malloc_trim(0); }

}  // namespace linkfit
