// LoopClock: the live node's one clock, with timers that fire on its event loop.
//
// Everything on the live side reads time from it and sets its timers with it (the executor's,
// the process host's, the server's deadlines), so that one node has one epoch and a test can
// drive all of it. SteadyLoopClock is the machine's monotonic clock over boost::asio timers.
// ManualLoopClock moves only when told (AdvanceTo) and posts the timers it passes, in time order
// and, for equal times, in the order they were set; RunUntil drives a node on it: handlers first,
// then time moves to whatever the node waits for.
//
// Threading: Now and SleepUntil from any thread; At, the timers it returns and their
// destruction on the loop's thread only. The loop must outlive the clock's timers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "gshare/common/clock.h"
#include "gshare/common/status.h"

namespace boost::asio {
class io_context;
}

namespace gshare {

// A timer set with LoopClock::At; destroying it (or Cancel) before it fires cancels it: its
// callback never runs after that. Move-only; an empty timer does nothing.
class LoopTimer {
 public:
  class Impl {
   public:
    virtual ~Impl() = default;
    virtual void Cancel() = 0;
  };

  LoopTimer() = default;
  explicit LoopTimer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
  ~LoopTimer() { Cancel(); }
  LoopTimer(LoopTimer&&) noexcept = default;
  LoopTimer& operator=(LoopTimer&& other) noexcept {
    if (this != &other) {
      Cancel();
      impl_ = std::move(other.impl_);
    }
    return *this;
  }

  void Cancel() {
    if (impl_) impl_->Cancel();
    impl_.reset();
  }
  bool armed() const { return impl_ != nullptr; }

 private:
  std::unique_ptr<Impl> impl_;
};

class LoopClock : public Clock {
 public:
  virtual boost::asio::io_context& loop() const = 0;
  // Calls `fire` on the loop once Now() reads `at` or later; never from inside this call, never
  // after the returned timer is cancelled or destroyed.
  [[nodiscard]] virtual LoopTimer At(TimePoint at, std::function<void()> fire) = 0;
  [[nodiscard]] LoopTimer After(Duration wait, std::function<void()> fire) {
    return At(Now() + std::max(wait, Duration::zero()), std::move(fire));
  }
};

class SteadyLoopClock final : public LoopClock {
 public:
  explicit SteadyLoopClock(boost::asio::io_context& loop) : loop_(loop) {}

  TimePoint Now() const override { return clock_.Now(); }
  void SleepUntil(TimePoint at) const override { clock_.SleepUntil(at); }
  boost::asio::io_context& loop() const override { return loop_; }
  LoopTimer At(TimePoint at, std::function<void()> fire) override;

 private:
  boost::asio::io_context& loop_;
  SteadyClock clock_;
};

class ManualLoopClock final : public LoopClock {
 public:
  explicit ManualLoopClock(boost::asio::io_context& loop) : loop_(loop) {}
  ~ManualLoopClock() override;

  TimePoint Now() const override { return clock_.Now(); }
  void SleepUntil(TimePoint at) const override { clock_.SleepUntil(at); }
  boost::asio::io_context& loop() const override { return loop_; }
  LoopTimer At(TimePoint at, std::function<void()> fire) override;

  // Moves time to `to` (never backward), wakes the threads sleeping until then and posts the
  // timers due, earliest first. Loop thread.
  void AdvanceTo(TimePoint to);
  void Advance(Duration by) { AdvanceTo(Now() + by); }
  // From now on time moves as threads sleep on it (ManualClock::RunFree); timers are not posted
  // by it. For a teardown.
  void RunFree() { clock_.RunFree(); }
  // The earliest pending timer, if any.
  std::optional<TimePoint> NextTimer() const;
  std::size_t pending_timers() const { return timers_.size(); }

  // Runs the loop until `done()`. Whenever no handler is ready, time moves: to the earliest time
  // a thread sleeps until (someone waits on this clock), else to the earliest timer, but only
  // while `working()` says that nothing is in flight beyond what waits on this clock (a copy
  // being made, a process starting), so that no timer overtakes real work; otherwise it waits
  // for that work to post its completion. The loop must have work (a work guard) throughout.
  // `limit` is wall time and only a guard against a hang: DeadlineExceeded past it, saying so.
  Status RunUntil(const std::function<bool()>& done, const std::function<bool()>& working,
                  std::chrono::seconds limit = std::chrono::seconds(120));

 private:
  struct Entry {
    std::function<void()> fire;
    std::shared_ptr<bool> live;
  };
  using Key = std::pair<TimePoint, std::uint64_t>;
  class Timer;

  boost::asio::io_context& loop_;
  ManualClock clock_;
  std::map<Key, Entry> timers_;
  std::uint64_t next_sequence_ = 0;
};

}  // namespace gshare
