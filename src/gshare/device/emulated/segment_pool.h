// Shared-memory segments for emulated device memory, and a preparer that makes them ahead of need.
//
// A GPU's memory is already there when a program allocates it; a fresh memfd segment is not: its
// pages are allocated when first touched, so a restore into a fresh segment would pay the host's
// page faults (about 10 ms for 22 MiB on one VM, several times that on a VM with shadow page
// tables, docs/runtimes.md), which no GPU pays. The SegmentPreparer makes and faults in fresh
// segments in the background, of the sizes recently asked for, within a byte budget, so that an
// allocation of such a size takes a ready segment. Segments are never recycled: one handed to a
// function process may still be mapped by it, so reusing it for another function would expose that
// function's data.
//
// Every segment is sealed against shrinking and growing: a function handed it can neither shrink
// it under the node's own mapping nor grow it past the GPU's capacity.
//
// Thread safety: SegmentPreparer methods may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "gshare/common/status.h"

namespace gshare {

// A memfd and the node's read-write mapping of all of it. Plain value: FreeSegment releases it.
struct Segment {
  int fd = -1;
  std::span<std::byte> bytes;
};

// A fresh sealed segment of `size_bytes`; its pages faulted in when `populate`.
// ResourceExhausted when the host refuses the memory, IoError otherwise.
Result<Segment> MakeSegment(const std::string& name, std::uint64_t size_bytes, bool populate);
void FreeSegment(const Segment& segment);

class SegmentPreparer {
 public:
  // Keeps up to kSparesPerSize ready segments of each of the last kSizesTracked sizes asked
  // for, within `budget_bytes` in all (0: prepares nothing).
  static constexpr int kSparesPerSize = 2;
  static constexpr std::size_t kSizesTracked = 8;
  static constexpr int kNice = 5;  // the preparer thread's: below the node's other threads

  SegmentPreparer(std::string name, std::uint64_t budget_bytes);
  ~SegmentPreparer();
  SegmentPreparer(const SegmentPreparer&) = delete;
  SegmentPreparer& operator=(const SegmentPreparer&) = delete;

  // A ready segment of exactly `size_bytes`, if there is one; notes the size as wanted either way.
  std::optional<Segment> Take(std::uint64_t size_bytes);
  std::uint64_t ready_bytes() const;
  // Take calls answered with a ready segment, and not.
  std::uint64_t hits() const;
  std::uint64_t misses() const;
  // Waits until a segment of `size_bytes` is ready, or `limit` passed; whether one is.
  bool WaitReady(std::uint64_t size_bytes, std::chrono::milliseconds limit);

 private:
  void Prepare();
  std::optional<std::uint64_t> NextSizeLocked() const;

  const std::string name_;
  const std::uint64_t budget_bytes_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::multimap<std::uint64_t, Segment> ready_;  // by size
  std::uint64_t ready_bytes_ = 0;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
  std::deque<std::uint64_t> wanted_;  // most recent first, distinct
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gshare
