// SubAllocator: first-fit allocation of offsets within a range: a function's device memory
// (DeviceMemory on an emulated GPU, the CUDA allocator shim's slice).
//
// Hands out ranges [offset, offset + size) of [0, capacity), each size rounded up to the
// alignment, at the lowest offset where one fits (first fit keeps allocations low, and so the
// image a checkpoint copies, [0, high water), small). A freed range merges with its free
// neighbours. A limit passed with each allocation bounds where it may end (the slice's quota),
// so the quota may change without touching the free list. Retire(end) takes [0, end) out of use
// for good: what is free there now, and what is freed there later, is never handed out again
// (frozen weights stay where they are; DeviceMemory::Freeze).
//
// Not thread-safe: its owner serializes the calls (DeviceMemory and ShimCore do, under their
// mutexes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>

namespace gshare::fn {

class SubAllocator {
 public:
  // `alignment_bytes`: a power of two; `capacity_bytes`: a multiple of it.
  SubAllocator(std::uint64_t capacity_bytes, std::uint64_t alignment_bytes);

  // The offset of a new allocation of `bytes` (> 0) that ends at or below `limit_bytes`;
  // nullopt, with nothing changed, when no free range fits.
  std::optional<std::uint64_t> Allocate(std::uint64_t bytes, std::uint64_t limit_bytes);
  // Frees the allocation that starts at `offset`; returns its (rounded) size, or nullopt, with
  // nothing changed, when no allocation starts there.
  std::optional<std::uint64_t> Free(std::uint64_t offset);
  // Nothing below `end_bytes` (<= capacity) is handed out again; a lower end than an earlier
  // call's changes nothing.
  void Retire(std::uint64_t end_bytes);

  // The sum of the live allocations' (rounded) sizes.
  std::uint64_t in_use_bytes() const { return in_use_bytes_; }
  // The end of the highest live allocation or of the retired range, whichever is higher; 0 when
  // there is neither.
  std::uint64_t high_water_bytes() const;
  std::uint64_t retired_bytes() const { return retired_end_; }
  std::size_t live_count() const { return live_.size(); }
  std::uint64_t capacity_bytes() const { return capacity_bytes_; }
  std::uint64_t alignment_bytes() const { return alignment_bytes_; }
  // Free ranges, offset -> size, in address order (for tests).
  const std::map<std::uint64_t, std::uint64_t>& free_ranges() const { return free_; }

 private:
  const std::uint64_t capacity_bytes_;
  const std::uint64_t alignment_bytes_;
  std::map<std::uint64_t, std::uint64_t> free_;  // offset -> size; never adjacent
  std::map<std::uint64_t, std::uint64_t> live_;  // offset -> size
  std::uint64_t in_use_bytes_ = 0;
  std::uint64_t retired_end_ = 0;
};

}  // namespace gshare::fn
