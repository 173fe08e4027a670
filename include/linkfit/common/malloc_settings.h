#pragma once

// Process-wide glibc malloc settings for the two phases of `linkfit serve` (issue 11).
//
// Start-up builds and frees large temporaries: the YAML trees of the cluster and state files, or
// the API server's list pages (megabytes each) read on the reflectors' threads. glibc's default
// mmap threshold is dynamic: once a block of megabytes that was mmapped is freed, blocks up to its
// size come from the allocating thread's arena, and that arena's top is trimmed only past twice
// that size; malloc_trim trims the top of the main arena only. Freed list pages then stay resident
// (about 6 MB at 5,000 nodes). UseStartUpMallocSettings fixes the threshold at 128 KiB, so that
// every large temporary is mmapped and goes back to the system when freed.
//
// Serving wants the opposite: a fixed 128 KiB threshold gives every large request body an mmap,
// its page faults and an munmap (filter at 5,000 names 17 % slower at p50, non-cache filter of
// 1,000 nodes 20 %; bench/RESULTS.md). UseServingMallocSettings releases the start-up's free
// memory and then fixes thresholds high enough that request bodies are reused from the arenas, as
// the dynamic threshold would after the first large body.
//
// Thread-safety: process-wide; call from one thread at a time.

namespace linkfit {

// Fixes the mmap threshold at 128 KiB (and the trim threshold at 128 KiB).
void UseStartUpMallocSettings();

// Returns the free memory of every arena to the system (malloc_trim), then fixes the mmap
// threshold at 32 MiB (glibc's largest) and the trim threshold at 64 MiB, and turns fastbins off
// (M_MXFAST 0; small blocks still come from the per-thread caches): a free of a block past 64 KB
// (a request frees several) consolidates the fastbins, walking chunks spread over the heap.
// Measured: prioritize at 5,000 names 3-4 % faster at p50, filter 1-2 % (bench/RESULTS.md; the
// cache simulation that suggested it counted start-up's consolidations too, most of them).
void UseServingMallocSettings();

// Returns the free memory of every arena to the system now (malloc_trim): for after freeing a rare
// large block, such as the buffers a request of full Node objects grew, which the serving
// thresholds would otherwise keep resident. Costs a walk of the heap (milliseconds).
void ReturnFreeMemory();

}  // namespace linkfit
