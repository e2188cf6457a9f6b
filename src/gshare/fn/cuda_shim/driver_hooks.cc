// The driver-level hooks (cuda.h's cuMem* calls) and cuGetProcAddress.
#include "gshare/fn/cuda_shim/driver_hooks.h"

#include <cuda.h>

#include <cstring>
#include <optional>
#include <span>

#include "gshare/fn/cuda_shim/proc_address.h"
#include "gshare/fn/cuda_shim/shim.h"

// <cuda.h> renames cuGetProcAddress to cuGetProcAddress_v2; the shim defines both ABIs.
#undef cuGetProcAddress

namespace gshare::fn::cuda_shim {
namespace {

// The per-thread default stream variants take stream 0 to mean the calling thread's stream.
CUstream PerThread(CUstream stream) { return stream == nullptr ? CU_STREAM_PER_THREAD : stream; }

CUresult AllocateFromSlice(CUdeviceptr* pointer, std::size_t bytes) {
  if (pointer == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  ShimCore* slice = Slice();
  if (slice == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  auto allocated = slice->Allocate(bytes);
  if (!allocated.ok()) return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = static_cast<CUdeviceptr>(*allocated);
  return CUDA_SUCCESS;
}

// Frees memory of the slice once the device is done with it: after the context's work for a
// synchronous free (no stream), after the stream's for an asynchronous one. A synchronization
// error is not the free's: the program meets it at its next synchronizing call.
CUresult FreeToSlice(ShimCore& slice, CUdeviceptr pointer, const CUstream* stream) {
  if (stream == nullptr) {
    SynchronizeDevice();
  } else {
    if (IsCapturing(*stream)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    (void)SynchronizeStream(*stream);
  }
  return slice.Free(static_cast<std::uintptr_t>(pointer)) == ShimCore::FreeOutcome::kFreed
             ? CUDA_SUCCESS
             : CUDA_ERROR_INVALID_VALUE;
}

// The slice's memory, when `pointer` lies in it.
ShimCore* Owner(CUdeviceptr pointer) {
  ShimCore* slice = ConnectedSlice();
  return slice != nullptr && slice->Owns(static_cast<std::uintptr_t>(pointer)) ? slice : nullptr;
}

template <typename Function, typename... Args>
CUresult Forward(Function real, Args... args) {
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  return real(args...);
}

// libcuda's own entry point, or nullptr without a driver.
template <auto kEntry>
auto Real() {
  const CudaDriver* driver = Driver();
  return driver != nullptr ? driver->*kEntry : nullptr;
}

CUresult AllocateAsync(CUdeviceptr* pointer, std::size_t bytes, CUstream stream,
                       decltype(CudaDriver::mem_alloc_async) real) {
  // A graph's allocations belong to the graph: the driver's pool serves them.
  if (!Active() || IsCapturing(stream)) return Forward(real, pointer, bytes, stream);
  return AllocateFromSlice(pointer, bytes);
}

CUresult FreeAsync(CUdeviceptr pointer, CUstream stream,
                   decltype(CudaDriver::mem_free_async) real) {
  ShimCore* slice = Owner(pointer);
  if (slice == nullptr) return Forward(real, pointer, stream);
  return FreeToSlice(*slice, pointer, &stream);
}

}  // namespace
}  // namespace gshare::fn::cuda_shim

extern "C" {

GSHARE_SHIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* pointer, std::size_t bytes) {
  using namespace gshare::fn::cuda_shim;
  if (!Active()) return Forward(Real<&CudaDriver::mem_alloc>(), pointer, bytes);
  return AllocateFromSlice(pointer, bytes);
}

GSHARE_SHIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr pointer) {
  using namespace gshare::fn::cuda_shim;
  ShimCore* slice = Owner(pointer);
  if (slice == nullptr) return Forward(Real<&CudaDriver::mem_free>(), pointer);
  return FreeToSlice(*slice, pointer, nullptr);
}

GSHARE_SHIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* pointer, std::size_t bytes,
                                            CUstream stream) {
  using namespace gshare::fn::cuda_shim;
  return AllocateAsync(pointer, bytes, stream, Real<&CudaDriver::mem_alloc_async>());
}

GSHARE_SHIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* pointer, std::size_t bytes,
                                                 CUstream stream) {
  using namespace gshare::fn::cuda_shim;
  if (!Active()) return Forward(Real<&CudaDriver::mem_alloc_async_ptsz>(), pointer, bytes, stream);
  return AllocateAsync(pointer, bytes, PerThread(stream),
                       Real<&CudaDriver::mem_alloc_async_ptsz>());
}

GSHARE_SHIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) {
  using namespace gshare::fn::cuda_shim;
  return FreeAsync(pointer, stream, Real<&CudaDriver::mem_free_async>());
}

GSHARE_SHIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr pointer, CUstream stream) {
  using namespace gshare::fn::cuda_shim;
  if (Owner(pointer) == nullptr) {
    return Forward(Real<&CudaDriver::mem_free_async_ptsz>(), pointer, stream);
  }
  return FreeAsync(pointer, PerThread(stream), Real<&CudaDriver::mem_free_async_ptsz>());
}

GSHARE_SHIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* pointer, std::size_t* pitch,
                                               std::size_t width_bytes, std::size_t height,
                                               unsigned int element_bytes) {
  using namespace gshare::fn::cuda_shim;
  if (!Active()) {
    return Forward(Real<&CudaDriver::mem_alloc_pitch>(), pointer, pitch, width_bytes, height,
                   element_bytes);
  }
  if (pitch == nullptr || width_bytes == 0 || height == 0 ||
      (element_bytes != 4 && element_bytes != 8 && element_bytes != 16)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const std::optional<PitchedLayout> layout = LayOutPitched(width_bytes, height);
  if (!layout) return CUDA_ERROR_INVALID_VALUE;
  const CUresult allocated = AllocateFromSlice(pointer, layout->total_bytes);
  if (allocated == CUDA_SUCCESS) *pitch = layout->row_bytes;
  return allocated;
}

GSHARE_SHIM_EXPORT CUresult cuMemGetInfo_v2(std::size_t* free_bytes, std::size_t* total_bytes) {
  using namespace gshare::fn::cuda_shim;
  if (!Active()) return Forward(Real<&CudaDriver::mem_get_info>(), free_bytes, total_bytes);
  if (free_bytes == nullptr || total_bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ShimCore* slice = Slice();
  if (slice == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  const SliceUsage usage = slice->usage();
  *total_bytes = usage.quota_bytes;
  *free_bytes = usage.free_bytes();
  return CUDA_SUCCESS;
}

GSHARE_SHIM_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** function,
                                                int cuda_version, cuuint64_t flags,
                                                CUdriverProcAddressQueryResult* status) {
  using namespace gshare::fn::cuda_shim;
  const CUresult found = Forward(Real<&CudaDriver::get_proc_address_v2>(), symbol, function,
                                 cuda_version, flags, status);
  if (found == CUDA_SUCCESS && Active() && function != nullptr && *function != nullptr) {
    if (void* hook = ProcAddressHook(symbol, cuda_version, flags, *function)) *function = hook;
  }
  return found;
}

GSHARE_SHIM_EXPORT CUresult cuGetProcAddress(const char* symbol, void** function, int cuda_version,
                                             cuuint64_t flags) {
  using namespace gshare::fn::cuda_shim;
  const CUresult found =
      Forward(Real<&CudaDriver::get_proc_address>(), symbol, function, cuda_version, flags);
  if (found == CUDA_SUCCESS && Active() && function != nullptr && *function != nullptr) {
    if (void* hook = ProcAddressHook(symbol, cuda_version, flags, *function)) *function = hook;
  }
  return found;
}

}  // extern "C"

namespace gshare::fn::cuda_shim {
namespace {

static_assert(kProcAddressLegacyStream == CU_GET_PROC_ADDRESS_LEGACY_STREAM);
static_assert(kProcAddressPerThreadStream == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);

// The shim's hooks, by the name libcuda exports the hooked function as (HookedAbis()).
struct DriverHook {
  const char* name;
  void* hook;
};

const DriverHook kDriverHooks[] = {
    {"cuMemAlloc_v2", reinterpret_cast<void*>(&cuMemAlloc_v2)},
    {"cuMemFree_v2", reinterpret_cast<void*>(&cuMemFree_v2)},
    {"cuMemAllocAsync", reinterpret_cast<void*>(&cuMemAllocAsync)},
    {"cuMemAllocAsync_ptsz", reinterpret_cast<void*>(&cuMemAllocAsync_ptsz)},
    {"cuMemFreeAsync", reinterpret_cast<void*>(&cuMemFreeAsync)},
    {"cuMemFreeAsync_ptsz", reinterpret_cast<void*>(&cuMemFreeAsync_ptsz)},
    {"cuMemAllocPitch_v2", reinterpret_cast<void*>(&cuMemAllocPitch_v2)},
    {"cuMemGetInfo_v2", reinterpret_cast<void*>(&cuMemGetInfo_v2)},
    {"cuGetProcAddress", reinterpret_cast<void*>(&cuGetProcAddress)},
    {"cuGetProcAddress_v2", reinterpret_cast<void*>(&cuGetProcAddress_v2)},
};

cuuint64_t FlagsFor(StreamVariant stream) {
  switch (stream) {
    case StreamVariant::kNone:
      return CU_GET_PROC_ADDRESS_DEFAULT;
    case StreamVariant::kLegacy:
      return CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    case StreamVariant::kPerThread:
      return CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  }
  return CU_GET_PROC_ADDRESS_DEFAULT;
}

// The real functions behind each hooked ABI (HookedAbis(), in its order): libcuda's export, and
// what its cuGetProcAddress answers for the ABI's version and stream variant (the driver may hand
// out another address for the same function).
struct RealFunction {
  const void* exported = nullptr;
  const void* resolved = nullptr;
};

const RealFunction* RealFunctions() {
  static const RealFunction* const reals = []() -> const RealFunction* {
    const CudaDriver* driver = Driver();
    if (driver == nullptr) return nullptr;
    const std::span<const HookedAbi> abis = HookedAbis();
    auto* found = new RealFunction[abis.size()];  // for the life of the process
    for (std::size_t i = 0; i < abis.size(); ++i) {
      const HookedAbi& abi = abis[i];
      found[i].exported = RealDlsym()(driver->library, abi.exported);
      void* resolved = nullptr;
      if (driver->get_proc_address_v2 != nullptr) {
        CUdriverProcAddressQueryResult status{};
        (void)driver->get_proc_address_v2(abi.base_name, &resolved, abi.since, FlagsFor(abi.stream),
                                          &status);
      } else if (driver->get_proc_address != nullptr) {
        (void)driver->get_proc_address(abi.base_name, &resolved, abi.since, FlagsFor(abi.stream));
      }
      found[i].resolved = resolved;
    }
    return found;
  }();
  return reals;
}

}  // namespace

void* DriverHookNamed(const char* name) {
  for (const DriverHook& entry : kDriverHooks) {
    if (std::strcmp(entry.name, name) == 0) return entry.hook;
  }
  return nullptr;
}

void* DriverHookFor(const void* real) {
  const RealFunction* reals = RealFunctions();
  if (reals == nullptr || real == nullptr) return nullptr;
  const std::span<const HookedAbi> abis = HookedAbis();
  for (std::size_t i = 0; i < abis.size(); ++i) {
    if (reals[i].exported == real || reals[i].resolved == real) {
      return DriverHookNamed(abis[i].exported);
    }
  }
  return nullptr;
}

void* ProcAddressHook(const char* symbol, int cuda_version, cuuint64_t flags, const void* answer) {
  if (const char* exported = HookedEntryPoint(symbol, cuda_version, flags)) {
    return DriverHookNamed(exported);
  }
  return DriverHookFor(answer);
}

}  // namespace gshare::fn::cuda_shim
