// The copy engine of an emulated GPU: how its copies move bytes.
//
// A GPU's copy engine is a DMA unit: it writes memory without passing through the CPU's caches.
// The emulated engine does the same with non-temporal (streaming) stores for large copies, which
// is also what the C library's memcpy does for copies above its non-temporal threshold (a large
// fraction of the last-level cache). Without this, a restore cut into chunks would run through
// the caches while one large memcpy would not, and the comparison would measure the C library's
// size heuristic instead of the restore engine. Small copies, and CPUs without AVX2, use memcpy.
//
// Which is faster for large copies depends on the machine (its caches, its memory, its virtual
// machine's CPU model): the routine for copies of 1 MiB and more is a process-wide setting,
// streaming by default, that a node sets once at start from a measurement of both
// (copy_calibration.h).
#pragma once

#include <cstddef>

namespace gshare {

// How the copy engine copies 1 MiB and more.
enum class CopyRoutine {
  kStreaming,  // non-temporal stores (AVX-512 or AVX2; memcpy on a CPU with neither)
  kMemcpy,     // the C library's memcpy
};
const char* CopyRoutineName(CopyRoutine routine);  // "streaming", "memcpy"

// The routine for large copies, for the whole process. Thread-safe.
void SetCopyRoutine(CopyRoutine routine);
CopyRoutine ActiveCopyRoutine();

// Copies `bytes` from `source` to `destination` (not overlapping) with the active routine.
// Thread-safe.
void CopyEngineCopy(void* destination, const void* source, std::size_t bytes);
// The same with `routine`, whatever the active one (for measuring them).
void CopyEngineCopyWith(CopyRoutine routine, void* destination, const void* source,
                        std::size_t bytes);

// The instruction set the copy engine uses on this CPU: "avx512", "avx2" or "memcpy".
const char* CopyEngineKind();

}  // namespace gshare
