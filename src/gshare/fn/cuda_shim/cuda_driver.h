// CudaDriver: the CUDA driver entry points the CUDA allocator shim calls, resolved at run time
// from libcuda.so.1.
//
// The shim links no CUDA library: a process without a driver still loads it, and the shim never
// binds to its own copy of a symbol it interposes. Only types come from <cuda.h>. The entry
// points the shim interposes are resolved here too: these are libcuda's own, the ones a hook
// forwards to.
//
// Threading: Load once; the table does not change afterwards and may be read from any thread.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "gshare/common/status.h"

namespace gshare::fn::cuda_shim {

struct CudaDriver {
  using Lookup = void* (*)(void* handle, const char* name) noexcept;

  // Opens libcuda.so.1 and resolves every entry point through `lookup` (the real dlsym).
  // Unavailable when the library or an entry point the shim needs is missing.
  static Result<CudaDriver> Load(Lookup lookup);

  // "cuMemMap: CUDA_ERROR_INVALID_VALUE (1)".
  std::string ErrorText(std::string_view call, CUresult result) const;
  // OK for CUDA_SUCCESS; otherwise Internal, naming the call and the driver's error.
  Status Check(std::string_view call, CUresult result) const;

  void* library = nullptr;

  CUresult (*init)(unsigned int flags) = nullptr;
  CUresult (*device_get)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*primary_context_retain)(CUcontext* context, CUdevice device) = nullptr;
  CUresult (*context_get_current)(CUcontext* context) = nullptr;
  CUresult (*context_push_current)(CUcontext context) = nullptr;
  CUresult (*context_pop_current)(CUcontext* context) = nullptr;
  CUresult (*context_synchronize)() = nullptr;
  CUresult (*stream_synchronize)(CUstream stream) = nullptr;
  CUresult (*stream_is_capturing)(CUstream stream, CUstreamCaptureStatus* status) = nullptr;
  CUresult (*get_error_name)(CUresult result, const char** name) = nullptr;
  CUresult (*mem_get_allocation_granularity)(std::size_t* granularity,
                                             const CUmemAllocationProp* properties,
                                             CUmemAllocationGranularity_flags option) = nullptr;
  CUresult (*mem_address_reserve)(CUdeviceptr* address, std::size_t bytes, std::size_t alignment,
                                  CUdeviceptr hint, unsigned long long flags) = nullptr;
  CUresult (*mem_address_free)(CUdeviceptr address, std::size_t bytes) = nullptr;
  CUresult (*mem_import_from_shareable_handle)(CUmemGenericAllocationHandle* handle,
                                               void* os_handle,
                                               CUmemAllocationHandleType kind) = nullptr;
  CUresult (*mem_map)(CUdeviceptr address, std::size_t bytes, std::size_t offset,
                      CUmemGenericAllocationHandle handle, unsigned long long flags) = nullptr;
  CUresult (*mem_unmap)(CUdeviceptr address, std::size_t bytes) = nullptr;
  CUresult (*mem_release)(CUmemGenericAllocationHandle handle) = nullptr;
  CUresult (*mem_set_access)(CUdeviceptr address, std::size_t bytes, const CUmemAccessDesc* access,
                             std::size_t count) = nullptr;

  // Interposed by the shim; libcuda's own. Null when this driver lacks one.
  CUresult (*mem_alloc)(CUdeviceptr* pointer, std::size_t bytes) = nullptr;  // cuMemAlloc_v2
  CUresult (*mem_free)(CUdeviceptr pointer) = nullptr;                       // cuMemFree_v2
  CUresult (*mem_alloc_async)(CUdeviceptr* pointer, std::size_t bytes, CUstream stream) = nullptr;
  CUresult (*mem_alloc_async_ptsz)(CUdeviceptr* pointer, std::size_t bytes,
                                   CUstream stream) = nullptr;
  CUresult (*mem_free_async)(CUdeviceptr pointer, CUstream stream) = nullptr;
  CUresult (*mem_free_async_ptsz)(CUdeviceptr pointer, CUstream stream) = nullptr;
  CUresult (*mem_alloc_pitch)(CUdeviceptr* pointer, std::size_t* pitch, std::size_t width_bytes,
                              std::size_t height, unsigned int element_bytes) = nullptr;
  CUresult (*mem_get_info)(std::size_t* free_bytes, std::size_t* total_bytes) = nullptr;
  CUresult (*get_proc_address)(const char* symbol, void** function, int cuda_version,
                               cuuint64_t flags) = nullptr;
  CUresult (*get_proc_address_v2)(const char* symbol, void** function, int cuda_version,
                                  cuuint64_t flags,
                                  CUdriverProcAddressQueryResult* status) = nullptr;
};

// Makes `context` current on the calling thread for its scope.
class ScopedContext {
 public:
  ScopedContext(const CudaDriver& driver, CUcontext context);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

  CUresult result() const { return result_; }

 private:
  const CudaDriver& driver_;
  CUresult result_;
};

}  // namespace gshare::fn::cuda_shim
