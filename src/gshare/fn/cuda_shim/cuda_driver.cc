#include "gshare/fn/cuda_shim/cuda_driver.h"

#include <dlfcn.h>

namespace gshare::fn::cuda_shim {
namespace {

template <typename Function>
void Resolve(CudaDriver::Lookup lookup, void* library, Function& slot, const char* name) {
  slot = reinterpret_cast<Function>(lookup(library, name));
}

}  // namespace

Result<CudaDriver> CudaDriver::Load(Lookup lookup) {
  CudaDriver driver;
  driver.library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver.library == nullptr) {
    const char* error = ::dlerror();
    return Unavailable(std::string("no CUDA driver: ") +
                       (error != nullptr ? error : "libcuda.so.1"));
  }
  void* const library = driver.library;
  Resolve(lookup, library, driver.init, "cuInit");
  Resolve(lookup, library, driver.device_get, "cuDeviceGet");
  Resolve(lookup, library, driver.primary_context_retain, "cuDevicePrimaryCtxRetain");
  Resolve(lookup, library, driver.context_get_current, "cuCtxGetCurrent");
  Resolve(lookup, library, driver.context_push_current, "cuCtxPushCurrent_v2");
  Resolve(lookup, library, driver.context_pop_current, "cuCtxPopCurrent_v2");
  Resolve(lookup, library, driver.context_synchronize, "cuCtxSynchronize");
  Resolve(lookup, library, driver.stream_synchronize, "cuStreamSynchronize");
  Resolve(lookup, library, driver.stream_is_capturing, "cuStreamIsCapturing");
  Resolve(lookup, library, driver.get_error_name, "cuGetErrorName");
  Resolve(lookup, library, driver.mem_get_allocation_granularity, "cuMemGetAllocationGranularity");
  Resolve(lookup, library, driver.mem_address_reserve, "cuMemAddressReserve");
  Resolve(lookup, library, driver.mem_address_free, "cuMemAddressFree");
  Resolve(lookup, library, driver.mem_import_from_shareable_handle,
          "cuMemImportFromShareableHandle");
  Resolve(lookup, library, driver.mem_map, "cuMemMap");
  Resolve(lookup, library, driver.mem_unmap, "cuMemUnmap");
  Resolve(lookup, library, driver.mem_release, "cuMemRelease");
  Resolve(lookup, library, driver.mem_set_access, "cuMemSetAccess");
  const void* const required[] = {
      reinterpret_cast<const void*>(driver.init),
      reinterpret_cast<const void*>(driver.device_get),
      reinterpret_cast<const void*>(driver.primary_context_retain),
      reinterpret_cast<const void*>(driver.context_get_current),
      reinterpret_cast<const void*>(driver.context_push_current),
      reinterpret_cast<const void*>(driver.context_pop_current),
      reinterpret_cast<const void*>(driver.context_synchronize),
      reinterpret_cast<const void*>(driver.stream_synchronize),
      reinterpret_cast<const void*>(driver.stream_is_capturing),
      reinterpret_cast<const void*>(driver.get_error_name),
      reinterpret_cast<const void*>(driver.mem_get_allocation_granularity),
      reinterpret_cast<const void*>(driver.mem_address_reserve),
      reinterpret_cast<const void*>(driver.mem_address_free),
      reinterpret_cast<const void*>(driver.mem_import_from_shareable_handle),
      reinterpret_cast<const void*>(driver.mem_map),
      reinterpret_cast<const void*>(driver.mem_unmap),
      reinterpret_cast<const void*>(driver.mem_release),
      reinterpret_cast<const void*>(driver.mem_set_access)};
  for (const void* entry : required) {
    if (entry == nullptr) {
      return Unavailable(
          "the CUDA driver lacks the virtual memory calls the shim needs (CUDA 10.2 "
          "or newer)");
    }
  }
  Resolve(lookup, library, driver.mem_alloc, "cuMemAlloc_v2");
  Resolve(lookup, library, driver.mem_free, "cuMemFree_v2");
  Resolve(lookup, library, driver.mem_alloc_async, "cuMemAllocAsync");
  Resolve(lookup, library, driver.mem_alloc_async_ptsz, "cuMemAllocAsync_ptsz");
  Resolve(lookup, library, driver.mem_free_async, "cuMemFreeAsync");
  Resolve(lookup, library, driver.mem_free_async_ptsz, "cuMemFreeAsync_ptsz");
  Resolve(lookup, library, driver.mem_alloc_pitch, "cuMemAllocPitch_v2");
  Resolve(lookup, library, driver.mem_get_info, "cuMemGetInfo_v2");
  Resolve(lookup, library, driver.get_proc_address, "cuGetProcAddress");
  Resolve(lookup, library, driver.get_proc_address_v2, "cuGetProcAddress_v2");
  return driver;
}

std::string CudaDriver::ErrorText(std::string_view call, CUresult result) const {
  const char* name = nullptr;
  if (get_error_name == nullptr || get_error_name(result, &name) != CUDA_SUCCESS ||
      name == nullptr) {
    name = "unknown CUDA error";
  }
  return std::string(call) + ": " + name + " (" + std::to_string(static_cast<int>(result)) + ")";
}

Status CudaDriver::Check(std::string_view call, CUresult result) const {
  if (result == CUDA_SUCCESS) return Status::Ok();
  return Internal("cuda shim: " + ErrorText(call, result));
}

ScopedContext::ScopedContext(const CudaDriver& driver, CUcontext context)
    : driver_(driver), result_(driver.context_push_current(context)) {}

ScopedContext::~ScopedContext() {
  if (result_ != CUDA_SUCCESS) return;
  CUcontext popped = nullptr;
  (void)driver_.context_pop_current(&popped);
}

}  // namespace gshare::fn::cuda_shim
