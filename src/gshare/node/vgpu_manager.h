// VGpuManager: elastic vGPUs. Cuts each GPU's memory into slices and charges device memory to them.
//
// A slice is a memory quota on one GPU, a multiple of the program's slice granularity (one
// SliceGranularity, passed in; 128 MiB by default) up to the whole GPU. The quotas of a GPU's
// slices never add up to more than its memory, so every slice can always fill its quota. A slice is
// bound to at most one function, and a function to at most one slice, only while the function needs
// a GPU. Slices grow and shrink while bound (a shrink below what is in use is refused).
//
// Device memory of a bound slice is allocated through Allocate, which charges the bytes to the
// slice exactly (no rounding) and credits them back when the SliceAllocation is destroyed. An
// allocation beyond the slice's quota fails with ResourceExhausted, naming the slice, function,
// GPU, quota and use, and changes nothing: no other slice or GPU sees any effect.
//
// Errors: InvalidArgument for a quota that is zero or not a multiple of the granularity, or an
// unknown GPU; NotFound for an unknown slice; ResourceExhausted for a quota or GPU that is full;
// FailedPrecondition for an operation the slice's state forbids (unbinding or destroying a slice
// with memory in use, allocating on an unbound slice); AlreadyExists for a second binding.
//
// Thread safety: every method may be called from any thread; one mutex guards the accounting,
// and device allocations run outside it. The devices (not owned) must outlive the manager, and
// every SliceAllocation must be destroyed before it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gshare/common/mutex.h"
#include "gshare/common/slice_granularity.h"
#include "gshare/common/status.h"
#include "gshare/common/units.h"
#include "gshare/device/device.h"

namespace gshare {

using SliceId = std::uint64_t;

struct SliceInfo {
  SliceId id = 0;
  int gpu = 0;
  std::uint64_t quota_bytes = 0;
  std::uint64_t used_bytes = 0;  // charged by live allocations (and ones being made)
  std::string function_id;       // empty when unbound
  bool operator==(const SliceInfo&) const = default;
};

struct GpuUsage {
  int gpu = 0;
  std::uint64_t capacity_bytes = 0;  // device memory, rounded down to the granularity
  std::uint64_t reserved_bytes = 0;  // sum of its slices' quotas
  std::uint64_t used_bytes = 0;      // sum of its slices' use
  std::size_t slice_count = 0;
  bool operator==(const GpuUsage&) const = default;
};

class VGpuManager;

// Device memory charged to a slice. Destroying it frees the memory and credits the slice.
class SliceAllocation {
 public:
  ~SliceAllocation();
  SliceAllocation(const SliceAllocation&) = delete;
  SliceAllocation& operator=(const SliceAllocation&) = delete;

  DeviceBuffer& buffer() const { return *buffer_; }
  std::uint64_t size_bytes() const { return buffer_->size_bytes(); }
  SliceId slice() const { return slice_; }

 private:
  friend class VGpuManager;
  SliceAllocation(VGpuManager& manager, SliceId slice, std::unique_ptr<DeviceBuffer> buffer);

  VGpuManager& manager_;
  const SliceId slice_;
  std::unique_ptr<DeviceBuffer> buffer_;
};

class VGpuManager {
 public:
  // Manages `devices` (GPU i is devices[i]); every quota is a multiple of `granularity`.
  VGpuManager(std::span<Device* const> devices, SliceGranularity granularity);
  ~VGpuManager();
  VGpuManager(const VGpuManager&) = delete;
  VGpuManager& operator=(const VGpuManager&) = delete;

  Result<SliceId> CreateSlice(int gpu, std::uint64_t quota_bytes) EXCLUDES(mutex_);
  // Only an unbound slice without memory in use.
  Status DestroySlice(SliceId slice) EXCLUDES(mutex_);

  Status Bind(SliceId slice, const std::string& function_id) EXCLUDES(mutex_);
  // Only a slice without memory in use (checkpoint the function first).
  Status Unbind(SliceId slice) EXCLUDES(mutex_);

  // Sets the quota. Growing needs unreserved memory on the GPU; shrinking keeps use within it.
  Status Resize(SliceId slice, std::uint64_t quota_bytes) EXCLUDES(mutex_);
  Status Grow(SliceId slice, std::uint64_t delta_bytes) EXCLUDES(mutex_);
  Status Shrink(SliceId slice, std::uint64_t delta_bytes) EXCLUDES(mutex_);

  // Allocates `size_bytes` (> 0) of device memory on the slice's GPU, charged to the slice. With
  // `accounting_only`, the bytes are charged but nothing is allocated on the device: the buffer
  // names the GPU and the size, and has no memory (for a process that allocates its own, which
  // the driver's checkpoint API switches); it exports nothing and must never be copied to or from.
  Result<std::unique_ptr<SliceAllocation>> Allocate(SliceId slice, std::uint64_t size_bytes,
                                                    bool accounting_only = false) EXCLUDES(mutex_);

  Result<SliceInfo> slice(SliceId slice) const EXCLUDES(mutex_);
  std::vector<SliceInfo> slices() const EXCLUDES(mutex_);  // in id order
  Result<SliceId> FindByFunction(const std::string& function_id) const EXCLUDES(mutex_);
  Result<GpuUsage> gpu(int gpu) const EXCLUDES(mutex_);
  int gpu_count() const { return gpu_count_; }
  SliceGranularity granularity() const { return granularity_; }

 private:
  friend class SliceAllocation;
  struct Gpu {
    Device* device;  // not owned
    std::uint64_t capacity_bytes;
    std::uint64_t reserved_bytes = 0;  // guarded by mutex_
    std::uint64_t used_bytes = 0;      // guarded by mutex_
    std::size_t slice_count = 0;       // guarded by mutex_
  };
  struct Slice {
    int gpu;
    std::uint64_t quota_bytes;
    std::uint64_t used_bytes = 0;
    std::string function_id;
  };

  Result<Slice*> FindLocked(SliceId slice) REQUIRES(mutex_);
  Result<const Slice*> FindLocked(SliceId slice) const REQUIRES(mutex_);
  Status ResizeLocked(SliceId id, Slice& slice, std::uint64_t quota_bytes) REQUIRES(mutex_);
  SliceInfo InfoLocked(SliceId id, const Slice& slice) const REQUIRES(mutex_);
  std::string DescribeLocked(SliceId id, const Slice& slice) const REQUIRES(mutex_);
  void Credit(SliceId slice, std::uint64_t size_bytes) EXCLUDES(mutex_);

  const int gpu_count_;
  const SliceGranularity granularity_;
  mutable Mutex mutex_;
  std::vector<Gpu> gpus_ GUARDED_BY(mutex_);  // the vector's shape is fixed at construction
  std::map<SliceId, Slice> slices_ GUARDED_BY(mutex_);
  std::map<std::string, SliceId> bindings_ GUARDED_BY(mutex_);
  SliceId next_id_ GUARDED_BY(mutex_) = 1;
};

}  // namespace gshare
