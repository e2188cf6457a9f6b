// CopyCrew: the best raw copy of a machine, for benchmarks that compare against it.
//
// S copy threads started once and kept, as the restore engine keeps its stream threads: each
// round wakes them, each copies one contiguous part (page-aligned cuts), and the round is timed
// from the wake-up to the last part's end. Thread creation is never timed. Copy is called from
// one thread at a time.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

#include "gshare/common/mutex.h"
#include "gshare/common/status.h"
#include "gshare/common/units.h"

namespace gshare::cli {

inline void PlainMemcpy(void* to, const void* from, std::size_t n) { std::memcpy(to, from, n); }

class CopyCrew {
 public:
  using CopyFunction = void (*)(void*, const void*, std::size_t);

  static Result<std::unique_ptr<CopyCrew>> Start(int threads) {
    auto crew = std::unique_ptr<CopyCrew>(new CopyCrew());
    try {
      for (int i = 0; i < threads; ++i) {
        crew->workers_.emplace_back([raw = crew.get(), i, threads] { raw->Work(i, threads); });
      }
    } catch (const std::exception& e) {
      return Internal(fmt::format("cannot start copy threads: {}", e.what()));
    }
    return crew;
  }

  ~CopyCrew() {
    {
      MutexLock lock(mutex_);
      stopping_ = true;
    }
    changed_.NotifyAll();
    for (auto& worker : workers_) worker.join();
  }

  Duration Copy(std::byte* destination, const std::byte* source, std::uint64_t bytes,
                CopyFunction copy) EXCLUDES(mutex_) {
    const auto begin = std::chrono::steady_clock::now();
    {
      MutexLock lock(mutex_);
      job_ = Job{destination, source, bytes, copy};
      remaining_ = static_cast<int>(workers_.size());
      ++round_;
    }
    changed_.NotifyAll();
    MutexLock lock(mutex_);
    changed_.Wait(mutex_, [this]() REQUIRES(mutex_) { return remaining_ == 0; });
    return std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - begin);
  }

 private:
  struct Job {
    std::byte* destination = nullptr;
    const std::byte* source = nullptr;
    std::uint64_t bytes = 0;
    CopyFunction copy = nullptr;
  };

  CopyCrew() = default;

  void Work(int index, int threads) EXCLUDES(mutex_) {
    std::uint64_t seen = 0;
    for (;;) {
      Job job;
      {
        MutexLock lock(mutex_);
        changed_.Wait(mutex_, [&]() REQUIRES(mutex_) { return stopping_ || round_ != seen; });
        if (stopping_) return;
        seen = round_;
        job = job_;
      }
      const auto count = static_cast<std::uint64_t>(threads);
      const std::uint64_t part = (job.bytes / count + 4095) / 4096 * 4096;
      const std::uint64_t begin = std::min(job.bytes, static_cast<std::uint64_t>(index) * part);
      const std::uint64_t end = std::min(job.bytes, begin + part);
      job.copy(job.destination + begin, job.source + begin, static_cast<std::size_t>(end - begin));
      bool last = false;
      {
        MutexLock lock(mutex_);
        last = --remaining_ == 0;
      }
      if (last) changed_.NotifyAll();
    }
  }

  Mutex mutex_;
  CondVar changed_;
  Job job_ GUARDED_BY(mutex_);
  int remaining_ GUARDED_BY(mutex_) = 0;
  std::uint64_t round_ GUARDED_BY(mutex_) = 0;
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace gshare::cli
