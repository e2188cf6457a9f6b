// Keeps the memory a process frees for its next requests instead of handing it back at once.
//
// glibc's allocator gives the free top of a heap back to the kernel once it exceeds its trim
// threshold, which it sets to twice the largest single allocation it has seen mapped (128 KiB at
// first). A server that builds a few 600 KB bodies for a request (a 1x3x224x224 FP32 tensor: the
// input, its encoding) and frees them together then has those pages faulted in again on every
// request. Where a page fault is cheap that costs little; on virtual machines with shadow page
// tables it costs about 6 us a page, 3.5 ms a request in `gshare bench runtime`
// (docs/runtimes.md, "Measured"). KeepFreedMemoryForReuse fixes both thresholds: allocations below
// 32 MiB (the most glibc would raise its own threshold to) come from the heap, and a heap keeps
// up to 16 MiB free at its top before it shrinks.
//
// The cost is memory kept: up to 16 MiB free at the top of each heap, one or more per malloc
// arena (glibc gives threads arenas of their own, up to 8 per core), besides free chunks below
// live ones, which no setting gives back. The gshare program calls it, and so do the bundled
// runtimes (gshare-function; the Python runtimes, kserve_unix.keep_freed_memory); a tenant's
// own program is left as it is.
//
// Threading: call it first thing in main, before any thread starts.
#pragma once

#include <cstdint>

namespace gshare {

inline constexpr std::uint64_t kHeapMapThresholdBytes = std::uint64_t{32} << 20;
inline constexpr std::uint64_t kHeapTrimThresholdBytes = std::uint64_t{16} << 20;

// Sets the two thresholds above. Returns false where the C library refused either (a sanitizer's
// allocator does; the process then runs with what it had, which is correct, only slower).
bool KeepFreedMemoryForReuse();

}  // namespace gshare
