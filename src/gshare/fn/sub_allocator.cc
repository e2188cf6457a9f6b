#include "gshare/fn/sub_allocator.h"

#include <algorithm>
#include <iterator>

namespace gshare::fn {

SubAllocator::SubAllocator(std::uint64_t capacity_bytes, std::uint64_t alignment_bytes)
    : capacity_bytes_(capacity_bytes), alignment_bytes_(alignment_bytes) {
  if (capacity_bytes_ > 0) free_[0] = capacity_bytes_;
}

std::optional<std::uint64_t> SubAllocator::Allocate(std::uint64_t bytes,
                                                    std::uint64_t limit_bytes) {
  if (bytes == 0 || bytes > capacity_bytes_) return std::nullopt;
  const std::uint64_t size = (bytes + alignment_bytes_ - 1) / alignment_bytes_ * alignment_bytes_;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const std::uint64_t start = it->first;
    if (start + size > limit_bytes) break;  // ranges are in address order: none further fits
    if (size > it->second) continue;
    const std::uint64_t left = it->second - size;
    free_.erase(it);
    if (left > 0) free_[start + size] = left;
    live_[start] = size;
    in_use_bytes_ += size;
    return start;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> SubAllocator::Free(std::uint64_t offset) {
  const auto live = live_.find(offset);
  if (live == live_.end()) return std::nullopt;
  const std::uint64_t freed = live->second;
  live_.erase(live);
  in_use_bytes_ -= freed;
  // Retired memory is not reused; the part of a range above the retired end is.
  const std::uint64_t end = offset + freed;
  if (end <= retired_end_) return freed;
  std::uint64_t start = std::max(offset, retired_end_);
  std::uint64_t size = end - start;
  auto next = free_.lower_bound(start);
  if (next != free_.end() && start + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    const auto previous = std::prev(next);
    if (previous->first + previous->second == start) {
      start = previous->first;
      size += previous->second;
      free_.erase(previous);
    }
  }
  free_[start] = size;
  return freed;
}

void SubAllocator::Retire(std::uint64_t end_bytes) {
  end_bytes = std::min(end_bytes, capacity_bytes_);
  if (end_bytes <= retired_end_) return;
  retired_end_ = end_bytes;
  for (auto it = free_.begin(); it != free_.end() && it->first < end_bytes;) {
    const std::uint64_t range_end = it->first + it->second;
    it = free_.erase(it);
    if (range_end > end_bytes) {
      free_[end_bytes] = range_end - end_bytes;
      break;
    }
  }
}

std::uint64_t SubAllocator::high_water_bytes() const {
  const std::uint64_t live_end = live_.empty() ? 0 : live_.rbegin()->first + live_.rbegin()->second;
  return std::max(live_end, retired_end_);
}

}  // namespace gshare::fn
