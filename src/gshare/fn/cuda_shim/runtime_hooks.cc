// The runtime-level hooks (cuda_runtime_api.h's cudaMalloc family), for programs that load the
// shared CUDA runtime (libcudart.so). A program that links the runtime statically calls its own
// copy directly; its allocations reach the shim at the driver level (driver_hooks.cc).
//
// What the shim does not serve goes to the runtime's own function (cudaFree(nullptr), which
// programs call to create the context, frees of memory outside the slice, every call when
// passive): the next definition after the shim's, or, where libcudart is not in the global scope
// (opened with RTLD_LOCAL, as a Python extension may open it), the loaded libcudart's: found as
// libcudart.so.13, libcudart.so.12, or any loaded object whose name contains "libcudart.so".
// With GSHARE_SHIM_VERBOSE set, one line says which library that is.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>

#include "gshare/fn/cuda_shim/shim.h"

namespace gshare::fn::cuda_shim {
namespace {

// Whether `address` lies in the shim itself (whose exports a lookup must never hand back as the
// runtime's own).
bool InShim(const void* address) {
  static const void* const shim_base = [] {
    Dl_info info{};
    return ::dladdr(reinterpret_cast<const void*>(&InShim), &info) != 0 ? info.dli_fbase : nullptr;
  }();
  Dl_info info{};
  return ::dladdr(address, &info) != 0 && info.dli_fbase == shim_base;
}

// The path of the first loaded object whose name contains "libcudart.so"; empty when none.
std::string LoadedRuntimePath() {
  std::string path;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        if (info->dlpi_name == nullptr || std::strstr(info->dlpi_name, "libcudart.so") == nullptr) {
          return 0;
        }
        *static_cast<std::string*>(data) = info->dlpi_name;
        return 1;
      },
      &path);
  return path;
}

// A handle of the CUDA runtime the process has loaded, wherever: libcudart.so.13 or .12 by name,
// else any object named like libcudart. Found once, kept (the handle pins the library, which the
// shim's callers use anyway); nullptr while there is none.
void* LoadedRuntime() {
  static std::atomic<void*> runtime{nullptr};
  void* found = runtime.load(std::memory_order_acquire);
  if (found != nullptr) return found;
  for (const char* name : {"libcudart.so.13", "libcudart.so.12"}) {
    found = ::dlopen(name, RTLD_NOLOAD | RTLD_LAZY);
    if (found != nullptr) break;
  }
  if (found == nullptr) {
    // Opened outside dl_iterate_phdr's callback: the loader's lock is held there.
    const std::string path = LoadedRuntimePath();
    if (!path.empty()) found = ::dlopen(path.c_str(), RTLD_NOLOAD | RTLD_LAZY);
  }
  if (found == nullptr) return nullptr;
  void* expected = nullptr;
  if (!runtime.compare_exchange_strong(expected, found, std::memory_order_acq_rel)) {
    ::dlclose(found);  // another thread found it first: one reference is enough
    return expected;
  }
  return found;
}

// How a runtime function's real definition was looked for.
enum class Found {
  kNext,           // the next definition after the shim
  kLoadedRuntime,  // in the loaded libcudart
  kNotInRuntime,   // a libcudart is loaded, without this function
  kNoRuntime,      // none after the shim, and no libcudart loaded
};

// With GSHARE_SHIM_VERBOSE, says once where the runtime's functions come from, and once that
// one of them is nowhere to be found.
void SayWhereTheRuntimeIs(const char* name, const void* found, Found how) {
  static std::atomic<bool> said_found{false};
  static std::atomic<bool> said_missing{false};
  if (!Verbose()) return;
  if (found == nullptr) {
    if (!said_missing.exchange(true)) {
      LogLine(std::string("no CUDA runtime function to forward ") + name + " to: " +
              (how == Found::kNotInRuntime ? "the loaded libcudart lacks it"
                                           : "none after the shim, and no libcudart loaded"));
    }
    return;
  }
  if (said_found.exchange(true)) return;
  Dl_info info{};
  const bool named =
      ::dladdr(found, &info) != 0 && info.dli_fname != nullptr && *info.dli_fname != '\0';
  const char* library = named ? info.dli_fname : "the program";
  LogLine(std::string("the CUDA runtime's functions (") + name + " first) come from " + library +
          (how == Found::kNext ? " (the next definition after the shim)"
                               : " (a libcudart loaded outside the global scope)"));
}

// A runtime function's real definition, looked up once found: the next one after the shim's
// (libcudart in the global scope), else the loaded libcudart's (one a library opened with
// RTLD_LOCAL, as a Python extension may be, is not in the global scope, and RTLD_NEXT does not
// find it).
template <typename Function>
class NextDefinition {
 public:
  explicit NextDefinition(const char* name) : name_(name) {}
  Function get() {
    void* found = found_.load(std::memory_order_acquire);
    if (found == nullptr) {
      found = RealDlsym()(RTLD_NEXT, name_);
      Found how = Found::kNext;
      if (found == nullptr) {
        how = Found::kNoRuntime;
        if (void* runtime = LoadedRuntime()) {
          found = RealDlsym()(runtime, name_);
          if (found != nullptr && InShim(found)) found = nullptr;
          how = found != nullptr ? Found::kLoadedRuntime : Found::kNotInRuntime;
        }
      }
      SayWhereTheRuntimeIs(name_, found, how);
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
  const std::optional<PitchedLayout> layout = LayOutPitched(width_bytes, height);
  if (!layout) return cudaErrorInvalidValue;
  const cudaError_t allocated = AllocateFromSlice(pointer, layout->total_bytes);
  if (allocated == cudaSuccess) *pitch = layout->row_bytes;
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
  *free_bytes = usage.free_bytes();
  return cudaSuccess;
}

}  // extern "C"
