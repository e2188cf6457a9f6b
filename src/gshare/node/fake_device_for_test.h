// FakeDevice: a test device whose copies and stream callbacks run in one global order on one
// thread, with faults on request. For tests of the restore engine's error and concurrency paths,
// deterministically.
//
// Every operation enqueued on any stream of a FakeDevice (a copy, a digest, a recorded completion,
// a Then callback) joins one queue that a single runner thread works through in order. So a test
// knows exactly which copies ran before which callback, and sees what is still in flight
// (copies_pending()).
// Faults: the n-th Then callback and every later one are called with an injected error
// (FailCallbacksFrom), after their copies ran; the next callback can be held before it runs until
// the test releases it (HoldNextCallback, callback_held, ReleaseHeldCallback).
//
// Thread safety: every method may be called from any thread. Test-only: not part of any library.
#pragma once

#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "gshare/common/mutex.h"
#include "gshare/device/chunk_digest.h"
#include "gshare/device/device.h"

namespace gshare::testing {

class FakeDevice final : public Device {
 public:
  FakeDevice() {
    info_.name = "fake-gpu";
    info_.uuid = "FAKE-0";
    info_.memory_bytes = 1ULL << 30;
    runner_ = std::thread([this] { Run(); });
  }

  // Runs what is queued, then stops the runner. Streams and buffers must be gone or idle.
  ~FakeDevice() override {
    {
      MutexLock lock(mutex_);
      stopping_ = true;
      released_ = true;
    }
    changed_.NotifyAll();
    runner_.join();
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

  // Then callbacks are numbered from 1 as they run; callback `n` and every later one get an
  // injected Internal error.
  void FailCallbacksFrom(int n) EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    fail_callbacks_from_ = n;
  }
  // Then callbacks run so far.
  int callbacks_run() const EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    return callbacks_;
  }
  // The runner stops before the next Then callback, once, until ReleaseHeldCallback.
  void HoldNextCallback() EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    hold_next_callback_ = true;
  }
  // Whether the runner is stopped by HoldNextCallback now.
  bool callback_held() const EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    return callback_held_;
  }
  void ReleaseHeldCallback() EXCLUDES(mutex_) {
    {
      MutexLock lock(mutex_);
      hold_next_callback_ = false;
      released_ = true;
    }
    changed_.NotifyAll();
  }
  // Copies enqueued and not yet run, over all streams.
  int copies_pending() const EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    return copies_queued_;
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

  // One queued operation: a copy (bytes > 0), a completion to mark done, or a callback.
  struct Operation {
    std::byte* destination = nullptr;
    const std::byte* source = nullptr;
    std::size_t bytes = 0;
    std::shared_ptr<bool> done;  // a completion: set when reached (guarded by mutex_)
    std::function<void(Status)> then;
    std::uint64_t* digest = nullptr;  // a digest of `source`, `bytes` long
  };

  class Event final : public CopyCompletion::Event {
   public:
    Event(const FakeDevice& device, std::shared_ptr<bool> done)
        : device_(device), done_(std::move(done)) {}
    bool Done() const override {
      MutexLock lock(device_.mutex_);
      return *done_;
    }
    Status Wait() const override {
      MutexLock lock(device_.mutex_);
      device_.changed_.Wait(device_.mutex_, [this]() REQUIRES(device_.mutex_) { return *done_; });
      return Status::Ok();
    }

   private:
    const FakeDevice& device_;
    std::shared_ptr<bool> done_;
  };

  class Stream final : public CopyStream {
   public:
    explicit Stream(FakeDevice& device) : device_(device) {}
    ~Stream() override { (void)Synchronize(); }
    Status CopyToDevice(DeviceBuffer& destination, std::uint64_t offset,
                        std::span<const std::byte> source) override {
      if (offset > destination.size_bytes() || source.size() > destination.size_bytes() - offset) {
        return OutOfRange("fake copy does not fit");
      }
      device_.Enqueue({Bytes(destination).data() + offset, source.data(), source.size(), {}, {}});
      return Status::Ok();
    }
    Status CopyToHost(std::span<std::byte> destination, const DeviceBuffer& source,
                      std::uint64_t offset) override {
      if (offset > source.size_bytes() || destination.size() > source.size_bytes() - offset) {
        return OutOfRange("fake copy does not fit");
      }
      device_.Enqueue(
          {destination.data(), Bytes(source).data() + offset, destination.size(), {}, {}});
      return Status::Ok();
    }
    Status Digest(const DeviceBuffer& source, std::uint64_t offset, std::uint64_t size,
                  std::uint64_t* digest) override {
      if (offset % 8 != 0) return InvalidArgument("fake digest at an unaligned offset");
      if (offset > source.size_bytes() || size > source.size_bytes() - offset) {
        return OutOfRange("fake digest does not fit");
      }
      device_.Enqueue({nullptr, Bytes(source).data() + offset, size, {}, {}, digest});
      return Status::Ok();
    }
    Result<CopyCompletion> Record() override {
      auto done = std::make_shared<bool>(false);
      device_.Enqueue({nullptr, nullptr, 0, done, {}});
      return CopyCompletion(std::make_shared<Event>(device_, std::move(done)));
    }
    Status Synchronize() override {
      GSHARE_ASSIGN_OR_RETURN(CopyCompletion completion, Record());
      return completion.Wait();
    }
    void Then(std::function<void(Status)> callback) override {
      device_.Enqueue({nullptr, nullptr, 0, {}, std::move(callback)});
    }

   private:
    FakeDevice& device_;
  };

  void Enqueue(Operation operation) EXCLUDES(mutex_) {
    {
      MutexLock lock(mutex_);
      if (operation.bytes > 0 && operation.digest == nullptr) ++copies_queued_;
      queue_.push_back(std::move(operation));
    }
    changed_.NotifyAll();
  }

  void Run() EXCLUDES(mutex_) {
    for (;;) {
      Operation operation;
      Status injected;
      {
        MutexLock lock(mutex_);
        changed_.Wait(mutex_, [this]() REQUIRES(mutex_) { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        if (queue_.front().then && hold_next_callback_) {
          hold_next_callback_ = false;
          callback_held_ = true;
          released_ = false;
          changed_.NotifyAll();
          changed_.Wait(mutex_, [this]() REQUIRES(mutex_) { return released_; });
          callback_held_ = false;
        }
        operation = std::move(queue_.front());
        queue_.pop_front();
        if (operation.digest != nullptr) {
          *operation.digest = ChunkDigest({operation.source, operation.bytes});
          continue;
        }
        if (operation.bytes > 0) {
          std::memcpy(operation.destination, operation.source, operation.bytes);
          --copies_queued_;
          continue;
        }
        if (operation.done != nullptr) {
          *operation.done = true;
          changed_.NotifyAll();
          continue;
        }
        if (++callbacks_ >= fail_callbacks_from_) injected = Internal("injected copy failure");
      }
      operation.then(injected);  // outside the lock: it enqueues more
    }
  }

  DeviceInfo info_;
  mutable Mutex mutex_;
  mutable CondVar changed_;
  std::deque<Operation> queue_ GUARDED_BY(mutex_);
  int copies_queued_ GUARDED_BY(mutex_) = 0;
  int callbacks_ GUARDED_BY(mutex_) = 0;
  int fail_callbacks_from_ GUARDED_BY(mutex_) = 1 << 30;
  bool hold_next_callback_ GUARDED_BY(mutex_) = false;
  bool callback_held_ GUARDED_BY(mutex_) = false;
  bool released_ GUARDED_BY(mutex_) = false;
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::thread runner_;  // started last, in the constructor body
};

}  // namespace gshare::testing
