// Clock: the only source of time for scheduler code.
//
// Scheduler and policy code never reads the system clock; it is handed a Clock at construction.
// SteadyClock reads the monotonic clock of the machine (the live node). SimulatedClock holds a
// virtual time that only its owner advances (the simulator), and fires its timers in time order,
// equal times in the order they were set, so a simulated run is reproducible.
#pragma once

#include <functional>

#include "gshare/common/timer_queue.h"
#include "gshare/common/units.h"

namespace gshare {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
};

// Monotonic wall time; its epoch is the moment the SteadyClock was constructed. Thread-safe.
class SteadyClock final : public Clock {
 public:
  SteadyClock();
  TimePoint Now() const override;

 private:
  std::chrono::steady_clock::time_point origin_;
};

// Virtual time, starting at TimePoint{} (zero). Not thread-safe.
class SimulatedClock final : public Clock {
 public:
  TimePoint Now() const override { return now_; }

  // Moves time forward to `t`. Moving backwards is an error (FailedPrecondition) and keeps time.
  Status AdvanceTo(TimePoint t);

  // Calls `callback` when the clock reaches `at` (at or after now) through RunUntil/RunNext.
  void ScheduleAt(TimePoint at, std::function<void()> callback);

  // Fires the earliest timer, advancing time to it. Returns false when no timer is pending.
  bool RunNext();
  // Fires every timer due at or before `t` in order, then advances time to `t`.
  void RunUntil(TimePoint t);
  bool HasPendingTimers() const { return !timers_.empty(); }

 private:
  TimePoint now_{};
  TimerQueue<std::function<void()>> timers_;
};

}  // namespace gshare
