// FakeDevice: a test device whose copies run only when something waits for them, with faults on
// request. For tests of the restore engine's error and concurrency paths, deterministically.
//
// A copy enqueued on a FakeDevice stream stays pending (in flight) until a completion recorded
// after it is waited for, or its stream is synchronized; then the wait runs it. So a test sees
// exactly which copies a caller left in flight when it returned (copies_pending()).
// Faults: Record fails from its n-th call on (FailRecordFrom), and the next completion wait can
// be held until the test releases it (HoldNextWait, wait_held, ReleaseHeldWait).
//
// Thread safety: every method may be called from any thread. Test-only: not part of any library.
#pragma once

#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "gshare/common/mutex.h"
#include "gshare/device/device.h"

namespace gshare::testing {

class FakeDevice final : public Device {
 public:
  FakeDevice() {
    info_.name = "fake-gpu";
    info_.uuid = "FAKE-0";
    info_.memory_bytes = 1ULL << 30;
  }

  const DeviceInfo& info() const override { return info_; }

  Result<std::unique_ptr<DeviceBuffer>> Allocate(std::uint64_t size_bytes) override {
    return std::unique_ptr<DeviceBuffer>(new Buffer(*this, size_bytes));
  }
  std::uint64_t allocated_bytes() const override { return 0; }

  Result<std::unique_ptr<CopyStream>> CreateStream() override {
    return std::unique_ptr<CopyStream>(new Stream(*this));
  }

  Result<Duration> TimedRawCopyToDevice(DeviceBuffer& destination,
                                        std::span<const std::byte> source) override {
    std::memcpy(Bytes(destination).data(), source.data(), source.size());
    return Duration{};
  }

  static std::span<std::byte> Bytes(const DeviceBuffer& buffer) {
    return static_cast<const Buffer&>(buffer).bytes();
  }

  // Record calls, over all streams, are numbered from 1; call `n` and every later one fail.
  void FailRecordFrom(int n) EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    fail_record_from_ = n;
  }
  // The next completion wait blocks, once, until ReleaseHeldWait.
  void HoldNextWait() EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    hold_next_wait_ = true;
  }
  // Whether a wait is blocked by HoldNextWait now.
  bool wait_held() const EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    return wait_held_;
  }
  void ReleaseHeldWait() EXCLUDES(mutex_) {
    {
      MutexLock lock(mutex_);
      hold_next_wait_ = false;
      released_ = true;
    }
    changed_.NotifyAll();
  }
  // Copies enqueued and not yet run, over all streams.
  int copies_pending() const EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    int pending = 0;
    for (const auto& queue : queues_) pending += static_cast<int>(queue->copies.size());
    return pending;
  }

 private:
  class Buffer final : public DeviceBuffer {
   public:
    Buffer(const Device& device, std::uint64_t size_bytes)
        : DeviceBuffer(device, size_bytes), storage_(size_bytes) {}
    std::span<std::byte> bytes() const { return storage_; }

   private:
    mutable std::vector<std::byte> storage_;
  };

  struct Copy {
    std::byte* destination;
    const std::byte* source;
    std::size_t bytes;
    std::uint64_t sequence;
  };
  struct Queue {
    std::deque<Copy> copies;
    std::uint64_t next_sequence = 1;
  };

  // Runs the queue's copies up to `sequence`. Holds the mutex: copies are small in tests.
  void RunUpTo(Queue& queue, std::uint64_t sequence) REQUIRES(mutex_) {
    while (!queue.copies.empty() && queue.copies.front().sequence <= sequence) {
      const Copy& copy = queue.copies.front();
      std::memcpy(copy.destination, copy.source, copy.bytes);
      queue.copies.pop_front();
    }
  }

  Status WaitFor(Queue& queue, std::uint64_t sequence) const EXCLUDES(mutex_) {
    auto& self = const_cast<FakeDevice&>(*this);
    MutexLock lock(self.mutex_);
    if (self.hold_next_wait_) {
      self.hold_next_wait_ = false;
      self.wait_held_ = true;
      self.changed_.Wait(self.mutex_, [&self]() REQUIRES(self.mutex_) { return self.released_; });
      self.wait_held_ = false;
    }
    self.RunUpTo(queue, sequence);
    return Status::Ok();
  }

  class Event final : public CopyCompletion::Event {
   public:
    Event(const FakeDevice& device, std::shared_ptr<Queue> queue, std::uint64_t sequence)
        : device_(device), queue_(std::move(queue)), sequence_(sequence) {}
    bool Done() const override { return false; }
    Status Wait() const override { return device_.WaitFor(*queue_, sequence_); }

   private:
    const FakeDevice& device_;
    std::shared_ptr<Queue> queue_;
    std::uint64_t sequence_;
  };

  class Stream final : public CopyStream {
   public:
    explicit Stream(FakeDevice& device) : device_(device), queue_(std::make_shared<Queue>()) {
      MutexLock lock(device_.mutex_);
      device_.queues_.push_back(queue_);
    }
    Status CopyToDevice(DeviceBuffer& destination, std::uint64_t offset,
                        std::span<const std::byte> source) override {
      if (offset > destination.size_bytes() || source.size() > destination.size_bytes() - offset) {
        return OutOfRange("fake copy does not fit");
      }
      Enqueue(Bytes(destination).data() + offset, source.data(), source.size());
      return Status::Ok();
    }
    Status CopyToHost(std::span<std::byte> destination, const DeviceBuffer& source,
                      std::uint64_t offset) override {
      if (offset > source.size_bytes() || destination.size() > source.size_bytes() - offset) {
        return OutOfRange("fake copy does not fit");
      }
      Enqueue(destination.data(), Bytes(source).data() + offset, destination.size());
      return Status::Ok();
    }
    Result<CopyCompletion> Record() override {
      MutexLock lock(device_.mutex_);
      if (++device_.record_calls_ >= device_.fail_record_from_) {
        return Internal("injected Record failure");
      }
      return CopyCompletion(std::make_shared<Event>(device_, queue_, queue_->next_sequence - 1));
    }
    Status Synchronize() override {
      MutexLock lock(device_.mutex_);
      device_.RunUpTo(*queue_, queue_->next_sequence);
      return Status::Ok();
    }

   private:
    void Enqueue(std::byte* destination, const std::byte* source, std::size_t bytes) {
      MutexLock lock(device_.mutex_);
      queue_->copies.push_back(Copy{destination, source, bytes, queue_->next_sequence++});
    }

    FakeDevice& device_;
    std::shared_ptr<Queue> queue_;
  };

  DeviceInfo info_;
  mutable Mutex mutex_;
  CondVar changed_;
  std::vector<std::shared_ptr<Queue>> queues_ GUARDED_BY(mutex_);
  int record_calls_ GUARDED_BY(mutex_) = 0;
  int fail_record_from_ GUARDED_BY(mutex_) = 1 << 30;
  bool hold_next_wait_ GUARDED_BY(mutex_) = false;
  bool wait_held_ GUARDED_BY(mutex_) = false;
  bool released_ GUARDED_BY(mutex_) = false;
};

}  // namespace gshare::testing
