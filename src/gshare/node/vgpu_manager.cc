#include "gshare/node/vgpu_manager.h"

#include <fmt/format.h>

#include <utility>

namespace gshare {

SliceAllocation::SliceAllocation(VGpuManager& manager, SliceId slice,
                                 std::unique_ptr<DeviceBuffer> buffer)
    : manager_(manager), slice_(slice), buffer_(std::move(buffer)) {}

SliceAllocation::~SliceAllocation() {
  const std::uint64_t size = buffer_->size_bytes();
  buffer_.reset();  // free the device memory before the slice may hand it out again
  manager_.Credit(slice_, size);
}

VGpuManager::VGpuManager(std::span<Device* const> devices, SliceGranularity granularity)
    : gpu_count_(static_cast<int>(devices.size())), granularity_(granularity) {
  MutexLock lock(mutex_);
  for (Device* device : devices) {
    gpus_.push_back(Gpu{device, granularity_.RoundDown(device->info().memory_bytes)});
  }
}

VGpuManager::~VGpuManager() = default;

Result<VGpuManager::Slice*> VGpuManager::FindLocked(SliceId slice) {
  auto it = slices_.find(slice);
  if (it == slices_.end()) return NotFound(fmt::format("no slice {}", slice));
  return &it->second;
}

Result<const VGpuManager::Slice*> VGpuManager::FindLocked(SliceId slice) const {
  auto it = slices_.find(slice);
  if (it == slices_.end()) return NotFound(fmt::format("no slice {}", slice));
  return &it->second;
}

std::string VGpuManager::DescribeLocked(SliceId id, const Slice& slice) const {
  if (slice.function_id.empty()) return fmt::format("slice {} (unbound, GPU {})", id, slice.gpu);
  return fmt::format("slice {} (function '{}', GPU {})", id, slice.function_id, slice.gpu);
}

SliceInfo VGpuManager::InfoLocked(SliceId id, const Slice& slice) const {
  return SliceInfo{id, slice.gpu, slice.quota_bytes, slice.used_bytes, slice.function_id};
}

Result<SliceId> VGpuManager::CreateSlice(int gpu, std::uint64_t quota_bytes) {
  if (gpu < 0 || gpu >= gpu_count_) {
    return InvalidArgument(fmt::format("no GPU {} (this node has {})", gpu, gpu_count_));
  }
  if (quota_bytes == 0 || !granularity_.Divides(quota_bytes)) {
    return InvalidArgument(fmt::format("slice quota {} is not a positive multiple of {}",
                                       FormatBytes(quota_bytes),
                                       FormatBytes(granularity_.bytes())));
  }
  MutexLock lock(mutex_);
  Gpu& g = gpus_[static_cast<std::size_t>(gpu)];
  if (quota_bytes > g.capacity_bytes - g.reserved_bytes) {
    return ResourceExhausted(fmt::format(
        "GPU {}: a slice of {} does not fit: {} of {} reserved", gpu, FormatBytes(quota_bytes),
        FormatBytes(g.reserved_bytes), FormatBytes(g.capacity_bytes)));
  }
  g.reserved_bytes += quota_bytes;
  ++g.slice_count;
  const SliceId id = next_id_++;
  slices_.emplace(id, Slice{gpu, quota_bytes, 0, {}});
  return id;
}

Status VGpuManager::DestroySlice(SliceId id) {
  MutexLock lock(mutex_);
  GSHARE_ASSIGN_OR_RETURN(Slice * slice, FindLocked(id));
  if (!slice->function_id.empty()) {
    return FailedPrecondition(
        fmt::format("{}: unbind it before destroying it", DescribeLocked(id, *slice)));
  }
  if (slice->used_bytes != 0) {
    return FailedPrecondition(fmt::format("{}: {} still allocated", DescribeLocked(id, *slice),
                                          FormatBytes(slice->used_bytes)));
  }
  Gpu& g = gpus_[static_cast<std::size_t>(slice->gpu)];
  g.reserved_bytes -= slice->quota_bytes;
  --g.slice_count;
  slices_.erase(id);
  return Status::Ok();
}

Status VGpuManager::Bind(SliceId id, const std::string& function_id) {
  if (function_id.empty()) return InvalidArgument("cannot bind a slice to an empty function id");
  MutexLock lock(mutex_);
  GSHARE_ASSIGN_OR_RETURN(Slice * slice, FindLocked(id));
  if (!slice->function_id.empty()) {
    return AlreadyExists(fmt::format("{} is already bound", DescribeLocked(id, *slice)));
  }
  if (auto it = bindings_.find(function_id); it != bindings_.end()) {
    return AlreadyExists(
        fmt::format("function '{}' is already bound to slice {}", function_id, it->second));
  }
  slice->function_id = function_id;
  bindings_.emplace(function_id, id);
  return Status::Ok();
}

Status VGpuManager::Unbind(SliceId id) {
  MutexLock lock(mutex_);
  GSHARE_ASSIGN_OR_RETURN(Slice * slice, FindLocked(id));
  if (slice->function_id.empty()) {
    return FailedPrecondition(fmt::format("slice {} is not bound", id));
  }
  if (slice->used_bytes != 0) {
    return FailedPrecondition(fmt::format("{}: {} still allocated; checkpoint and free it first",
                                          DescribeLocked(id, *slice),
                                          FormatBytes(slice->used_bytes)));
  }
  bindings_.erase(slice->function_id);
  slice->function_id.clear();
  return Status::Ok();
}

Status VGpuManager::ResizeLocked(SliceId id, Slice& slice, std::uint64_t quota_bytes) {
  if (quota_bytes == 0 || !granularity_.Divides(quota_bytes)) {
    return InvalidArgument(fmt::format("{}: quota {} is not a positive multiple of {}",
                                       DescribeLocked(id, slice), FormatBytes(quota_bytes),
                                       FormatBytes(granularity_.bytes())));
  }
  Gpu& g = gpus_[static_cast<std::size_t>(slice.gpu)];
  if (quota_bytes > slice.quota_bytes) {
    const std::uint64_t growth = quota_bytes - slice.quota_bytes;
    if (growth > g.capacity_bytes - g.reserved_bytes) {
      return ResourceExhausted(fmt::format(
          "{}: cannot grow from {} to {}: GPU {} has {} unreserved", DescribeLocked(id, slice),
          FormatBytes(slice.quota_bytes), FormatBytes(quota_bytes), slice.gpu,
          FormatBytes(g.capacity_bytes - g.reserved_bytes)));
    }
  } else if (quota_bytes < slice.used_bytes) {
    return FailedPrecondition(fmt::format("{}: cannot shrink to {}: {} in use",
                                          DescribeLocked(id, slice), FormatBytes(quota_bytes),
                                          FormatBytes(slice.used_bytes)));
  }
  g.reserved_bytes = g.reserved_bytes - slice.quota_bytes + quota_bytes;
  slice.quota_bytes = quota_bytes;
  return Status::Ok();
}

Status VGpuManager::Resize(SliceId id, std::uint64_t quota_bytes) {
  MutexLock lock(mutex_);
  GSHARE_ASSIGN_OR_RETURN(Slice * slice, FindLocked(id));
  return ResizeLocked(id, *slice, quota_bytes);
}

Status VGpuManager::Grow(SliceId id, std::uint64_t delta_bytes) {
  MutexLock lock(mutex_);
  GSHARE_ASSIGN_OR_RETURN(Slice * slice, FindLocked(id));
  if (delta_bytes > UINT64_MAX - slice->quota_bytes) {
    return OutOfRange(fmt::format("{}: growth too large", DescribeLocked(id, *slice)));
  }
  return ResizeLocked(id, *slice, slice->quota_bytes + delta_bytes);
}

Status VGpuManager::Shrink(SliceId id, std::uint64_t delta_bytes) {
  MutexLock lock(mutex_);
  GSHARE_ASSIGN_OR_RETURN(Slice * slice, FindLocked(id));
  if (delta_bytes >= slice->quota_bytes) {
    return InvalidArgument(fmt::format("{}: cannot shrink a quota of {} by {}",
                                       DescribeLocked(id, *slice), FormatBytes(slice->quota_bytes),
                                       FormatBytes(delta_bytes)));
  }
  return ResizeLocked(id, *slice, slice->quota_bytes - delta_bytes);
}

namespace {

// A slice's bytes as the node counts them, with no memory behind them (Allocate's
// accounting_only).
class AccountingBuffer final : public DeviceBuffer {
 public:
  AccountingBuffer(const Device& device, std::uint64_t size_bytes)
      : DeviceBuffer(device, size_bytes) {}
};

}  // namespace

Result<std::unique_ptr<SliceAllocation>> VGpuManager::Allocate(SliceId id, std::uint64_t size_bytes,
                                                               bool accounting_only) {
  if (size_bytes == 0) return InvalidArgument(fmt::format("slice {}: cannot allocate 0 bytes", id));
  Device* device = nullptr;
  {
    // Charge first, allocate outside the lock: concurrent allocations can never overshoot.
    MutexLock lock(mutex_);
    GSHARE_ASSIGN_OR_RETURN(Slice * slice, FindLocked(id));
    if (slice->function_id.empty()) {
      return FailedPrecondition(fmt::format("slice {} is not bound to a function", id));
    }
    if (size_bytes > slice->quota_bytes - slice->used_bytes) {
      return ResourceExhausted(fmt::format(
          "{}: allocating {} would exceed the slice's quota of {} ({} in use, {} left)",
          DescribeLocked(id, *slice), FormatBytes(size_bytes), FormatBytes(slice->quota_bytes),
          FormatBytes(slice->used_bytes), FormatBytes(slice->quota_bytes - slice->used_bytes)));
    }
    slice->used_bytes += size_bytes;
    Gpu& g = gpus_[static_cast<std::size_t>(slice->gpu)];
    g.used_bytes += size_bytes;
    device = g.device;
  }
  if (accounting_only) {
    return std::unique_ptr<SliceAllocation>(
        new SliceAllocation(*this, id, std::make_unique<AccountingBuffer>(*device, size_bytes)));
  }
  auto buffer = device->Allocate(size_bytes);
  if (!buffer.ok()) {
    Credit(id, size_bytes);
    return buffer.status().WithContext(fmt::format("slice {}", id));
  }
  return std::unique_ptr<SliceAllocation>(
      new SliceAllocation(*this, id, std::move(buffer).value()));
}

void VGpuManager::Credit(SliceId id, std::uint64_t size_bytes) {
  MutexLock lock(mutex_);
  // The slice exists: it cannot be destroyed while memory is charged to it.
  Slice& slice = slices_.at(id);
  slice.used_bytes -= size_bytes;
  gpus_[static_cast<std::size_t>(slice.gpu)].used_bytes -= size_bytes;
}

Result<SliceInfo> VGpuManager::slice(SliceId id) const {
  MutexLock lock(mutex_);
  GSHARE_ASSIGN_OR_RETURN(const Slice* slice, FindLocked(id));
  return InfoLocked(id, *slice);
}

std::vector<SliceInfo> VGpuManager::slices() const {
  MutexLock lock(mutex_);
  std::vector<SliceInfo> all;
  all.reserve(slices_.size());
  for (const auto& [id, slice] : slices_) all.push_back(InfoLocked(id, slice));
  return all;
}

Result<SliceId> VGpuManager::FindByFunction(const std::string& function_id) const {
  MutexLock lock(mutex_);
  auto it = bindings_.find(function_id);
  if (it == bindings_.end()) {
    return NotFound(fmt::format("function '{}' is not bound to a slice", function_id));
  }
  return it->second;
}

Result<GpuUsage> VGpuManager::gpu(int gpu) const {
  if (gpu < 0 || gpu >= gpu_count_) {
    return InvalidArgument(fmt::format("no GPU {} (this node has {})", gpu, gpu_count_));
  }
  MutexLock lock(mutex_);
  const Gpu& g = gpus_[static_cast<std::size_t>(gpu)];
  return GpuUsage{gpu, g.capacity_bytes, g.reserved_bytes, g.used_bytes, g.slice_count};
}

}  // namespace gshare
