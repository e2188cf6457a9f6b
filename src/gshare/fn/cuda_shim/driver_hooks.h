// The CUDA allocator shim's driver-level hooks, as dlsym and cuGetProcAddress hand them out.
//
// A CUDA 12 runtime reaches the driver through cuGetProcAddress, which it finds with
// dlsym(libcuda, "cuGetProcAddress_v2"): neither goes through symbol interposition, so the shim
// hands out its hooks at both doors. The hooked entry points: cuMemAlloc_v2, cuMemFree_v2,
// cuMemAllocAsync(_ptsz), cuMemFreeAsync(_ptsz), cuMemAllocPitch_v2, cuMemGetInfo_v2,
// cuGetProcAddress and cuGetProcAddress_v2.
#pragma once

namespace gshare::fn::cuda_shim {

// The shim's hook for the driver entry point exported as `name` ("cuMemAlloc_v2"); nullptr when
// the shim does not hook it.
void* DriverHookNamed(const char* name);
// The shim's hook for the driver function at `real` (what cuGetProcAddress returned); nullptr
// when the shim does not hook it (another function, another ABI version of it).
void* DriverHookFor(const void* real);

}  // namespace gshare::fn::cuda_shim
