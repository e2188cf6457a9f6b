#include "gshare/device/cuda/cuda_presence.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>

#include "gshare/device/device.h"

namespace gshare {
namespace {

constexpr const char* kDriverLibrary = "libcuda.so.1";

std::string RuntimeSaid(cudaError_t error) {
  return fmt::format("CUDA runtime: {}: {}", cudaGetErrorName(error), cudaGetErrorString(error));
}

}  // namespace

CudaPresence ClassifyCudaPresence(cudaError_t count_error, int count, bool driver_loadable) {
  if (count_error == cudaSuccess) return count > 0 ? CudaPresence::kGpus : CudaPresence::kNoGpu;
  // The toolkit's stub library stands in for a driver at link time only.
  if (count_error == cudaErrorStubLibrary) return CudaPresence::kNoDriver;
  if (!driver_loadable) {
    // What the runtime reports when it finds no driver to load.
    if (count_error == cudaErrorInsufficientDriver || count_error == cudaErrorNoDevice) {
      return CudaPresence::kNoDriver;
    }
    return CudaPresence::kBroken;
  }
  // A driver is there. No device means none is visible to this process (no GPU, or
  // CUDA_VISIBLE_DEVICES hides them all); anything else, "insufficient driver" included (a driver
  // older than the runtime), is a driver that fails.
  return count_error == cudaErrorNoDevice ? CudaPresence::kNoGpu : CudaPresence::kBroken;
}

Status CudaPresenceStatus(CudaPresence presence, cudaError_t count_error,
                          std::string_view loader_error, int driver_version) {
  switch (presence) {
    case CudaPresence::kGpus:
      break;
    case CudaPresence::kNoDriver:
      if (count_error == cudaErrorStubLibrary) {
        return Unavailable(fmt::format(
            "no NVIDIA driver: {} is the CUDA toolkit's stub library, not a driver ({})",
            kDriverLibrary, RuntimeSaid(count_error)));
      }
      return Unavailable(fmt::format("no NVIDIA driver: {} could not be loaded ({}{}{})",
                                     kDriverLibrary, loader_error, loader_error.empty() ? "" : "; ",
                                     RuntimeSaid(count_error)));
    case CudaPresence::kNoGpu: {
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      return Unavailable(fmt::format(
          "no CUDA GPU: the NVIDIA driver (CUDA {}) shows this process no GPU ({}{})",
          FormatCudaVersion(driver_version),
          count_error == cudaSuccess ? "it counts 0" : RuntimeSaid(count_error),
          visible != nullptr ? fmt::format("; CUDA_VISIBLE_DEVICES='{}'", visible) : ""));
    }
    case CudaPresence::kBroken:
      if (count_error == cudaErrorInsufficientDriver) {
        int runtime_version = 0;
        (void)cudaRuntimeGetVersion(&runtime_version);
        return FailedPrecondition(fmt::format(
            "the NVIDIA driver (CUDA {}) is older than this gshare's CUDA runtime ({}) needs ({})",
            FormatCudaVersion(driver_version), FormatCudaVersion(runtime_version),
            RuntimeSaid(count_error)));
      }
      return FailedPrecondition(fmt::format(
          "the NVIDIA driver{} is installed but CUDA cannot use it ({})",
          driver_version > 0 ? fmt::format(" (CUDA {})", FormatCudaVersion(driver_version)) : "",
          RuntimeSaid(count_error)));
  }
  return Internal("CudaPresenceStatus called for GPUs that are present");
}

bool CudaDriverLoadable(std::string& loader_error) {
  void* library = ::dlopen(kDriverLibrary, RTLD_LAZY | RTLD_LOCAL);
  if (library == nullptr) {
    const char* error = ::dlerror();
    loader_error = error != nullptr ? error : fmt::format("{} not found", kDriverLibrary);
    return false;
  }
  ::dlclose(library);
  return true;
}

}  // namespace gshare
