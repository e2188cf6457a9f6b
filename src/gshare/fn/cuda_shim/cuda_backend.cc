#include "gshare/fn/cuda_shim/cuda_backend.h"

#include <string>

namespace gshare::fn::cuda_shim {
namespace {

std::string Decimal(std::uint64_t value) { return std::to_string(value); }

}  // namespace

Result<std::unique_ptr<CudaBackend>> CudaBackend::Create(const CudaDriver& driver,
                                                         CUcontext context, CUdevice device) {
  CUmemAllocationProp properties{};
  properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  properties.location.id = device;
  properties.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  std::size_t granularity = 0;
  {
    ScopedContext current(driver, context);
    GSHARE_RETURN_IF_ERROR(driver.Check("cuCtxPushCurrent", current.result()));
    GSHARE_RETURN_IF_ERROR(
        driver.Check("cuMemGetAllocationGranularity",
                     driver.mem_get_allocation_granularity(&granularity, &properties,
                                                           CU_MEM_ALLOC_GRANULARITY_MINIMUM)));
  }
  if (granularity == 0) return Internal("cuda shim: the driver reports a granularity of 0");
  return std::unique_ptr<CudaBackend>(new CudaBackend(driver, context, device, granularity));
}

CudaBackend::~CudaBackend() {
  ScopedContext current(driver_, context_);
  (void)Unmap();
  if (base_ != 0) (void)driver_.mem_address_free(base_, reserve_bytes_);
}

Result<MemoryBackend::Range> CudaBackend::Reserve(std::uintptr_t base_hint, std::uint64_t bytes) {
  if (base_ != 0) return FailedPrecondition("cuda shim: reserved already");
  const std::uint64_t rounded =
      (bytes + granularity_bytes_ - 1) / granularity_bytes_ * granularity_bytes_;
  ScopedContext current(driver_, context_);
  GSHARE_RETURN_IF_ERROR(driver_.Check("cuCtxPushCurrent", current.result()));
  CUdeviceptr base = 0;
  GSHARE_RETURN_IF_ERROR(
      driver_.Check("cuMemAddressReserve of " + Decimal(rounded) + " bytes",
                    driver_.mem_address_reserve(&base, rounded, granularity_bytes_,
                                                static_cast<CUdeviceptr>(base_hint), 0)));
  base_ = base;
  reserve_bytes_ = rounded;
  return Range{.base = static_cast<std::uintptr_t>(base), .bytes = rounded};
}

Status CudaBackend::Map(UniqueFd handle, MapHandleKind kind, std::uint64_t bytes) {
  if (kind != MapHandleKind::kCudaPosixFd) {
    return InvalidArgument("cuda shim: a descriptor of kind " +
                           Decimal(static_cast<std::uint32_t>(kind)) +
                           ", not a CUDA allocation's POSIX descriptor");
  }
  if (!handle.valid() || bytes == 0 || bytes % granularity_bytes_ != 0 || bytes > reserve_bytes_) {
    return InvalidArgument("cuda shim: cannot map " + Decimal(bytes) + " bytes (a multiple of " +
                           Decimal(granularity_bytes_) + " up to " + Decimal(reserve_bytes_) + ")");
  }
  if (mapped_bytes_ != 0) return FailedPrecondition("cuda shim: mapped already");
  ScopedContext current(driver_, context_);
  GSHARE_RETURN_IF_ERROR(driver_.Check("cuCtxPushCurrent", current.result()));
  CUmemGenericAllocationHandle imported = 0;
  // The descriptor travels as the pointer-sized "OS handle" the driver expects for this kind.
  GSHARE_RETURN_IF_ERROR(driver_.Check(
      "cuMemImportFromShareableHandle",
      driver_.mem_import_from_shareable_handle(
          &imported, reinterpret_cast<void*>(static_cast<std::uintptr_t>(handle.get())),
          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)));
  if (const CUresult mapped = driver_.mem_map(base_, bytes, 0, imported, 0);
      mapped != CUDA_SUCCESS) {
    (void)driver_.mem_release(imported);
    return driver_.Check("cuMemMap of " + Decimal(bytes) + " bytes", mapped);
  }
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (const CUresult allowed = driver_.mem_set_access(base_, bytes, &access, 1);
      allowed != CUDA_SUCCESS) {
    (void)driver_.mem_unmap(base_, bytes);
    (void)driver_.mem_release(imported);
    return driver_.Check("cuMemSetAccess", allowed);
  }
  imported_ = imported;
  mapped_bytes_ = bytes;
  descriptor_ = std::move(handle);
  return Status::Ok();
}

Status CudaBackend::Unmap() {
  if (mapped_bytes_ == 0) return Status::Ok();
  ScopedContext current(driver_, context_);
  GSHARE_RETURN_IF_ERROR(driver_.Check("cuCtxPushCurrent", current.result()));
  // Nothing may still be in flight on memory that is about to go (the node locked the instance
  // with the device idle; this makes sure).
  (void)driver_.context_synchronize();
  GSHARE_RETURN_IF_ERROR(driver_.Check("cuMemUnmap", driver_.mem_unmap(base_, mapped_bytes_)));
  mapped_bytes_ = 0;
  const CUresult released = driver_.mem_release(imported_);
  imported_ = 0;
  descriptor_.Reset();
  return driver_.Check("cuMemRelease", released);
}

Status CudaBackend::Synchronize() {
  ScopedContext current(driver_, context_);
  GSHARE_RETURN_IF_ERROR(driver_.Check("cuCtxPushCurrent", current.result()));
  return driver_.Check("cuCtxSynchronize", driver_.context_synchronize());
}

}  // namespace gshare::fn::cuda_shim
