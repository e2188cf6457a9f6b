#include "gshare/measure/copy_crew.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "gshare/common/clock.h"

namespace gshare::measure {

void PlainMemcpy(void* to, const void* from, std::size_t n) { std::memcpy(to, from, n); }

Status CopyOnStreams(const std::vector<std::unique_ptr<CopyStream>>& streams,
                     std::uint64_t size_bytes, const StreamPartCopy& copy) {
  constexpr std::uint64_t kAlign = 4 * kKiB;
  const std::uint64_t count = streams.size();
  const std::uint64_t part = ((size_bytes + count - 1) / count + kAlign - 1) / kAlign * kAlign;
  Status status = Status::Ok();
  for (std::uint64_t i = 0; i < count && status.ok(); ++i) {
    const std::uint64_t offset = i * part;
    if (offset >= size_bytes) break;
    status = copy(*streams[i], offset, std::min(part, size_bytes - offset));
  }
  for (const auto& stream : streams) {
    Status synchronized = stream->Synchronize();
    if (status.ok()) status = std::move(synchronized);
  }
  return status;
}

Result<std::unique_ptr<CopyCrew>> CopyCrew::Start(int threads) {
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

CopyCrew::~CopyCrew() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  changed_.NotifyAll();
  for (auto& worker : workers_) worker.join();
}

Duration CopyCrew::Copy(std::byte* destination, const std::byte* source, std::uint64_t bytes,
                        CopyFunction copy) {
  const SteadyClock& clock = SteadyClock::Shared();
  const TimePoint begin = clock.Now();
  {
    MutexLock lock(mutex_);
    job_ = Job{destination, source, bytes, copy};
    remaining_ = static_cast<int>(workers_.size());
    ++round_;
  }
  changed_.NotifyAll();
  MutexLock lock(mutex_);
  changed_.Wait(mutex_, [this]() REQUIRES(mutex_) { return remaining_ == 0; });
  return clock.Now() - begin;
}

void CopyCrew::Work(int index, int threads) {
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

}  // namespace gshare::measure
