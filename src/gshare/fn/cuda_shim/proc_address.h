// Which of the shim's hooks answers a cuGetProcAddress query, decided from the query alone.
//
// cuGetProcAddress(symbol, pfn, cudaVersion, flags) takes a driver function's base name
// ("cuMemAlloc") and returns the newest ABI of it introduced at or before cudaVersion, in the
// variant the flags ask for: CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM the per-thread default
// stream one (_ptsz) where there is one, CU_GET_PROC_ADDRESS_LEGACY_STREAM or
// CU_GET_PROC_ADDRESS_DEFAULT (the driver's default; <cuda.h> turns it into the per-thread flag in
// code built for the per-thread stream) the legacy one. A runtime asks with its own version
// (13000 from CUDA 13) and both flags, so the answer cannot be recognized by comparing addresses
// with what the driver answered for one version and one flag: the shim decides by name, version
// and flags, and compares addresses only for what the name does not decide.
//
// The ABIs the shim hooks, and since when (the versions <cuda.h> maps the names to):
//   cuMemAlloc, cuMemFree, cuMemAllocPitch, cuMemGetInfo   _v2 since 3020
//   cuMemAllocAsync, cuMemFreeAsync                        since 11020, legacy and _ptsz
//   cuGetProcAddress                                       since 11030; _v2 since 12000
// An older ABI of one of these (cuMemAlloc before 3020: 32-bit sizes) is not hooked.
#pragma once

#include <cstdint>
#include <span>

namespace gshare::fn::cuda_shim {

// The stream semantics of a hooked ABI.
enum class StreamVariant {
  kNone,       // takes no stream: the same function for both flags
  kLegacy,     // the legacy default stream
  kPerThread,  // the per-thread default stream (_ptsz)
};

struct HookedAbi {
  const char* exported;   // as libcuda exports it and the shim hooks it ("cuMemAlloc_v2")
  const char* base_name;  // as cuGetProcAddress knows it ("cuMemAlloc")
  int since;              // the CUDA version that introduced this ABI (3020)
  StreamVariant stream;
};

// Every ABI the shim hooks.
std::span<const HookedAbi> HookedAbis();

// cuGetProcAddress's flags (CUdriverProcAddress_flags; driver_hooks.cc checks them against
// <cuda.h>).
inline constexpr std::uint64_t kProcAddressLegacyStream = 1 << 0;
inline constexpr std::uint64_t kProcAddressPerThreadStream = 1 << 1;

// The exported name of the hooked ABI that cuGetProcAddress(symbol, cuda_version, flags) answers
// with ("cuMemAllocAsync_ptsz"), or nullptr when the query does not decide one: a name the shim
// does not hook (a null one among them), a version older than every hooked ABI of it, or both
// stream flags at once for a function with stream variants.
const char* HookedEntryPoint(const char* symbol, int cuda_version, std::uint64_t flags);

}  // namespace gshare::fn::cuda_shim
