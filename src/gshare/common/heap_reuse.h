// Keeps the memory a process frees for its next requests instead of handing it back at once.
//
// glibc's allocator returns the top of its heap to the kernel as soon as more than 128 KiB (later
// twice its largest mapped allocation) lies free there, and maps large allocations afresh each
// time. A server that builds a 600 KB request body, sends it and frees it (a 1x3x224x224 FP32
// tensor) then has those pages faulted in again on every request. Where a page fault is cheap
// that costs little; on virtual machines with shadow page tables it costs 5 to 10 us a page: 3.5
// ms a request in `gshare bench runtime` on the development VM (docs/runtimes.md). With
// KeepFreedMemoryForReuse, allocations below 16 MiB come from the heap, and the heap keeps up to
// 64 MiB free at its top (per arena) before it shrinks.
//
// Threading: call it first thing in main, before any thread starts.
#pragma once

#include <cstdint>

namespace gshare {

inline constexpr std::uint64_t kHeapMapThresholdBytes = std::uint64_t{16} << 20;
inline constexpr std::uint64_t kHeapTrimThresholdBytes = std::uint64_t{64} << 20;

// Sets the two thresholds above. Returns false where the C library refused them (the process
// then runs with its defaults, which are correct, only slower).
bool KeepFreedMemoryForReuse();

}  // namespace gshare
