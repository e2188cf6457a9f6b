// CopyCrew: the best raw copy of a machine, for benchmarks that compare against it.
//
// S copy threads started once and kept, as the restore engine keeps its stream threads: each
// round wakes them, each copies one contiguous part (page-aligned cuts), and the round is timed
// from the wake-up to the last part's end. Thread creation is never timed. Copy is called from
// one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "gshare/common/mutex.h"
#include "gshare/common/status.h"
#include "gshare/common/units.h"
#include "gshare/device/device.h"

namespace gshare::measure {

// memcpy, as a CopyFunction.
void PlainMemcpy(void* to, const void* from, std::size_t n);

// Enqueues one part of a copy on a stream: (stream, offset, bytes), the same offset on both sides.
using StreamPartCopy = std::function<Status(CopyStream&, std::uint64_t, std::uint64_t)>;

// Cuts `size_bytes` into one contiguous part per stream (4 KiB aligned, the last one shorter),
// enqueues `copy` of each part on its stream, then synchronizes every stream, even after an error:
// a device's best raw copy where the host cannot reach its memory (CUDA, paced emulated links).
Status CopyOnStreams(const std::vector<std::unique_ptr<CopyStream>>& streams,
                     std::uint64_t size_bytes, const StreamPartCopy& copy);

class CopyCrew {
 public:
  using CopyFunction = void (*)(void*, const void*, std::size_t);

  // Starts `threads` copy threads; Internal when the system refuses a thread.
  static Result<std::unique_ptr<CopyCrew>> Start(int threads);

  // Joins the threads.
  ~CopyCrew();

  // Copies `bytes` from `source` to `destination`, each thread its part with `copy`; returns the
  // time from the wake-up to the last part's end, on the steady clock.
  Duration Copy(std::byte* destination, const std::byte* source, std::uint64_t bytes,
                CopyFunction copy) EXCLUDES(mutex_);

 private:
  struct Job {
    std::byte* destination = nullptr;
    const std::byte* source = nullptr;
    std::uint64_t bytes = 0;
    CopyFunction copy = nullptr;
  };

  CopyCrew() = default;

  void Work(int index, int threads) EXCLUDES(mutex_);

  Mutex mutex_;
  CondVar changed_;
  Job job_ GUARDED_BY(mutex_);
  int remaining_ GUARDED_BY(mutex_) = 0;
  std::uint64_t round_ GUARDED_BY(mutex_) = 0;
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace gshare::measure
