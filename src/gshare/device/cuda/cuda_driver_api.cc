#include "gshare/device/cuda/cuda_driver_api.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

namespace gshare {
namespace {

// The ABI the typedefs in CudaDriverApi are taken at.
constexpr unsigned int kDriverAbiVersion = 12000;

template <typename Function>
Status Resolve(const char* symbol, Function& function) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSuccess;
  const cudaError_t error = cudaGetDriverEntryPointByVersion(symbol, &address, kDriverAbiVersion,
                                                             cudaEnableDefault, &found);
  if (error != cudaSuccess) {
    return Unavailable(fmt::format("resolving the CUDA driver function {}: {} ({})", symbol,
                                   cudaGetErrorString(error), cudaGetErrorName(error)));
  }
  if (found != cudaDriverEntryPointSuccess || address == nullptr) {
    return Unavailable(fmt::format("the CUDA driver lacks {} at version {}.{}", symbol,
                                   kDriverAbiVersion / 1000, (kDriverAbiVersion % 1000) / 10));
  }
  function = reinterpret_cast<Function>(address);
  return Status::Ok();
}

Result<CudaDriverApi> ResolveAll() {
  CudaDriverApi api;
  GSHARE_RETURN_IF_ERROR(Resolve("cuGetErrorName", api.get_error_name));
  GSHARE_RETURN_IF_ERROR(Resolve("cuGetErrorString", api.get_error_string));
  GSHARE_RETURN_IF_ERROR(Resolve("cuDeviceGet", api.device_get));
  GSHARE_RETURN_IF_ERROR(Resolve("cuDeviceGetAttribute", api.device_get_attribute));
  GSHARE_RETURN_IF_ERROR(Resolve("cuDeviceGetUuid", api.device_get_uuid));
  GSHARE_RETURN_IF_ERROR(
      Resolve("cuMemGetAllocationGranularity", api.mem_get_allocation_granularity));
  GSHARE_RETURN_IF_ERROR(Resolve("cuMemCreate", api.mem_create));
  GSHARE_RETURN_IF_ERROR(Resolve("cuMemRelease", api.mem_release));
  GSHARE_RETURN_IF_ERROR(Resolve("cuMemAddressReserve", api.mem_address_reserve));
  GSHARE_RETURN_IF_ERROR(Resolve("cuMemAddressFree", api.mem_address_free));
  GSHARE_RETURN_IF_ERROR(Resolve("cuMemMap", api.mem_map));
  GSHARE_RETURN_IF_ERROR(Resolve("cuMemUnmap", api.mem_unmap));
  GSHARE_RETURN_IF_ERROR(Resolve("cuMemSetAccess", api.mem_set_access));
  GSHARE_RETURN_IF_ERROR(
      Resolve("cuMemExportToShareableHandle", api.mem_export_to_shareable_handle));
  GSHARE_RETURN_IF_ERROR(
      Resolve("cuMemImportFromShareableHandle", api.mem_import_from_shareable_handle));
  GSHARE_RETURN_IF_ERROR(Resolve("cuModuleLoadData", api.module_load_data));
  GSHARE_RETURN_IF_ERROR(Resolve("cuModuleUnload", api.module_unload));
  GSHARE_RETURN_IF_ERROR(Resolve("cuModuleGetFunction", api.module_get_function));
  GSHARE_RETURN_IF_ERROR(Resolve("cuLaunchKernel", api.launch_kernel));
  return api;
}

}  // namespace

CuResultText DescribeCuResult(CUresult result, PFN_cuGetErrorName_v6000 get_name,
                              PFN_cuGetErrorString_v6000 get_string) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (get_name == nullptr || get_name(result, &name) != CUDA_SUCCESS) name = nullptr;
  if (get_string == nullptr || get_string(result, &text) != CUDA_SUCCESS) text = nullptr;
  return {.name = name != nullptr ? std::string(name) : fmt::format("CUresult {}", +result),
          .text = text != nullptr ? std::string(text) : std::string("CUDA driver error")};
}

Status CudaDriverApi::Error(CUresult result, std::string_view what) const {
  const CuResultText described = DescribeCuResult(result, get_error_name, get_error_string);
  return Status(
      result == CUDA_ERROR_OUT_OF_MEMORY ? StatusCode::kResourceExhausted : StatusCode::kInternal,
      fmt::format("{}: {} ({})", what, described.text, described.name));
}

Result<const CudaDriverApi*> CudaDriver() {
  // Resolved once: a driver that is not there now will not appear later in this process.
  static const Result<CudaDriverApi> api = ResolveAll();
  if (!api.ok()) return api.status();
  return &api.value();
}

}  // namespace gshare
