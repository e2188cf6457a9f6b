// The CUDA driver functions the backend calls directly (virtual memory management, UUIDs, its
// kernels), resolved at run time.
//
// gshare links only the static CUDA runtime, never libcuda, so that its binary starts on a
// machine without a driver. The runtime loads the driver when first used; the driver functions
// here come from it through cudaGetDriverEntryPointByVersion, each at the ABI of the typedef it
// is stored as (CUDA 12.0's). Nothing outside device/cuda includes this header.
//
// Thread safety: CudaDriver() resolves once per process and may be called from any thread; the
// functions are the driver's, as thread-safe as the driver documents.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>
#include <string_view>

#include "gshare/common/status.h"

namespace gshare {

struct CudaDriverApi {
  PFN_cuGetErrorName_v6000 get_error_name = nullptr;
  PFN_cuGetErrorString_v6000 get_error_string = nullptr;
  PFN_cuDeviceGet_v2000 device_get = nullptr;
  PFN_cuDeviceGetAttribute_v2000 device_get_attribute = nullptr;
  PFN_cuDeviceGetUuid_v11040 device_get_uuid = nullptr;  // MIG instances' own UUIDs
  PFN_cuMemGetAllocationGranularity_v10020 mem_get_allocation_granularity = nullptr;
  PFN_cuMemCreate_v10020 mem_create = nullptr;
  PFN_cuMemRelease_v10020 mem_release = nullptr;
  PFN_cuMemAddressReserve_v10020 mem_address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 mem_address_free = nullptr;
  PFN_cuMemMap_v10020 mem_map = nullptr;
  PFN_cuMemUnmap_v10020 mem_unmap = nullptr;
  PFN_cuMemSetAccess_v10020 mem_set_access = nullptr;
  PFN_cuMemExportToShareableHandle_v10020 mem_export_to_shareable_handle = nullptr;
  PFN_cuMemImportFromShareableHandle_v10020 mem_import_from_shareable_handle = nullptr;
  // gshare's own kernels (the chunk digest), loaded from an embedded fat binary.
  PFN_cuModuleLoadData_v2000 module_load_data = nullptr;
  PFN_cuModuleUnload_v2000 module_unload = nullptr;
  PFN_cuModuleGetFunction_v2000 module_get_function = nullptr;
  PFN_cuLaunchKernel_v4000 launch_kernel = nullptr;

  // A Status for a driver error: "what: <message> (CUDA_ERROR_...)". Out of memory is
  // ResourceExhausted; everything else Internal.
  Status Error(CUresult result, std::string_view what) const;
};

// A driver result's name ("CUDA_ERROR_OUT_OF_MEMORY") and description, from the driver's own
// lookups, either of which may be null (a driver without them) or fail (a code it does not know):
// then "CUresult <n>" and "CUDA driver error".
struct CuResultText {
  std::string name;
  std::string text;
};
CuResultText DescribeCuResult(CUresult result, PFN_cuGetErrorName_v6000 get_name,
                              PFN_cuGetErrorString_v6000 get_string);

// The driver's functions, resolved on first use. Unavailable, naming the function and the
// runtime's reason, when the driver is missing or lacks one of them.
Result<const CudaDriverApi*> CudaDriver();

}  // namespace gshare

// Returns from the enclosing function with api.Error(...) when a driver call fails.
#define GSHARE_CU_RETURN_IF_ERROR(api, call, what)   \
  do {                                               \
    const CUresult gshare_cu_result_ = (call);       \
    if (gshare_cu_result_ != CUDA_SUCCESS) {         \
      return (api).Error(gshare_cu_result_, (what)); \
    }                                                \
  } while (false)
