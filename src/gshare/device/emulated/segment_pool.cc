#include "gshare/device/emulated/segment_pool.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#include "gshare/common/units.h"

namespace gshare {

Result<Segment> MakeSegment(const std::string& name, std::uint64_t size_bytes, bool populate) {
  const int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return IoError(fmt::format("{}: memfd_create: {}", name, std::strerror(errno)));
  if (::ftruncate(fd, static_cast<off_t>(size_bytes)) != 0) {
    const int error = errno;
    ::close(fd);
    return ResourceExhausted(fmt::format("{}: cannot size a {} segment: {}", name,
                                         FormatBytes(size_bytes), std::strerror(error)));
  }
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int error = errno;
    ::close(fd);
    return IoError(fmt::format("{}: sealing a segment: {}", name, std::strerror(error)));
  }
  void* address = ::mmap(nullptr, size_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (address == MAP_FAILED) {
    const int error = errno;
    ::close(fd);
    return ResourceExhausted(fmt::format("{}: cannot map a {} segment: {}", name,
                                         FormatBytes(size_bytes), std::strerror(error)));
  }
  Segment segment{fd, std::span<std::byte>(static_cast<std::byte*>(address), size_bytes)};
  if (populate) {
    // In steps, so that the process's address-space lock is held only briefly at a time
    // (MAP_POPULATE would hold it for the whole segment, stalling every mmap of the node). Each
    // step is populated by the kernel (no fault per page) and then touched from here, one write a
    // page: on a virtual machine with shadow page tables the first access from user space still
    // costs an exit per page after the kernel populated it (docs/runtimes.md, "Measured"), which
    // the copy of a restore would otherwise pay. A kernel without MADV_POPULATE_WRITE (EINVAL)
    // leaves the touch to fault the pages in; a host short of memory fails the segment here.
    constexpr std::uint64_t kStep = 2 * kMiB;
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    for (std::uint64_t offset = 0; offset < size_bytes; offset += kStep) {
      const std::uint64_t length = std::min(kStep, size_bytes - offset);
      if (::madvise(segment.bytes.data() + offset, length, MADV_POPULATE_WRITE) != 0 &&
          errno != EINVAL) {
        const int error = errno;
        FreeSegment(segment);
        return ResourceExhausted(fmt::format("{}: cannot fault in a {} segment: {}", name,
                                             FormatBytes(size_bytes), std::strerror(error)));
      }
      for (std::uint64_t at = offset; at < offset + length; at += page) {
        *static_cast<volatile std::byte*>(&segment.bytes[at]) = std::byte{0};  // zero already
      }
    }
  }
  return segment;
}

void FreeSegment(const Segment& segment) {
  ::munmap(segment.bytes.data(), segment.bytes.size());
  ::close(segment.fd);
}

SegmentPreparer::SegmentPreparer(std::string name, std::uint64_t budget_bytes)
    : name_(std::move(name)), budget_bytes_(budget_bytes) {
  if (budget_bytes_ > 0) thread_ = std::thread([this] { Prepare(); });
}

SegmentPreparer::~SegmentPreparer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (const auto& [size, segment] : ready_) FreeSegment(segment);
}

std::optional<Segment> SegmentPreparer::Take(std::uint64_t size_bytes) {
  if (budget_bytes_ == 0) {
    std::lock_guard lock(mutex_);
    ++misses_;
    return std::nullopt;
  }
  std::optional<Segment> taken;
  {
    std::lock_guard lock(mutex_);
    std::erase(wanted_, size_bytes);
    wanted_.push_front(size_bytes);
    if (wanted_.size() > kSizesTracked) wanted_.pop_back();
    auto it = ready_.find(size_bytes);
    if (it != ready_.end()) {
      taken = it->second;
      ready_bytes_ -= size_bytes;
      ready_.erase(it);
      ++hits_;
    } else {
      ++misses_;
    }
  }
  changed_.notify_all();
  return taken;
}

std::uint64_t SegmentPreparer::ready_bytes() const {
  std::lock_guard lock(mutex_);
  return ready_bytes_;
}

std::uint64_t SegmentPreparer::hits() const {
  std::lock_guard lock(mutex_);
  return hits_;
}

std::uint64_t SegmentPreparer::misses() const {
  std::lock_guard lock(mutex_);
  return misses_;
}

bool SegmentPreparer::WaitReady(std::uint64_t size_bytes, std::chrono::milliseconds limit) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, limit, [&] { return ready_.count(size_bytes) > 0; });
}

std::optional<std::uint64_t> SegmentPreparer::NextSizeLocked() const {
  for (const std::uint64_t size : wanted_) {
    if (static_cast<int>(ready_.count(size)) < kSparesPerSize &&
        ready_bytes_ + size <= budget_bytes_) {
      return size;
    }
  }
  return std::nullopt;
}

void SegmentPreparer::Prepare() {
  // Linux gives each thread a nice value of its own: the preparer works with the CPU that the
  // node's loop, its copies and the functions leave (faulting in 128 MiB can take a quarter of a
  // second of CPU on a virtual machine).
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kNice) != 0) {
    spdlog::debug("segment preparer: setpriority: {}", std::strerror(errno));
  }
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || NextSizeLocked().has_value(); });
    if (stopping_) return;
    const std::uint64_t size = *NextSizeLocked();
    ready_bytes_ += size;  // counted while it is made, so that the budget holds
    lock.unlock();
    auto segment = MakeSegment(name_, size, /*populate=*/true);
    lock.lock();
    if (!segment.ok()) {
      ready_bytes_ -= size;
      std::erase(wanted_, size);  // the host is short: stop asking for it
      continue;
    }
    ready_.emplace(size, *segment);
    changed_.notify_all();
  }
}

}  // namespace gshare
