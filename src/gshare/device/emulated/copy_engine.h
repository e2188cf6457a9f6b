// The copy engine of an emulated GPU: how its copies move bytes.
//
// A GPU's copy engine is a DMA unit: it writes memory without passing through the CPU's caches.
// The emulated engine does the same with non-temporal (streaming) stores for large copies, which
// is also what the C library's memcpy does for copies above its non-temporal threshold (a large
// fraction of the last-level cache). Without this, a restore cut into chunks would run through
// the caches while one large memcpy would not, and the comparison would measure the C library's
// size heuristic instead of the restore engine. Small copies, and CPUs without AVX2, use memcpy.
#pragma once

#include <cstddef>

namespace gshare {

// Copies `bytes` from `source` to `destination` (not overlapping). Thread-safe.
void CopyEngineCopy(void* destination, const void* source, std::size_t bytes);

// The instruction set the copy engine uses on this CPU: "avx512", "avx2" or "memcpy".
const char* CopyEngineKind();

}  // namespace gshare
