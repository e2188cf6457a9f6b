// Clock: the only source of time.
//
// Scheduler and policy code never reads the system clock: it reads Executor::Now(). The live
// node has one clock, injected at its construction (node/loop_clock.h adds timers on its event
// loop); everything on the live side reads that one. SteadyClock reads the monotonic clock of the
// machine; ManualClock moves only when told (tests, and the live node under a test's control).
// The simulator keeps its own virtual time in its event queue (sim/sim_executor.h), whose
// TimerQueue fires equal times in the order they were set, so a simulated run is reproducible.
#pragma once

#include <chrono>
#include <optional>
#include <vector>

#include "gshare/common/mutex.h"
#include "gshare/common/units.h"

namespace gshare {

// The system clock's time `after` from now: for a library that takes its deadlines on that clock
// (gRPC's server shutdown), and only for that.
std::chrono::system_clock::time_point SystemTimeAfter(Duration after);

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
  // Blocks the calling thread until Now() reads `at` or later (returns at once when it already
  // does): for work that takes time on this clock, such as an emulated link delivering bytes.
  // Never called on an event loop. Thread-safe.
  virtual void SleepUntil(TimePoint at) const = 0;
};

// Monotonic wall time; its epoch is the moment the SteadyClock was constructed. Thread-safe.
class SteadyClock final : public Clock {
 public:
  SteadyClock();
  TimePoint Now() const override;
  void SleepUntil(TimePoint at) const override;

  // One steady clock for what has no clock injected (a device opened on its own, a tool's
  // timing): constructed on first use, never destroyed.
  static const SteadyClock& Shared();

 private:
  std::chrono::steady_clock::time_point origin_;
};

// Time that moves only when AdvanceTo moves it, from zero. Threads in SleepUntil wait for it;
// EarliestSleeper tells a driver where they wait. Thread-safe.
class ManualClock final : public Clock {
 public:
  TimePoint Now() const override EXCLUDES(mutex_);
  void SleepUntil(TimePoint at) const override EXCLUDES(mutex_);

  // Moves time to `to` (never backward: an earlier `to` changes nothing) and wakes the sleepers
  // whose time has come.
  void AdvanceTo(TimePoint to) EXCLUDES(mutex_);
  void Advance(Duration by) EXCLUDES(mutex_);
  // The earliest time a thread sleeps until, if any sleeps now.
  std::optional<TimePoint> EarliestSleeper() const EXCLUDES(mutex_);
  // From now on a sleeper moves time to its wake-up itself and returns at once, and the threads
  // sleeping now wake: for a teardown that lets everything in flight run to its end.
  void RunFree() EXCLUDES(mutex_);

 private:
  mutable Mutex mutex_;
  mutable CondVar moved_;
  mutable TimePoint now_ GUARDED_BY(mutex_){};
  bool free_ GUARDED_BY(mutex_) = false;
  // The times the sleeping threads wait for (a multiset by hand: a few entries at most).
  mutable std::vector<TimePoint> sleepers_ GUARDED_BY(mutex_);
};

}  // namespace gshare
