#include "gshare/fn/device_memory.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "gshare/common/units.h"

namespace gshare::fn {
namespace {

std::uint64_t PageBytes() { return static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)); }

std::uint64_t RoundUp(std::uint64_t value, std::uint64_t to) { return (value + to - 1) / to * to; }

// Replaces [address, address + bytes) with an inaccessible reservation.
bool ReserveRange(void* address, std::uint64_t bytes, bool fixed) {
  const int flags =
      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (fixed ? MAP_FIXED : MAP_FIXED_NOREPLACE);
  void* got = ::mmap(address, bytes, PROT_NONE, flags, -1, 0);
  if (got == MAP_FAILED) return false;
  if (got != address) {  // an old kernel that ignores MAP_FIXED_NOREPLACE
    ::munmap(got, bytes);
    errno = EEXIST;
    return false;
  }
  return true;
}

}  // namespace

DeviceAllocation::~DeviceAllocation() { Reset(); }

DeviceAllocation::DeviceAllocation(DeviceAllocation&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      offset_bytes_(other.offset_bytes_),
      size_bytes_(other.size_bytes_),
      data_(std::exchange(other.data_, nullptr)) {}

DeviceAllocation& DeviceAllocation::operator=(DeviceAllocation&& other) noexcept {
  if (this != &other) {
    Reset();
    owner_ = std::exchange(other.owner_, nullptr);
    offset_bytes_ = other.offset_bytes_;
    size_bytes_ = other.size_bytes_;
    data_ = std::exchange(other.data_, nullptr);
  }
  return *this;
}

void DeviceAllocation::Reset() {
  if (owner_ != nullptr) owner_->Free(offset_bytes_);
  owner_ = nullptr;
  data_ = nullptr;
}

Result<std::unique_ptr<DeviceMemory>> DeviceMemory::Reserve(std::uintptr_t base,
                                                            std::uint64_t reserve_bytes) {
  const std::uint64_t page = PageBytes();
  if (base == 0 || base % page != 0) {
    return InvalidArgument(fmt::format("device memory: base {:#x} is not page-aligned", base));
  }
  if (reserve_bytes == 0 || reserve_bytes % page != 0 || reserve_bytes > (1ULL << 46)) {
    return InvalidArgument(
        fmt::format("device memory: cannot reserve {} bytes (a multiple of {} up to 64 TiB)",
                    reserve_bytes, page));
  }
  void* address = reinterpret_cast<void*>(base);
  if (!ReserveRange(address, reserve_bytes, /*fixed=*/false)) {
    return FailedPrecondition(fmt::format("device memory: cannot reserve {} at {:#x}: {}",
                                          FormatBytes(reserve_bytes), base, std::strerror(errno)));
  }
  return std::unique_ptr<DeviceMemory>(
      new DeviceMemory(static_cast<std::byte*>(address), reserve_bytes));
}

DeviceMemory::DeviceMemory(std::byte* base, std::uint64_t reserve_bytes)
    : base_(base), reserve_bytes_(reserve_bytes), allocator_(reserve_bytes, kAlignment) {}

DeviceMemory::~DeviceMemory() { ::munmap(base_, reserve_bytes_); }

Result<DeviceAllocation> DeviceMemory::Allocate(std::uint64_t bytes, std::string_view what) {
  if (bytes == 0 || bytes > reserve_bytes_) {
    return InvalidArgument(
        fmt::format("device memory: cannot allocate {} bytes for {}", bytes, what));
  }
  MutexLock lock(mutex_);
  if (const std::optional<std::uint64_t> start = allocator_.Allocate(bytes, quota_bytes_)) {
    return DeviceAllocation(this, *start, RoundUp(bytes, kAlignment), base_ + *start);
  }
  return ResourceExhausted(fmt::format(
      "device memory: allocating {} for {} would exceed the slice's quota of {} ({} in "
      "use)",
      FormatBytes(bytes), what, FormatBytes(quota_bytes_), FormatBytes(allocator_.in_use_bytes())));
}

void DeviceMemory::Free(std::uint64_t offset_bytes) {
  MutexLock lock(mutex_);
  allocator_.Free(offset_bytes);
}

Status DeviceMemory::ProtectFrozenLocked() {
  const std::uint64_t frozen_end = allocator_.retired_bytes();
  if (frozen_end == 0 || mapped_bytes_ == 0) return Status::Ok();
  if (::mprotect(base_, std::min(frozen_end, mapped_bytes_), PROT_READ) != 0) {
    return IoError(fmt::format("device memory: mprotect: {}", std::strerror(errno)));
  }
  return Status::Ok();
}

Status DeviceMemory::Freeze() {
  MutexLock lock(mutex_);
  frozen_ = true;
  // Nothing below the mark is handed out again.
  allocator_.Retire(RoundUp(allocator_.high_water_bytes(), PageBytes()));
  return ProtectFrozenLocked();
}

bool DeviceMemory::mapped() const {
  MutexLock lock(mutex_);
  return mapped_bytes_ != 0;
}

std::uint64_t DeviceMemory::quota_bytes() const {
  MutexLock lock(mutex_);
  return quota_bytes_;
}

std::uint64_t DeviceMemory::in_use_bytes() const {
  MutexLock lock(mutex_);
  return allocator_.in_use_bytes();
}

MemoryImage DeviceMemory::Image() const {
  MutexLock lock(mutex_);
  MemoryImage image;
  image.used_bytes = allocator_.high_water_bytes();
  // Clean only when frozen and nothing lives above the mark: the image is the frozen memory.
  image.written = !frozen_ || image.used_bytes > allocator_.retired_bytes();
  return image;
}

Status DeviceMemory::Map(UniqueFd segment, std::uint64_t mapped_bytes, std::uint64_t quota_bytes) {
  if (!segment.valid()) return InvalidArgument("device memory: map without a segment");
  const std::uint64_t page = PageBytes();
  if (mapped_bytes == 0 || mapped_bytes % page != 0 || mapped_bytes > reserve_bytes_ ||
      quota_bytes > mapped_bytes) {
    return InvalidArgument(fmt::format(
        "device memory: cannot map {} bytes with a quota of {} into a reservation of {}",
        mapped_bytes, quota_bytes, reserve_bytes_));
  }
  struct stat info {};
  if (::fstat(segment.get(), &info) != 0 || info.st_size < 0 ||
      static_cast<std::uint64_t>(info.st_size) < mapped_bytes) {
    return InvalidArgument(fmt::format(
        "device memory: the segment is smaller than the {} bytes to map", mapped_bytes));
  }
  MutexLock lock(mutex_);
  if (mapped_bytes_ != 0) return FailedPrecondition("device memory: already mapped");
  if (allocator_.high_water_bytes() > quota_bytes) {
    return FailedPrecondition(
        fmt::format("device memory: allocations up to {} do not fit a quota of {}",
                    allocator_.high_water_bytes(), quota_bytes));
  }
  void* got =
      ::mmap(base_, mapped_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, segment.get(), 0);
  if (got == MAP_FAILED) {
    const int error = errno;
    ReserveRange(base_, mapped_bytes, /*fixed=*/true);
    return IoError(fmt::format("device memory: mmap: {}", std::strerror(error)));
  }
  mapped_bytes_ = mapped_bytes;
  quota_bytes_ = quota_bytes;
  return ProtectFrozenLocked();
}

Status DeviceMemory::Unmap() {
  MutexLock lock(mutex_);
  if (mapped_bytes_ == 0) return Status::Ok();
  if (!ReserveRange(base_, mapped_bytes_, /*fixed=*/true)) {
    return IoError(fmt::format("device memory: unmap: {}", std::strerror(errno)));
  }
  mapped_bytes_ = 0;
  return Status::Ok();
}

Status DeviceMemory::SetQuota(std::uint64_t quota_bytes) {
  MutexLock lock(mutex_);
  const std::uint64_t limit = mapped_bytes_ != 0 ? mapped_bytes_ : reserve_bytes_;
  if (quota_bytes > limit || quota_bytes < allocator_.high_water_bytes()) {
    return InvalidArgument(
        fmt::format("device memory: a quota of {} must lie between the allocations' end {} and {}",
                    quota_bytes, allocator_.high_water_bytes(), limit));
  }
  quota_bytes_ = quota_bytes;
  return Status::Ok();
}

}  // namespace gshare::fn
