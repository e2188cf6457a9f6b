// DeviceMemory: a function process's GPU memory on an emulated GPU, at a fixed address.
//
// Lives in the function process (the client library, runtime.h). At start it reserves an address
// range at the base the node chose (no memory behind it: any touch faults). When the node binds
// the instance to a slice it sends the slice's shared-memory segment (a memfd of an emulated
// GPU), which is mapped over the start of the range; when the node checkpoints the instance away
// the segment is unmapped and the range is reserved again. Because the range never moves,
// pointers into device memory stay valid across a checkpoint and a restore onto another GPU.
//
// Allocation is first fit (sub_allocator.h) over offsets in [0, quota): an allocation that would
// end past the slice's quota fails with ResourceExhausted and a message naming the quota and the
// bytes in use, and nothing else changes. Freeze() marks everything allocated so far (the model's
// weights, say) read-only and puts later allocations above it; a snapshot of a frozen function
// with no allocation above the mark is clean, so the node can drop its slice without copying
// (fast swap). A function that never freezes is assumed to write everything it allocated.
//
// Contract with the function's code: device memory is touched only while the instance is mapped,
// that is inside FunctionRuntime::Launch (runtime.h); a touch while unmapped faults (SIGSEGV),
// as an illegal address does on a real GPU, and a write to frozen memory faults too.
//
// Thread safety: all methods may be called from any thread; one mutex guards the state.
// DeviceAllocation handles must be destroyed before the DeviceMemory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "gshare/common/mutex.h"
#include "gshare/common/status.h"
#include "gshare/common/unique_fd.h"
#include "gshare/fn/sub_allocator.h"

namespace gshare::fn {

class DeviceMemory;

// One allocation of device memory; freed when destroyed. Move-only.
class DeviceAllocation {
 public:
  DeviceAllocation() = default;
  ~DeviceAllocation();
  DeviceAllocation(DeviceAllocation&& other) noexcept;
  DeviceAllocation& operator=(DeviceAllocation&& other) noexcept;
  DeviceAllocation(const DeviceAllocation&) = delete;
  DeviceAllocation& operator=(const DeviceAllocation&) = delete;

  std::byte* data() const { return data_; }
  std::uint64_t size_bytes() const { return size_bytes_; }
  std::uint64_t offset_bytes() const { return offset_bytes_; }
  explicit operator bool() const { return owner_ != nullptr; }

  template <typename T>
  T* as() const {
    return reinterpret_cast<T*>(data_);
  }

 private:
  friend class DeviceMemory;
  DeviceAllocation(DeviceMemory* owner, std::uint64_t offset_bytes, std::uint64_t size_bytes,
                   std::byte* data)
      : owner_(owner), offset_bytes_(offset_bytes), size_bytes_(size_bytes), data_(data) {}
  void Reset();

  DeviceMemory* owner_ = nullptr;  // not owned
  std::uint64_t offset_bytes_ = 0;
  std::uint64_t size_bytes_ = 0;
  std::byte* data_ = nullptr;
};

// What a locked instance tells the node about its device memory.
struct MemoryImage {
  std::uint64_t used_bytes = 0;  // the image to keep: [0, used_bytes) of the segment
  bool written = true;           // whether it may differ from the last image the node holds
};

class DeviceMemory {
 public:
  static constexpr std::uint64_t kAlignment = 256;  // as cudaMalloc aligns

  // Reserves `reserve_bytes` (a multiple of the page size) at `base` (page-aligned); fails when
  // the range is taken or invalid.
  static Result<std::unique_ptr<DeviceMemory>> Reserve(std::uintptr_t base,
                                                       std::uint64_t reserve_bytes);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  std::byte* base() const { return base_; }
  std::uint64_t reserve_bytes() const { return reserve_bytes_; }

  // Allocates `bytes` (> 0) within the quota. `what` names it in the error. ResourceExhausted
  // past the quota.
  Result<DeviceAllocation> Allocate(std::uint64_t bytes, std::string_view what) EXCLUDES(mutex_);
  // Makes every allocation made so far read-only and puts later ones above them.
  Status Freeze() EXCLUDES(mutex_);

  bool mapped() const EXCLUDES(mutex_);
  std::uint64_t quota_bytes() const EXCLUDES(mutex_);
  std::uint64_t in_use_bytes() const EXCLUDES(mutex_);
  MemoryImage Image() const EXCLUDES(mutex_);

  // For the runtime's control thread, while no kernel runs:
  // Maps `segment` (at least `mapped_bytes` long) over the start of the range, with `quota`
  // (<= mapped_bytes) as the allocation bound. FailedPrecondition when allocations in use do not
  // fit the quota.
  Status Map(UniqueFd segment, std::uint64_t mapped_bytes, std::uint64_t quota_bytes)
      EXCLUDES(mutex_);
  // Drops the mapping; the range stays reserved.
  Status Unmap() EXCLUDES(mutex_);
  // Changes the quota (<= mapped bytes, >= the end of every allocation).
  Status SetQuota(std::uint64_t quota_bytes) EXCLUDES(mutex_);

 private:
  friend class DeviceAllocation;
  DeviceMemory(std::byte* base, std::uint64_t reserve_bytes);
  void Free(std::uint64_t offset_bytes) EXCLUDES(mutex_);
  Status ProtectFrozenLocked() REQUIRES(mutex_);

  std::byte* const base_;
  const std::uint64_t reserve_bytes_;
  mutable Mutex mutex_;
  SubAllocator allocator_ GUARDED_BY(mutex_);  // its retired range is the frozen memory
  bool frozen_ GUARDED_BY(mutex_) = false;
  std::uint64_t mapped_bytes_ GUARDED_BY(mutex_) = 0;  // 0: unmapped
  std::uint64_t quota_bytes_ GUARDED_BY(mutex_) = 0;
};

}  // namespace gshare::fn
