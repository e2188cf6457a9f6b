// The CUDA allocator shim's driver-level hooks, as dlsym and cuGetProcAddress hand them out.
//
// A CUDA 12 runtime reaches the driver through cuGetProcAddress, which it finds with
// dlsym(libcuda, "cuGetProcAddress_v2"): neither goes through symbol interposition, so the shim
// hands out its hooks at both doors. The hooked entry points: cuMemAlloc_v2, cuMemFree_v2,
// cuMemAllocAsync(_ptsz), cuMemFreeAsync(_ptsz), cuMemAllocPitch_v2, cuMemGetInfo_v2,
// cuGetProcAddress and cuGetProcAddress_v2 (proc_address.h).
#pragma once

#include <cuda.h>

namespace gshare::fn::cuda_shim {

// The shim's hook for the driver entry point exported as `name` ("cuMemAlloc_v2"); nullptr when
// the shim does not hook it.
void* DriverHookNamed(const char* name);
// The shim's hook for the driver function at `real` (what cuGetProcAddress returned); nullptr
// when the shim does not hook it (another function, another ABI version of it).
void* DriverHookFor(const void* real);
// The hook to hand out where cuGetProcAddress(symbol, cuda_version, flags) answered `answer`:
// decided by the query (HookedEntryPoint, proc_address.h), else by the answer's address
// (DriverHookFor); nullptr to hand out the answer itself.
void* ProcAddressHook(const char* symbol, int cuda_version, cuuint64_t flags, const void* answer);

}  // namespace gshare::fn::cuda_shim
