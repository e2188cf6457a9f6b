// ShimCore: the function side of the switching protocol (fn/control_channel.h) for a process
// whose device memory the CUDA allocator shim serves, with the slice's sub-allocator and quota.
//
// It speaks to the node exactly as FunctionRuntime (fn/runtime.h) does, so the node switches a
// CUDA process as it switches an emulated instance. Connect reserves the address range, says
// hello (a = pid, b = the base actually reserved, c = the bytes reserved) and returns once the
// node has mapped the first slice. From then on a control thread serves the node:
//  - kMap + fd (a = bytes, b = quota, c = generation): the backend maps the memory at the start
//    of the range; kMapped echoes the generation, a = 1 when the mapping failed (a descriptor of
//    a kind the backend cannot map, live allocations that end past the quota);
//  - kLock: allocations wait from now on; the device finishes its work (Synchronize); kLocked
//    tells the node the image to keep (a = the end of the highest live allocation, b = 1: the
//    shim cannot tell whether it was written, so it always may have been). A lock blocks
//    allocations, not GPU work: a kernel that another thread of the program launches after the
//    synchronize still runs, may write the slice while the node copies it (a torn image) and
//    faults once the slice is unmapped. So the node locks only an instance with no request in
//    flight (the live node refuses to evict a running one, and `gshare bench function` switches
//    between requests); the shim adds no launch gate;
//  - kUnmap: the backend drops the mapping, the range stays reserved; kUnmapped;
//  - kUnlock: allocations go on (after a kMap; the node sends one after every kMapped);
//  - kSetQuota (a): a new quota, between the highest allocation's end and the mapped bytes.
// The compute messages are not used: a real GPU time-slices its contexts itself.
//
// Allocation is first fit (sub_allocator.h) over offsets below the quota, kAlignment-aligned.
// An allocation that does not fit fails with ResourceExhausted, writes one line to the log
// ("allocation of N bytes refused: the slice's quota is Q bytes, U in use") and tells the node
// (kQuotaExceeded: a = bytes asked, b = quota, c = bytes in use).
//
// Threading: Allocate, Free, Owns and usage may be called from any thread; Allocate blocks while
// the instance is locked or unmapped. One mutex guards the state; the backend's Map and Unmap run
// under it, its Synchronize outside it. Allocations are offsets in the range: destroying the core
// forgets them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>

#include "gshare/common/mutex.h"
#include "gshare/common/status.h"
#include "gshare/common/unique_fd.h"
#include "gshare/fn/control_channel.h"
#include "gshare/fn/cuda_shim/memory_backend.h"
#include "gshare/fn/sub_allocator.h"

namespace gshare::fn::cuda_shim {

struct ShimOptions {
  // What to do when the node closes the channel: end the process (_exit(70), as the function
  // runtime does), or only fail every later allocation (for tests).
  bool exit_when_node_gone = true;
  // Where the shim's lines go, one call per line, without the "gshare-cuda-shim: " prefix that
  // the default (standard error) adds.
  std::function<void(std::string_view line)> log;
  // Called, with the core's mutex held, whenever an allocation starts to wait for the instance
  // to be mapped and unlocked (tests synchronize on it). Must not call into the core.
  std::function<void()> on_allocation_waits;
};

// The slice as a program sees it (cudaMemGetInfo): free = quota - in use, total = quota.
struct SliceUsage {
  std::uint64_t quota_bytes = 0;
  std::uint64_t in_use_bytes = 0;  // the sum of the live allocations' aligned sizes

  // What the memory queries (cuMemGetInfo, cudaMemGetInfo) report as free: the quota left.
  std::uint64_t free_bytes() const {
    return quota_bytes > in_use_bytes ? quota_bytes - in_use_bytes : 0;
  }
};

// A pitched allocation (cuMemAllocPitch, cudaMallocPitch) of `height` rows of `width_bytes`: each
// row rounded up to ShimCore::kAlignment. nullopt when the size overflows.
struct PitchedLayout {
  std::size_t row_bytes = 0;
  std::size_t total_bytes = 0;
};
std::optional<PitchedLayout> LayOutPitched(std::size_t width_bytes, std::size_t height);

class ShimCore {
 public:
  // Every allocation starts at a multiple of this (cudaMalloc's guarantee is 256 bytes; the
  // driver aligns to 512 in practice, and some libraries rely on it).
  static constexpr std::uint64_t kAlignment = 512;

  // Reserves `reserve_bytes` at (or, when taken, near) `base_hint` through `backend`, says
  // hello on `control` and waits until the node maps the first slice. Makes the process
  // non-dumpable first, as the function runtime does. Unavailable when the node closes the
  // channel before mapping.
  static Result<std::unique_ptr<ShimCore>> Connect(UniqueFd control, std::uintptr_t base_hint,
                                                   std::uint64_t reserve_bytes,
                                                   std::unique_ptr<MemoryBackend> backend,
                                                   ShimOptions options = {});
  ~ShimCore();
  ShimCore(const ShimCore&) = delete;
  ShimCore& operator=(const ShimCore&) = delete;

  std::uintptr_t base() const { return base_; }
  std::uint64_t reserve_bytes() const { return reserve_bytes_; }
  // Whether `address` lies in the shim's range (whoever frees it must free it here).
  bool Owns(std::uintptr_t address) const {
    return address >= base_ && address - base_ < reserve_bytes_;
  }

  // The address of `bytes` (> 0) of the slice, once the instance is mapped and unlocked (waits
  // until then). ResourceExhausted beyond the quota (logged, and the node told); Unavailable when
  // the node is gone.
  Result<std::uintptr_t> Allocate(std::uint64_t bytes) EXCLUDES(mutex_);

  enum class FreeOutcome {
    kFreed,
    kNotOurs,           // outside the range: the caller forwards it to the real free
    kNoSuchAllocation,  // in the range, but no live allocation starts there
  };
  // Frees at once: the caller has made sure the device no longer uses the memory.
  FreeOutcome Free(std::uintptr_t address) EXCLUDES(mutex_);

  SliceUsage usage() const EXCLUDES(mutex_);
  // The number of slices mapped so far (the first one included).
  std::uint64_t maps() const EXCLUDES(mutex_);

 private:
  ShimCore(ControlChannel channel, std::unique_ptr<MemoryBackend> backend,
           MemoryBackend::Range range, ShimOptions options);
  void Serve();
  Status Handle(ReceivedMessage received) EXCLUDES(mutex_);
  Status HandleMap(ReceivedMessage received) EXCLUDES(mutex_);
  void NodeGone(const Status& why) EXCLUDES(mutex_);
  void Log(std::string_view line) const;

  const ControlChannel channel_;
  const std::unique_ptr<MemoryBackend> backend_;
  const std::uintptr_t base_;
  const std::uint64_t reserve_bytes_;
  const ShimOptions options_;

  mutable Mutex mutex_;
  CondVar changed_;
  SubAllocator allocator_ GUARDED_BY(mutex_);
  bool mapped_ GUARDED_BY(mutex_) = false;
  bool locked_ GUARDED_BY(mutex_) = false;
  bool node_gone_ GUARDED_BY(mutex_) = false;
  std::uint64_t mapped_bytes_ GUARDED_BY(mutex_) = 0;
  std::uint64_t quota_bytes_ GUARDED_BY(mutex_) = 0;
  std::uint64_t maps_ GUARDED_BY(mutex_) = 0;
  std::thread control_thread_;
};

}  // namespace gshare::fn::cuda_shim
