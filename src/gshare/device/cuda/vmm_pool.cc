#include "gshare/device/cuda/vmm_pool.h"

#include <fcntl.h>
#include <fmt/format.h>

#include <utility>

#include "gshare/common/units.h"

namespace gshare {
namespace {

CUmemAllocationProp AllocationProperties(CUdevice device) {
  CUmemAllocationProp properties{};
  properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  properties.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  properties.location.id = device;
  return properties;
}

}  // namespace

Result<std::unique_ptr<VmmPool>> VmmPool::Create(const CudaDriverApi& api, CUdevice device,
                                                 std::string name) {
  const CUmemAllocationProp properties = AllocationProperties(device);
  std::size_t granularity = 0;
  GSHARE_CU_RETURN_IF_ERROR(api,
                            api.mem_get_allocation_granularity(
                                &granularity, &properties, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                            fmt::format("{}: querying the allocation granularity", name));
  if (granularity == 0) {
    return Internal(fmt::format("{}: the driver reports an allocation granularity of 0", name));
  }
  return std::unique_ptr<VmmPool>(new VmmPool(api, device, std::move(name), granularity));
}

VmmPool::VmmPool(const CudaDriverApi& api, CUdevice device, std::string name,
                 std::uint64_t granularity_bytes)
    : api_(api), device_(device), name_(std::move(name)), granularity_bytes_(granularity_bytes) {}

VmmPool::~VmmPool() { (void)Trim(); }

Result<VmmAllocation> VmmPool::Allocate(std::uint64_t size_bytes) {
  if (size_bytes == 0) return InvalidArgument(fmt::format("{}: cannot allocate 0 bytes", name_));
  if (size_bytes > UINT64_MAX - granularity_bytes_) {
    return ResourceExhausted(fmt::format("{}: cannot allocate {} bytes", name_, size_bytes));
  }
  const std::uint64_t bytes =
      (size_bytes + granularity_bytes_ - 1) / granularity_bytes_ * granularity_bytes_;
  {
    MutexLock lock(mutex_);
    auto cached = free_.find(bytes);
    if (cached != free_.end()) {
      const VmmAllocation allocation = cached->second.back();
      cached->second.pop_back();
      if (cached->second.empty()) free_.erase(cached);
      cached_bytes_ -= bytes;
      return allocation;
    }
  }
  auto created = Create(bytes);
  if (created.ok() || created.status().code() != StatusCode::kResourceExhausted) return created;
  // Memory the pool holds for other sizes may be what is missing.
  if (cached_bytes() == 0) return created;
  GSHARE_RETURN_IF_ERROR(Trim());
  return Create(bytes);
}

void VmmPool::Release(const VmmAllocation& allocation) {
  MutexLock lock(mutex_);
  free_[allocation.bytes].push_back(allocation);
  cached_bytes_ += allocation.bytes;
}

void VmmPool::Discard(const VmmAllocation& allocation) const { (void)Destroy(allocation); }

Status VmmPool::Trim() {
  std::map<std::uint64_t, std::vector<VmmAllocation>> cached;
  {
    MutexLock lock(mutex_);
    cached.swap(free_);
    cached_bytes_ = 0;
  }
  Status first;
  for (const auto& [bytes, allocations] : cached) {
    for (const VmmAllocation& allocation : allocations) {
      const Status destroyed = Destroy(allocation);
      if (first.ok() && !destroyed.ok()) first = destroyed;
    }
  }
  return first;
}

std::uint64_t VmmPool::cached_bytes() const {
  MutexLock lock(mutex_);
  return cached_bytes_;
}

Result<UniqueFd> VmmPool::Export(const VmmAllocation& allocation) const {
  int fd = -1;
  GSHARE_CU_RETURN_IF_ERROR(
      api_,
      api_.mem_export_to_shareable_handle(&fd, allocation.handle,
                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
      fmt::format("{}: exporting {} of device memory", name_, FormatBytes(allocation.bytes)));
  UniqueFd owned(fd);
  // The node starts function processes; none may inherit another's memory.
  if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
    return IoError(fmt::format("{}: marking an exported handle close-on-exec", name_));
  }
  return owned;
}

Result<VmmAllocation> VmmPool::Create(std::uint64_t bytes) const {
  const std::string what = fmt::format("{}: allocating {}", name_, FormatBytes(bytes));
  const CUmemAllocationProp properties = AllocationProperties(device_);
  VmmAllocation allocation{.bytes = bytes};
  GSHARE_CU_RETURN_IF_ERROR(api_, api_.mem_create(&allocation.handle, bytes, &properties, 0), what);
  CUresult result = api_.mem_address_reserve(&allocation.address, bytes, granularity_bytes_, 0, 0);
  if (result != CUDA_SUCCESS) {
    api_.mem_release(allocation.handle);
    return api_.Error(result, what + ": reserving addresses");
  }
  result = api_.mem_map(allocation.address, bytes, 0, allocation.handle, 0);
  if (result != CUDA_SUCCESS) {
    api_.mem_address_free(allocation.address, bytes);
    api_.mem_release(allocation.handle);
    return api_.Error(result, what + ": mapping");
  }
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  result = api_.mem_set_access(allocation.address, bytes, &access, 1);
  if (result != CUDA_SUCCESS) {
    (void)Destroy(allocation);
    return api_.Error(result, what + ": granting the GPU access");
  }
  return allocation;
}

Status VmmPool::Destroy(const VmmAllocation& allocation) const {
  // Each step runs even when one before failed, so that nothing is left behind that could be.
  const std::string what = fmt::format("{}: freeing {}", name_, FormatBytes(allocation.bytes));
  const CUresult unmapped = api_.mem_unmap(allocation.address, allocation.bytes);
  const CUresult freed = api_.mem_address_free(allocation.address, allocation.bytes);
  const CUresult released = api_.mem_release(allocation.handle);
  for (const CUresult result : {unmapped, freed, released}) {
    if (result != CUDA_SUCCESS) return api_.Error(result, what);
  }
  return Status::Ok();
}

}  // namespace gshare
