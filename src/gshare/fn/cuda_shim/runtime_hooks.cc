// The runtime-level hooks (cuda_runtime_api.h's cudaMalloc family), for programs that load the
// shared CUDA runtime (libcudart.so). A program that links the runtime statically calls its own
// copy directly; its allocations reach the shim at the driver level (driver_hooks.cc).
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdint>

#include "gshare/fn/cuda_shim/shim.h"

namespace gshare::fn::cuda_shim {
namespace {

// The next definition of a runtime function after the shim's (libcudart's), looked up once.
template <typename Function>
class NextDefinition {
 public:
  explicit NextDefinition(const char* name) : name_(name) {}
  Function get() {
    void* found = found_.load(std::memory_order_acquire);
    if (found == nullptr) {
      found = RealDlsym()(RTLD_NEXT, name_);
      found_.store(found, std::memory_order_release);
    }
    return reinterpret_cast<Function>(found);
  }

 private:
  const char* const name_;
  std::atomic<void*> found_{nullptr};
};

NextDefinition<cudaError_t (*)(void**, std::size_t)> next_malloc("cudaMalloc");
NextDefinition<cudaError_t (*)(void*)> next_free("cudaFree");
NextDefinition<cudaError_t (*)(void**, std::size_t, cudaStream_t)> next_malloc_async(
    "cudaMallocAsync");
NextDefinition<cudaError_t (*)(void**, std::size_t, cudaStream_t)> next_malloc_async_ptsz(
    "cudaMallocAsync_ptsz");
NextDefinition<cudaError_t (*)(void*, cudaStream_t)> next_free_async("cudaFreeAsync");
NextDefinition<cudaError_t (*)(void*, cudaStream_t)> next_free_async_ptsz("cudaFreeAsync_ptsz");
NextDefinition<cudaError_t (*)(void**, std::size_t*, std::size_t, std::size_t)> next_malloc_pitch(
    "cudaMallocPitch");
NextDefinition<cudaError_t (*)(std::size_t*, std::size_t*)> next_mem_get_info("cudaMemGetInfo");

template <typename Function, typename... Args>
cudaError_t Forward(Function real, Args... args) {
  if (real == nullptr) return cudaErrorInitializationError;
  return real(args...);
}

cudaStream_t PerThread(cudaStream_t stream) {
  return stream == nullptr ? cudaStreamPerThread : stream;
}

// cudaMalloc's contract: 0 bytes is a null pointer and success.
cudaError_t AllocateFromSlice(void** pointer, std::size_t bytes) {
  if (pointer == nullptr) return cudaErrorInvalidValue;
  if (bytes == 0) {
    *pointer = nullptr;
    return cudaSuccess;
  }
  ShimCore* slice = Slice();
  if (slice == nullptr) return cudaErrorMemoryAllocation;
  auto allocated = slice->Allocate(bytes);
  if (!allocated.ok()) return cudaErrorMemoryAllocation;
  *pointer = reinterpret_cast<void*>(*allocated);
  return cudaSuccess;
}

ShimCore* Owner(const void* pointer) {
  ShimCore* slice = ConnectedSlice();
  return slice != nullptr && slice->Owns(reinterpret_cast<std::uintptr_t>(pointer)) ? slice
                                                                                    : nullptr;
}

cudaError_t Freed(ShimCore& slice, void* pointer) {
  return slice.Free(reinterpret_cast<std::uintptr_t>(pointer)) == ShimCore::FreeOutcome::kFreed
             ? cudaSuccess
             : cudaErrorInvalidValue;
}

cudaError_t AllocateAsync(void** pointer, std::size_t bytes, cudaStream_t stream,
                          cudaError_t (*real)(void**, std::size_t, cudaStream_t)) {
  // A graph's allocations belong to the graph: the runtime's pool serves them.
  if (!Active() || IsCapturing(stream)) return Forward(real, pointer, bytes, stream);
  return AllocateFromSlice(pointer, bytes);
}

cudaError_t FreeAsync(void* pointer, cudaStream_t stream,
                      cudaError_t (*real)(void*, cudaStream_t)) {
  ShimCore* slice = Owner(pointer);
  if (slice == nullptr) return Forward(real, pointer, stream);
  if (IsCapturing(stream)) return cudaErrorStreamCaptureUnsupported;
  (void)SynchronizeStream(stream);
  return Freed(*slice, pointer);
}

}  // namespace
}  // namespace gshare::fn::cuda_shim

extern "C" {

GSHARE_SHIM_EXPORT cudaError_t cudaMalloc(void** pointer, std::size_t bytes) {
  using namespace gshare::fn::cuda_shim;
  if (!Active()) return Forward(next_malloc.get(), pointer, bytes);
  return AllocateFromSlice(pointer, bytes);
}

GSHARE_SHIM_EXPORT cudaError_t cudaFree(void* pointer) {
  using namespace gshare::fn::cuda_shim;
  // Not the slice's (cudaFree(nullptr) among them, which programs call to create the context).
  ShimCore* slice = Owner(pointer);
  if (slice == nullptr) return Forward(next_free.get(), pointer);
  SynchronizeDevice();
  return Freed(*slice, pointer);
}

GSHARE_SHIM_EXPORT cudaError_t cudaMallocAsync(void** pointer, std::size_t bytes,
                                               cudaStream_t stream) {
  using namespace gshare::fn::cuda_shim;
  return AllocateAsync(pointer, bytes, stream, next_malloc_async.get());
}

GSHARE_SHIM_EXPORT cudaError_t cudaMallocAsync_ptsz(void** pointer, std::size_t bytes,
                                                    cudaStream_t stream) {
  using namespace gshare::fn::cuda_shim;
  if (!Active()) return Forward(next_malloc_async_ptsz.get(), pointer, bytes, stream);
  return AllocateAsync(pointer, bytes, PerThread(stream), next_malloc_async_ptsz.get());
}

GSHARE_SHIM_EXPORT cudaError_t cudaFreeAsync(void* pointer, cudaStream_t stream) {
  using namespace gshare::fn::cuda_shim;
  return FreeAsync(pointer, stream, next_free_async.get());
}

GSHARE_SHIM_EXPORT cudaError_t cudaFreeAsync_ptsz(void* pointer, cudaStream_t stream) {
  using namespace gshare::fn::cuda_shim;
  if (Owner(pointer) == nullptr) return Forward(next_free_async_ptsz.get(), pointer, stream);
  return FreeAsync(pointer, PerThread(stream), next_free_async_ptsz.get());
}

GSHARE_SHIM_EXPORT cudaError_t cudaMallocPitch(void** pointer, std::size_t* pitch,
                                               std::size_t width_bytes, std::size_t height) {
  using namespace gshare::fn::cuda_shim;
  if (!Active()) return Forward(next_malloc_pitch.get(), pointer, pitch, width_bytes, height);
  if (pointer == nullptr || pitch == nullptr) return cudaErrorInvalidValue;
  const std::size_t row =
      (width_bytes + ShimCore::kAlignment - 1) / ShimCore::kAlignment * ShimCore::kAlignment;
  if (row < width_bytes || (row != 0 && height > SIZE_MAX / row)) return cudaErrorInvalidValue;
  const cudaError_t allocated = AllocateFromSlice(pointer, row * height);
  if (allocated == cudaSuccess) *pitch = row;
  return allocated;
}

GSHARE_SHIM_EXPORT cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  using namespace gshare::fn::cuda_shim;
  if (!Active()) return Forward(next_mem_get_info.get(), free_bytes, total_bytes);
  if (free_bytes == nullptr || total_bytes == nullptr) return cudaErrorInvalidValue;
  ShimCore* slice = Slice();
  if (slice == nullptr) return cudaErrorInitializationError;
  const SliceUsage usage = slice->usage();
  *total_bytes = usage.quota_bytes;
  *free_bytes = usage.quota_bytes > usage.in_use_bytes ? usage.quota_bytes - usage.in_use_bytes : 0;
  return cudaSuccess;
}

}  // extern "C"
